//! Rows 1 to 4: a GET without a cursor (first attach, a live connection, the reset
//! contract, a reconnect without it), and liveness turning one row into another.

use super::*;

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
