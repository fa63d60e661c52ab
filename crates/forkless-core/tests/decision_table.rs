//! The decision table of PROTOCOL section 4, one test per row, through both the pure
//! [`decide_get`] and the applying [`SessionRecord::on_get`].
//!
//! Every case builds a session in the state the row describes, asks both functions, and checks
//! that they agree and that `on_get` applied exactly the row's effects: a rejection ends the
//! session (every stream fenced, nothing retained), a conflict changes nothing, a resume bumps
//! the stream's epoch, a reset fences the old standalone stream and opens a new one. Where rows
//! overlap, the `row_order_*` tests pin which one wins. The last test proves `decide_get`
//! allocates nothing, with a per-thread counting global allocator (`allocation-counter`).

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

// ===== row 1 =====

#[test]
fn row_01_first_get_attaches_standalone_and_delivers_from_first_event() {
    let mut record = session(1, false);
    // Notifications emitted before the first GET are kept and delivered (row 1, last line).
    emit(&mut record, AppendTarget::Standalone, 3);
    let standalone = record.standalone().id();
    let (decision, after, outcome) = ask(&record, None, None, T0, &cfg());
    assert_eq!(decision, Decision::OpenNew(OpenNew::Standalone(standalone)));
    let GetOutcome::Attached(g) = outcome else { unreachable!() };
    assert_eq!(
        (g.stream, g.after, g.resumed, g.displaced, g.fenced),
        (standalone, Seq::PRIMING, false, false, None)
    );
    assert_eq!(g.epoch, Epoch::new(1));
    let s = after.standalone();
    assert_eq!(
        (s.id(), s.high_water(), s.low_water()),
        (standalone, Seq::new(3), Seq::FIRST),
        "nothing skipped"
    );
    assert!(s.ever_attached() && s.is_live(T0));
}

#[test]
fn row_01_attached_before_but_without_content_attaches_again() {
    // The client saw nothing but priming events, so even without the reset contract nothing it
    // could have seen is skipped.
    let (record, standalone) = seen_and_dropped(2, false, 0);
    let (decision, after, _) = ask(&record, None, None, T0, &cfg());
    assert_eq!(decision, Decision::OpenNew(OpenNew::Standalone(standalone)));
    assert_eq!(after.standalone().epoch(), Epoch::new(2));
}

#[test]
fn row_01_evicted_log_is_rejected_cursor_evicted() {
    let mut record = session(3, true);
    let limits = Limits { stream_max_events: 3, ..Limits::default() };
    emit_with(&mut record, AppendTarget::Standalone, 5, &limits);
    assert_eq!(record.standalone().low_water(), Seq::new(3));
    assert_rejected(&record, None, None, &cfg(), RejectReason::CursorEvicted);
}

// ===== row 2 =====

#[test]
fn row_02_live_standalone_connection_conflicts() {
    for reset_contract in [false, true] {
        let mut record = session(4, reset_contract);
        attach_standalone(&mut record);
        emit(&mut record, AppendTarget::Standalone, 2);
        let (decision, after, outcome) = ask(&record, None, None, later(1), &cfg());
        assert_eq!(decision, Decision::Conflict(ConflictReason::StreamAttached));
        assert_eq!(outcome, GetOutcome::Conflict(ConflictReason::StreamAttached));
        assert_eq!(after, record, "a conflict changes nothing (contract {reset_contract})");
    }
}

#[test]
fn row_02_conflict_lasts_while_writes_renew_liveness() {
    let mut record = session(5, true);
    let g = attach_standalone(&mut record);
    emit(&mut record, AppendTarget::Standalone, 1);
    let grace_ms = cfg().grace.as_millis() as u64;
    // A write completing just before the deadline pushes it out by another grace window.
    record.on_write_completed(g.stream, g.epoch, later(grace_ms - 1), &cfg()).unwrap();
    let (decision, after, _) = ask(&record, None, None, later(2 * grace_ms - 2), &cfg());
    assert_eq!(decision, Decision::Conflict(ConflictReason::StreamAttached));
    assert_eq!(after, record);
}

