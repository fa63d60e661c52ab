//! The database failing under a pipelined emitter (faults injected between the store and a
//! real PostgreSQL by `FaultyDatabase`): a group commit refused, one applied whose answer was
//! lost, a session that could not be read. A notification's append is answered before its
//! batch is stored, so no error can reach its emitter afterwards: the store must try again
//! until it is stored under the id it was answered with, or is found stored under it already.
//! The oracle is the emitter's whole view against the log. A negative control runs the
//! database down for longer than the store tries: then the oracle must see the loss, and the
//! store must count it.

use bytes::Bytes;
use forkless_core::{AppendTarget, EventId, EventKind, Limits, Seq, SessionRecord, Timestamp};
use forkless_store::conformance::until_delivered;
use forkless_store::shared::{
    DbFault, DbFaults, FaultyDatabase, Hints, Pipeline, SETTLE_RETRIES, SharedStore, TailConfig,
};
use forkless_store::{Append, Error, Reader, Store};
use forkless_store_postgres::testing::{TestDb, fresh};
use forkless_store_postgres::{PgConfig, Postgres};

type Faulty = SharedStore<FaultyDatabase<Postgres>>;

const T0: Timestamp = Timestamp::from_millis(1_000_000);

async fn store(db: &TestDb, pipeline: Pipeline) -> (Faulty, DbFaults) {
    let mut cfg = PgConfig::new(&db.url);
    cfg.pool_size = 4;
    let pg = forkless_store_postgres::database(&cfg).await.expect("connect");
    let (faulty, faults) = FaultyDatabase::new(pg);
    (
        SharedStore::new(
            faulty,
            Hints::Off,
            forkless_store::shared::NodeName::new("a").unwrap(),
            pipeline,
            TailConfig::default(),
        ),
        faults,
    )
}

async fn emit(store: &Faulty, record: &SessionRecord, n: u64) -> Result<EventId, Error> {
    let limits = Limits::default();
    let append = Append {
        session: record.id(),
        target: AppendTarget::Standalone,
        payload: Bytes::from(format!("{{\"n\":{n}}}")),
        kind: EventKind::Intermediate,
        now: T0,
        limits: &limits,
    };
    store.append(append).await
}

/// What the emitter saw and what the log holds once everything settled.
struct View {
    accepted: Vec<(EventId, u64)>,
    log: Vec<(u64, u64)>,
    lost: u64,
}

/// Emit notifications one after another, arming `faults` at the tenth, until at least 60 are
/// sent and every fault fired; then read the log.
async fn run(faults: &[DbFault]) -> Option<View> {
    let db = fresh().await?;
    let (store, armed) = store(&db, Pipeline::On).await;
    let record = forkless_store::conformance::new_record(1, true);
    store.create(record.clone()).await.expect("create");
    let mut accepted = Vec::new();
    let mut n = 0;
    while n < 60 || armed.pending() > 0 {
        if n == 10 {
            faults.iter().for_each(|f| armed.inject(*f));
        }
        match emit(&store, &record, n).await {
            Ok(id) => accepted.push((id, n)),
            Err(Error::Backend(_)) => {}
            Err(other) => panic!("an untyped or wrong refusal: {other}"),
        }
        n += 1;
        assert!(n < 100_000, "the armed faults never fired: {} left", armed.pending());
    }
    // A load on the node waits until its answered appends are stored or dropped.
    store.load(record.id()).await.expect("load");
    let events = store
        .read(record.id(), record.standalone().id(), Seq::PRIMING, 100_000, Reader::Inspector)
        .await
        .expect("read");
    let log = events
        .iter()
        .map(|e| {
            let text = std::str::from_utf8(&e.payload).expect("utf-8");
            (e.seq.get(), text.trim_start_matches("{\"n\":").trim_end_matches('}').parse().expect("emitted"))
        })
        .collect();
    let lost =
        store.metrics().iter().find(|m| m.name == "forkless_store_events_lost_total").map_or(0, |m| m.value);
    Some(View { accepted, log, lost })
}

