//! Group commit: appends waiting together are stored in one transaction, each numbered and
//! evicted exactly as if it had been stored alone.

use bytes::Bytes;
use forkless_core::{AppendTarget, EventKind, Limits, Seq, SessionRecord, Timestamp};
use forkless_store::{Append, Reader, Store};
use forkless_store_postgres::testing::fresh;
use forkless_store_postgres::{Hints, PgStore};

const T0: Timestamp = Timestamp::from_millis(1_000_000);

async fn session(store: &PgStore, seed: u64) -> SessionRecord {
    let record = forkless_store::conformance::new_record(seed, true);
    store.create(record.clone()).await.unwrap();
    record
}

/// `count` appends at once to `record`'s standalone stream; what each was numbered.
async fn burst(
    store: &PgStore,
    record: &SessionRecord,
    count: u64,
    limits: Limits,
    size: usize,
) -> Vec<(Seq, Bytes)> {
    let tasks: Vec<_> = (0..count)
        .map(|n| {
            let (store, id) = (store.clone(), record.id());
            tokio::spawn(async move {
                let payload = Bytes::from(format!("{n:0>size$}"));
                let append = Append {
                    session: id,
                    target: AppendTarget::Standalone,
                    payload: payload.clone(),
                    kind: EventKind::Intermediate,
                    now: T0,
                    limits: &limits,
                };
                (store.append(append).await.expect("append").seq, payload)
            })
        })
        .collect();
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_waiting_together_share_a_transaction_and_keep_their_numbers() {
    let Some(db) = fresh().await else { return };
    let store = db.store(Hints::Off).await;
    let mut records = Vec::new();
    for seed in 0..10 {
        records.push(session(&store, seed).await);
    }
    let before = store.stats();
    let bursts = records.iter().map(|r| burst(&store, r, 30, Limits::default(), 8));
    let accepted = futures::future::join_all(bursts).await;
    // A notification's append may return before its batch is stored; a load waits for them.
    for r in &records {
        store.load(r.id()).await.unwrap();
    }
    let stats = store.stats();
    let (batches, events) = (stats.batches - before.batches, stats.batched_events - before.batched_events);
    assert_eq!(events, 300);
    assert!(batches * 2 <= events, "300 appends at once took {batches} transactions");
    for (record, accepted) in records.iter().zip(accepted) {
        let seqs: Vec<u64> = accepted.iter().map(|(s, _)| s.get()).collect();
        assert_eq!(seqs, (1..=30).collect::<Vec<_>>(), "each session's events are numbered 1..30 once");
        let stored = store
            .read(record.id(), record.standalone().id(), Seq::PRIMING, 100, Reader::Inspector)
            .await
            .unwrap();
        for ((seq, payload), event) in accepted.iter().zip(&stored) {
            assert_eq!(
                (event.seq, &event.payload),
                (*seq, payload),
                "each id names what was appended under it"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_inside_a_batch_evicts_as_if_each_append_were_alone() {
    let Some(db) = fresh().await else { return };
    let store = db.store(Hints::Off).await;
    for (limits, seed) in [
        (Limits { stream_max_events: 3, ..Limits::default() }, 1),
        (Limits { stream_max_bytes: 35, ..Limits::default() }, 2),
    ] {
        let record = session(&store, seed).await;
        let (before, batches) = (store.usage(), store.stats().batches);
        let accepted = burst(&store, &record, 12, limits, 10).await;
        store.load(record.id()).await.unwrap();
        // Several appends to one stream shared a transaction: the case this test is about.
        assert!(store.stats().batches - batches < 12, "the burst was batched");
        let stream = record.standalone().id();
        let meta = store.load(record.id()).await.unwrap().unwrap().value.stream(stream).unwrap().clone();
        // 3 events of 10 bytes fit either limit: the 9 oldest are gone.
        assert_eq!(meta.low_water(), Seq::new(10), "{limits:?}");
        let stored = store.read(record.id(), stream, Seq::new(9), 100, Reader::Inspector).await.unwrap();
        assert_eq!(stored.len(), 3, "{limits:?}");
        for (event, (seq, payload)) in stored.iter().zip(&accepted[9..]) {
            assert_eq!((event.seq, &event.payload), (*seq, payload));
        }
        assert!(
            store.read(record.id(), stream, Seq::new(3), 100, Reader::Inspector).await.is_err(),
            "evicted"
        );
        let usage = store.usage();
        let evicted = (usage.evicted_by_events - before.evicted_by_events)
            + (usage.evicted_by_bytes - before.evicted_by_bytes);
        assert_eq!(evicted, 9, "{limits:?}");
    }
}

/// One emitter appending notifications one after another, each awaited, as a tool reporting
/// progress does: with the pipeline on, its appends return once computed, so one batch
/// carries many of its events while the one before is written; off (the negative control),
/// each append waits for its own transaction. Either way the log holds every event once, in
/// order, under the ids the appends returned (one node: nothing renumbers them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pipelined_emitter_shares_transactions_and_an_unpipelined_one_does_not() {
    let Some(db) = fresh().await else { return };
    for (pipeline, seed) in
        [(forkless_store_postgres::Pipeline::On, 7), (forkless_store_postgres::Pipeline::Off, 8)]
    {
        let mut cfg = forkless_store_postgres::PgConfig::new(&db.url);
        cfg.hints = Hints::Off;
        cfg.pipeline = pipeline;
        let store = forkless_store_postgres::connect(cfg).await.expect("connect");
        let record = session(&store, seed).await;
        let before = store.stats().batches;
        let mut returned = Vec::new();
        for n in 0..200u64 {
            let append = Append {
                session: record.id(),
                target: AppendTarget::Standalone,
                payload: Bytes::from(format!("{n:0>8}")),
                kind: EventKind::Intermediate,
                now: T0,
                limits: &Limits::default(),
            };
            returned.push(store.append(append).await.expect("append").seq);
        }
        store.load(record.id()).await.unwrap(); // every append stored
        let batches = store.stats().batches - before;
        match pipeline {
            forkless_store_postgres::Pipeline::On => {
                assert!(batches * 4 <= 200, "200 pipelined appends took {batches} transactions")
            }
            forkless_store_postgres::Pipeline::Off => assert_eq!(batches, 200, "one transaction each"),
        }
        let stored = store
            .read(record.id(), record.standalone().id(), Seq::PRIMING, 300, Reader::Inspector)
            .await
            .unwrap();
        assert_eq!(stored.len(), 200);
        for (n, (event, seq)) in stored.iter().zip(&returned).enumerate() {
            assert_eq!((event.seq, &event.payload), (*seq, &Bytes::from(format!("{n:0>8}"))));
        }
    }
}
