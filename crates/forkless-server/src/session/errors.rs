//! Why a session's message was not delivered: [`SendError`], what a handler sees, and
//! [`AppendError`], what the outbox reports to the answer path (which keeps the store's own
//! error, for the POST's status).

use forkless_core::EndReason;

use crate::jsonrpc::RpcError;

/// Why a message from the handler could not be delivered (or a server-to-client request
/// got no result).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SendError {
    /// The session has ended; nothing more reaches this client.
    #[error("session ended ({})", reason.as_str())]
    SessionEnded {
        /// Why it ended.
        reason: EndReason,
    },
    /// The target stream was fenced; events are never redirected to another stream.
    #[error("stream is fenced")]
    StreamFenced,
    /// The target stream already carried its final event (the response).
    #[error("stream is completed")]
    StreamCompleted,
    /// The store refused or failed the append (limits, backend failure).
    #[error("store: {0}")]
    Store(String),
    /// The client answered the server-to-client request with an error.
    #[error("client answered with {0}")]
    Rejected(RpcError),
    /// The request this context belongs to was cancelled (or its connection closed, 2026).
    #[error("request cancelled")]
    Cancelled,
    /// 2026-07-28: no sessions, no standalone stream, no server-to-client requests.
    #[error("not available in the stateless revision")]
    Stateless,
    /// A server-wide limit is reached (`max_retained_bytes`): the event was not stored.
    #[error("server at capacity: {limit} reached")]
    AtCapacity {
        /// The setting at its limit.
        limit: &'static str,
    },
}

impl SendError {
    /// The typed error for a store failure on an append.
    pub(crate) fn from_store(e: forkless_store::Error) -> Self {
        use forkless_core::Error as Core;
        match e {
            forkless_store::Error::Core(Core::SessionEnded { reason }) => Self::SessionEnded { reason },
            forkless_store::Error::Core(Core::StreamFenced) => Self::StreamFenced,
            forkless_store::Error::Core(Core::StreamCompleted) => Self::StreamCompleted,
            forkless_store::Error::Core(Core::Stateless) => Self::Stateless,
            other => Self::Store(other.to_string()),
        }
    }
}

/// Why an append was not made.
#[derive(Debug)]
pub(crate) enum AppendError {
    /// A server-wide budget is reached (a notification is held back, never a response).
    AtCapacity { limit: &'static str },
    /// The store refused or failed it.
    Store(forkless_store::Error),
}

impl AppendError {
    /// As the store's error (for the POST that answers with it).
    pub(crate) fn into_store(self) -> forkless_store::Error {
        match self {
            Self::AtCapacity { limit } => {
                forkless_store::Error::Backend(format!("server at capacity: {limit} reached"))
            }
            Self::Store(e) => e,
        }
    }
}

impl From<AppendError> for SendError {
    fn from(e: AppendError) -> Self {
        match e {
            AppendError::AtCapacity { limit } => Self::AtCapacity { limit },
            AppendError::Store(e) => Self::from_store(e),
        }
    }
}
