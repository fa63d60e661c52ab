//! Unit tests of `resume`.

use super::*;
use forkless_core::SeededEntropy;

const BUDGET: Duration = Duration::from_secs(30);

fn sid(seed: u64) -> StreamId {
    StreamId::generate(&mut SeededEntropy::new(seed))
}

fn head(stream: Option<StreamId>, resumed: bool) -> ResponseHead {
    ResponseHead {
        stream_id: stream.map(|s| s.to_string()),
        resumed: stream.map(|_| resumed.to_string()),
        grace_ms: stream.map(|_| "5000".to_owned()),
    }
}

fn ev(stream: StreamId, seq: u64, data: &str) -> Sse {
    Sse { id: Some(format!("{stream}.{seq}")), data: Some(data.to_owned()), ..Sse::default() }
}

/// A tracker attached to fresh stream `s` that accepted events 0..=upto.
fn attached(s: StreamId, upto: u64) -> (StreamTracker, StreamStats) {
    let mut t = StreamTracker::new(BUDGET);
    let mut st = StreamStats::default();
    assert_eq!(t.on_head(&head(Some(s), false), &mut st).unwrap(), Opened::Fresh { stream: Some(s) });
    assert_eq!(t.on_event(&ev(s, 0, ""), &mut st).unwrap(), Step::Nothing);
    for n in 1..=upto {
        assert_eq!(t.on_event(&ev(s, n, &format!("m{n}")), &mut st).unwrap(), Step::Deliver(format!("m{n}")));
    }
    (t, st)
}

#[test]
fn fresh_stream_primes_then_delivers_in_order() {
    let s = sid(1);
    let (t, st) = attached(s, 3);
    assert_eq!(t.cursor(), Cursor::Event(EventId::new(s, Seq::new(3))));
    assert_eq!(st.events_delivered, 3);
}

#[test]
fn priming_is_optional_but_content_starts_at_one() {
    let s = sid(1);
    let mut t = StreamTracker::new(BUDGET);
    let mut st = StreamStats::default();
    t.on_head(&head(Some(s), false), &mut st).unwrap();
    assert_eq!(t.on_event(&ev(s, 1, "a"), &mut st).unwrap(), Step::Deliver("a".into()));

    let mut t = StreamTracker::new(BUDGET);
    t.on_head(&head(Some(s), false), &mut st).unwrap();
    let err = t.on_event(&ev(s, 2, "b"), &mut st).unwrap_err();
    assert!(matches!(err, Error::Gap { expected, got, .. } if expected == Seq::FIRST && got == Seq::new(2)));
}

#[test]
fn resume_headers_carry_cursor_and_token() {
    let s = sid(2);
    let (mut t, _) = attached(s, 2);
    let h = t.begin_reconnect().unwrap();
    assert_eq!(h.last_event_id, format!("{s}.2"));
    assert_eq!(h.stream_token, Some(s));
    // priming alone is a cursor too (seq 0)
    let (mut t, _) = attached(s, 0);
    assert_eq!(t.begin_reconnect().unwrap().last_event_id, format!("{s}.0"));
    // no id seen: nothing to resume from
    let mut t = StreamTracker::new(BUDGET);
    assert_eq!(t.begin_reconnect(), None);
}

#[test]
fn continuation_needs_resumed_true_and_same_id() {
    let s = sid(3);
    let (mut t, mut st) = attached(s, 2);
    t.begin_reconnect();
    assert_eq!(
        t.on_head(&head(Some(s), true), &mut st).unwrap(),
        Opened::Continued { continuity: Continuity::Verified }
    );
    assert_eq!(t.on_event(&ev(s, 3, "m3"), &mut st).unwrap(), Step::Deliver("m3".into()));
    assert_eq!(st.resumes_verified, 1);
}

#[test]
fn resumed_false_is_a_new_stream_and_resets_the_cursor() {
    let s = sid(4);
    let (mut t, mut st) = attached(s, 5);
    t.begin_reconnect();
    assert_eq!(
        t.on_head(&head(Some(s), false), &mut st).unwrap(),
        Opened::NewStream { previous: Some(s), stream: Some(s) }
    );
    assert_eq!(t.cursor(), Cursor::None);
    // the "new" stream must start from its beginning
    assert_eq!(t.on_event(&ev(s, 1, "x"), &mut st).unwrap(), Step::Deliver("x".into()));
    assert_eq!(st.new_stream_resets, 1);
}

