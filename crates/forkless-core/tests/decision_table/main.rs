//! The decision table of PROTOCOL section 4, one test per row, through both the pure
//! [`decide_get`] and the applying [`SessionRecord::on_get`].
//!
//! Every case builds a session in the state the row describes, asks both functions, and checks
//! that they agree and that `on_get` applied exactly the row's effects: a rejection ends the
//! session (every stream fenced, nothing retained), a conflict changes nothing, a resume bumps
//! the stream's epoch, a reset fences the old standalone stream and opens a new one. Where rows
//! overlap, the `row_order_*` tests pin which one wins. The last test proves `decide_get`
//! allocates nothing, with a per-thread counting global allocator (`allocation-counter`).
//!
//! The rows without a cursor are in [`connectionless`], those with one in [`cursor`], the
//! overlaps in [`order`], the allocation test in [`allocation`]; this file holds the helpers.

use core::time::Duration;
use forkless_core::EventKind;

use forkless_core::{
    AppendTarget, Config, ConflictReason, Decision, EndReason, Epoch, FenceCause, GetOutcome, GetRequest,
    Grant, Limits, Liveness, NewSession, OpenNew, RejectReason, ResumeMode, Revision, SeededEntropy, Seq,
    SessionId, SessionRecord, StreamId, StreamKind, StreamState, Timestamp, decide_get,
};

const T0: Timestamp = Timestamp::from_millis(1_000_000);

/// The table's liveness rows are checked with connections renewing themselves; under
/// per-node liveness (the default) time alone never detaches (see
/// `per_node_liveness_never_expires_by_time`).
fn cfg() -> Config {
    Config { liveness: Liveness::PerConnection, ..Config::default() }
}

fn strict() -> Config {
    Config { mode: ResumeMode::Strict, ..cfg() }
}

fn later(ms: u64) -> Timestamp {
    T0.saturating_add(Duration::from_millis(ms))
}

fn session(seed: u64, reset_contract: bool) -> SessionRecord {
    let mut entropy = SeededEntropy::new(seed);
    let id = SessionId::generate(&mut entropy);
    let new = NewSession {
        id,
        revision: Revision::V2025_11_25,
        reset_contract,
        principal: None,
        client: Default::default(),
    };
    SessionRecord::create(new, T0, &mut entropy).expect("revision has sessions")
}

fn emit(record: &mut SessionRecord, target: AppendTarget, n: u64) {
    emit_with(record, target, n, &Limits::default());
}

fn emit_with(record: &mut SessionRecord, target: AppendTarget, n: u64, limits: &Limits) {
    for _ in 0..n {
        let id = record.append(target, 10, EventKind::Intermediate, T0, limits).expect("append");
        // Retention, as a store applies it after every append (every event is 10 bytes).
        record.on_retention(id.stream, std::iter::repeat(10), limits).expect("evict");
    }
}

/// Attach the standalone stream with a cursor-less GET (row 1) and return the grant.
fn attach_standalone(record: &mut SessionRecord) -> Grant {
    match record.on_get(&GetRequest::default(), T0, &cfg(), &mut SeededEntropy::new(900)) {
        Ok(GetOutcome::Attached(g)) => g,
        other => panic!("row 1 must attach: {other:?}"),
    }
}

/// A standalone stream that a client saw `n` events on and then lost (detached).
fn seen_and_dropped(seed: u64, reset_contract: bool, n: u64) -> (SessionRecord, StreamId) {
    let mut record = session(seed, reset_contract);
    let grant = attach_standalone(&mut record);
    emit(&mut record, AppendTarget::Standalone, n);
    record.on_detach(grant.stream, grant.epoch, T0).expect("detach");
    (record, grant.stream)
}

fn open_request(record: &mut SessionRecord, seed: u64) -> Grant {
    let id = StreamId::generate(&mut SeededEntropy::new(seed));
    record.open_request_stream(id, T0, &cfg()).expect("open request stream")
}

