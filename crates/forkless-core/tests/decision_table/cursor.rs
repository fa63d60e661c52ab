//! Rows 5 to 11: a GET with `Last-Event-ID` (malformed, foreign or unknown, a token
//! mismatch, fenced, ahead, evicted, and the resume).

use super::*;

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
