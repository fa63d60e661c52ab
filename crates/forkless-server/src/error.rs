//! The crate's one error enum for everything a request can fail with, and the one function
//! mapping each error to its HTTP status and JSON-RPC code ([`Error::status_and_code`]).
//!
//! Every error answers with a JSON-RPC error body without `id`:
//! `{"jsonrpc":"2.0","error":{"code":..,"message":..,"data":{"reason":..}}}` and is logged
//! once, when it becomes a response.

use axum::response::{IntoResponse, Response};
use forkless_core::{ConflictReason, EndReason};
use http::{HeaderValue, StatusCode, header};
use serde_json::json;

// The one table of JSON-RPC error codes this server answers with (handlers' own codes aside).

/// JSON-RPC: invalid JSON.
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC: not a valid request object.
pub const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC: the method does not exist.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC: invalid method parameters.
pub const INVALID_PARAMS: i64 = -32602;
/// JSON-RPC: internal error.
pub const INTERNAL_ERROR: i64 = -32603;
/// The session is unknown or ended: start a new session (PROTOCOL section 4, (b)).
pub const SESSION_ENDED: i64 = -32001;
/// The standalone stream already has a live connection (row 2).
pub const STREAM_CONFLICT: i64 = -32002;
/// 2026-07-28: the headers do not match the body, or a required one is missing or malformed.
pub const HEADER_MISMATCH: i64 = -32020;
/// 2026-07-28: the request needs a client capability its `_meta` did not declare.
pub const MISSING_REQUIRED_CLIENT_CAPABILITY: i64 = -32021;
/// The requested protocol version is not served (2026-07-28's code, used for every revision).
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
/// A request that was cancelled (a keyed request's re-issue after its cancellation).
pub const REQUEST_CANCELLED: i64 = -32800;

/// The versions this server speaks, newest first (for discovery and refusals).
pub(crate) fn supported_versions() -> Vec<&'static str> {
    forkless_core::Revision::ALL.iter().rev().map(|r| r.as_str()).collect()
}

/// Why the OAuth check ([`crate::auth`]) did not let a request through, as the
/// `error.data.reason` says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AuthRefusal {
    /// No `Authorization: Bearer` token.
    Missing,
    /// Malformed, badly signed, `alg` not the key's, or `alg: none`.
    Invalid,
    /// `exp` passed.
    Expired,
    /// `nbf` not reached.
    NotYetValid,
    /// `iss` is not the configured issuer.
    WrongIssuer,
    /// `aud` does not name this resource.
    WrongAudience,
    /// The token's key id is not among the issuer's keys.
    UnknownKey,
    /// The issuer's keys could not be fetched.
    KeysUnavailable,
    /// A required scope is absent.
    InsufficientScope,
}

impl AuthRefusal {
    /// The wire code (`error.data.reason`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Missing => "token_missing",
            Self::Invalid => "token_invalid",
            Self::Expired => "token_expired",
            Self::NotYetValid => "token_not_yet_valid",
            Self::WrongIssuer => "token_wrong_issuer",
            Self::WrongAudience => "token_wrong_audience",
            Self::UnknownKey => "token_unknown_key",
            Self::KeysUnavailable => "issuer_keys_unavailable",
            Self::InsufficientScope => "insufficient_scope",
        }
    }
}

/// Why a request for a session owned by another node could not be served (PROTOCOL
/// section 10), as `error.data.reason` says. Each is answered 503 with `Retry-After`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum OwnerUnavailable {
    /// The owner's advertised address did not take the request (refused, reset, unknown).
    Unreachable,
    /// The owner did not answer within the forward head timeout.
    Timeout,
    /// The node this request was sent to does not own the session either (one hop only).
    Moved,
    /// The owner advertised no address, and its sessions cannot be served elsewhere.
    NotAdvertised,
}

impl OwnerUnavailable {
    /// The wire code (`error.data.reason`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Unreachable => "owner_unreachable",
            Self::Timeout => "owner_timeout",
            Self::Moved => "owner_moved",
            Self::NotAdvertised => "owner_not_advertised",
        }
    }
}

/// What a client refused because a session's owner is unavailable is told to wait: about
/// the time a lapsed lease takes to be noticed and taken over.
const OWNER_RETRY_AFTER_SECS: u64 = 1;

