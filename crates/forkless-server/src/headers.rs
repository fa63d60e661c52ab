//! The MCP header names (PROTOCOL section 3), as constants every layer shares.
//!
//! A leaf: it imports nothing of this crate, so the listener, the router and the answer path
//! name headers without reaching into each other. What a header's value means is decided where
//! it is read ([`crate::request`]) or written ([`crate::sse`]).

use http::HeaderName;

/// `Mcp-Session-Id`.
pub const SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");
/// `MCP-Protocol-Version`.
pub const PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
/// `Last-Event-ID`.
pub const LAST_EVENT_ID: HeaderName = HeaderName::from_static("last-event-id");
/// `Mcp-Stream-Id` (request: the resumption token; response: the stream served).
pub const STREAM_ID: HeaderName = HeaderName::from_static("mcp-stream-id");
/// `Mcp-Stream-Resumed`.
pub const STREAM_RESUMED: HeaderName = HeaderName::from_static("mcp-stream-resumed");
/// `Mcp-Stream-Grace-Ms`.
pub const STREAM_GRACE_MS: HeaderName = HeaderName::from_static("mcp-stream-grace-ms");
