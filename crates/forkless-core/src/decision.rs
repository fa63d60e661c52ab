//! The decision on a GET (PROTOCOL section 4): resume, reject, conflict, or an explicitly new
//! stream.
//!
//! [`decide_get`] is a pure function of the session snapshot (with its streams), the request's
//! two headers, `now` and the configuration. It allocates nothing. Applying the decision is
//! [`crate::SessionRecord::on_get`]. Rows are checked in the table's order; each arm below
//! names its row.

use crate::config::{Config, ResumeMode};
use crate::error::{EndReason, Error};
use crate::id::EntropySource;
use crate::id::{EventId, Seq, StreamId};
pub use crate::reason::{ConflictReason, RejectReason};
use crate::record::{GetOutcome, SessionRecord};
use crate::stream::{Stream, StreamKind};
use crate::time::Timestamp;

/// The resume-relevant headers of a GET, as received (unparsed).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GetRequest<'a> {
    /// `Last-Event-ID`.
    pub last_event_id: Option<&'a str>,
    /// `Mcp-Stream-Id`.
    pub stream_token: Option<&'a str>,
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
        Some(token) if token.parse::<StreamId>() != Ok(cursor.stream) => {
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

// ===== applying the decision =====

impl SessionRecord {
    /// A GET arrived: decide (PROTOCOL section 4) and apply the decision in one step.
    /// A rejection ends the session; a conflict changes nothing.
    pub fn on_get(
        &mut self,
        req: &GetRequest<'_>,
        now: Timestamp,
        cfg: &Config,
        entropy: &mut impl EntropySource,
    ) -> Result<GetOutcome, Error> {
        self.check_active()?;
        let outcome = match decide_get(self, req, now, cfg) {
            Decision::Conflict(reason) => return Ok(GetOutcome::Conflict(reason)),
            Decision::Reject(reason) => {
                self.on_end(EndReason::Rejected(reason), now)?;
                return Ok(GetOutcome::Rejected(reason));
            }
            Decision::Resume { stream, after } => self.attach(stream, after, true, None, now, cfg)?,
            Decision::OpenNew(OpenNew::Standalone(stream)) => {
                self.attach(stream, Seq::PRIMING, false, None, now, cfg)?
            }
            Decision::OpenNew(OpenNew::Reset(old)) => {
                let fresh = Stream::new(StreamId::generate(entropy), StreamKind::Standalone, now);
                self.reset_standalone(old, fresh, now, cfg)?
            }
        };
        self.touch(now);
        Ok(GetOutcome::Attached(outcome))
    }
}