/// Why a request to the MCP endpoint was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The body is not JSON.
    #[error("parse error: {0}")]
    Parse(String),
    /// The body is JSON but not a JSON-RPC message of an accepted shape.
    #[error("invalid JSON-RPC message: {0}")]
    InvalidMessage(String),
    /// A request other than initialize without `Mcp-Session-Id`.
    #[error("missing Mcp-Session-Id header")]
    MissingSessionId,
    /// `MCP-Protocol-Version` names no revision this server speaks.
    #[error("unsupported MCP-Protocol-Version {0:?}")]
    UnsupportedVersion(String),
    /// A revision this server knows but does not offer: the operator's choice
    /// ([`crate::ServerConfig::revisions`]) or its handler's ([`crate::Revisions::SessionsOnly`]:
    /// 2026-07-28 behind a stdio gateway).
    #[error("MCP revision {} is not served here (served: {served})", .requested.as_str())]
    RevisionNotServed {
        /// What the client asked for.
        requested: forkless_core::Revision,
        /// What is served.
        served: forkless_core::RevisionSet,
    },
    /// `initialize` sent with a session id.
    #[error("initialize on an existing session")]
    AlreadyInitialized,
    /// A JSON-RPC batch in a revision without batches.
    #[error("JSON-RPC batches are not accepted in revision {0}")]
    BatchNotAllowed(&'static str),
    /// `Origin` is present and not allowed.
    #[error("origin {0:?} is not allowed")]
    OriginForbidden(String),
    /// The session id names no session (never existed, removed, malformed or another
    /// principal's).
    #[error("session not found")]
    SessionUnknown,
    /// The session has ended.
    #[error("session ended ({})", .0.as_str())]
    SessionEnded(EndReason),
    /// The method is not served here (GET/DELETE in the stateless revision).
    #[error("method not allowed")]
    MethodNotAllowed {
        /// The value of the `Allow` header.
        allow: &'static str,
    },
    /// `Accept` lacks a media type the answer needs.
    #[error("Accept must include {0}")]
    NotAcceptable(&'static str),
    /// Row 2: the stream has a live connection.
    #[error("the stream already has a live connection")]
    Conflict(ConflictReason),
    /// The body is larger than `max_body_bytes`.
    #[error("body exceeds {max} bytes")]
    BodyTooLarge {
        /// The limit.
        max: usize,
    },
    /// The body could not be read.
    #[error("body could not be read: {0}")]
    BodyRead(String),
    /// `Content-Type` is not `application/json`.
    #[error("Content-Type must be application/json")]
    UnsupportedMediaType,
    /// The session holds too many streams or bytes (a retention limit).
    #[error("limit reached: {0}")]
    Limit(forkless_core::Error),
    /// The request carries no valid bearer token (401), or lacks a required scope (403).
    #[error("not authorized: {}", refusal.as_str())]
    Unauthorized {
        /// Why.
        refusal: AuthRefusal,
        /// The `WWW-Authenticate` challenge.
        challenge: HeaderValue,
    },
    /// No endpoint at this path.
    #[error("no endpoint at this path")]
    PathUnknown,
    /// A header that carries one value arrived more than once (`Mcp-Session-Id`,
    /// `MCP-Protocol-Version`, `Last-Event-ID`, `Mcp-Stream-Id`): which one is meant is never
    /// guessed.
    #[error("header {0} sent more than once")]
    HeaderRepeated(&'static str),
    /// The request's headers are larger than `max_header_bytes`.
    #[error("request headers exceed {max} bytes")]
    HeadersTooLarge {
        /// The limit.
        max: usize,
    },
    /// The body did not arrive within `body_read_timeout`.
    #[error("the body did not arrive within {0:?}")]
    BodyTimeout(std::time::Duration),
    /// A server-wide limit is reached; try again later (`Retry-After`).
    #[error("server at capacity: {limit} reached")]
    AtCapacity {
        /// The setting that is at its limit (`max_sessions`, `max_retained_bytes`).
        limit: &'static str,
        /// What the client is told to wait.
        retry_after: std::time::Duration,
    },
    /// The principal holds its whole share of a limit (`crate::quota`); try again later
    /// (`Retry-After`).
    #[error("quota reached: {quota}")]
    QuotaExceeded {
        /// The setting whose share is used up (`max_sessions_per_principal`).
        quota: &'static str,
        /// What the client is told to wait.
        retry_after: std::time::Duration,
    },
    /// The session is owned by another node that cannot take the request now.
    #[error("the session's owner node {node} is unavailable ({})", why.as_str())]
    OwnerUnavailable {
        /// The owner's node id.
        node: String,
        /// Why.
        why: OwnerUnavailable,
    },
    /// This node stopped serving (its store refuses work: a lost node lease, a failed durable
    /// write); another node, or this one restarted, serves the session.
    #[error("this node stopped serving: {0}")]
    NodeStopped(String),
    /// The store failed.
    #[error("store failed: {0}")]
    Store(forkless_store::Error),
}

impl From<forkless_store::Error> for Error {
    fn from(e: forkless_store::Error) -> Self {
        use forkless_core::Error as Core;
        match e {
            forkless_store::Error::SessionUnknown => Self::SessionUnknown,
            forkless_store::Error::Core(Core::SessionEnded { reason }) => Self::SessionEnded(reason),
            forkless_store::Error::Core(
                c @ (Core::TooManyStreams { .. }
                | Core::SessionBudgetExceeded { .. }
                | Core::EventTooLarge { .. }),
            ) => Self::Limit(c),
            other => Self::Store(other),
        }
    }
}

impl Error {
    /// The one mapping of errors to (HTTP status, JSON-RPC code).
    pub fn status_and_code(&self) -> (StatusCode, i64) {
        match self {
            Self::Parse(_) => (StatusCode::BAD_REQUEST, PARSE_ERROR),
            Self::UnsupportedVersion(_) | Self::RevisionNotServed { .. } => {
                (StatusCode::BAD_REQUEST, UNSUPPORTED_PROTOCOL_VERSION)
            }
            Self::InvalidMessage(_)
            | Self::MissingSessionId
            | Self::AlreadyInitialized
            | Self::BatchNotAllowed(_)
            | Self::HeaderRepeated(_)
            | Self::BodyRead(_) => (StatusCode::BAD_REQUEST, INVALID_REQUEST),
            Self::HeadersTooLarge { .. } => (StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE, INVALID_REQUEST),
            Self::BodyTimeout(_) => (StatusCode::REQUEST_TIMEOUT, INVALID_REQUEST),
            Self::AtCapacity { .. }
            | Self::OwnerUnavailable { .. }
            | Self::NodeStopped(_)
            | Self::Store(forkless_store::Error::LeaseLost(_) | forkless_store::Error::Backend(_)) => {
                (StatusCode::SERVICE_UNAVAILABLE, INTERNAL_ERROR)
            }
            Self::OriginForbidden(_) => (StatusCode::FORBIDDEN, INVALID_REQUEST),
            Self::SessionUnknown | Self::SessionEnded(_) => (StatusCode::NOT_FOUND, SESSION_ENDED),
            Self::MethodNotAllowed { .. } => (StatusCode::METHOD_NOT_ALLOWED, INVALID_REQUEST),
            Self::PathUnknown => (StatusCode::NOT_FOUND, INVALID_REQUEST),
            Self::Unauthorized { refusal: AuthRefusal::InsufficientScope, .. } => {
                (StatusCode::FORBIDDEN, INVALID_REQUEST)
            }
            // The issuer's keys could not be fetched: not the client's fault.
            Self::Unauthorized { refusal: AuthRefusal::KeysUnavailable, .. } => {
                (StatusCode::SERVICE_UNAVAILABLE, INTERNAL_ERROR)
            }
            Self::Unauthorized { .. } => (StatusCode::UNAUTHORIZED, INVALID_REQUEST),
            Self::NotAcceptable(_) => (StatusCode::NOT_ACCEPTABLE, INVALID_REQUEST),
            Self::Conflict(_) => (StatusCode::CONFLICT, STREAM_CONFLICT),
            Self::BodyTooLarge { .. } => (StatusCode::PAYLOAD_TOO_LARGE, INVALID_REQUEST),
            Self::UnsupportedMediaType => (StatusCode::UNSUPPORTED_MEDIA_TYPE, INVALID_REQUEST),
            Self::Limit(_) | Self::QuotaExceeded { .. } => (StatusCode::TOO_MANY_REQUESTS, INTERNAL_ERROR),
            Self::Store(forkless_store::Error::Contended { .. }) => {
                (StatusCode::SERVICE_UNAVAILABLE, INTERNAL_ERROR)
            }
            Self::Store(_) => (StatusCode::INTERNAL_SERVER_ERROR, INTERNAL_ERROR),
        }
    }

    /// The machine-readable `error.data.reason`.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Parse(_) => "parse_error",
            Self::InvalidMessage(_) => "invalid_message",
            Self::MissingSessionId => "session_id_missing",
            Self::UnsupportedVersion(_) | Self::RevisionNotServed { .. } => "protocol_version_unsupported",
            Self::AlreadyInitialized => "already_initialized",
            Self::BatchNotAllowed(_) => "batch_not_allowed",
            Self::OriginForbidden(_) => "origin_forbidden",
            Self::SessionUnknown => "session_unknown",
            Self::SessionEnded(reason) => reason.as_str(),
            Self::MethodNotAllowed { .. } => "method_not_allowed",
            Self::NotAcceptable(_) => "not_acceptable",
            Self::Conflict(reason) => reason.as_str(),
            Self::BodyTooLarge { .. } => "body_too_large",
            Self::BodyRead(_) => "body_unreadable",
            Self::UnsupportedMediaType => "unsupported_media_type",
            Self::Limit(_) => "limit_reached",
            Self::HeaderRepeated(_) => "header_repeated",
            Self::PathUnknown => "path_unknown",
            Self::Unauthorized { refusal, .. } => refusal.as_str(),
            Self::HeadersTooLarge { .. } => "headers_too_large",
            Self::BodyTimeout(_) => "body_timeout",
            Self::AtCapacity { limit, .. } => limit,
            Self::QuotaExceeded { quota, .. } => quota,
            Self::OwnerUnavailable { why, .. } => why.as_str(),
            Self::NodeStopped(_) => "node_stopped",
            Self::Store(forkless_store::Error::LeaseLost(_)) => "node_lease_lost",
            Self::Store(forkless_store::Error::Backend(_)) => "store_unavailable",
            Self::Store(_) => "store_failed",
        }
    }

    /// The JSON-RPC error body (no `id`) this error answers with.
    pub(crate) fn body(&self) -> serde_json::Value {
        let (_, code) = self.status_and_code();
        let mut data = json!({ "reason": self.reason() });
        if let Self::UnsupportedVersion(requested) = self {
            // As 2026-07-28's UnsupportedProtocolVersionError: what is served, what was asked.
            data["supported"] = json!(supported_versions());
            data["requested"] = json!(requested);
        }
        if let Self::RevisionNotServed { requested, served } = self {
            let served: Vec<_> = served.newest_first().map(|r| r.as_str()).collect();
            data["supported"] = json!(served);
            data["requested"] = json!(requested.as_str());
        }
        json!({ "jsonrpc": "2.0", "error": { "code": code, "message": self.message(), "data": data } })
    }

    fn message(&self) -> String {
        match self {
            // Decision (b): the one answer every specification-following client treats as
            // "initialize again".
            Self::SessionUnknown | Self::SessionEnded(_) => format!("{self}; start a new session"),
            _ => self.to_string(),
        }
    }
}

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        self.into_response_for(None)
    }
}

