//! The durable redb store: the conformance suite in both durability modes, recovery after a
//! restart, refusal of unknown file formats, and what a failed write does.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use forkless_core::{
    AppendTarget, Config, GetOutcome, GetRequest, Label, Limits, NewSession, Revision, SeededEntropy, Seq,
    SessionId, SessionRecord, StreamId, Timestamp,
};
use forkless_store::{Durability, Error, RedbStore, Store, transact};

const T0: Timestamp = Timestamp::from_millis(5_000_000);

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("temp dir")
}

mod immediate {
    forkless_store::store_conformance_tests!(async {
        let dir = Box::leak(Box::new(super::tempdir()));
        let (store, _) = forkless_store::RedbStore::open(
            dir.path().join("data.redb"),
            forkless_store::Durability::Immediate,
            super::T0,
        )
        .expect("open");
        store
    });
}

mod batched {
    forkless_store::store_conformance_tests!(async {
        let dir = Box::leak(Box::new(super::tempdir()));
        let durability = forkless_store::Durability::Batched { window: std::time::Duration::from_millis(2) };
        let (store, _) = forkless_store::RedbStore::open(dir.path().join("data.redb"), durability, super::T0)
            .expect("open");
        store
    });
}

fn record(seed: u64) -> SessionRecord {
    let mut e = SeededEntropy::new(seed);
    let new = NewSession {
        id: SessionId::generate(&mut e),
        revision: Revision::V2025_11_25,
        reset_contract: true,
        principal: Some("alice".into()),
    };
    SessionRecord::create(new, T0, &mut e).expect("create")
}

fn payload(n: u64) -> Bytes {
    Bytes::from(format!("{{\"n\":{n}}}"))
}

#[tokio::test]
async fn sessions_streams_and_events_survive_a_restart() {
    let dir = tempdir();
    let path = dir.path().join("data.redb");
    let rec = record(1);
    let sid = rec.id();
    let standalone = rec.standalone().id();
    {
        let (store, recovery) = RedbStore::open(&path, Durability::Immediate, T0).unwrap();
        assert_eq!(recovery, Default::default());
        store.create(rec.clone()).await.unwrap();
        let (grant, _) = transact(&store, sid, |r| {
            r.on_get(&GetRequest::default(), T0, &Config::default(), &mut SeededEntropy::new(2))
        })
        .await
        .unwrap();
        assert!(matches!(grant, GetOutcome::Attached(_)));
        for n in 1..=7 {
            store
                .append(sid, AppendTarget::Standalone, payload(n), false, T0, &Limits::default())
                .await
                .unwrap();
        }
    }
    let later = T0.saturating_add(Duration::from_secs(5));
    let (store, recovery) = RedbStore::open(&path, Durability::Immediate, later).unwrap();
    assert_eq!((recovery.sessions, recovery.events, recovery.detached), (1, 7, 1));
    let back = store.load(sid).await.unwrap().expect("session recovered").value;
    assert_eq!(back.session().principal(), Some("alice"));
    let s = back.stream(standalone).expect("standalone recovered");
    assert_eq!(s.high_water(), Seq::new(7));
    assert!(!s.is_live(later), "a restart leaves no connection attached");
    let events = store.read(sid, standalone, Seq::new(3), 100).await.unwrap();
    assert_eq!(events.iter().map(|e| e.seq.get()).collect::<Vec<_>>(), vec![4, 5, 6, 7]);
    assert_eq!(events[0].payload, payload(4));
    // A resume from the client's cursor works across the restart; new events follow.
    let lei = format!("{standalone}.5");
    let (out, _) = transact(&store, sid, |r| {
        let req = GetRequest { last_event_id: Some(&lei), stream_token: Some(&lei[..16]) };
        r.on_get(&req, later, &Config::default(), &mut SeededEntropy::new(3))
    })
    .await
    .unwrap();
    assert!(matches!(out, GetOutcome::Attached(g) if g.resumed && g.after == Seq::new(5)));
    let next = store
        .append(sid, AppendTarget::Standalone, payload(8), false, later, &Limits::default())
        .await
        .unwrap();
    assert_eq!(next.seq, Seq::new(8));
}

