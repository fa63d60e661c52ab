//! The client half of the wire contract (PROTOCOL section 7) as a sans-IO state machine.
//!
//! A [`StreamTracker`] follows one logical SSE stream across its connections. It is fed the
//! response heads and SSE blocks the I/O layer received and answers with what to do: deliver an
//! event's data, drop a duplicate, report a new stream, or fail with a gap or a protocol
//! violation. It also says which resumption headers the next reconnect carries.
//!
//! It owns the cursor and the verification rules; it does not own HTTP, timers, retries or
//! JSON-RPC. Those live in the stream driver (`client.rs`), which is a thin loop around this.
//!
//! ```text
//!              first response head                       reconnect (resume headers)
//!  Unknown ───────────────┬──────────────▶ Forkless(S) ──────────┬──▶ Resumed:true, same S: continue
//!                         │   (Mcp-Stream-Id: S)                 └──▶ anything else: NewStream, cursor reset
//!                         └──────────────▶ Plain ───────────────────▶ Continued, Unverified
//!                              (no identity header)
//! ```

use std::time::Duration;

use forkless_core::{EventId, Seq, StreamId};
use sse_stream::Sse;

use crate::error::Error;
use crate::stats::StreamStats;

/// The contract headers of an SSE response, as received (PROTOCOL section 3).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResponseHead {
    /// `Mcp-Stream-Id`.
    pub stream_id: Option<String>,
    /// `Mcp-Stream-Resumed`.
    pub resumed: Option<String>,
    /// `Mcp-Stream-Grace-Ms`.
    pub grace_ms: Option<String>,
}

/// How far a resumed stream's continuity was checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Continuity {
    /// The server echoed the stream identity and said `Mcp-Stream-Resumed: true`, and every
    /// event id is checked against the cursor.
    Verified,
    /// A plain-specification server (no `Mcp-Stream-*` headers, opaque event ids): resumed
    /// with `Last-Event-ID` only; whether it really continues cannot be checked.
    Unverified,
}

/// What a response head means for the stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Opened {
    /// The stream's first connection.
    Fresh {
        /// Its identity, if the server speaks the contract.
        stream: Option<StreamId>,
    },
    /// A reconnect accepted as a continuation.
    Continued {
        /// How far that could be checked.
        continuity: Continuity,
    },
    /// A reconnect answered with another (or an unidentified) stream. The cursor was reset;
    /// the application must be told, since work pending on the old stream may be lost.
    NewStream {
        /// The stream we tried to continue.
        previous: Option<StreamId>,
        /// The stream we got.
        stream: Option<StreamId>,
    },
}

/// What to do with one SSE block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Hand this data (one JSON-RPC message or batch) to the application.
    Deliver(String),
    /// A duplicate at or below the cursor: dropped.
    Duplicate(Seq),
    /// Nothing to deliver (priming event, `retry:`-only block, empty event).
    Nothing,
}

/// The headers a reconnect carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResumeHeaders {
    /// `Last-Event-ID`.
    pub last_event_id: String,
    /// `Mcp-Stream-Id`, sent only to servers that identified the stream.
    pub stream_token: Option<StreamId>,
}