impl Error {
    /// The response, its body carrying the `id` of the request it refuses where that is known
    /// (a single request whose body was read).
    pub(crate) fn into_response_for(self, id: Option<&serde_json::Value>) -> Response {
        let (status, code) = self.status_and_code();
        if status.is_server_error() {
            tracing::warn!(status = status.as_u16(), reason = self.reason(), error = %self, "request failed");
        } else {
            tracing::debug!(status = status.as_u16(), reason = self.reason(), error = %self, "request refused");
        }
        let _ = code;
        let mut body = self.body();
        if let Some(id) = id {
            body["id"] = id.clone();
        }
        let mut response = (status, axum::Json(body)).into_response();
        match self {
            Self::MethodNotAllowed { allow } => {
                response.headers_mut().insert(header::ALLOW, HeaderValue::from_static(allow));
            }
            Self::Unauthorized { challenge, .. } => {
                response.headers_mut().insert(header::WWW_AUTHENTICATE, challenge);
            }
            Self::AtCapacity { retry_after, .. } | Self::QuotaExceeded { retry_after, .. } => {
                let secs = retry_after.as_secs().max(1);
                response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs));
            }
            Self::OwnerUnavailable { .. }
            | Self::NodeStopped(_)
            | Self::Store(forkless_store::Error::LeaseLost(_) | forkless_store::Error::Backend(_)) => {
                response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(OWNER_RETRY_AFTER_SECS));
            }
            _ => {}
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use forkless_core::RejectReason;

    #[test]
    fn ended_sessions_are_404_with_the_reason_and_the_restart_hint() {
        let e = Error::SessionEnded(EndReason::Rejected(RejectReason::CursorMalformed));
        assert_eq!(e.status_and_code(), (StatusCode::NOT_FOUND, SESSION_ENDED));
        assert_eq!(e.reason(), "cursor_malformed");
        assert!(e.message().ends_with("; start a new session"));
    }

    #[test]
    fn store_errors_map_to_typed_errors() {
        let ended =
            forkless_store::Error::Core(forkless_core::Error::SessionEnded { reason: EndReason::Deleted });
        assert!(matches!(Error::from(ended), Error::SessionEnded(EndReason::Deleted)));
        assert!(matches!(Error::from(forkless_store::Error::SessionUnknown), Error::SessionUnknown));
    }
}