#[tokio::test]
async fn a_request_whose_handler_died_is_answered_and_completed() {
    let dir = tempdir();
    let path = dir.path().join("data.redb");
    let rec = record(4);
    let sid = rec.id();
    let stream = StreamId::generate(&mut SeededEntropy::new(40));
    {
        let (store, _) = RedbStore::open(&path, Durability::Immediate, T0).unwrap();
        store.create(rec).await.unwrap();
        let label = Label::new(b"17");
        transact(&store, sid, |r| r.open_labeled_request_stream(stream, label, T0, &Config::default()))
            .await
            .unwrap();
        store
            .append(sid, AppendTarget::Stream(stream), payload(1), false, T0, &Limits::default())
            .await
            .unwrap();
    }
    let (store, recovery) = RedbStore::open(&path, Durability::Immediate, T0).unwrap();
    assert_eq!(recovery.orphaned_requests, 1);
    let events = store.read(sid, stream, Seq::PRIMING, 10).await.unwrap();
    assert_eq!(events.len(), 2, "the progress event survives and the error answer follows");
    let answer: serde_json::Value = serde_json::from_slice(&events[1].payload).unwrap();
    assert_eq!(answer["id"], 17);
    assert_eq!(answer["error"]["code"], -32603);
    let meta = store.load(sid).await.unwrap().unwrap().value;
    assert!(meta.stream(stream).unwrap().is_completed());
    // A second restart does not answer it again.
    drop(store);
    let (_, recovery) = RedbStore::open(&path, Durability::Immediate, T0).unwrap();
    assert_eq!(recovery.orphaned_requests, 0);
}

#[tokio::test]
async fn a_file_of_an_unknown_format_is_refused_and_left_alone() {
    let dir = tempdir();
    let path = dir.path().join("data.redb");
    {
        let db = redb::Database::create(&path).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut meta = txn.open_table(redb::TableDefinition::<&str, u64>::new("meta")).unwrap();
            meta.insert("format", 99).unwrap();
        }
        txn.commit().unwrap();
    }
    let before = std::fs::read(&path).unwrap();
    let err = RedbStore::open(&path, Durability::Immediate, T0).unwrap_err();
    assert!(matches!(&err, Error::Corrupt(m) if m.contains("format version 99")), "{err}");
    assert!(std::fs::read(&path).unwrap() == before, "the file is not rewritten");
}

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

async fn failed_write_is_never_delivered(arm: impl FnOnce(&FailingBackend)) {
    let backend = FailingBackend {
        inner: redb::backends::InMemoryBackend::new(),
        fail_sync: Arc::default(),
        disk_full: Arc::default(),
    };
    let (fail_sync, disk_full) = (Arc::clone(&backend.fail_sync), Arc::clone(&backend.disk_full));
    let probe = FailingBackend { inner: redb::backends::InMemoryBackend::new(), fail_sync, disk_full };
    let (store, _) = RedbStore::open_with_backend(backend, Durability::Immediate, T0).unwrap();
    let rec = record(7);
    let sid = rec.id();
    let s = rec.standalone().id();
    store.create(rec).await.unwrap();
    store.append(sid, AppendTarget::Standalone, payload(1), false, T0, &Limits::default()).await.unwrap();
    let mut watch = store.watch(sid, s).await.unwrap();
    watch.mark_seen();
    arm(&probe);
    let err = store.append(sid, AppendTarget::Standalone, payload(2), false, T0, &Limits::default()).await;
    assert!(matches!(err, Err(Error::Poisoned(_))), "{err:?}");
    assert_eq!(watch.current().high_water, Seq::new(1), "readers were never told of the failed event");
    let err = store.read(sid, s, Seq::new(1), 10).await;
    assert!(matches!(err, Err(Error::Poisoned(_))), "the store refuses all work after a failed write");
    let err = store.append(sid, AppendTarget::Standalone, payload(3), false, T0, &Limits::default()).await;
    assert!(matches!(err, Err(Error::Poisoned(_))));
}

#[tokio::test]
async fn a_failing_fsync_poisons_the_store_before_anything_is_delivered() {
    failed_write_is_never_delivered(|b| b.fail_sync.store(true, Ordering::SeqCst)).await;
}

#[tokio::test]
async fn a_full_disk_poisons_the_store_before_anything_is_delivered() {
    failed_write_is_never_delivered(|b| b.disk_full.store(true, Ordering::SeqCst)).await;
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
            store
                .append(sid, AppendTarget::Standalone, payload(n), false, T0, &Limits::default())
                .await
                .unwrap();
        }
        store.flush().await.unwrap();
    }
    let (_, recovery) = RedbStore::open(&path, Durability::Immediate, T0).unwrap();
    assert_eq!((recovery.sessions, recovery.events), (1, 50));
}

