//! What one `Durability::Immediate` append costs against one raw fsync on the same disk.
//!
//! In one process, in interleaved rounds (so a change in the disk's latency hits both sides
//! alike), it times (a) one small `pwrite` + `fdatasync` on a pre-zeroed file in `DIR` and
//! (b) one sequential immediate append through [`RedbStore`] in `DIR`, and prints (b)/(a).
//! `MODE` `store` runs (b) alone, for counting syscalls per append under
//! `strace -f -c -e trace=fdatasync,fsync,pwrite64,ftruncate`; `raw` runs (a) alone.
//!
//! `cargo run --release -p forkless-store-redb --example commit_cost -- DIR [APPENDS] [both|store|raw]`

use forkless_core::EventKind;
use forkless_store::Append;
use std::time::{Duration, Instant};

use bytes::Bytes;
use forkless_core::{
    AppendTarget, Limits, NewSession, Revision, SeededEntropy, SessionId, SessionRecord, Timestamp,
};
use forkless_store::Store;
use forkless_store_redb::{Durability, RedbStore};
use redb::StorageBackend as _;

/// Rounds the appends are split into; each round times the raw sync and the store in turn.
const ROUNDS: u64 = 10;
/// Bytes of each raw write: about one append's log entry.
const RAW_WRITE: usize = 256;
/// Size of the pre-zeroed raw file; writes wrap around inside it, as the store's log does.
const RAW_FILE: u64 = 8 << 20;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut args = std::env::args().skip(1);
    let dir = std::path::PathBuf::from(args.next().expect("usage: commit_cost DIR [APPENDS] [MODE]"));
    let n: u64 = args.next().map_or(2000, |a| a.parse().expect("APPENDS is a number"));
    let mode = args.next().unwrap_or_else(|| "both".to_owned());
    let (raw_on, store_on) = match mode.as_str() {
        "both" => (true, true),
        "store" => (false, true),
        "raw" => (true, false),
        other => panic!("MODE is both, store or raw, not {other}"),
    };
    std::fs::create_dir_all(&dir).expect("data dir");
    let per_round = (n / ROUNDS).max(1);

    let mut raw = raw_on.then(|| RawSync::new(&dir.join("raw.bin")));
    let mut store = None;
    if store_on {
        store = Some(Emitter::open(&dir).await);
    }
    let (mut raw_total, mut store_total) = (Duration::ZERO, Duration::ZERO);
    let mut ratios = Vec::new();
    for _ in 0..ROUNDS {
        let r = raw.as_mut().map(|raw| raw.run(per_round));
        let s = match store.as_mut() {
            Some(store) => Some(store.run(per_round).await),
            None => None,
        };
        raw_total += r.unwrap_or_default();
        store_total += s.unwrap_or_default();
        if let (Some(r), Some(s)) = (r, s) {
            ratios.push(s.as_secs_f64() / r.as_secs_f64());
        }
    }
    let count = u32::try_from(per_round * ROUNDS).unwrap_or(u32::MAX);
    if raw_on {
        println!("raw pwrite({RAW_WRITE} B) + fdatasync: {:?} each", raw_total / count);
    }
    if store_on {
        println!("immediate append: {:?} each ({count} appends)", store_total / count);
    }
    if raw_on && store_on {
        ratios.sort_by(f64::total_cmp);
        println!(
            "append / raw sync: {:.2} overall, {:.2} median of {ROUNDS} rounds (min {:.2}, max {:.2})",
            store_total.as_secs_f64() / raw_total.as_secs_f64(),
            ratios[ratios.len() / 2],
            ratios[0],
            ratios[ratios.len() - 1],
        );
    }
}

/// A pre-zeroed file that takes small writes, each followed by its own `fdatasync`, through
/// the same redb file backend the store's log uses.
struct RawSync {
    file: redb::backends::FileBackend,
    offset: u64,
}

impl RawSync {
    fn new(path: &std::path::Path) -> Self {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .expect("raw file");
        let file = redb::backends::FileBackend::new(file).expect("raw file backend");
        let zeros = vec![0u8; 1 << 20];
        for chunk in 0..RAW_FILE >> 20 {
            file.write(chunk << 20, &zeros).expect("zero the raw file");
        }
        file.sync_data().expect("sync the raw file");
        Self { file, offset: 0 }
    }

    fn run(&mut self, n: u64) -> Duration {
        let data = [0x5au8; RAW_WRITE];
        let started = Instant::now();
        for _ in 0..n {
            if self.offset + RAW_WRITE as u64 > RAW_FILE {
                self.offset = 0;
            }
            self.file.write(self.offset, &data).expect("raw write");
            self.file.sync_data().expect("raw fdatasync");
            self.offset += RAW_WRITE as u64;
        }
        started.elapsed()
    }
}

/// One session's standalone stream, appended to by one sequential emitter.
struct Emitter {
    store: RedbStore,
    sid: SessionId,
    next: u64,
}

impl Emitter {
    async fn open(dir: &std::path::Path) -> Self {
        let t = Timestamp::from_millis(1);
        // A fresh file each run, so every run measures the same thing.
        for stale in ["cost.redb", "cost.redb.wal"] {
            let _ = std::fs::remove_file(dir.join(stale));
        }
        let (store, _) = RedbStore::open(dir.join("cost.redb"), Durability::Immediate, t).expect("open");
        let mut e = SeededEntropy::new(1);
        let new = NewSession {
            id: SessionId::generate(&mut e),
            revision: Revision::V2025_11_25,
            reset_contract: false,
            principal: None,
            client: Default::default(),
        };
        let record = SessionRecord::create(new, t, &mut e).expect("create");
        let sid = record.id();
        store.create(record).await.expect("create");
        Self { store, sid, next: 0 }
    }

    async fn run(&mut self, n: u64) -> Duration {
        let t = Timestamp::from_millis(1);
        let limits = Limits {
            stream_max_events: u64::MAX,
            stream_max_bytes: u64::MAX,
            session_max_bytes: u64::MAX,
            ..Limits::default()
        };
        let started = Instant::now();
        for _ in 0..n {
            let payload = Bytes::from(format!("{{\"n\":{}}}", self.next));
            self.next += 1;
            self.store
                .append(Append {
                    session: self.sid,
                    target: AppendTarget::Standalone,
                    payload,
                    kind: EventKind::Intermediate,
                    now: t,
                    limits: &limits,
                })
                .await
                .expect("append");
        }
        started.elapsed()
    }
}