#[test]
fn row_02_clock_jumping_backwards_keeps_the_connection_live() {
    let mut record = session(6, true);
    attach_standalone(&mut record);
    emit(&mut record, AppendTarget::Standalone, 1);
    let (decision, _, _) = ask(&record, None, None, Timestamp::ZERO, &cfg());
    assert_eq!(decision, Decision::Conflict(ConflictReason::StreamAttached));
}

// ===== liveness expiry: row 2 becomes row 3 or row 4 =====

#[test]
fn liveness_expiry_after_grace_turns_row_02_into_row_03() {
    let mut record = session(7, true);
    let g = attach_standalone(&mut record);
    emit(&mut record, AppendTarget::Standalone, 2);
    let grace_ms = cfg().grace.as_millis() as u64;
    let (d, _, _) = ask(&record, None, None, later(grace_ms - 1), &cfg());
    assert_eq!(d, Decision::Conflict(ConflictReason::StreamAttached), "still inside grace");
    // Without a tick: the deadline alone decides.
    let (d, after, _) = ask(&record, None, None, later(grace_ms), &cfg());
    assert_eq!(d, Decision::OpenNew(OpenNew::Reset(g.stream)));
    assert!(after.stream(g.stream).unwrap().is_fenced());
    // With a tick first: the attachment is detached (not fenced), same answer.
    let mut ticked = record.clone();
    let tick = ticked.on_tick(later(grace_ms), &cfg());
    assert_eq!(tick.detached, vec![g.stream]);
    assert!(!ticked.stream(g.stream).unwrap().is_fenced(), "liveness expiry detaches, never fences");
    let (d, _, _) = ask(&ticked, None, None, later(grace_ms), &cfg());
    assert_eq!(d, Decision::OpenNew(OpenNew::Reset(g.stream)));
}

#[test]
fn liveness_expiry_after_grace_turns_row_02_into_row_04() {
    let mut record = session(8, false);
    attach_standalone(&mut record);
    emit(&mut record, AppendTarget::Standalone, 2);
    let grace_ms = cfg().grace.as_millis() as u64;
    let (d, _, _) = ask(&record, None, None, later(grace_ms - 1), &cfg());
    assert_eq!(d, Decision::Conflict(ConflictReason::StreamAttached));
    let mut ticked = record.clone();
    ticked.on_tick(later(grace_ms), &cfg());
    let (d, after, _) = ask(&ticked, None, None, later(grace_ms), &cfg());
    assert_eq!(d, Decision::Reject(RejectReason::CursorMissing));
    assert_eq!(after.session().ended(), Some(EndReason::Rejected(RejectReason::CursorMissing)));
}

#[test]
fn liveness_expiry_leaves_the_stream_resumable_with_a_cursor() {
    let mut record = session(9, false);
    let g = attach_standalone(&mut record);
    emit(&mut record, AppendTarget::Standalone, 4);
    let grace_ms = cfg().grace.as_millis() as u64;
    record.on_tick(later(grace_ms), &cfg());
    let lei = format!("{}.2", g.stream);
    let grant = assert_resumed(&record, &lei, None, &cfg(), false);
    assert_eq!(grant.after, Seq::new(2));
}

// ===== row 3 =====