/// Everything the emitter's view and the log disagree on.
fn violations(v: &View) -> Vec<String> {
    let mut found = Vec::new();
    let seqs: Vec<u64> = v.log.iter().map(|(s, _)| *s).collect();
    if seqs != (1..=seqs.len() as u64).collect::<Vec<_>>() {
        found.push(format!("the log has gaps: {seqs:?}"));
    }
    if !v.log.windows(2).all(|w| w[0].1 < w[1].1) {
        found.push("the log holds an event twice or out of order".into());
    }
    for (id, n) in &v.accepted {
        match v.log.iter().find(|(_, logged)| logged == n) {
            None => found.push(format!("accepted #{n} ({id}) is not in the log")),
            Some((seq, _)) if *seq != id.seq.get() => {
                found.push(format!("accepted #{n} was answered {id} but is stored at {seq}"))
            }
            Some(_) => {}
        }
    }
    found.truncate(10);
    if v.lost > 0 {
        found.push(format!("{} answered events counted lost", v.lost));
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answered_notifications_survive_refused_unacknowledged_and_unreadable_commits() {
    use DbFault::{Batch, BatchUnacknowledged, Load};
    let faults = [Batch, BatchUnacknowledged, Load, Batch, Load, BatchUnacknowledged];
    assert!(faults.len() < SETTLE_RETRIES as usize, "within what the store tries");
    let Some(view) = run(&faults).await else { return };
    assert_eq!(violations(&view), Vec::<String>::new());
    assert!(view.accepted.len() >= 50, "nearly every append was accepted: {}", view.accepted.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn negative_control_a_database_down_for_longer_than_the_store_tries_is_seen_and_counted() {
    // The pipelined write, then the store's first try and every retry.
    let faults = vec![DbFault::Batch; SETTLE_RETRIES as usize + 2];
    let Some(view) = run(&faults).await else { return };
    let found = violations(&view);
    assert!(!found.is_empty(), "the oracle sees answered notifications dropped");
    let missing = view.accepted.iter().filter(|(_, n)| !view.log.iter().any(|(_, l)| l == n)).count();
    assert!(missing > 0, "{found:?}");
    assert!(
        missing as u64 <= view.lost,
        "every missing one is counted: {missing} missing, {} lost",
        view.lost
    );
    let seqs: Vec<u64> = view.log.iter().map(|(s, _)| *s).collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>(), "the log itself stays gap-free");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_a_failed_write_stored_after_all_reaches_its_watchers() {
    let Some(db) = fresh().await else { return };
    let (store, faults) = store(&db, Pipeline::On).await;
    let record = forkless_store::conformance::new_record(3, true);
    store.create(record.clone()).await.expect("create");
    let stream = record.standalone().id();
    let mut watch = store.watch(record.id(), stream).await.expect("watch");
    // One notification, alone in its batch: the write stores it and reports an error, so
    // only finding it stored under its id can wake the watcher (hints are off).
    faults.inject(DbFault::BatchUnacknowledged);
    let id = emit(&store, &record, 7).await.expect("answered");
    until_delivered(&mut watch, id.seq).await;
    assert_eq!(faults.pending(), 0, "the fault fired");
    let events = store.read(record.id(), stream, Seq::PRIMING, 10, Reader::Inspector).await.expect("read");
    let logged: Vec<(Seq, &[u8])> = events.iter().map(|e| (e.seq, &e.payload[..])).collect();
    assert_eq!(logged, [(id.seq, &b"{\"n\":7}"[..])], "stored once, under the id it was answered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_error_names_its_sqlstate() {
    let Some(db) = fresh().await else { return };
    let (store, _) = store(&db, Pipeline::Off).await;
    let record = forkless_store::conformance::new_record(2, true);
    store.create(record.clone()).await.expect("create");
    let (client, conn) = tokio_postgres::connect(&db.url, tokio_postgres::NoTls).await.expect("connect");
    tokio::spawn(conn);
    client.batch_execute("ALTER TABLE forkless_chunks RENAME TO forkless_chunks_gone").await.expect("rename");
    match emit(&store, &record, 0).await {
        Err(Error::Backend(m)) => {
            assert!(m.contains("42P01") && m.contains("forkless_chunks"), "SQLSTATE and message: {m}")
        }
        other => panic!("a typed backend error, got {other:?}"),
    }
}

/// The negative control of the two-node task check: a node whose store acknowledges a task's
/// creation before writing it (what answering `CreateTaskResult` before the commit would be)
/// is caught: the other node does not know the task it was just told of.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_acknowledged_before_its_write_is_caught_unknown_on_the_other_node() {
    let Some(db) = fresh().await else { return };
    let (a, faults) = store(&db, Pipeline::On).await;
    let (b, _) = store(&db, Pipeline::On).await;
    // Without the fault the same check holds: the two-node conformance check on this store.
    faults.inject(DbFault::TaskAckedBeforeWrite);
    let caught = forkless_store::conformance::resolves_on_the_other_node(&a, &b).await;
    let violation = caught.expect_err("acknowledging before the write must be caught");
    assert!(violation.contains("unknown on the other"), "{violation}");
}
