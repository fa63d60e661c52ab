//! Checkpoints run beside the log: a sync never waits for one, and a power failure in the
//! middle of one loses nothing that was acknowledged.

use super::*;

use std::sync::{Condvar, Mutex, mpsc};

use support::Disk;

/// A data-file disk whose syncs can be held: once armed, the next sync reports that it has
/// started and waits until released. A checkpoint's redb commit syncs the data file, so a
/// held sync is a checkpoint caught half-way.
#[derive(Debug, Clone)]
struct HeldDisk {
    disk: Disk,
    gate: Arc<Gate>,
}

#[derive(Debug, Default)]
struct Gate {
    armed: AtomicBool,
    held: Mutex<Option<mpsc::Sender<()>>>,
    released: Mutex<bool>,
    release: Condvar,
}

impl Gate {
    /// Hold the next sync; `Receiver` hears when it is held.
    fn arm(&self) -> mpsc::Receiver<()> {
        let (tx, rx) = mpsc::channel();
        *self.held.lock().unwrap() = Some(tx);
        self.armed.store(true, Ordering::SeqCst);
        rx
    }

    fn release(&self) {
        *self.released.lock().unwrap() = true;
        self.release.notify_all();
    }
}

/// Releases the gate when dropped: a failing test must not leave the store's threads held
/// (closing the store waits for them), so that it fails instead of hanging.
struct ReleaseOnDrop(Arc<Gate>);

impl Drop for ReleaseOnDrop {
    fn drop(&mut self) {
        self.0.release();
    }
}

impl redb::StorageBackend for HeldDisk {
    fn len(&self) -> Result<u64, std::io::Error> {
        self.disk.len()
    }
    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), std::io::Error> {
        self.disk.read(offset, out)
    }
    fn set_len(&self, len: u64) -> Result<(), std::io::Error> {
        self.disk.set_len(len)
    }
    fn sync_data(&self) -> Result<(), std::io::Error> {
        if self.gate.armed.swap(false, Ordering::SeqCst) {
            if let Some(held) = self.gate.held.lock().unwrap().take() {
                let _ = held.send(());
            }
            let mut released = self.gate.released.lock().unwrap();
            while !*released {
                released = self.gate.release.wait(released).unwrap();
            }
        }
        self.disk.sync_data()
    }
    fn write(&self, offset: u64, data: &[u8]) -> Result<(), std::io::Error> {
        self.disk.write(offset, data)
    }
}

/// An append that must be acknowledged (immediate mode: after its log sync) well within
/// `LIMIT`; the limit only bounds a failure, it is not a measurement.
async fn acknowledged(store: &RedbStore, sid: SessionId, payload: Bytes) -> forkless_core::EventId {
    const LIMIT: Duration = Duration::from_secs(20);
    tokio::time::timeout(LIMIT, standalone_event(store, sid, payload))
        .await
        .expect("the append was acknowledged while a checkpoint was held (a sync waited for it)")
        .expect("append")
}

fn big(n: u8) -> Bytes {
    // Three of these fill most of a region of the small log (32 KiB); a fourth does not fit.
    Bytes::from(vec![b'a' + n; 9_000])
}