#[test]
fn row_03_reset_contract_fences_and_opens_new_stream() {
    let (record, old) = seen_and_dropped(10, true, 3);
    let (decision, after, outcome) = ask(&record, None, None, T0, &cfg());
    assert_eq!(decision, Decision::OpenNew(OpenNew::Reset(old)));
    let GetOutcome::Attached(g) = outcome else { unreachable!() };
    assert_eq!((g.resumed, g.after, g.fenced, g.displaced), (false, Seq::PRIMING, Some(old), false));
    assert_eq!(g.epoch, Epoch::new(1));
    assert_ne!(g.stream, old, "a new stream identity");
    assert_eq!(after.standalone().id(), g.stream);
    assert_eq!(after.standalone().high_water(), Seq::PRIMING, "the new stream starts empty");
    let fenced = after.stream(old).expect("old stream kept, fenced");
    assert!(matches!(fenced.state(), StreamState::Fenced(f) if f.cause == FenceCause::Reset));
    assert_eq!(fenced.retained_events(), 0, "the old log is dropped");
    assert_eq!(after.session().ended(), None);
    // Emits now go to the new stream; the old one refuses.
    let mut emitter = after.clone();
    let id =
        emitter.append(AppendTarget::Standalone, 1, EventKind::Intermediate, T0, &Limits::default()).unwrap();
    assert_eq!((id.stream, id.seq), (g.stream, Seq::FIRST));
    let err = emitter.append(AppendTarget::Stream(old), 1, EventKind::Intermediate, T0, &Limits::default());
    assert_eq!(err, Err(forkless_core::Error::StreamFenced));
}

// ===== row 4 =====

#[test]
fn row_04_cursorless_reconnect_without_contract_is_rejected() {
    let (record, _) = seen_and_dropped(11, false, 3);
    assert_rejected(&record, None, None, &cfg(), RejectReason::CursorMissing);
}

#[test]
fn row_04_token_without_cursor_is_rejected() {
    for reset_contract in [false, true] {
        let (record, standalone) = seen_and_dropped(12, reset_contract, 3);
        let token = standalone.to_string();
        assert_rejected(&record, None, Some(&token), &cfg(), RejectReason::CursorMissing);
        // Even on a fresh session, where row 1 would otherwise attach.
        let fresh = session(13, reset_contract);
        let token = fresh.standalone().id().to_string();
        assert_rejected(&fresh, None, Some(&token), &cfg(), RejectReason::CursorMissing);
    }
}

// ===== row 5 =====

#[test]
fn row_05_malformed_cursor() {
    let (record, s) = seen_and_dropped(14, true, 3);
    let cases = [
        "41".to_string(),
        String::new(),
        " ".to_string(),
        s.to_string(),
        format!("{s}."),
        format!("{s}.01"),
        format!("{s}.-1"),
        format!("{s}.1.2"),
        format!(" {s}.1"),
        format!("{s}.18446744073709551616"),
        format!("{}.1", &s.to_string()[..15]),
        "not an event id".to_string(),
        "é.1".to_string(),
    ];
    for lei in &cases {
        assert_rejected(&record, Some(lei), None, &cfg(), RejectReason::CursorMalformed);
        assert_rejected(&record, Some(lei), Some(&s.to_string()), &strict(), RejectReason::CursorMalformed);
    }
}

// ===== row 6 =====

#[test]
fn row_06_foreign_session_cursor_is_stream_unknown() {
    let (record, _) = seen_and_dropped(15, true, 3);
    let (other, foreign) = seen_and_dropped(16, true, 3);
    assert_ne!(record.id(), other.id());
    let lei = format!("{foreign}.2");
    assert_rejected(&record, Some(&lei), None, &cfg(), RejectReason::StreamUnknown);
    assert_rejected(&record, Some(&lei), Some(&foreign.to_string()), &strict(), RejectReason::StreamUnknown);
}

#[test]
fn row_06_never_issued_stream_is_stream_unknown() {
    let (record, _) = seen_and_dropped(17, true, 3);
    let unknown = StreamId::generate(&mut SeededEntropy::new(1717));
    assert_rejected(&record, Some(&format!("{unknown}.0")), None, &cfg(), RejectReason::StreamUnknown);
}

// ===== row 7 =====

#[test]
fn row_07_token_mismatch() {
    let (mut record, s) = seen_and_dropped(18, true, 3);
    let other = open_request(&mut record, 180).stream;
    let lei = format!("{s}.2");
    // Another stream of the same session, a foreign-looking id, and an unparsable token.
    for token in [other.to_string(), StreamId::generate(&mut SeededEntropy::new(181)).to_string(), "x".into()]
    {
        assert_rejected(&record, Some(&lei), Some(&token), &cfg(), RejectReason::TokenMismatch);
        assert_rejected(&record, Some(&lei), Some(&token), &strict(), RejectReason::TokenMismatch);
    }
}

