//! Append throughput of every store with 1, 16 and 256 concurrent streams, and replay of a
//! 10,000-event window, so the durable store is always measured against the memory store in
//! the same run.
//!
//! `cargo bench -p forkless-store-redb --bench durable`

use forkless_core::EventKind;
use forkless_store::Append;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use forkless_core::{
    AppendTarget, Config, Limits, NewSession, Revision, SeededEntropy, Seq, SessionId, SessionRecord,
    StreamId, Timestamp,
};
use forkless_store::Reader;
use forkless_store::{MemoryStore, Store, transact};
use forkless_store_redb::{Durability, RedbStore};

const T0: Timestamp = Timestamp::from_millis(1);
const PAYLOAD: &[u8] =
    br#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"tick #123"}}"#;
/// Appends per stream per iteration.
const PER_STREAM: usize = 64;

fn limits() -> Limits {
    Limits {
        stream_max_events: 1_000_000,
        stream_max_bytes: 1 << 34,
        session_max_bytes: 1 << 40,
        ..Limits::default()
    }
}

/// One session per stream (the realistic shape: many clients), each with a request stream.
async fn setup<S: Store>(store: &S, streams: usize, seed: u64) -> Vec<(SessionId, StreamId)> {
    let mut e = SeededEntropy::new(seed);
    let mut out = Vec::with_capacity(streams);
    for _ in 0..streams {
        let new = NewSession {
            id: SessionId::generate(&mut e),
            revision: Revision::V2025_11_25,
            reset_contract: false,
            principal: None,
            client: Default::default(),
        };
        let record = SessionRecord::create(new, T0, &mut e).expect("create");
        let sid = record.id();
        store.create(record).await.expect("create");
        let stream = StreamId::generate(&mut e);
        transact(store, sid, |r| r.open_request_stream(stream, T0, &Config::default())).await.expect("open");
        out.push((sid, stream));
    }
    out
}

async fn append_round<S: Store>(store: &Arc<S>, targets: &[(SessionId, StreamId)]) {
    let tasks: Vec<_> = targets
        .iter()
        .map(|&(sid, stream)| {
            let store = Arc::clone(store);
            tokio::spawn(async move {
                let limits = limits();
                for _ in 0..PER_STREAM {
                    store
                        .append(Append {
                            session: sid,
                            target: AppendTarget::Stream(stream),
                            payload: Bytes::from_static(PAYLOAD),
                            kind: EventKind::Intermediate,
                            now: T0,
                            limits: &limits,
                        })
                        .await
                        .expect("append");
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("task");
    }
}

fn bench_store<S: Store>(c: &mut Criterion, name: &str, make: impl Fn() -> S) {
    let rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let mut group = c.benchmark_group(format!("append/{name}"));
    group.sample_size(10).measurement_time(Duration::from_secs(4)).warm_up_time(Duration::from_secs(1));
    for streams in [1usize, 16, 256] {
        group.throughput(Throughput::Elements((streams * PER_STREAM) as u64));
        group.bench_with_input(BenchmarkId::from_parameter(streams), &streams, |b, &streams| {
            let store = Arc::new(make());
            let targets = rt.block_on(setup(&*store, streams, streams as u64));
            b.iter_custom(|iters| {
                let start = Instant::now();
                for _ in 0..iters {
                    rt.block_on(append_round(&store, &targets));
                }
                start.elapsed()
            });
        });
    }
    group.finish();

    let mut group = c.benchmark_group(format!("replay_10k/{name}"));
    group.sample_size(10).measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    group.throughput(Throughput::Elements(10_000));
    let store = make();
    let (sid, stream) = rt.block_on(async {
        let t = setup(&store, 1, 99).await[0];
        for _ in 0..10_000 {
            store
                .append(Append {
                    session: t.0,
                    target: AppendTarget::Stream(t.1),
                    payload: Bytes::from_static(PAYLOAD),
                    kind: EventKind::Intermediate,
                    now: T0,
                    limits: &limits(),
                })
                .await
                .unwrap();
        }
        // A batched store delivers the last window's events after its sync.
        let mut watch = store.watch(t.0, t.1).await.unwrap();
        while watch.current().delivered < Seq::new(10_000) {
            watch.changed().await;
        }
        t
    });
    group.bench_function("read_batches_of_256", |b| {
        b.iter(|| {
            rt.block_on(async {
                let mut cursor = Seq::PRIMING;
                loop {
                    let batch = store.read(sid, stream, cursor, 256, Reader::Inspector).await.expect("read");
                    let Some(last) = batch.last() else { break };
                    cursor = last.seq;
                }
                assert_eq!(cursor, Seq::new(10_000));
            });
        });
    });
    group.finish();
}

fn benches(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    bench_store(c, "memory", MemoryStore::new);
    let n = std::sync::atomic::AtomicU64::new(0);
    let redb = |durability: Durability| {
        let i = n.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = dir.path().join(format!("bench-{i}.redb"));
        RedbStore::open(path, durability, T0).expect("open").0
    };
    bench_store(c, "redb_batched_5ms", || redb(Durability::Batched { window: Duration::from_millis(5) }));
    bench_store(c, "redb_immediate", || redb(Durability::Immediate));
}

criterion_group!(durable, benches);
criterion_main!(durable);
