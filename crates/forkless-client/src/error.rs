//! The crate's one error type.
//!
//! Every failure the client can report is a variant here, so applications and the check/chaos
//! tools can match on the reason instead of parsing messages. The enum is `Clone` because one
//! failure (a gap, an ended session) has to be handed to every request that was waiting on it.

use std::sync::Arc;
use std::time::Duration;

use forkless_core::{Seq, StreamId};

/// Everything that can go wrong in `forkless-client`.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The server answered 404 to a request carrying our session id: the session is gone.
    /// `reason` is `error.data.reason` from the JSON-RPC error body when the server gave one
    /// (for example `cursor_evicted`, `token_mismatch`, `deleted`).
    #[error("session ended by the server ({}); start a new session", reason.as_deref().unwrap_or("no reason given"))]
    SessionEnded {
        /// The server's reason code, if any.
        reason: Option<String>,
    },
    /// An event skipped past the stream's cursor: events were lost, so the session is broken and
    /// has been ended.
    #[error("gap on stream {stream}: expected seq {expected}, got {got}; the session is broken")]
    Gap {
        /// The stream with the gap.
        stream: StreamId,
        /// The seq that should have come next.
        expected: Seq,
        /// The seq that came.
        got: Seq,
    },
    /// The server's liveness grace window is not shorter than our retry budget, so a resume
    /// could give up while the server still holds the old connection (seed condition 5).
    #[error("server grace window {grace:?} is not shorter than the client retry budget {budget:?}")]
    GraceTooLong {
        /// The server's `Mcp-Stream-Grace-Ms` (or `graceMs` from initialize).
        grace: Duration,
        /// Our total retry budget.
        budget: Duration,
    },
    /// Reconnecting did not succeed within the retry budget.
    #[error("gave up reconnecting after {attempts} attempts within {budget:?}: {last}")]
    RetryBudgetExhausted {
        /// Attempts made.
        attempts: u32,
        /// The configured budget.
        budget: Duration,
        /// What the last attempt failed with.
        last: String,
    },
    /// A stream's connection dropped before it carried an event id, so there is no cursor to
    /// resume from and its remaining events cannot be recovered.
    #[error("stream connection lost before any event id; it cannot be resumed")]
    NotResumable,
    /// The server broke the wire contract or JSON-RPC (malformed event id, an event of another
    /// stream, a non-JSON message, …).
    #[error("protocol violation: {0}")]
    Protocol(String),
    /// The server answered with an HTTP status this operation does not accept.
    #[error("unexpected HTTP status {status}: {body}")]
    Status {
        /// The status code.
        status: u16,
        /// The (possibly truncated) response body.
        body: String,
    },
    /// The server does not offer a standalone GET stream (405).
    #[error("the server does not offer a standalone SSE stream (405)")]
    StandaloneUnsupported,
    /// The JSON-RPC request failed with an error response.
    #[error("JSON-RPC error {code}: {message}")]
    Rpc {
        /// The error code.
        code: i64,
        /// The error message.
        message: String,
        /// The error data, if any.
        data: Option<serde_json::Value>,
    },
    /// The server negotiated a protocol revision this client does not speak.
    #[error("server chose unsupported protocol revision {0:?}")]
    UnsupportedRevision(String),
    /// Connecting or talking to the server failed at the HTTP/TCP level.
    #[error("transport error: {0}")]
    Transport(#[source] Arc<reqwest::Error>),
    /// The request did not complete within the configured request timeout.
    #[error("request timed out after {0:?}")]
    Timeout(Duration),
    /// A response stream ended before the response (2026-07-28: the request's answer is
    /// lost, and only a keyed re-issue gets it back).
    #[error("the response stream ended before its answer")]
    AnswerLost,
    /// A request's stream lost its connection and the reconnect was not a proven continuation
    /// of it (a new stream, or a server that cannot prove one), under
    /// [`crate::Continuation::Proven`]: the request's answer is given up, never guessed at.
    #[error("the stream could not be continued provably: {0}")]
    Unproven(String),
    /// A task ended cancelled (the tasks extension): it has no result.
    #[error("task {0} was cancelled")]
    TaskCancelled(String),
    /// The task log ([`crate::TaskLog`]) failed.
    #[error("task log: {0}")]
    TaskLog(String),
    /// The client was closed (or the session restarted) while the operation was in flight.
    #[error("client closed")]
    Closed,
    /// [`crate::Client::notifications`] was already called; there is one receiver per client.
    #[error("the notification stream was already taken")]
    NotificationsTaken,
    /// The base URL could not be parsed.
    #[error("invalid server URL: {0}")]
    InvalidUrl(String),
    /// A builder setting is out of range.
    #[error("invalid setting: {0}")]
    InvalidSetting(&'static str),
    /// A CA file for TLS could not be used (see [`crate::tls`]).
    #[error("TLS trust: {0}")]
    Tls(String),
}

impl From<reqwest::Error> for Error {
    fn from(e: reqwest::Error) -> Self {
        Self::Transport(Arc::new(e))
    }
}

impl Error {
    /// The failure's name on the wire, for a bridge or a report that passes it on
    /// (`data.reason` of a JSON-RPC error): one stable `snake_case` word per variant.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::SessionEnded { .. } => "session_ended",
            Self::Gap { .. } => "gap",
            Self::GraceTooLong { .. } => "grace_too_long",
            Self::RetryBudgetExhausted { .. } => "retry_budget_exhausted",
            Self::NotResumable => "not_resumable",
            Self::Protocol(_) => "protocol_violation",
            Self::Status { .. } => "http_status",
            Self::StandaloneUnsupported => "standalone_unsupported",
            Self::Rpc { .. } => "rpc_error",
            Self::UnsupportedRevision(_) => "unsupported_revision",
            Self::Transport(_) => "transport",
            Self::Timeout(_) => "timeout",
            Self::AnswerLost => "answer_lost",
            Self::Unproven(_) => "unproven_continuation",
            Self::TaskCancelled(_) => "task_cancelled",
            Self::TaskLog(_) => "task_log",
            Self::Closed => "closed",
            Self::NotificationsTaken => "notifications_taken",
            Self::InvalidUrl(_) => "invalid_url",
            Self::InvalidSetting(_) => "invalid_setting",
            Self::Tls(_) => "tls",
        }
    }

    /// Whether a reconnect may cure this failure (network trouble, a 409 while the server's
    /// grace window runs out, a 5xx); the others are final for the stream.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Transport(_) | Self::Timeout(_) | Self::AnswerLost => true,
            Self::Status { status, .. } => *status == 409 || *status == 429 || *status >= 500,
            _ => false,
        }
    }
}