#[test]
fn row_07_strict_mode_requires_token() {
    let (record, s) = seen_and_dropped(19, true, 3);
    let lei = format!("{s}.2");
    assert_rejected(&record, Some(&lei), None, &strict(), RejectReason::TokenMissing);
    // The same request is a resume in compat mode, and with the token in strict mode.
    assert_resumed(&record, &lei, None, &cfg(), false);
    assert_resumed(&record, &lei, Some(&s.to_string()), &strict(), false);
}

// ===== row 8 =====

#[test]
fn row_08_fenced_stream() {
    let (record, old) = seen_and_dropped(20, true, 3);
    let (_, after, _) = ask(&record, None, None, T0, &cfg());
    assert!(after.stream(old).unwrap().is_fenced());
    let lei = format!("{old}.3");
    assert_rejected(&after, Some(&lei), None, &cfg(), RejectReason::StreamFenced);
    assert_rejected(&after, Some(&lei), Some(&old.to_string()), &strict(), RejectReason::StreamFenced);
}

// ===== row 9 =====

#[test]
fn row_09_cursor_ahead() {
    let (record, s) = seen_and_dropped(21, true, 3);
    for seq in [4, 5, u64::MAX] {
        assert_rejected(&record, Some(&format!("{s}.{seq}")), None, &cfg(), RejectReason::CursorAhead);
    }
    // A fresh request stream: nothing emitted, so even seq 1 is ahead.
    let mut record = session(22, true);
    let g = open_request(&mut record, 220);
    assert_rejected(&record, Some(&format!("{}.1", g.stream)), None, &cfg(), RejectReason::CursorAhead);
}

// ===== row 10 =====

#[test]
fn row_10_cursor_evicted() {
    let mut record = session(23, true);
    let g = attach_standalone(&mut record);
    let limits = Limits { stream_max_events: 3, ..Limits::default() };
    emit_with(&mut record, AppendTarget::Standalone, 6, &limits);
    record.on_detach(g.stream, g.epoch, T0).unwrap();
    assert_eq!(record.standalone().low_water(), Seq::new(4));
    for seq in [0, 1, 2] {
        assert_rejected(
            &record,
            Some(&format!("{}.{seq}", g.stream)),
            None,
            &cfg(),
            RejectReason::CursorEvicted,
        );
    }
    // Seq 3 is the last evicted one: everything after it is retained, so it resumes.
    assert_resumed(&record, &format!("{}.3", g.stream), None, &cfg(), false);
}

// ===== row 11 =====

#[test]
fn row_11_resume_from_cursor() {
    let (record, s) = seen_and_dropped(24, false, 41);
    let grant = assert_resumed(&record, &format!("{s}.41"), Some(&s.to_string()), &cfg(), false);
    assert_eq!(grant.after, Seq::new(41));
    // Every cursor from priming to high-water resumes.
    for seq in [0, 1, 40] {
        assert_resumed(&record, &format!("{s}.{seq}"), None, &cfg(), false);
    }
}

#[test]
fn row_11_resume_displaces_live_connection() {
    let mut record = session(25, false);
    let g = attach_standalone(&mut record);
    emit(&mut record, AppendTarget::Standalone, 5);
    let grant = assert_resumed(&record, &format!("{}.3", g.stream), None, &cfg(), true);
    assert!(grant.epoch > g.epoch, "the old connection's epoch is now stale");
    let mut after = record.clone();
    after
        .on_get(
            &GetRequest { last_event_id: Some(&format!("{}.3", g.stream)), stream_token: None },
            T0,
            &cfg(),
            &mut SeededEntropy::new(1),
        )
        .unwrap();
    assert_eq!(
        after.on_detach(g.stream, g.epoch, T0),
        Err(forkless_core::Error::StaleEpoch { held: g.epoch, current: grant.epoch }),
        "the displaced writer can no longer act on the stream"
    );
}

