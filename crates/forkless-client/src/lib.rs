//! # forkless-client: an MCP Streamable HTTP client that never mistakes a new stream for a continuation
//!
//! The client half of the forkless wire contract (PROTOCOL section 7) over the MCP Streamable
//! HTTP transport (revisions 2025-03-26 to 2025-11-25):
//!
//! - it declares `capabilities.experimental["forkless/resume"] = {"version": 1}` in `initialize`;
//! - it keeps a cursor per SSE stream and resumes a dropped connection with
//!   `Last-Event-ID: <stream>.<seq>` and `Mcp-Stream-Id: <stream>`;
//! - it accepts a reconnect as a continuation only when the server answers with the same
//!   `Mcp-Stream-Id` and `Mcp-Stream-Resumed: true`; anything else resets the cursor and is
//!   reported as [`ClientEvent::NewStream`];
//! - it drops events at or below the cursor (duplicates) and ends the session on an event above
//!   `cursor + 1` ([`Error::Gap`]);
//! - on 404 it surfaces [`Error::SessionEnded`] with the server's reason and re-initializes
//!   only when configured to;
//! - it retries with exponential backoff and jitter, honours `retry:`, and refuses a server
//!   whose grace window is not shorter than its retry budget ([`Error::GraceTooLong`]).
//!
//! Against a server that speaks only the specification (no `Mcp-Stream-*` headers, opaque
//! event ids) it resumes with `Last-Event-ID` alone and reports the result as
//! [`Continuity::Unverified`]: it never claims a continuation it could not check.
//!
//! ```no_run
//! # async fn demo() -> Result<(), forkless_client::Error> {
//! use forkless_client::{Client, ClientEvent};
//! use futures::StreamExt;
//!
//! let client = Client::connect("http://127.0.0.1:8080/mcp").await?;
//! let mut events = client.notifications()?;
//! let result = client.call_tool("echo", serde_json::json!({"text": "hi"})).await?;
//! let standalone = client.open_standalone().await?;
//! while let Some(event) = events.next().await {
//!     if let ClientEvent::Notification(n) = event {
//!         println!("{}: {:?}", n.method, n.params);
//!     }
//! }
//! println!("{result} {:?}", standalone.stats());
//! client.close().await?;
//! # Ok(()) }
//! ```
//!
//! ## Layout
//!
//! | module | owns |
//! |---|---|
//! | [`resume`] | the sans-IO state machine: cursor, continuation check, duplicates, gaps |
//! | [`backoff`] | reconnect pacing: exponential backoff, jitter, `retry:` floor, budget |
//! | [`stats`] | per-stream counters for check and chaos tools |
//! | `client` | session lifecycle, requests, routing, the public [`Client`] |
//! | [`current`] | the 2026-07-28 client ([`CurrentClient`]): keyed re-issue, tasks driven to their end, `input_required` rounds answered, task ids kept in a [`TaskLog`] |
//! | [`credentials`] | the `Authorization` header each request carries, asked afresh ([`Credentials`]) |
//! | `driver` | one task per SSE stream: read, feed the state machine, reconnect |
//! | `http`, `jsonrpc` | header names and body reading; JSON-RPC framing |
//!
//! The HTTP layer is a `reqwest::Client` ([`ClientBuilder::http_client`]) and a base URL, so
//! tests can point the client at a fault-injecting proxy.

pub mod backoff;
mod builder;
mod client;
pub mod credentials;
pub mod current;
mod driver;
mod error;
mod events;
pub mod http;
mod inner;
mod jsonrpc;
pub mod resume;
pub mod stats;
pub mod tls;

pub use backoff::RetryPolicy;
pub use builder::ClientBuilder;
pub use client::Client;
pub use credentials::Credentials;
pub use current::{CurrentClient, CurrentSettings, FileTaskLog, MemoryTaskLog, Reissue, TaskLog};
pub use driver::StreamControl;
pub use error::Error;
pub use events::{
    ClientEvent, HandlerFn, Notification, Notifications, Progress, RejectAll, RpcError, ServerRequestHandler,
    StreamOrigin, handler_fn,
};
pub use forkless_core::{EventId, Revision, Seq, StreamId};
pub use inner::RESUME_CAPABILITY;
pub use resume::{
    Continuation, Continuity, Cursor, Opened, ResponseHead, ResumeHeaders, Step, StreamTracker,
};
pub use stats::{Latency, StreamStats};