/// Ask both functions; check they agree; return the decision, the record after `on_get`, and
/// the outcome.
fn ask(
    record: &SessionRecord,
    lei: Option<&str>,
    token: Option<&str>,
    now: Timestamp,
    cfg: &Config,
) -> (Decision, SessionRecord, GetOutcome) {
    let req = GetRequest { last_event_id: lei, stream_token: token };
    let decision = decide_get(record, &req, now, cfg);
    let mut after = record.clone();
    let outcome = after.on_get(&req, now, cfg, &mut SeededEntropy::new(4242)).expect("session is active");
    match (decision, outcome) {
        (Decision::Reject(d), GetOutcome::Rejected(o)) => assert_eq!(d, o),
        (Decision::Conflict(d), GetOutcome::Conflict(o)) => assert_eq!(d, o),
        (Decision::Resume { stream, after: cursor }, GetOutcome::Attached(g)) => {
            assert_eq!((g.stream, g.after, g.resumed, g.fenced), (stream, cursor, true, None));
        }
        (Decision::OpenNew(OpenNew::Standalone(s)), GetOutcome::Attached(g)) => {
            assert_eq!((g.stream, g.after, g.resumed, g.fenced), (s, Seq::PRIMING, false, None));
        }
        (Decision::OpenNew(OpenNew::Reset(old)), GetOutcome::Attached(g)) => {
            assert_eq!((g.after, g.resumed, g.fenced), (Seq::PRIMING, false, Some(old)));
            assert_ne!(g.stream, old);
        }
        (d, o) => panic!("decide_get said {d:?} but on_get did {o:?}"),
    }
    assert_invariant(&after, now);
    (decision, after, outcome)
}

/// The structural half of the invariant, after any GET.
fn assert_invariant(record: &SessionRecord, now: Timestamp) {
    let open_standalone =
        record.streams().filter(|s| s.kind() == StreamKind::Standalone && !s.is_fenced()).count();
    let expected = if record.session().ended().is_some() { 0 } else { 1 };
    assert_eq!(open_standalone, expected, "non-fenced standalone streams");
    if record.session().ended().is_none() {
        assert!(!record.standalone().is_fenced());
    }
    // At most one connection can hold a stream's current epoch: attaching bumps it.
    for s in record.streams() {
        if s.is_live(now) {
            assert!(s.epoch() > Epoch::NONE);
        }
    }
}

/// The effects of (b): the session ended with `reason`, every stream fenced, nothing retained.
fn assert_rejected(
    record: &SessionRecord,
    lei: Option<&str>,
    token: Option<&str>,
    cfg: &Config,
    reason: RejectReason,
) {
    let (decision, after, outcome) = ask(record, lei, token, T0, cfg);
    assert_eq!(decision, Decision::Reject(reason));
    assert_eq!(outcome, GetOutcome::Rejected(reason));
    assert!(RejectReason::ALL.contains(&reason));
    assert_eq!(after.session().ended(), Some(EndReason::Rejected(reason)));
    assert!(after.streams().all(|s| s.is_fenced()), "every stream fenced");
    assert!(after.streams().all(|s| s.retained_events() == 0), "stored events dropped");
    assert_eq!(after.retained_bytes(), 0);
    // Nothing more lands anywhere.
    let err =
        after.clone().append(AppendTarget::Standalone, 1, EventKind::Intermediate, T0, &Limits::default());
    assert_eq!(err, Err(forkless_core::Error::SessionEnded { reason: EndReason::Rejected(reason) }));
}

/// The effects of a resume (row 11): same stream, epoch + 1, cursor as sent.
fn assert_resumed(
    record: &SessionRecord,
    lei: &str,
    token: Option<&str>,
    cfg: &Config,
    displaced: bool,
) -> Grant {
    let cursor: forkless_core::EventId = lei.parse().expect("valid cursor");
    let before = record.stream(cursor.stream).expect("stream of the session").epoch();
    let (decision, after, outcome) = ask(record, Some(lei), token, T0, cfg);
    assert_eq!(decision, Decision::Resume { stream: cursor.stream, after: cursor.seq });
    let GetOutcome::Attached(grant) = outcome else { unreachable!("checked by ask") };
    assert!(grant.resumed);
    assert_eq!(grant.displaced, displaced);
    assert_eq!(grant.epoch, before.next(), "attaching bumps the epoch");
    let s = after.stream(cursor.stream).expect("still there");
    assert_eq!(s.epoch(), grant.epoch);
    assert!(s.is_live(T0));
    assert_eq!(after.session().ended(), None);
    // Every other stream is untouched.
    for other in record.streams().filter(|o| o.id() != cursor.stream) {
        assert_eq!(after.stream(other.id()), Some(other));
    }
    grant
}

mod allocation;
mod connectionless;
mod cursor;
mod order;