/// A redb backend that models a disk: writes land in a volatile image, and only an fsync
/// makes them durable. "Pulling the plug" keeps the durable image alone.
#[derive(Debug, Clone)]
struct Disk {
    volatile: Arc<std::sync::Mutex<Vec<u8>>>,
    durable: Arc<std::sync::Mutex<Vec<u8>>>,
}

impl Disk {
    fn new() -> Self {
        Self { volatile: Arc::default(), durable: Arc::default() }
    }

    /// The disk as it is after a power failure now: only what was fsynced.
    fn after_power_failure(&self) -> Self {
        let image = self.durable.lock().unwrap().clone();
        Self {
            volatile: Arc::new(std::sync::Mutex::new(image.clone())),
            durable: Arc::new(std::sync::Mutex::new(image)),
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
        v[offset as usize..end].copy_from_slice(data);
        Ok(())
    }
}

/// Append `n` numbered events to the standalone stream, returning the last id.
async fn emit_n(store: &RedbStore, sid: SessionId, from: u64, n: u64) -> forkless_core::EventId {
    let mut last = None;
    for i in from..from + n {
        last = Some(
            store
                .append(sid, AppendTarget::Standalone, payload(i), false, T0, &Limits::default())
                .await
                .unwrap(),
        );
    }
    last.expect("n > 0")
}

#[tokio::test]
async fn immediate_mode_loses_nothing_acknowledged_on_power_failure() {
    let disk = Disk::new();
    let rec = record(11);
    let (sid, s) = (rec.id(), rec.standalone().id());
    let (store, _) = RedbStore::open_with_backend(disk.clone(), Durability::Immediate, T0).unwrap();
    store.create(rec).await.unwrap();
    let last = emit_n(&store, sid, 1, 25).await;
    // Pull the plug while the store is still running: nothing is flushed on the way down.
    let survivor = disk.after_power_failure();
    let (after, recovery) = RedbStore::open_with_backend(survivor, Durability::Immediate, T0).unwrap();
    assert_eq!(recovery.events, 25, "every acknowledged event survived");
    let events = after.read(sid, s, Seq::PRIMING, 100).await.unwrap();
    assert_eq!(events.last().map(|e| e.seq), Some(last.seq));
    drop(store);
}

#[tokio::test]
async fn batched_mode_loses_at_most_the_unsynced_window_and_keeps_a_gap_free_prefix() {
    let disk = Disk::new();
    let rec = record(12);
    let (sid, s) = (rec.id(), rec.standalone().id());
    // A window far longer than the test, so nothing after the flush reaches the disk.
    let durability = Durability::Batched { window: Duration::from_secs(3600) };
    let (store, _) = RedbStore::open_with_backend(disk.clone(), durability, T0).unwrap();
    store.create(rec).await.unwrap();
    emit_n(&store, sid, 1, 10).await;
    store.flush().await.unwrap();
    let delivered = emit_n(&store, sid, 11, 15).await;
    // Readers saw the unsynced events (batched mode delivers at once)...
    let seen = store.read(sid, s, Seq::new(10), 100).await.unwrap();
    assert_eq!(seen.len(), 15);
    let survivor = disk.after_power_failure();
    let (after, recovery) = RedbStore::open_with_backend(survivor, Durability::Immediate, T0).unwrap();
    // ...but only the flushed prefix survived, gap-free.
    assert_eq!(recovery.events, 10);
    let events = after.read(sid, s, Seq::PRIMING, 100).await.unwrap();
    assert_eq!(events.iter().map(|e| e.seq.get()).collect::<Vec<_>>(), (1..=10).collect::<Vec<_>>());
    // A client holding the lost cursor is refused, never answered with a stream.
    let lei = delivered.to_string();
    let (out, _) = transact(&after, sid, |r| {
        let req = GetRequest { last_event_id: Some(&lei), stream_token: None };
        r.on_get(&req, T0, &Config::default(), &mut SeededEntropy::new(5))
    })
    .await
    .unwrap();
    assert_eq!(out, GetOutcome::Rejected(forkless_core::RejectReason::CursorAhead));
    drop(store);
}