#[test]
fn other_id_with_resumed_true_is_a_new_stream() {
    let (s, other) = (sid(5), sid(6));
    let (mut t, mut st) = attached(s, 5);
    t.begin_reconnect();
    assert_eq!(
        t.on_head(&head(Some(other), true), &mut st).unwrap(),
        Opened::NewStream { previous: Some(s), stream: Some(other) }
    );
    assert_eq!(t.stream_id(), Some(other));
}

#[test]
fn missing_identity_on_resume_is_never_verified() {
    let s = sid(7);
    let (mut t, mut st) = attached(s, 5);
    t.begin_reconnect();
    let opened = t.on_head(&head(None, true), &mut st).unwrap();
    assert_eq!(opened, Opened::NewStream { previous: Some(s), stream: None });
    assert_eq!(st.resumes_verified, 0);
}

#[test]
fn duplicates_are_dropped_and_counted() {
    let s = sid(8);
    let (mut t, mut st) = attached(s, 3);
    t.begin_reconnect();
    t.on_head(&head(Some(s), true), &mut st).unwrap();
    assert_eq!(t.on_event(&ev(s, 2, "m2"), &mut st).unwrap(), Step::Duplicate(Seq::new(2)));
    assert_eq!(t.on_event(&ev(s, 3, "m3"), &mut st).unwrap(), Step::Duplicate(Seq::new(3)));
    assert_eq!(t.on_event(&ev(s, 4, "m4"), &mut st).unwrap(), Step::Deliver("m4".into()));
    assert_eq!(st.duplicates_dropped, 2);
    assert_eq!(st.events_delivered, 4);
}

#[test]
fn gap_is_an_error() {
    let s = sid(9);
    let (mut t, mut st) = attached(s, 3);
    let err = t.on_event(&ev(s, 5, "m5"), &mut st).unwrap_err();
    assert!(
        matches!(err, Error::Gap { stream, expected, got } if stream == s && expected == Seq::new(4) && got == Seq::new(5))
    );
    assert_eq!(st.gaps, 1);
}

#[test]
fn foreign_or_malformed_ids_are_protocol_violations() {
    let s = sid(10);
    let (mut t, mut st) = attached(s, 1);
    assert!(matches!(t.on_event(&ev(sid(11), 2, "x"), &mut st), Err(Error::Protocol(_))));
    let bare = Sse { id: Some("41".into()), data: Some("x".into()), ..Sse::default() };
    assert!(matches!(t.on_event(&bare, &mut st), Err(Error::Protocol(_))));
    let idless = Sse { data: Some("x".into()), ..Sse::default() };
    assert!(matches!(t.on_event(&idless, &mut st), Err(Error::Protocol(_))));
    let priming_with_data = ev(s, 0, "x");
    let mut fresh = StreamTracker::new(BUDGET);
    fresh.on_head(&head(Some(s), false), &mut st).unwrap();
    assert!(matches!(fresh.on_event(&priming_with_data, &mut st), Err(Error::Protocol(_))));
}

#[test]
fn resumed_true_without_a_cursor_is_a_violation() {
    let mut t = StreamTracker::new(BUDGET);
    let err = t.on_head(&head(Some(sid(12)), true), &mut StreamStats::default()).unwrap_err();
    assert!(matches!(err, Error::Protocol(_)));
}

#[test]
fn plain_server_is_resumed_unverified_with_last_event_id_only() {
    let mut t = StreamTracker::new(BUDGET);
    let mut st = StreamStats::default();
    assert_eq!(t.on_head(&head(None, false), &mut st).unwrap(), Opened::Fresh { stream: None });
    let block = |id: Option<&str>, data: &str| Sse {
        id: id.map(str::to_owned),
        data: Some(data.to_owned()),
        ..Sse::default()
    };
    assert_eq!(t.on_event(&block(Some("prime-0"), ""), &mut st).unwrap(), Step::Nothing);
    assert_eq!(t.on_event(&block(Some("abc_1"), "one"), &mut st).unwrap(), Step::Deliver("one".into()));
    // the WHATWG buffer persists across id-less events
    assert_eq!(t.on_event(&block(None, "two"), &mut st).unwrap(), Step::Deliver("two".into()));
    let h = t.begin_reconnect().unwrap();
    assert_eq!(h, ResumeHeaders { last_event_id: "abc_1".into(), stream_token: None });
    assert_eq!(
        t.on_head(&ResponseHead::default(), &mut st).unwrap(),
        Opened::Continued { continuity: Continuity::Unverified }
    );
    assert_eq!(st.resumes_unverified, 1);
    // an empty id clears the buffer
    t.on_event(&block(Some(""), "three"), &mut st).unwrap();
    assert_eq!(t.begin_reconnect(), None);
    // so a reopen is a new stream as far as anyone can tell
    assert_eq!(
        t.on_head(&ResponseHead::default(), &mut st).unwrap(),
        Opened::NewStream { previous: None, stream: None }
    );
    assert_eq!(st.new_stream_resets, 1);
}

