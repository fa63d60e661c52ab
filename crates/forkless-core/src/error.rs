//! The core's one error type: every transition that is illegal in the current state says why.

use crate::id::Epoch;
use crate::reason::RejectReason;

/// Why a session ended. Carried by [`Error::SessionEnded`] and reported on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EndReason {
    /// The client sent DELETE.
    Deleted,
    /// A reconnect could not be proven fork-free (decision (b)).
    Rejected(RejectReason),
    /// No activity within the idle time-to-live.
    IdleExpired,
    /// The server could not vouch for the session after a failure (for example a failed
    /// durable write).
    Failed,
    /// The process or node that served the session is gone, and its handler's sessions
    /// cannot be restored elsewhere (a gateway's stdio child died with it): never re-created
    /// silently under the old id.
    OwnerLost,
    /// The store came back with less than it had delivered (restored from an older snapshot,
    /// or failed over to a copy that missed writes): events a client may hold are gone, so
    /// no cursor of the session can be proven, and numbering on would rename them.
    HistoryLost,
    /// The MCP server behind the session (a gateway's stdio child, an in-process service)
    /// exited: it was the session's state, so the session cannot go on, and it is never
    /// restarted under the same id.
    BackendExited,
    /// The server was at its session limit and reclaimed this session, the longest idle of
    /// the principal holding the most, to make room for another principal's.
    Reclaimed,
    /// The HTTP MCP server behind the session (a gateway's upstream) no longer knows the
    /// upstream session (it answered 404, after a restart): the session is never
    /// re-initialized upstream under the client's session id.
    UpstreamSessionLost,
}

impl EndReason {
    /// The wire code, as in `error.data.reason`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Deleted => "deleted",
            Self::Rejected(r) => r.as_str(),
            Self::IdleExpired => "idle_expired",
            Self::Failed => "failed",
            Self::OwnerLost => "owner_lost",
            Self::HistoryLost => "history_lost",
            Self::BackendExited => "backend_exited",
            Self::Reclaimed => "reclaimed",
            Self::UpstreamSessionLost => "upstream_session_lost",
        }
    }
}

/// An operation the model refuses in its current state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The session has ended; nothing more can be emitted or attached.
    #[error("session ended ({})", reason.as_str())]
    SessionEnded {
        /// Why it ended.
        reason: EndReason,
    },
    /// The stream is not (or no longer) part of this session.
    #[error("stream is not part of this session")]
    StreamUnknown,
    /// The stream was fenced; events are never redirected to another stream.
    #[error("stream is fenced")]
    StreamFenced,
    /// The stream already carried its final event.
    #[error("stream is completed")]
    StreamCompleted,
    /// The caller's attachment was superseded by a newer one.
    #[error("attachment epoch {held} is stale; current is {current}")]
    StaleEpoch {
        /// The epoch the caller holds.
        held: Epoch,
        /// The stream's current epoch.
        current: Epoch,
    },
    /// The stream has no attached connection.
    #[error("stream has no attached connection")]
    NotAttached,
    /// The session already holds `session_max_streams` streams.
    #[error("session holds the maximum of {max} streams")]
    TooManyStreams {
        /// The configured limit.
        max: usize,
    },
    /// The append would exceed the session's byte budget.
    #[error("session byte budget of {max} bytes exhausted")]
    SessionBudgetExceeded {
        /// The configured limit.
        max: u64,
    },
    /// One event is larger than a whole stream may hold.
    #[error("event of {size} bytes exceeds the per-stream limit of {max} bytes")]
    EventTooLarge {
        /// Size of the refused event.
        size: u64,
        /// The configured limit.
        max: u64,
    },
    /// A stream with this id already exists (ids are never reused).
    #[error("stream id already in use")]
    StreamExists,
    /// An [answer](crate::AppendTarget::Answer) is its stream's only event, so it must complete
    /// the stream.
    #[error("an answer must be its stream's final event")]
    AnswerNotFinal,
    /// The session's revision has no streams or resumption (2026-07-28).
    #[error("revision has no sessions")]
    Stateless,
}