#[test]
fn row_11_resume_of_completed_stream() {
    let mut record = session(26, false);
    let g = open_request(&mut record, 260);
    emit(&mut record, AppendTarget::Stream(g.stream), 2);
    record.append(AppendTarget::Stream(g.stream), 10, EventKind::Final, T0, &Limits::default()).unwrap();
    record.on_detach(g.stream, g.epoch, T0).unwrap();
    assert!(record.stream(g.stream).unwrap().is_completed());
    let grant = assert_resumed(&record, &format!("{}.1", g.stream), None, &cfg(), false);
    assert_eq!(grant.after, Seq::new(1));
    assert!(record.stream(g.stream).unwrap().is_completed(), "replay, then end");
}

#[test]
fn row_11_resume_of_request_stream_after_post_connection_closed() {
    let mut record = session(27, false);
    let g = open_request(&mut record, 270);
    emit(&mut record, AppendTarget::Stream(g.stream), 1);
    record.on_detach(g.stream, g.epoch, T0).unwrap();
    // Closing the connection does not cancel the request: its events keep landing.
    emit(&mut record, AppendTarget::Stream(g.stream), 2);
    let grant = assert_resumed(&record, &format!("{}.1", g.stream), None, &cfg(), false);
    assert_eq!(grant.after, Seq::new(1));
}

// ===== rows that overlap: the first matching row decides =====

#[test]
fn row_order_malformed_cursor_beats_fenced_stream() {
    let (record, old) = seen_and_dropped(30, true, 3);
    let (_, after, _) = ask(&record, None, None, T0, &cfg());
    assert!(after.stream(old).unwrap().is_fenced());
    // The cursor names the fenced stream but its seq is not canonical: row 5 before row 8.
    assert_rejected(&after, Some(&format!("{old}.03")), None, &cfg(), RejectReason::CursorMalformed);
}

#[test]
fn row_order_token_without_cursor_beats_live_conflict() {
    let mut record = session(31, true);
    let g = attach_standalone(&mut record);
    emit(&mut record, AppendTarget::Standalone, 2);
    // Row 4 (second half) applies to any `T` without `LEI`; row 2 only to neither header.
    assert_rejected(&record, None, Some(&g.stream.to_string()), &cfg(), RejectReason::CursorMissing);
}

#[test]
fn row_order_live_conflict_beats_reset() {
    let mut record = session(32, true);
    attach_standalone(&mut record);
    emit(&mut record, AppendTarget::Standalone, 2);
    let (d, after, _) = ask(&record, None, None, T0, &cfg());
    assert_eq!(d, Decision::Conflict(ConflictReason::StreamAttached));
    assert_eq!(after, record);
}

#[test]
fn row_order_unknown_stream_beats_token_mismatch() {
    let (record, s) = seen_and_dropped(33, true, 3);
    let (_, foreign) = seen_and_dropped(34, true, 3);
    assert_rejected(
        &record,
        Some(&format!("{foreign}.1")),
        Some(&s.to_string()),
        &cfg(),
        RejectReason::StreamUnknown,
    );
    assert_rejected(&record, Some(&format!("{foreign}.1")), None, &strict(), RejectReason::StreamUnknown);
}

#[test]
fn row_order_token_checks_beat_fenced_stream() {
    let (record, old) = seen_and_dropped(35, true, 3);
    let (_, after, _) = ask(&record, None, None, T0, &cfg());
    let lei = format!("{old}.1");
    let new = after.standalone().id().to_string();
    assert_rejected(&after, Some(&lei), Some(&new), &cfg(), RejectReason::TokenMismatch);
    assert_rejected(&after, Some(&lei), None, &strict(), RejectReason::TokenMissing);
}

