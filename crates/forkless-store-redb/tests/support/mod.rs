//! Test support shared by the durable store's tests: a disk model in which only synced bytes
//! survive a power failure, and a machine with two such disks (the data file's and the log's).

#![allow(dead_code, unreachable_pub)] // each test binary uses a different part of this module

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use forkless_core::Timestamp;
use forkless_store_redb::{Durability, RedbStore};
use redb::StorageBackend as _;

/// The instant the machines' stores open at.
pub const T0: Timestamp = Timestamp::from_millis(5_000_000);

/// A fresh 2025-11-25 session without a principal, its ids drawn from `seed`.
pub fn record(seed: u64) -> forkless_core::SessionRecord {
    let mut e = forkless_core::SeededEntropy::new(seed);
    let new = forkless_core::NewSession {
        id: forkless_core::SessionId::generate(&mut e),
        revision: forkless_core::Revision::V2025_11_25,
        reset_contract: true,
        principal: None,
        client: Default::default(),
    };
    forkless_core::SessionRecord::create(new, T0, &mut e).expect("create")
}

/// The smallest log the store uses at its length; 64 KiB holds about 200 appends.
pub const SMALL_LOG: u64 = 64 << 10;

/// A redb backend that models a disk: writes land in a volatile image, and only an fsync
/// makes them durable. "Pulling the plug" keeps the durable image alone. A sync can be made
/// to fail, leaving its write in the volatile image only (a write the crash interrupts).
#[derive(Debug, Clone)]
pub struct Disk {
    /// Bytes written so far (all writes, synced or not), without those at a write's start that
    /// it leaves as they were and its trailing zeros: the log writes whole blocks, so an entry
    /// rewrites the start of its block unchanged and pads the end of its last with zeros.
    pub written: Arc<std::sync::atomic::AtomicU64>,
    volatile: Arc<std::sync::Mutex<Vec<u8>>>,
    durable: Arc<std::sync::Mutex<Vec<u8>>>,
    pub fail_sync: Arc<AtomicBool>,
    /// Shared by the disks of one machine: a sync and a power failure exclude each other,
    /// so a power failure cuts every disk at the same instant.
    power: Arc<std::sync::Mutex<()>>,
}

impl Disk {
    pub fn new(power: &Arc<std::sync::Mutex<()>>) -> Self {
        Self {
            written: Arc::default(),
            volatile: Arc::default(),
            durable: Arc::default(),
            fail_sync: Arc::default(),
            power: Arc::clone(power),
        }
    }

    /// The disk as it is after a power failure now: only what was fsynced, and of what was
    /// written since, the first `torn` of the changed bytes (0.0 to 1.0).
    pub fn after_power_failure(&self, power: &Arc<std::sync::Mutex<()>>, torn: f64) -> Self {
        let mut image = self.durable.lock().unwrap().clone();
        let volatile = self.volatile.lock().unwrap();
        let changed: Vec<usize> =
            (0..image.len().min(volatile.len())).filter(|&i| image[i] != volatile[i]).collect();
        if let (Some(&first), Some(&last)) = (changed.first(), changed.last()) {
            let keep = first + ((last + 1 - first) as f64 * torn) as usize;
            image[first..keep].copy_from_slice(&volatile[first..keep]);
        }
        Self {
            written: Arc::default(),
            volatile: Arc::new(std::sync::Mutex::new(image.clone())),
            durable: Arc::new(std::sync::Mutex::new(image)),
            fail_sync: Arc::default(),
            power: Arc::clone(power),
        }
    }
}

impl redb::StorageBackend for Disk {
    fn len(&self) -> Result<u64, std::io::Error> {
        Ok(self.volatile.lock().unwrap().len() as u64)
    }
    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), std::io::Error> {
        let v = self.volatile.lock().unwrap();
        let start = offset as usize;
        let src = v.get(start..start + out.len()).ok_or_else(|| std::io::Error::other("read past end"))?;
        out.copy_from_slice(src);
        Ok(())
    }
    fn set_len(&self, len: u64) -> Result<(), std::io::Error> {
        self.volatile.lock().unwrap().resize(len as usize, 0);
        Ok(())
    }
    fn sync_data(&self) -> Result<(), std::io::Error> {
        if self.fail_sync.load(Ordering::SeqCst) {
            return Err(std::io::Error::other("injected fsync failure"));
        }
        let _power = self.power.lock().unwrap();
        let v = self.volatile.lock().unwrap().clone();
        *self.durable.lock().unwrap() = v;
        Ok(())
    }
    fn write(&self, offset: u64, data: &[u8]) -> Result<(), std::io::Error> {
        let mut v = self.volatile.lock().unwrap();
        let end = offset as usize + data.len();
        if v.len() < end {
            v.resize(end, 0);
        }
        let unchanged = data.iter().zip(&v[offset as usize..end]).take_while(|(new, old)| new == old).count();
        let padding = data[unchanged..].iter().rev().take_while(|&&b| b == 0).count();
        self.written.fetch_add((data.len() - unchanged - padding) as u64, Ordering::SeqCst);
        v[offset as usize..end].copy_from_slice(data);
        Ok(())
    }
}

/// A machine with two disks: the data file's and the log's.
pub struct Machine {
    pub data: Disk,
    pub log: Disk,
    power: Arc<std::sync::Mutex<()>>,
}

impl Machine {
    /// A machine whose log is `log_size` bytes long (the store's default if `None`).
    pub fn new(log_size: Option<u64>) -> Self {
        let power = Arc::default();
        let (data, log) = (Disk::new(&power), Disk::new(&power));
        if let Some(size) = log_size {
            log.set_len(size).unwrap();
            log.sync_data().unwrap();
        }
        Self { data, log, power }
    }

    pub fn open(&self, durability: Durability) -> (RedbStore, forkless_store_redb::Recovery) {
        self.open_at(durability, T0)
    }

    /// Open the store on this machine's disks at `now`.
    pub fn open_at(
        &self,
        durability: Durability,
        now: Timestamp,
    ) -> (RedbStore, forkless_store_redb::Recovery) {
        RedbStore::open_with_backend(self.data.clone(), self.log.clone(), durability, now).expect("open")
    }

    /// Pull the plug now: every disk keeps what was fsynced, and the log the first `torn`
    /// of what was written to it since.
    pub fn after_power_failure(&self, torn: f64) -> Self {
        let power: Arc<std::sync::Mutex<()>> = Arc::default();
        let _cut = self.power.lock().unwrap();
        let data = self.data.after_power_failure(&power, 0.0);
        let log = self.log.after_power_failure(&power, torn);
        Self { data, log, power }
    }

    /// The same data file with a new, empty log: what the data file holds by itself.
    pub fn data_file_alone(&self) -> Self {
        let power: Arc<std::sync::Mutex<()>> = Arc::default();
        let data = self.data.after_power_failure(&power, 0.0);
        let log = Disk::new(&power);
        log.set_len(SMALL_LOG).unwrap();
        Self { data, log, power }
    }
}
