//! The decision on a GET (PROTOCOL section 4): resume, reject, conflict, or an explicitly new
//! stream.
//!
//! [`decide_get`] is a pure function of the session snapshot (with its streams), the request's
//! two headers, `now` and the configuration. It allocates nothing. Applying the decision is
//! [`crate::SessionRecord::on_get`]. Rows are checked in the table's order; each arm below
//! names its row.

use crate::config::{Config, ResumeMode};
use crate::id::{EventId, Seq, StreamId};
use crate::session::SessionRecord;
use crate::time::Timestamp;

/// The resume-relevant headers of a GET, as received (unparsed).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GetRequest<'a> {
    /// `Last-Event-ID`.
    pub last_event_id: Option<&'a str>,
    /// `Mcp-Stream-Id`.
    pub stream_token: Option<&'a str>,
}

/// Why a reconnect is refused and the session ended (decision (b)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RejectReason {
    /// Row 1: the standalone log the client never saw was partly evicted. Row 10: events
    /// after the cursor were evicted.
    CursorEvicted,
    /// Row 4: no cursor, yet the client may have seen content and made no reset promise.
    CursorMissing,
    /// Row 5: `Last-Event-ID` is not `<stream>.<seq>`.
    CursorMalformed,
    /// Row 6: the cursor's stream is not a stream of this session.
    StreamUnknown,
    /// Row 7: `Mcp-Stream-Id` disagrees with the cursor's stream.
    TokenMismatch,
    /// Row 7, strict mode: `Mcp-Stream-Id` is absent.
    TokenMissing,
    /// Row 8: the stream is fenced.
    StreamFenced,
    /// Row 9: the cursor is beyond the stream's high-water mark.
    CursorAhead,
}

impl RejectReason {
    /// Every reason.
    pub const ALL: [Self; 8] = [
        Self::CursorEvicted,
        Self::CursorMissing,
        Self::CursorMalformed,
        Self::StreamUnknown,
        Self::TokenMismatch,
        Self::TokenMissing,
        Self::StreamFenced,
        Self::CursorAhead,
    ];

    /// The wire code (`error.data.reason`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::CursorEvicted => "cursor_evicted",
            Self::CursorMissing => "cursor_missing",
            Self::CursorMalformed => "cursor_malformed",
            Self::StreamUnknown => "stream_unknown",
            Self::TokenMismatch => "token_mismatch",
            Self::TokenMissing => "token_missing",
            Self::StreamFenced => "stream_fenced",
            Self::CursorAhead => "cursor_ahead",
        }
    }
}

/// Why a reconnect is refused while the session and the live connection stay untouched.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConflictReason {
    /// Row 2: the standalone stream has a live connection.
    StreamAttached,
}

impl ConflictReason {
    /// The wire code.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::StreamAttached => "stream_attached",
        }
    }
}

/// How a new (not resumed) standalone attachment comes about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenNew {
    /// Row 1: attach the standalone stream and deliver its whole log.
    Standalone(StreamId),
    /// Row 3: fence this standalone stream and create a new one, in one step.
    Reset(StreamId),
}

/// The answer to a GET on a valid session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Row 11, (a): continue `stream` right after `after`.
    Resume {
        /// The stream to continue.
        stream: StreamId,
        /// The client's cursor.
        after: Seq,
    },
    /// Rows 1 and 3: a stream the client must not take for a continuation.
    OpenNew(OpenNew),
    /// Row 2: 409; nothing changes.
    Conflict(ConflictReason),
    /// (b): 404 and the session ends.
    Reject(RejectReason),
}

/// Decide a GET on an active session. Pure; allocates nothing.
pub fn decide_get(record: &SessionRecord, req: &GetRequest<'_>, now: Timestamp, cfg: &Config) -> Decision {
    let Some(lei) = req.last_event_id else {
        return decide_without_cursor(record, req.stream_token.is_some(), now);
    };
    // Row 5.
    let Ok(cursor) = lei.parse::<EventId>() else {
        return Decision::Reject(RejectReason::CursorMalformed);
    };
    // Row 6: unknown and foreign streams look the same from here, by design.
    let Some(stream) = record.stream(cursor.stream) else {
        return Decision::Reject(RejectReason::StreamUnknown);
    };
    // Row 7.
    match req.stream_token {
        Some(token) if token.parse::<crate::id::StreamId>() != Ok(cursor.stream) => {
            return Decision::Reject(RejectReason::TokenMismatch);
        }
        None if cfg.mode == ResumeMode::Strict => return Decision::Reject(RejectReason::TokenMissing),
        _ => {}
    }
    // Row 8.
    if stream.is_fenced() {
        return Decision::Reject(RejectReason::StreamFenced);
    }
    // Row 9.
    if cursor.seq > stream.high_water() {
        return Decision::Reject(RejectReason::CursorAhead);
    }
    // Row 10.
    if cursor.seq.next() < stream.low_water() {
        return Decision::Reject(RejectReason::CursorEvicted);
    }
    // Row 11.
    Decision::Resume { stream: cursor.stream, after: cursor.seq }
}

fn decide_without_cursor(record: &SessionRecord, has_token: bool, now: Timestamp) -> Decision {
    // Row 4, second half: a token without a cursor proves nothing.
    if has_token {
        return Decision::Reject(RejectReason::CursorMissing);
    }
    let standalone = record.standalone();
    // Row 2.
    if standalone.is_live(now) {
        return Decision::Conflict(ConflictReason::StreamAttached);
    }
    // Row 1.
    if !standalone.ever_attached() || !standalone.has_content() {
        if standalone.has_evicted() {
            return Decision::Reject(RejectReason::CursorEvicted);
        }
        return Decision::OpenNew(OpenNew::Standalone(standalone.id()));
    }
    // Row 3.
    if record.session().reset_contract() {
        return Decision::OpenNew(OpenNew::Reset(standalone.id()));
    }
    // Row 4.
    Decision::Reject(RejectReason::CursorMissing)
}
