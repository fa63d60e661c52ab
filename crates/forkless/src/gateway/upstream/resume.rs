//! When an upstream's answer stream may be resumed: only when the continuation is provable
//! from what forkless received (PROTOCOL section 11).
//!
//! Provable means the upstream numbers its streams as this contract does (section 2): the
//! answer's head names its stream (`Mcp-Stream-Id`), each event's id is `<stream>.<seq>`
//! with no gap, and a resume (a GET with `Last-Event-ID` at the cursor) is answered with
//! `Mcp-Stream-Resumed: true` for the same stream, then the events right after the cursor.
//! An upstream that does not number its streams (the SDKs' servers name events as they
//! please) gives nothing to prove a continuation with: its cut answers are never resumed.
//!
//! This module owns the cursor and its rules, not the requests (`super::answer`'s).

use reqwest::header::HeaderMap;

/// The response header naming the stream a response carries.
pub(crate) const STREAM_ID: &str = "mcp-stream-id";
/// The response header saying whether a response continues the cursor sent.
const STREAM_RESUMED: &str = "mcp-stream-resumed";

/// Where forkless is in one numbered upstream stream: the last event it took.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Cursor {
    stream: String,
    seq: u64,
}

/// What an event is to the cursor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// The event right after the cursor: taken, and the cursor moves to it.
    Next,
    /// At or before the cursor (a priming event, or one a resume repeats): dropped.
    Repeat,
}

/// Why what the upstream sent does not continue the stream: the answer is lost, never
/// passed on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Fork(pub(crate) String);

impl Cursor {
    /// The cursor of an answer whose head names its stream, before its first event; `None`
    /// when the upstream does not number its streams.
    pub(crate) fn of(head: &HeaderMap) -> Option<Self> {
        let stream = head.get(STREAM_ID)?.to_str().ok()?;
        let numbered = !stream.is_empty() && stream.bytes().all(|b| b.is_ascii_graphic() && b != b'.');
        numbered.then(|| Self { stream: stream.to_owned(), seq: 0 })
    }

    /// Take the event with SSE id `id`, or say why it breaks the stream.
    pub(crate) fn admit(&mut self, id: Option<&str>) -> Result<Step, Fork> {
        let id = id.ok_or_else(|| Fork("an event without an id on a numbered stream".into()))?;
        let (stream, seq) = id
            .rsplit_once('.')
            .and_then(|(stream, seq)| Some((stream, seq.parse::<u64>().ok()?)))
            .ok_or_else(|| Fork(format!("an event id `{id}` that is not `<stream>.<seq>`")))?;
        if stream != self.stream {
            return Err(Fork(format!("an event of stream {stream} on stream {}", self.stream)));
        }
        if seq <= self.seq {
            return Ok(Step::Repeat);
        }
        if seq != self.seq + 1 {
            return Err(Fork(format!("a gap: event {seq} came after {}", self.seq)));
        }
        self.seq = seq;
        Ok(Step::Next)
    }

    /// Whether a resume's head says it continues this stream right after the cursor.
    pub(crate) fn continued_by(&self, head: &HeaderMap) -> Result<(), Fork> {
        let header = |name| head.get(name).and_then(|v| v.to_str().ok());
        match (header(STREAM_ID), header(STREAM_RESUMED)) {
            (Some(stream), Some("true")) if stream == self.stream => Ok(()),
            (Some(stream), _) if stream != self.stream => {
                Err(Fork(format!("the resume answered with stream {stream}, not {}", self.stream)))
            }
            _ => Err(Fork("the resume answered with a stream not marked as continuing it".into())),
        }
    }

    /// `Last-Event-ID` for a resume from here.
    pub(crate) fn last_event_id(&self) -> String {
        format!("{}.{}", self.stream, self.seq)
    }

    /// The stream's id (sent as `Mcp-Stream-Id` with a resume).
    pub(crate) fn stream(&self) -> &str {
        &self.stream
    }
}

/// Whether every event and every resume is taken as a continuation: the rule broken on
/// purpose, for a negative control over real processes
/// (`FORKLESS_TEST_TRUST_UPSTREAM_RESUME=1`, read only by builds with the `fault-injection`
/// feature, which no release build has).
pub(crate) fn trusting() -> bool {
    #[cfg(feature = "fault-injection")]
    {
        static TRUSTING: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *TRUSTING.get_or_init(|| std::env::var_os("FORKLESS_TEST_TRUST_UPSTREAM_RESUME").is_some())
    }
    #[cfg(not(feature = "fault-injection"))]
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn only_a_numbered_stream_has_a_cursor() {
        assert_eq!(Cursor::of(&head(&[])), None, "an SDK's answer: nothing to prove a resume with");
        assert_eq!(Cursor::of(&head(&[(STREAM_ID, "")])), None);
        assert_eq!(Cursor::of(&head(&[(STREAM_ID, "a.b")])), None, "a dot would split its ids");
        let c = Cursor::of(&head(&[(STREAM_ID, "s1")])).expect("numbered");
        assert_eq!((c.stream(), c.last_event_id().as_str()), ("s1", "s1.0"));
    }

    #[test]
    fn events_are_taken_in_order_repeats_dropped_and_anything_else_is_a_fork() {
        let mut c = Cursor::of(&head(&[(STREAM_ID, "s1")])).unwrap();
        assert_eq!(c.admit(Some("s1.0")), Ok(Step::Repeat), "the priming event");
        assert_eq!(c.admit(Some("s1.1")), Ok(Step::Next));
        assert_eq!(c.admit(Some("s1.2")), Ok(Step::Next));
        assert_eq!(c.admit(Some("s1.2")), Ok(Step::Repeat), "a resume's repeat");
        assert_eq!(c.last_event_id(), "s1.2");
        for broken in [Some("s1.4"), Some("s2.3"), Some("3"), Some("s1.x"), None] {
            let mut again = c.clone();
            assert!(again.admit(broken).is_err(), "{broken:?} does not continue s1.2");
            assert_eq!(again, c, "a refused event moves nothing");
        }
    }

    #[test]
    fn a_resume_continues_only_when_it_says_so_for_the_same_stream() {
        let c = Cursor::of(&head(&[(STREAM_ID, "s1")])).unwrap();
        assert_eq!(c.continued_by(&head(&[(STREAM_ID, "s1"), (STREAM_RESUMED, "true")])), Ok(()));
        for h in [
            head(&[(STREAM_ID, "s1"), (STREAM_RESUMED, "false")]),
            head(&[(STREAM_ID, "s1")]),
            head(&[(STREAM_ID, "s2"), (STREAM_RESUMED, "true")]),
            head(&[(STREAM_RESUMED, "true")]),
        ] {
            assert!(c.continued_by(&h).is_err(), "{h:?}");
        }
    }
}