/// A store on the model disks (immediate mode, the small log) with six events appended, the
/// fourth of which handed the first region to the checkpoint thread, whose data-file sync is
/// held. (Bind the guard after the store, so it is released before the store closes.)
async fn six_events_and_a_held_checkpoint(
    seed: u64,
) -> (Machine, Arc<Gate>, RedbStore, ReleaseOnDrop, SessionId, StreamId) {
    let machine = Machine::new(Some(SMALL_LOG));
    let gate = Arc::new(Gate::default());
    let data = HeldDisk { disk: machine.data.clone(), gate: Arc::clone(&gate) };
    let (store, _) =
        RedbStore::open_with_backend(data, machine.log.clone(), Durability::Immediate, T0).expect("open");
    let release = ReleaseOnDrop(Arc::clone(&gate));
    let rec = record(seed);
    let (sid, s) = (rec.id(), rec.standalone().id());
    store.create(rec).await.unwrap();
    let held = gate.arm();
    // The first region fills with three; the fourth hands it to the checkpoint thread, whose
    // data-file sync is then held, and goes to the second region.
    for n in 1..=4 {
        acknowledged(&store, sid, big(n)).await;
    }
    tokio::task::spawn_blocking(move || held.recv_timeout(Duration::from_secs(20)))
        .await
        .unwrap()
        .expect("the filled region's checkpoint started");
    // While that checkpoint is held half-way, appends that fit in the second region are made
    // durable and acknowledged.
    for n in 5..=6 {
        acknowledged(&store, sid, big(n)).await;
    }
    (machine, gate, store, release, sid, s)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_never_waits_for_a_checkpoint_and_a_crash_during_one_loses_nothing() {
    let (machine, gate, store, _release, sid, s) = six_events_and_a_held_checkpoint(31).await;
    let mut watch = store.watch(sid, s).await.unwrap();
    assert_eq!(watch.current().delivered, Seq::new(6), "delivered as they were synced");
    watch.mark_seen();
    // The power fails with the checkpoint still held: the data file has none of it, and the
    // log holds the entries of both regions.
    let crashed = machine.after_power_failure(0.0);
    gate.release();
    drop(store);
    let (_, alone) = crashed.data_file_alone().open(Durability::Immediate);
    assert_eq!(alone.events, 0, "the held checkpoint never committed");
    let (after, recovery) = crashed.open(Durability::Immediate);
    assert_eq!(recovery.events, 6, "every acknowledged event came back from the log's two regions");
    let events = after.read(sid, s, Seq::PRIMING, 100, Reader::Inspector).await.unwrap();
    let got: Vec<(u64, Bytes)> = events.into_iter().map(|e| (e.seq.get(), e.payload)).collect();
    let want: Vec<(u64, Bytes)> = (1..=6).map(|n| (u64::from(n), big(n))).collect();
    assert!(got == want, "each id names the bytes it was acknowledged with");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_region_waits_for_the_other_region_s_checkpoint_then_goes_on() {
    let (machine, gate, store, _release, sid, s) = six_events_and_a_held_checkpoint(32).await;
    // The seventh does not fit in the second region either, and the first may not be
    // written over before its checkpoint is done: it waits for that, then goes there.
    let store = Arc::new(store);
    let seventh = tokio::spawn({
        let store = Arc::clone(&store);
        async move { standalone_event(&store, sid, big(7)).await }
    });
    let mut watch = store.watch(sid, s).await.unwrap();
    assert_eq!(watch.current().delivered, Seq::new(6));
    watch.mark_seen();
    gate.release();
    let id = tokio::time::timeout(Duration::from_secs(20), seventh).await.unwrap().unwrap().unwrap();
    assert_eq!(id.seq, Seq::new(7));
    assert_eq!(watch.current().delivered, Seq::new(7));
    // It overwrote the first region only once that region was in the data file: after a
    // power failure now, all seven are there.
    drop(watch);
    let store = Arc::try_unwrap(store).expect("one owner");
    let crashed = machine.after_power_failure(0.0);
    drop(store);
    let (after, recovery) = crashed.open(Durability::Immediate);
    assert_eq!(recovery.events, 7);
    let events = after.read(sid, s, Seq::PRIMING, 100, Reader::Inspector).await.unwrap();
    assert!(events.iter().zip(1..=7u8).all(|(e, n)| e.seq.get() == u64::from(n) && e.payload == big(n)));
}

/// The data file's event rows (each a run of events) under `session`, and the first seq of
/// each.
fn event_rows(path: &std::path::Path, session: SessionId) -> Vec<u64> {
    let db = redb::ReadOnlyDatabase::open(path).unwrap();
    let txn = redb::ReadableDatabase::begin_read(&db).unwrap();
    let events = txn.open_table(redb::TableDefinition::<&[u8], &[u8]>::new("events")).unwrap();
    let (mut lo, mut hi) = ([0u8; 36], [0xffu8; 36]);
    lo[..16].copy_from_slice(session.as_bytes());
    hi[..16].copy_from_slice(session.as_bytes());
    events
        .range(&lo[..]..=&hi[..])
        .unwrap()
        .map(|row| u64::from_be_bytes(row.unwrap().0.value()[28..].try_into().unwrap()))
        .collect()
}

/// Events evicted in a later checkpoint than the one that stored them leave the data file:
/// every row of them when all are gone (an ended session's tombstone used to keep the last
/// row of each stream for its whole TTL, and the file grew by 25 MB/s under session churn),
/// and every row before the one holding the oldest retained event otherwise.
#[tokio::test]
async fn evicted_events_leave_the_data_file_whole_rows_at_a_time() {
    let dir = tempdir();
    let path = dir.path().join("data.redb");
    let (ended, kept) = (record(41), record(42));
    let (ended_id, kept_id, kept_stream) = (ended.id(), kept.id(), kept.standalone().id());
    let keep_300 = Limits { stream_max_events: 300, ..Limits::default() };
    {
        // One checkpoint, at close (however long the appends take under load), so the rows
        // are the runs of 256 the test expects.
        let options = forkless_store_redb::Options {
            durability: Durability::Immediate,
            checkpoint_interval: Duration::from_secs(3600),
            ..forkless_store_redb::Options::default()
        };
        let (store, _) = RedbStore::open_options(&path, T0, options).unwrap();
        store.create(ended).await.unwrap();
        store.create(kept).await.unwrap();
        for n in 1..=600 {
            standalone_event(&store, ended_id, payload(n)).await.unwrap();
            standalone_event(&store, kept_id, payload(n)).await.unwrap();
        }
    }
    // Stored as rows of at most 256 events: 1, 257, 513.
    assert_eq!(event_rows(&path, ended_id), [1, 257, 513]);
    {
        let (store, _) = RedbStore::open(&path, Durability::Immediate, T0).unwrap();
        transact(&store, ended_id, |r| r.on_end(forkless_core::EndReason::Deleted, T0)).await.unwrap();
        // One more event under a 300-event limit evicts 1..=301: the oldest kept is 302.
        store
            .append(Append {
                session: kept_id,
                target: AppendTarget::Standalone,
                payload: payload(601),
                kind: EventKind::Intermediate,
                now: T0,
                limits: &keep_300,
            })
            .await
            .unwrap();
    }
    assert_eq!(event_rows(&path, ended_id), Vec::<u64>::new(), "an ended session's rows are all gone");
    assert_eq!(event_rows(&path, kept_id), [257, 513, 601], "the row holding 302 stays, the one before goes");
    let (store, _) = RedbStore::open(&path, Durability::Immediate, T0).unwrap();
    let back = store.read(kept_id, kept_stream, Seq::new(301), 1000, Reader::Inspector).await.unwrap();
    let seqs: Vec<u64> = back.iter().map(|e| e.seq.get()).collect();
    assert_eq!(seqs, (302..=601).collect::<Vec<_>>(), "exactly the retained events read back");
    assert!(back.iter().all(|e| e.payload == payload(e.seq.get())));
}
