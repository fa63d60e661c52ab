//! Two nodes on one database: the two-node checks of the conformance suite, and what only
//! PostgreSQL can show: a lost hint made good when the listener reconnects, connections the
//! database terminates mid-run costing typed errors, never a delivered event, and tail
//! interest (a node holding a lease hints a group commit only while another node watches the
//! session, and a watch that starts while a commit is under way misses nothing: the
//! declaration is ordered against the commit by the session's row lock).

use std::time::Duration;

use bytes::Bytes;
use forkless_core::{AppendTarget, EventKind, Limits, Seq, SessionRecord, Timestamp};
use forkless_store::conformance::{listener_connected, until_delivered};
use forkless_store::{Append, Error, Reader, Store};
use forkless_store_postgres::testing::{TestDb, fresh};
use forkless_store_postgres::{Hints, PgConfig, PgStore};

/// Nodes `a` and `b` (hints on) on a database of their own.
async fn two_nodes() -> Option<(TestDb, PgStore, PgStore)> {
    let db = fresh().await?;
    let (a, b) = (node(&db, "a", Hints::Notify).await, node(&db, "b", Hints::Notify).await);
    Some((db, a, b))
}

forkless_store::store_node_tests!(maybe two_nodes());

const T0: Timestamp = Timestamp::from_millis(1_000_000);
/// A failure guard: a wake-up that never comes fails the test instead of hanging it.
const GUARD: Duration = Duration::from_secs(10);

async fn node(db: &TestDb, name: &str, hints: Hints) -> PgStore {
    let mut cfg = PgConfig::new(format!("{}?application_name={name}", db.url));
    cfg.hints = hints;
    cfg.pool_size = 4;
    cfg.node = Some(name.to_owned());
    forkless_store_postgres::connect(cfg).await.expect("connect")
}

async fn session(store: &PgStore, seed: u64) -> SessionRecord {
    let record = forkless_store::conformance::new_record(seed, true);
    store.create(record.clone()).await.unwrap();
    record
}

async fn emit(store: &PgStore, record: &SessionRecord, n: u64) -> Result<forkless_core::EventId, Error> {
    let limits = Limits::default();
    let payload = Bytes::from(format!("{{\"n\":{n}}}"));
    let append = Append {
        session: record.id(),
        target: AppendTarget::Standalone,
        payload,
        kind: EventKind::Intermediate,
        now: T0,
        limits: &limits,
    };
    store.append(append).await
}

/// Terminate the database connections of `application_name` whose last statement starts
/// with `query_prefix` (all of them when empty); how many.
async fn terminate(db: &TestDb, application_name: &str, query_prefix: &str) -> i64 {
    let (client, conn) = tokio_postgres::connect(&db.url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    let row = client
        .query_one(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE datname = current_database() AND application_name = $1 AND query LIKE $2 || '%' \
             AND pid <> pg_backend_pid()",
            &[&application_name, &query_prefix],
        )
        .await
        .unwrap();
    row.get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_hint_is_made_good_when_the_listener_reconnects() {
    let Some(db) = fresh().await else { return };
    // Node a sends no hints at all: node b can only learn of its commit by re-reading.
    let (a, b) = (node(&db, "a", Hints::Off).await, node(&db, "b", Hints::Notify).await);
    listener_connected(&b).await;
    let record = session(&a, 2).await;
    let stream = record.standalone().id();
    let mut watch = b.watch(record.id(), stream).await.unwrap();
    let id = emit(&a, &record, 1).await.unwrap();
    assert_eq!(watch.current().delivered, Seq::PRIMING, "no hint was sent");
    // Cut node b's listener; it reconnects and re-reads every stream it watches.
    tokio::time::timeout(GUARD, async {
        while terminate(&db, "b", "LISTEN").await == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("node b's listener is connected");
    // Node b re-reads the stream after its listener reconnected.
    until_delivered(&mut watch, id.seq).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminated_connections_cost_typed_errors_never_a_delivered_event() {
    let Some(db) = fresh().await else { return };
    let a = node(&db, "a", Hints::Off).await;
    let record = session(&a, 5).await;
    let mut accepted = Vec::new();
    let mut refused = 0;
    for n in 0..60u64 {
        if n % 20 == 10 {
            // Node a's connections, once it holds some again (its appends may not wait for
            // their writes, so the pool may still be reconnecting from the last cut).
            tokio::time::timeout(GUARD, async {
                while terminate(&db, "a", "").await == 0 {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            })
            .await
            .expect("node a's connections are terminated");
        }
        match emit(&a, &record, n).await {
            Ok(id) => accepted.push((id.seq, n)),
            Err(Error::Backend(_)) => refused += 1,
            Err(other) => panic!("an untyped or wrong refusal: {other}"),
        }
    }
    // A notification's append may return before its batch is stored, its id provisional
    // until then (nothing is delivered before): the log is judged once node a's appends are
    // stored (a load waits for them).
    a.load(record.id()).await.unwrap();
    let events =
        a.read(record.id(), record.standalone().id(), Seq::PRIMING, 100, Reader::Inspector).await.unwrap();
    let seqs: Vec<u64> = events.iter().map(|e| e.seq.get()).collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>(), "the log is gap-free");
    let logged: Vec<u64> = events
        .iter()
        .map(|e| {
            let text = std::str::from_utf8(&e.payload).expect("utf-8");
            text.trim_start_matches("{\"n\":").trim_end_matches('}').parse().expect("an emitted event")
        })
        .collect();
    assert!(logged.windows(2).all(|w| w[0] < w[1]), "each event once, in the order sent: {logged:?}");
    // Whether a terminated connection costs an error depends on whether the pool noticed
    // first; either way the node must reconnect and go on.
    assert_eq!(logged.last(), Some(&59), "the node reconnected ({refused} refused)");
    // Every accepted event is in the log: a batch whose write failed with a cut connection
    // is tried again (on a new one) until stored under its ids, or found stored under them.
    let lost =
        a.metrics().iter().find(|m| m.name == "forkless_store_events_lost_total").map_or(0, |m| m.value);
    let missing = accepted.iter().filter(|(_, n)| !logged.contains(n)).count() as u64;
    assert_eq!((missing, lost), (0, 0), "accepted events missing, and counted lost");
}

forkless_store::store_interest_tests!(maybe two_nodes());
