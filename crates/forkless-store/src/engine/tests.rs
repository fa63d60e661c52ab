//! What the engine keeps in memory once events are gone.

use forkless_core::{
    AppendTarget, EndReason, EventKind, Limits, NewSession, Revision, SeededEntropy, SessionId,
    SessionRecord, Timestamp,
};

use super::*;
use crate::Append;

const T0: Timestamp = Timestamp::from_millis(1_000_000);

fn record() -> SessionRecord {
    let mut e = SeededEntropy::new(7);
    let new = NewSession {
        id: SessionId::generate(&mut e),
        revision: Revision::V2025_11_25,
        reset_contract: true,
        principal: None,
        client: Default::default(),
    };
    SessionRecord::create(new, T0, &mut e).expect("create")
}

/// The buffer capacity of every log the session holds, in events.
fn capacities(engine: &Engine, id: SessionId) -> Vec<usize> {
    let slot = engine.slot(id).unwrap();
    let slot = lock(&slot).unwrap();
    slot.logs.values().map(Log::capacity).collect()
}

/// An ended session's tombstone is kept for minutes; its logs must not keep the buffers their
/// longest backlog needed (they did: 40 KiB for a thousand notifications, per ended session,
/// and a server churning through sessions grew without bound).
#[test]
fn logs_emptied_by_eviction_give_their_memory_back() {
    let engine = Engine::default();
    let rec = record();
    let id = rec.id();
    engine.create(rec, |_| {}).unwrap();
    let limits = Limits::default();
    for n in 0..1000u32 {
        let append = Append {
            session: id,
            target: AppendTarget::Standalone,
            payload: Bytes::from(format!("{{\"n\":{n}}}")),
            kind: EventKind::Intermediate,
            now: T0,
            limits: &limits,
        };
        engine.append(append, true, |_| {}).unwrap();
    }
    assert!(capacities(&engine, id).iter().any(|&c| c >= 1000), "the backlog was buffered");

    let current = engine.load(id).unwrap().unwrap();
    let mut ended = current.value;
    ended.on_end(EndReason::Deleted, T0).unwrap();
    engine.compare_and_set(current.version, ended, |_| {}).unwrap().expect("the record was current");
    let after = capacities(&engine, id);
    assert!(after.iter().all(|&c| c < 16), "an emptied log keeps no buffer: {after:?}");
}
