//! A failed fsync, a full disk or a failed checkpoint poisons the store before anything it
//! could not make durable is delivered.

use super::*;

/// An in-memory redb backend whose fsyncs or writes fail on demand.
#[derive(Debug)]
struct FailingBackend {
    inner: redb::backends::InMemoryBackend,
    fail_sync: Arc<AtomicBool>,
    disk_full: Arc<AtomicBool>,
}

impl redb::StorageBackend for FailingBackend {
    fn len(&self) -> Result<u64, std::io::Error> {
        self.inner.len()
    }
    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), std::io::Error> {
        self.inner.read(offset, out)
    }
    fn set_len(&self, len: u64) -> Result<(), std::io::Error> {
        if self.disk_full.load(Ordering::SeqCst) && len > self.inner.len()? {
            return Err(std::io::Error::from(std::io::ErrorKind::StorageFull));
        }
        self.inner.set_len(len)
    }
    fn sync_data(&self) -> Result<(), std::io::Error> {
        if self.fail_sync.load(Ordering::SeqCst) {
            return Err(std::io::Error::other("injected fsync failure"));
        }
        self.inner.sync_data()
    }
    fn write(&self, offset: u64, data: &[u8]) -> Result<(), std::io::Error> {
        if self.disk_full.load(Ordering::SeqCst) {
            return Err(std::io::Error::from(std::io::ErrorKind::StorageFull));
        }
        self.inner.write(offset, data)
    }
}

impl FailingBackend {
    fn new() -> Self {
        Self {
            inner: redb::backends::InMemoryBackend::new(),
            fail_sync: Arc::default(),
            disk_full: Arc::default(),
        }
    }

    /// A small log (64 KiB, the least used as is), so a test reaches checkpoints quickly.
    fn small_log() -> Self {
        let log = Self::new();
        log.inner.set_len(SMALL_LOG).unwrap();
        log
    }

    /// A handle on the same switches.
    fn switches(&self) -> Self {
        Self {
            inner: redb::backends::InMemoryBackend::new(),
            fail_sync: Arc::clone(&self.fail_sync),
            disk_full: Arc::clone(&self.disk_full),
        }
    }
}

/// Which file's writes fail.
#[derive(Clone, Copy, PartialEq)]
enum Failing {
    /// The log: the next append's own write fails.
    Log,
    /// The data file: the next checkpoint fails (reached here by filling the small log).
    Data,
}

async fn failed_write_is_never_delivered(which: Failing, arm: impl FnOnce(&FailingBackend)) {
    let (data, log) = (FailingBackend::new(), FailingBackend::small_log());
    let switches = if which == Failing::Log { log.switches() } else { data.switches() };
    let (store, _) = RedbStore::open_with_backend(data, log, Durability::Immediate, T0).unwrap();
    let rec = record(7);
    let sid = rec.id();
    let s = rec.standalone().id();
    store.create(rec).await.unwrap();
    standalone_event(&store, sid, payload(1)).await.unwrap();
    let mut watch = store.watch(sid, s).await.unwrap();
    watch.mark_seen();
    arm(&switches);
    let mut acknowledged = 1;
    let err = loop {
        match standalone_event(&store, sid, payload(2)).await {
            Ok(id) => acknowledged = id.seq.get(),
            Err(e) => break e,
        }
        assert!(acknowledged < 1000, "a failing checkpoint is reached once the log is full");
    };
    assert!(matches!(err, Error::Poisoned(_)), "{err:?}");
    if which == Failing::Log {
        assert_eq!(acknowledged, 1, "the append whose log write failed is not acknowledged");
    }
    assert_eq!(
        watch.current().delivered,
        Seq::new(acknowledged),
        "readers were never told of the failed event"
    );
    let err = store.read(sid, s, Seq::new(1), 10, Reader::Inspector).await;
    assert!(matches!(err, Err(Error::Poisoned(_))), "the store refuses all work after a failed write");
    let err = standalone_event(&store, sid, payload(3)).await;
    assert!(matches!(err, Err(Error::Poisoned(_))));
}

#[tokio::test]
async fn a_failing_fsync_poisons_the_store_before_anything_is_delivered() {
    failed_write_is_never_delivered(Failing::Log, |b| b.fail_sync.store(true, Ordering::SeqCst)).await;
}

#[tokio::test]
async fn a_full_disk_poisons_the_store_before_anything_is_delivered() {
    failed_write_is_never_delivered(Failing::Log, |b| b.disk_full.store(true, Ordering::SeqCst)).await;
}

#[tokio::test]
async fn a_failing_checkpoint_poisons_the_store_before_anything_more_is_delivered() {
    failed_write_is_never_delivered(Failing::Data, |b| b.fail_sync.store(true, Ordering::SeqCst)).await;
    failed_write_is_never_delivered(Failing::Data, |b| b.disk_full.store(true, Ordering::SeqCst)).await;
}

#[tokio::test]
async fn batched_mode_reaches_disk_within_its_window() {
    let dir = tempdir();
    let path = dir.path().join("data.redb");
    let rec = record(9);
    let sid = rec.id();
    {
        let durability = Durability::Batched { window: Duration::from_millis(20) };
        let (store, _) = RedbStore::open(&path, durability, T0).unwrap();
        store.create(rec).await.unwrap();
        for n in 1..=50 {
            standalone_event(&store, sid, payload(n)).await.unwrap();
        }
        store.flush().await.unwrap();
    }
    let (_, recovery) = RedbStore::open(&path, Durability::Immediate, T0).unwrap();
    assert_eq!((recovery.sessions, recovery.events), (1, 50));
}
