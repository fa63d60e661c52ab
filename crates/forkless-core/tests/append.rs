//! A refused append leaves the record exactly as it was, whatever the reason: stores compute
//! appends on their working copy of a record in place (the shared stores' group commit does),
//! so a refusal that changed anything would leak into the events after it.

use forkless_core::{AppendTarget, Config, EndReason, Error, EventKind, Limits, SeededEntropy, StreamId};

mod support;
use support::{at, session};

#[test]
fn every_refused_append_changes_nothing() {
    let limits = Limits { session_max_bytes: 1_000, ..Limits::default() };
    let cfg = Config { limits, ..Config::default() };
    let mut e = SeededEntropy::new(11);
    let mut r = session(&mut e);
    let done = StreamId::generate(&mut e);
    r.open_request_stream(done, at(1), &cfg).unwrap();
    r.append(AppendTarget::Stream(done), 10, EventKind::Final, at(1), &limits).unwrap();
    r.append(AppendTarget::Standalone, 900, EventKind::Intermediate, at(1), &limits).unwrap();
    let unknown = StreamId::generate(&mut e);
    let before = r.clone();

    let cases: [(AppendTarget, u64, Error); 4] = [
        (AppendTarget::Stream(unknown), 1, Error::StreamUnknown),
        (AppendTarget::Stream(done), 1, Error::StreamCompleted),
        (
            AppendTarget::Standalone,
            limits.stream_max_bytes + 1,
            Error::EventTooLarge { size: limits.stream_max_bytes + 1, max: limits.stream_max_bytes },
        ),
        (AppendTarget::Standalone, 200, Error::SessionBudgetExceeded { max: 1_000 }),
    ];
    for (target, size, why) in cases {
        assert_eq!(r.append(target, size, EventKind::Intermediate, at(2), &limits), Err(why));
        assert_eq!(r, before, "refused with {why}, and nothing changed");
    }

    r.on_end(EndReason::Deleted, at(3)).unwrap();
    let ended = r.clone();
    let refused = r.append(AppendTarget::Standalone, 1, EventKind::Intermediate, at(4), &limits);
    assert!(matches!(refused, Err(Error::SessionEnded { .. })), "{refused:?}");
    assert_eq!(r, ended, "an ended session is left as it was");
}

#[test]
fn appends_never_change_the_header_a_store_keeps() {
    let cfg = Config::default();
    let mut e = SeededEntropy::new(12);
    let mut r = session(&mut e);
    let before = r.clone();
    for n in 0..5 {
        r.append(AppendTarget::Standalone, 10 + n, EventKind::Intermediate, at(5 + n), &cfg.limits).unwrap();
    }
    assert!(!r.header_changed_since(&before), "appends change streams only");
    let opened = r.clone();
    r.open_request_stream(StreamId::generate(&mut e), at(20), &cfg).unwrap();
    assert!(r.header_changed_since(&opened), "a request counts as the session's activity");
    let active = r.clone();
    r.on_end(EndReason::Deleted, at(30)).unwrap();
    assert!(r.header_changed_since(&active), "ending is the session's own state");
}
