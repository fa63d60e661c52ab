//! Benchmarks of the core's hot paths: the GET decision (a resume and a rejection) and the
//! append transition with retention, as a store runs it on every emitted event.
//!
//! `cargo bench -p forkless-core --bench core`; under `cargo test` each runs once, untimed.

use forkless_core::EventKind;
use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use forkless_core::{
    AppendTarget, Config, GetRequest, Limits, NewSession, Revision, SeededEntropy, SessionId, SessionRecord,
    StreamId, Timestamp, decide_get,
};

const T0: Timestamp = Timestamp::from_millis(1_000_000);

/// A session with its standalone stream and `requests` request streams, each with 41 events,
/// all detached: what a busy session looks like when a client reconnects.
fn busy_session(requests: usize) -> (SessionRecord, Vec<StreamId>) {
    let mut entropy = SeededEntropy::new(1);
    let id = SessionId::generate(&mut entropy);
    let new = NewSession {
        id,
        revision: Revision::V2025_11_25,
        reset_contract: false,
        principal: None,
        client: Default::default(),
    };
    let mut record = SessionRecord::create(new, T0, &mut entropy).expect("create");
    let cfg = Config::default();
    let mut ids = vec![record.standalone().id()];
    for _ in 0..requests {
        let id = StreamId::generate(&mut entropy);
        let g = record.open_request_stream(id, T0, &cfg).expect("open");
        record.on_detach(id, g.epoch, T0).expect("detach");
        ids.push(id);
    }
    for &id in &ids {
        for _ in 0..41 {
            record
                .append(AppendTarget::Stream(id), 64, EventKind::Intermediate, T0, &Limits::default())
                .expect("append");
        }
    }
    (record, ids)
}

fn decide(c: &mut Criterion) {
    let cfg = Config::default();
    let (record, ids) = busy_session(15);
    let lei = format!("{}.41", ids[7]);
    let token = ids[7].to_string();
    let resume = GetRequest { last_event_id: Some(&lei), stream_token: Some(&token) };
    let malformed = GetRequest { last_event_id: Some("41"), stream_token: None };
    let foreign_id = StreamId::generate(&mut SeededEntropy::new(99));
    let foreign_lei = format!("{foreign_id}.41");
    let foreign = GetRequest { last_event_id: Some(&foreign_lei), stream_token: None };

    let mut group = c.benchmark_group("decide_get");
    group.bench_function("row 11 resume (16 streams)", |b| {
        b.iter(|| decide_get(black_box(&record), black_box(&resume), T0, &cfg));
    });
    group.bench_function("row 5 reject cursor_malformed", |b| {
        b.iter(|| decide_get(black_box(&record), black_box(&malformed), T0, &cfg));
    });
    group.bench_function("row 6 reject stream_unknown (16 streams)", |b| {
        b.iter(|| decide_get(black_box(&record), black_box(&foreign), T0, &cfg));
    });
    group.finish();
}

fn append(c: &mut Criterion) {
    // Steady state: the stream is at its retention limit, so every append also evicts one event.
    let limits = Limits { stream_max_events: 1_000, ..Limits::default() };
    let (mut record, ids) = busy_session(3);
    let target = AppendTarget::Stream(ids[2]);
    for _ in 0..1_000 {
        record.append(target, 64, EventKind::Intermediate, T0, &limits).expect("fill");
        record.on_retention(ids[2], [64], &limits).expect("evict");
    }
    c.bench_function("SessionRecord::append + retention (4 streams)", |b| {
        b.iter(|| {
            let id =
                record.append(black_box(target), 64, EventKind::Intermediate, T0, &limits).expect("append");
            record.on_retention(id.stream, [64], &limits).expect("evict");
            id
        });
    });
}

criterion_group!(benches, decide, append);
criterion_main!(benches);
