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

/// What a stream accepts as its continuation after it lost its connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Continuation {
    /// Go on with whatever the reconnect opened, telling the application through
    /// [`crate::ClientEvent::NewStream`] and [`crate::ClientEvent::Resumed`] (the library's
    /// default: the application decides).
    #[default]
    Follow,
    /// Only a [`Continuity::Verified`] continuation: a new stream, or a resume a
    /// plain-specification server cannot prove, ends the stream with
    /// [`crate::Error::Unproven`]: a request's stream fails its request, the standalone stream
    /// is reported as [`crate::ClientEvent::StreamFailed`] (open a fresh one to go on). For a
    /// bridge that must never hand its host a fork.
    Proven,
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
mod tests;