#[test]
fn row_order_fenced_beats_cursor_ahead() {
    let (record, old) = seen_and_dropped(36, true, 3);
    let (_, after, _) = ask(&record, None, None, T0, &cfg());
    assert_rejected(&after, Some(&format!("{old}.99")), None, &cfg(), RejectReason::StreamFenced);
}

#[test]
fn row_order_token_checks_beat_cursor_ahead_and_evicted() {
    let mut record = session(37, true);
    let g = attach_standalone(&mut record);
    let limits = Limits { stream_max_events: 2, ..Limits::default() };
    emit_with(&mut record, AppendTarget::Standalone, 5, &limits);
    record.on_detach(g.stream, g.epoch, T0).unwrap();
    for seq in [0, 99] {
        let lei = format!("{}.{seq}", g.stream);
        assert_rejected(&record, Some(&lei), None, &strict(), RejectReason::TokenMissing);
        assert_rejected(&record, Some(&lei), Some("other"), &cfg(), RejectReason::TokenMismatch);
    }
}

#[test]
fn on_get_on_an_ended_session_is_a_typed_error_and_changes_nothing() {
    let (mut record, s) = seen_and_dropped(38, true, 3);
    record.on_end(EndReason::Deleted, T0).unwrap();
    let before = record.clone();
    for (lei, token) in [(None, None), (Some(format!("{s}.3")), None)] {
        let req = GetRequest { last_event_id: lei.as_deref(), stream_token: token };
        let err = record.on_get(&req, T0, &cfg(), &mut SeededEntropy::new(1));
        assert_eq!(err, Err(forkless_core::Error::SessionEnded { reason: EndReason::Deleted }));
        assert_eq!(record, before);
    }
}

// ===== decide_get allocates nothing =====

