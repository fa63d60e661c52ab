//! Benchmarks of the in-memory store: appending an event (the core transition, the log push,
//! retention and the watcher wake-up, under the session's lock) and replaying a 10,000-event
//! window through `read()` in batches, as a resumed connection does.
//!
//! `cargo bench -p forkless-store --bench store`; under `cargo test` each runs once, untimed.

use forkless_core::EventKind;
use forkless_store::Append;
use std::hint::black_box;

use bytes::Bytes;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use forkless_core::{
    AppendTarget, Limits, NewSession, Revision, SeededEntropy, Seq, SessionId, SessionRecord, Timestamp,
};
use forkless_store::Reader;
use forkless_store::{MemoryStore, Store};

const T0: Timestamp = Timestamp::from_millis(1_000_000);
const WINDOW: u64 = 10_000;

fn payload() -> Bytes {
    Bytes::from_static(
        br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":41,"total":100}}"#,
    )
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().build().expect("runtime")
}

/// A store holding one session whose standalone stream holds `events` events.
fn filled(rt: &tokio::runtime::Runtime, events: u64, limits: &Limits) -> (MemoryStore, SessionRecord) {
    let store = MemoryStore::new();
    let mut entropy = SeededEntropy::new(1);
    let id = SessionId::generate(&mut entropy);
    let new = NewSession {
        id,
        revision: Revision::V2025_11_25,
        reset_contract: false,
        principal: None,
        client: Default::default(),
    };
    let record = SessionRecord::create(new, T0, &mut entropy).expect("create");
    rt.block_on(async {
        store.create(record.clone()).await.expect("create");
        for _ in 0..events {
            store
                .append(Append {
                    session: id,
                    target: AppendTarget::Standalone,
                    payload: payload(),
                    kind: EventKind::Intermediate,
                    now: T0,
                    limits,
                })
                .await
                .expect("append");
        }
    });
    (store, record)
}

fn append(c: &mut Criterion) {
    let rt = runtime();
    // At the retention limit, so every append also evicts one event (steady state).
    let limits = Limits { stream_max_events: WINDOW, ..Limits::default() };
    let (store, record) = filled(&rt, WINDOW, &limits);
    let mut group = c.benchmark_group("MemoryStore");
    group.throughput(Throughput::Elements(1));
    group.bench_function("append (stream at its 10,000-event limit)", |b| {
        b.to_async(&rt).iter(|| async {
            store
                .append(Append {
                    session: record.id(),
                    target: AppendTarget::Standalone,
                    payload: payload(),
                    kind: EventKind::Intermediate,
                    now: T0,
                    limits: &limits,
                })
                .await
                .expect("append")
        });
    });
    group.finish();
}

fn replay(c: &mut Criterion) {
    let rt = runtime();
    let limits = Limits { stream_max_events: WINDOW, ..Limits::default() };
    let (store, record) = filled(&rt, WINDOW, &limits);
    let stream = record.standalone().id();
    let mut group = c.benchmark_group("MemoryStore replay of 10,000 events via read()");
    group.throughput(Throughput::Elements(WINDOW));
    for batch in [64usize, 256, 1024] {
        group.bench_with_input(BenchmarkId::new("batch", batch), &batch, |b, &batch| {
            b.to_async(&rt).iter(|| async {
                let mut cursor = Seq::PRIMING;
                let mut n = 0u64;
                loop {
                    let events = store
                        .read(record.id(), stream, cursor, batch, Reader::Inspector)
                        .await
                        .expect("read");
                    let Some(last) = events.last() else { break };
                    cursor = last.seq;
                    n += events.len() as u64;
                    black_box(&events);
                }
                assert_eq!(n, WINDOW);
                n
            });
        });
    }
    group.finish();
}

criterion_group!(benches, append, replay);
criterion_main!(benches);
