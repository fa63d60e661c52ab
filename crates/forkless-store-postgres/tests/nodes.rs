//! Two nodes on one database: a watcher on one is woken by the other's commit (and by a
//! re-read when its listener reconnects, since hints may be lost), racing appends and
//! resumes across nodes are numbered and fenced as on one node, and connections the database
//! terminates mid-run cost typed errors, never a delivered event.

use std::collections::BTreeSet;
use std::time::Duration;

use bytes::Bytes;
use forkless_core::{
    AppendTarget, Config, EventKind, GetOutcome, GetRequest, Limits, NewSession, Revision, SeededEntropy,
    Seq, SessionId, SessionRecord, Timestamp,
};
use forkless_store::{Append, Error, Reader, Store, transact};
use forkless_store_postgres::testing::{TestDb, fresh};
use forkless_store_postgres::{Hints, PgConfig, PgStore};

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
    let mut e = SeededEntropy::new(seed);
    let new = NewSession {
        id: SessionId::generate(&mut e),
        revision: Revision::V2025_11_25,
        reset_contract: true,
        principal: None,
        client: Default::default(),
    };
    let record = SessionRecord::create(new, T0, &mut e).unwrap();
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
async fn a_watcher_on_another_node_is_woken_by_a_hint() {
    let Some(db) = fresh().await else { return };
    let (a, b) = (node(&db, "a", Hints::Notify).await, node(&db, "b", Hints::Notify).await);
    let record = session(&a, 1).await;
    let stream = record.standalone().id();
    let mut watch = b.watch(record.id(), stream).await.unwrap();
    assert_eq!(watch.current().delivered, Seq::PRIMING);
    let id = emit(&a, &record, 1).await.unwrap();
    tokio::time::timeout(GUARD, async {
        while watch.current().delivered < id.seq {
            watch.changed().await;
        }
    })
    .await
    .expect("node b's watcher is woken by node a's commit");
    let events = b.read(record.id(), stream, Seq::PRIMING, 10, Reader::Inspector).await.unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(&events[0].payload[..], b"{\"n\":1}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_hint_is_made_good_when_the_listener_reconnects() {
    let Some(db) = fresh().await else { return };
    // Node a sends no hints at all: node b can only learn of its commit by re-reading.
    let (a, b) = (node(&db, "a", Hints::Off).await, node(&db, "b", Hints::Notify).await);
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
    tokio::time::timeout(GUARD, async {
        while watch.current().delivered < id.seq {
            watch.changed().await;
        }
    })
    .await
    .expect("node b re-read the stream after its listener reconnected");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_racing_on_two_nodes_are_numbered_gap_free() {
    let Some(db) = fresh().await else { return };
    let (a, b) = (node(&db, "a", Hints::Notify).await, node(&db, "b", Hints::Notify).await);
    let record = session(&a, 3).await;
    let racer = |store: PgStore, record: SessionRecord, base: u64| {
        tokio::spawn(async move {
            let mut got = Vec::new();
            for n in 0..40 {
                let id = emit(&store, &record, base + n).await.expect("append");
                got.push((id.seq, base + n));
            }
            got
        })
    };
    let (ra, rb) = (racer(a.clone(), record.clone(), 1000), racer(b.clone(), record.clone(), 2000));
    let mut accepted = ra.await.unwrap();
    accepted.extend(rb.await.unwrap());
    let seqs: BTreeSet<u64> = accepted.iter().map(|(s, _)| s.get()).collect();
    assert_eq!(seqs.len(), 80, "no seq was handed out twice");
    assert_eq!(seqs, (1..=80).collect(), "gap-free");
    let events =
        a.read(record.id(), record.standalone().id(), Seq::PRIMING, 100, Reader::Inspector).await.unwrap();
    for (seq, n) in accepted {
        let event = &events[seq.get() as usize - 1];
        assert_eq!(event.seq, seq);
        assert_eq!(event.payload, Bytes::from(format!("{{\"n\":{n}}}")), "seq {seq} names what was appended");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resumes_racing_on_two_nodes_each_get_a_distinct_epoch() {
    let Some(db) = fresh().await else { return };
    let (a, b) = (node(&db, "a", Hints::Notify).await, node(&db, "b", Hints::Notify).await);
    let record = session(&a, 4).await;
    let stream = record.standalone().id();
    let cfg = Config::default();
    let (first, _) =
        transact(&a, record.id(), |r| r.on_get(&GetRequest::default(), T0, &cfg, &mut SeededEntropy::new(9)))
            .await
            .unwrap();
    assert!(matches!(first, GetOutcome::Attached(_)));
    let id = emit(&a, &record, 1).await.unwrap();
    let lei = format!("{stream}.{}", id.seq);
    let mut epochs = BTreeSet::new();
    let sid = record.id();
    for round in 0..10u64 {
        let resume = |store: PgStore, seed: u64| {
            let lei = lei.clone();
            tokio::spawn(async move {
                let req = GetRequest { last_event_id: Some(&lei), stream_token: None };
                let (out, _) = transact(&store, sid, |r| {
                    r.on_get(&req, T0, &Config::default(), &mut SeededEntropy::new(seed))
                })
                .await
                .unwrap();
                match out {
                    GetOutcome::Attached(g) => g.epoch,
                    other => panic!("resume refused: {other:?}"),
                }
            })
        };
        let (ea, eb) = (resume(a.clone(), 100 + round), resume(b.clone(), 200 + round));
        for epoch in [ea.await.unwrap(), eb.await.unwrap()] {
            assert!(epochs.insert(epoch), "two resumes were granted epoch {epoch:?}");
        }
    }
    let last = b.load(record.id()).await.unwrap().unwrap().value.stream(stream).unwrap().epoch();
    assert_eq!(Some(&last), epochs.iter().next_back(), "exactly one attachment is current");
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
            assert!(terminate(&db, "a", "").await > 0, "node a's connections are terminated");
        }
        match emit(&a, &record, n).await {
            Ok(id) => accepted.push((id.seq, n)),
            Err(Error::Backend(_)) => refused += 1,
            Err(other) => panic!("an untyped or wrong refusal: {other}"),
        }
    }
    // Whether a terminated connection costs an error depends on whether the pool noticed
    // first; either way the node must reconnect and go on.
    assert!(accepted.last().is_some_and(|(_, n)| *n == 59), "the node reconnected ({refused} refused)");
    let events =
        a.read(record.id(), record.standalone().id(), Seq::PRIMING, 100, Reader::Inspector).await.unwrap();
    let seqs: Vec<u64> = events.iter().map(|e| e.seq.get()).collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>(), "the log is gap-free");
    for (seq, n) in accepted {
        let event = &events[seq.get() as usize - 1];
        assert_eq!(
            event.payload,
            Bytes::from(format!("{{\"n\":{n}}}")),
            "accepted seq {seq} names its event"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_removed_on_one_node_stops_the_watchers_on_another() {
    let Some(db) = fresh().await else { return };
    let (a, b) = (node(&db, "a", Hints::Notify).await, node(&db, "b", Hints::Notify).await);
    let record = session(&a, 6).await;
    let mut watch = b.watch(record.id(), record.standalone().id()).await.unwrap();
    a.remove(record.id()).await.unwrap();
    let signal = tokio::time::timeout(GUARD, async {
        loop {
            let signal = watch.changed().await;
            if signal.end.is_some() {
                return signal;
            }
        }
    })
    .await
    .expect("node b's watcher stops");
    assert_eq!(signal.end, Some(forkless_store::StreamEnd::Fenced));
}