#[test]
fn retry_is_remembered_even_from_metadata_only_blocks() {
    let s = sid(13);
    let (mut t, mut st) = attached(s, 1);
    let retry_only = Sse { retry: Some(2500), ..Sse::default() };
    assert_eq!(t.on_event(&retry_only, &mut st).unwrap(), Step::Nothing);
    assert_eq!(t.server_retry(), Some(Duration::from_millis(2500)));
}

#[test]
fn grace_must_be_shorter_than_budget() {
    let mut t = StreamTracker::new(Duration::from_secs(5));
    let mut h = head(Some(sid(14)), false);
    h.grace_ms = Some("5000".into());
    assert!(matches!(t.on_head(&h, &mut StreamStats::default()), Err(Error::GraceTooLong { .. })));
    h.grace_ms = Some("4999".into());
    assert!(t.on_head(&h, &mut StreamStats::default()).is_ok());
    h.grace_ms = Some("soon".into());
    assert!(matches!(
        StreamTracker::new(BUDGET).on_head(&h, &mut StreamStats::default()),
        Err(Error::Protocol(_))
    ));
}

proptest::proptest! {
    /// Whatever the server replays from and wherever connections drop, the application
    /// sees a gap-free prefix of the stream, each event once, or the session breaks with
    /// a gap exactly when a replay skipped past the cursor.
    #[test]
    fn delivery_is_a_gap_free_prefix_or_a_gap_error(
        total in 1u64..30,
        prime in proptest::bool::ANY,
        conns in proptest::collection::vec((0u64..35, 0usize..12), 1..12),
    ) {
        let s = sid(99);
        let mut t = StreamTracker::new(BUDGET);
        let mut st = StreamStats::default();
        t.on_head(&head(Some(s), false), &mut st).unwrap();
        let mut delivered: Vec<u64> = Vec::new();
        let mut dups = 0u64;
        // first connection: from the beginning
        let mut plan: Vec<(u64, usize)> = vec![(if prime { 0 } else { 1 }, conns[0].1)];
        plan.extend(conns.iter().skip(1).copied());
        'conns: for (i, (from, take)) in plan.into_iter().enumerate() {
            if i > 0 {
                if t.begin_reconnect().is_none() {
                    // nothing to resume from: a request stream would fail NotResumable
                    break;
                }
                let opened = t.on_head(&head(Some(s), true), &mut st).unwrap();
                proptest::prop_assert_eq!(opened, Opened::Continued { continuity: Continuity::Verified });
            }
            let cursor = delivered.last().copied().unwrap_or(0);
            for seq in (from..=total).take(take) {
                let data = if seq == 0 { String::new() } else { format!("m{seq}") };
                match t.on_event(&ev(s, seq, &data), &mut st) {
                    Ok(Step::Deliver(d)) => {
                        proptest::prop_assert_eq!(d, format!("m{seq}"));
                        delivered.push(seq);
                    }
                    Ok(Step::Duplicate(_)) => dups += 1,
                    Ok(Step::Nothing) => proptest::prop_assert_eq!(seq, 0),
                    Err(Error::Gap { expected, got, .. }) => {
                        proptest::prop_assert!(from > cursor + 1, "gap only when the replay skipped");
                        proptest::prop_assert_eq!(expected.get(), cursor + 1);
                        proptest::prop_assert_eq!(got.get(), from);
                        break 'conns;
                    }
                    Err(e) => proptest::prop_assert!(false, "unexpected error {e}"),
                }
            }
        }
        let expect: Vec<u64> = (1..=delivered.len() as u64).collect();
        proptest::prop_assert_eq!(&delivered, &expect);
        proptest::prop_assert_eq!(st.events_delivered, delivered.len() as u64);
        proptest::prop_assert_eq!(st.duplicates_dropped, dups);
    }
}
