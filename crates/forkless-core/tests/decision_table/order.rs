//! Where rows overlap, the first matching row decides; and an ended session refuses.

use super::*;

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