/// The cursor of a stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cursor {
    /// No event id seen yet: nothing to resume from.
    None,
    /// The last accepted event of a contract-speaking server.
    Event(EventId),
    /// The last event id of a plain-specification server (the WHATWG last-event-ID buffer).
    Opaque(String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Identity {
    Unknown,
    Forkless { stream: StreamId, cursor: Option<Seq> },
    Plain,
}

/// One logical stream's resumption state. See the module docs.
#[derive(Clone, Debug)]
pub struct StreamTracker {
    identity: Identity,
    /// The last `id:` of a plain server; kept across id-less events, cleared by an empty `id:`.
    opaque_cursor: Option<String>,
    server_retry: Option<Duration>,
    resuming: bool,
    budget: Duration,
}

impl StreamTracker {
    /// A stream not yet connected. `budget` is the client's retry budget, which every
    /// advertised grace window is checked against.
    pub fn new(budget: Duration) -> Self {
        Self { identity: Identity::Unknown, opaque_cursor: None, server_retry: None, resuming: false, budget }
    }

    /// The stream's identity, once a contract-speaking server named it.
    pub fn stream_id(&self) -> Option<StreamId> {
        match self.identity {
            Identity::Forkless { stream, .. } => Some(stream),
            _ => None,
        }
    }

    /// The cursor a reconnect would resume from.
    pub fn cursor(&self) -> Cursor {
        match (&self.identity, &self.opaque_cursor) {
            (Identity::Forkless { stream, cursor: Some(seq) }, _) => {
                Cursor::Event(EventId::new(*stream, *seq))
            }
            (Identity::Plain, Some(id)) => Cursor::Opaque(id.clone()),
            _ => Cursor::None,
        }
    }

    /// The last `retry:` the server sent.
    pub fn server_retry(&self) -> Option<Duration> {
        self.server_retry
    }

    /// Start a reconnect: the headers it must carry, or `None` when there is no cursor (the
    /// stream cannot be resumed; a standalone stream may still be reopened plainly).
    pub fn begin_reconnect(&mut self) -> Option<ResumeHeaders> {
        let headers = match self.cursor() {
            Cursor::Event(id) => {
                Some(ResumeHeaders { last_event_id: id.to_string(), stream_token: Some(id.stream) })
            }
            Cursor::Opaque(id) => Some(ResumeHeaders { last_event_id: id, stream_token: None }),
            Cursor::None => None,
        };
        self.resuming = headers.is_some();
        headers
    }

    /// Judge a `200 text/event-stream` response head.
    pub fn on_head(&mut self, head: &ResponseHead, stats: &mut StreamStats) -> Result<Opened, Error> {
        if let Some(grace) = &head.grace_ms {
            let grace = grace
                .trim()
                .parse::<u64>()
                .map(Duration::from_millis)
                .map_err(|_| Error::Protocol(format!("Mcp-Stream-Grace-Ms {grace:?} is not a number")))?;
            check_grace(grace, self.budget)?;
        }
        let announced =
            match &head.stream_id {
                Some(text) => Some(text.trim().parse::<StreamId>().map_err(|e| {
                    Error::Protocol(format!("Mcp-Stream-Id {text:?} is not a stream id: {e}"))
                })?),
                None => None,
            };
        let resumed = head.resumed.as_deref().is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
        let resuming = std::mem::take(&mut self.resuming);

        let opened = match (resuming, self.identity, announced) {
            (false, _, Some(_)) if resumed => {
                return Err(Error::Protocol("Mcp-Stream-Resumed: true on a request without a cursor".into()));
            }
            (true, Identity::Forkless { stream, .. }, Some(got)) if got == stream && resumed => {
                stats.resumes_verified += 1;
                Opened::Continued { continuity: Continuity::Verified }
            }
            (true, Identity::Plain, None) => {
                stats.resumes_unverified += 1;
                Opened::Continued { continuity: Continuity::Unverified }
            }
            (_, Identity::Unknown, stream) => Opened::Fresh { stream },
            // A plain reopen of a stream that never carried an id, answered by the same stream.
            (false, Identity::Forkless { stream, cursor: None }, Some(got)) if got == stream => {
                Opened::Fresh { stream: Some(got) }
            }
            // Everything else is not a proven continuation.
            (_, previous, stream) => {
                stats.new_stream_resets += 1;
                let previous = match previous {
                    Identity::Forkless { stream, .. } => Some(stream),
                    _ => None,
                };
                Opened::NewStream { previous, stream }
            }
        };
        match opened {
            Opened::Fresh { stream } | Opened::NewStream { stream, .. } => {
                self.identity = match stream {
                    Some(stream) => Identity::Forkless { stream, cursor: None },
                    None => Identity::Plain,
                };
                self.opaque_cursor = None;
            }
            Opened::Continued { .. } => {}
        }
        Ok(opened)
    }

    /// Judge one SSE block of the current connection.
    pub fn on_event(&mut self, sse: &Sse, stats: &mut StreamStats) -> Result<Step, Error> {
        if let Some(ms) = sse.retry {
            self.server_retry = Some(Duration::from_millis(ms));
        }
        let data = sse.data.as_deref().filter(|d| !d.is_empty());
        match &mut self.identity {
            Identity::Forkless { stream, cursor } => {
                let Some(text) = sse.id.as_deref() else {
                    return match data {
                        Some(_) => Err(Error::Protocol(format!("event without id on stream {stream}"))),
                        None => Ok(Step::Nothing),
                    };
                };
                let id: EventId = text
                    .parse()
                    .map_err(|e| Error::Protocol(format!("event id {text:?} on stream {stream}: {e}")))?;
                if id.stream != *stream {
                    return Err(Error::Protocol(format!("event {id} arrived on stream {stream}")));
                }
                if cursor.is_some_and(|c| id.seq <= c) {
                    stats.duplicates_dropped += 1;
                    return Ok(Step::Duplicate(id.seq));
                }
                let expected = cursor.map_or(Seq::PRIMING, Seq::next);
                if id.seq == Seq::PRIMING {
                    if data.is_some() {
                        return Err(Error::Protocol(format!("priming event {id} carries data")));
                    }
                    *cursor = Some(id.seq);
                    return Ok(Step::Nothing);
                }
                // Content starts at 1 whether or not a priming event came first.
                if id.seq != expected && !(cursor.is_none() && id.seq == Seq::FIRST) {
                    stats.gaps += 1;
                    let expected = if cursor.is_none() { Seq::FIRST } else { expected };
                    return Err(Error::Gap { stream: *stream, expected, got: id.seq });
                }
                *cursor = Some(id.seq);
                Ok(deliver(data, stats))
            }
            Identity::Plain | Identity::Unknown => {
                if let Some(id) = &sse.id {
                    self.opaque_cursor = (!id.is_empty()).then(|| id.clone());
                }
                Ok(deliver(data, stats))
            }
        }
    }
}

fn deliver(data: Option<&str>, stats: &mut StreamStats) -> Step {
    match data {
        Some(d) => {
            stats.events_delivered += 1;
            Step::Deliver(d.to_owned())
        }
        None => Step::Nothing,
    }
}

/// Seed condition 5: a server whose grace window is not shorter than our retry budget could
/// keep answering "attached" until we give up, so we refuse it.
pub fn check_grace(grace: Duration, budget: Duration) -> Result<(), Error> {
    if grace >= budget { Err(Error::GraceTooLong { grace, budget }) } else { Ok(()) }
}

#[cfg(test)]
mod tests {
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
            assert_eq!(
                t.on_event(&ev(s, n, &format!("m{n}")), &mut st).unwrap(),
                Step::Deliver(format!("m{n}"))
            );
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
        assert!(
            matches!(err, Error::Gap { expected, got, .. } if expected == Seq::FIRST && got == Seq::new(2))
        );
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
}