#[test]
fn decide_get_allocates_nothing_on_any_row() {
    // The counter is per thread, so parallel tests cannot pollute this measurement; prove it
    // is installed first so the zero below cannot pass vacuously.
    let probe = allocation_counter::measure(|| {
        std::hint::black_box(Vec::<u8>::with_capacity(8));
    });
    assert_eq!(probe.count_total, 1, "the counting allocator is active");

    let fresh = session(40, true);
    let (seen_contract, s_contract) = seen_and_dropped(41, true, 3);
    let (seen_no_contract, s_plain) = seen_and_dropped(42, false, 41);
    let mut live = session(43, true);
    let live_grant = attach_standalone(&mut live);
    emit(&mut live, AppendTarget::Standalone, 2);
    let (_, reset_done, _) = ask(&seen_contract, None, None, T0, &cfg());
    let mut evicted = session(44, true);
    emit_with(
        &mut evicted,
        AppendTarget::Standalone,
        5,
        &Limits { stream_max_events: 2, ..Limits::default() },
    );
    let mut completed = session(45, false);
    let req = open_request(&mut completed, 450);
    completed.append(AppendTarget::Stream(req.stream), 1, EventKind::Final, T0, &Limits::default()).unwrap();
    let (_, foreign) = seen_and_dropped(46, true, 1);

    // Every header string is built before measuring.
    let s41 = format!("{s_plain}.41");
    let s3 = format!("{s_contract}.3");
    let ahead = format!("{s_plain}.42");
    let foreign_lei = format!("{foreign}.1");
    let evicted_lei = format!("{}.1", evicted.standalone().id());
    let completed_lei = format!("{}.0", req.stream);
    let live_lei = format!("{}.1", live_grant.stream);
    let plain_token = s_plain.to_string();
    let contract_token = s_contract.to_string();
    let live_token = live_grant.stream.to_string();
    let strict = strict();
    let compat = cfg();

    type Case<'a> = (&'a SessionRecord, Option<&'a str>, Option<&'a str>, &'a Config, Decision);
    let cases: Vec<Case<'_>> = vec![
        (&fresh, None, None, &compat, Decision::OpenNew(OpenNew::Standalone(fresh.standalone().id()))),
        (&evicted, None, None, &compat, Decision::Reject(RejectReason::CursorEvicted)),
        (&live, None, None, &compat, Decision::Conflict(ConflictReason::StreamAttached)),
        (&seen_contract, None, None, &compat, Decision::OpenNew(OpenNew::Reset(s_contract))),
        (&seen_no_contract, None, None, &compat, Decision::Reject(RejectReason::CursorMissing)),
        (&live, None, Some(&live_token), &compat, Decision::Reject(RejectReason::CursorMissing)),
        (&seen_no_contract, Some("41"), None, &compat, Decision::Reject(RejectReason::CursorMalformed)),
        (&seen_no_contract, Some(&foreign_lei), None, &compat, Decision::Reject(RejectReason::StreamUnknown)),
        (
            &seen_no_contract,
            Some(&s41),
            Some(&contract_token),
            &compat,
            Decision::Reject(RejectReason::TokenMismatch),
        ),
        (&seen_no_contract, Some(&s41), None, &strict, Decision::Reject(RejectReason::TokenMissing)),
        (&reset_done, Some(&s3), None, &compat, Decision::Reject(RejectReason::StreamFenced)),
        (&seen_no_contract, Some(&ahead), None, &compat, Decision::Reject(RejectReason::CursorAhead)),
        (&evicted, Some(&evicted_lei), None, &compat, Decision::Reject(RejectReason::CursorEvicted)),
        (
            &seen_no_contract,
            Some(&s41),
            Some(&plain_token),
            &strict,
            Decision::Resume { stream: s_plain, after: Seq::new(41) },
        ),
        (
            &live,
            Some(&live_lei),
            None,
            &compat,
            Decision::Resume { stream: live_grant.stream, after: Seq::FIRST },
        ),
        (
            &completed,
            Some(&completed_lei),
            None,
            &compat,
            Decision::Resume { stream: req.stream, after: Seq::PRIMING },
        ),
    ];
    // Every reject reason and every kind of decision is exercised.
    for reason in RejectReason::ALL {
        assert!(cases.iter().any(|c| c.4 == Decision::Reject(reason)), "no case for {reason:?}");
    }

    const ROUNDS: usize = 500;
    let mut mismatches = 0usize;
    let info = allocation_counter::measure(|| {
        for _ in 0..ROUNDS {
            for (record, lei, token, cfg, want) in &cases {
                let req = GetRequest { last_event_id: *lei, stream_token: *token };
                let got = decide_get(std::hint::black_box(record), std::hint::black_box(&req), T0, cfg);
                mismatches += usize::from(got != *want);
            }
        }
    });
    assert_eq!(mismatches, 0, "every case decides as expected");
    assert_eq!(
        info.count_total,
        0,
        "decide_get allocated across {} decisions: {info:?}",
        ROUNDS * cases.len()
    );
    assert_eq!(info.bytes_total, 0);
}

#[test]
fn per_node_liveness_never_expires_by_time() {
    let cfg = Config::default();
    assert_eq!(cfg.liveness, Liveness::PerNode);
    let mut record = session(41, false);
    let g = match record.on_get(&GetRequest::default(), T0, &cfg, &mut SeededEntropy::new(901)) {
        Ok(GetOutcome::Attached(g)) => g,
        other => panic!("row 1 must attach: {other:?}"),
    };
    let much_later = later(365 * 24 * 3_600_000);
    let tick = record.on_tick(much_later, &cfg);
    assert!(tick.detached.is_empty(), "time alone never detaches a node-held attachment");
    assert!(record.standalone().is_live(much_later));
    assert_eq!(
        decide_get(&record, &GetRequest::default(), much_later, &cfg),
        Decision::Conflict(ConflictReason::StreamAttached),
        "row 2 holds for as long as the node holds the attachment"
    );
    assert_eq!(record.wake().liveness, None, "a store has no liveness deadline to index");
    record.on_detach(g.stream, g.epoch, much_later).unwrap();
    assert!(!record.standalone().is_live(much_later), "the node's detach ends it");
}
