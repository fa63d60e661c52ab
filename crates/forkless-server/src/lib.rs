//! # forkless-server: the MCP Streamable HTTP server of forkless
//!
//! An axum 0.8 / hyper 1 server for the MCP Streamable HTTP transport (revisions 2025-03-26,
//! 2025-06-18 and 2025-11-25 with sessions and resumable SSE; 2026-07-28 served statelessly
//! on the same endpoint) that keeps the forkless invariant (PROTOCOL section 1): at most one
//! live connection per stream, one standalone stream identity per session, and every event a
//! client receives a gap-free continuation of exactly one stream.
//!
//! The server is a thin shell. Every decision (which stream a GET gets, whether an event may
//! be appended, when a connection counts as gone, when a session ends) is made by
//! `forkless-core` on a session snapshot and applied by compare-and-set through
//! [`forkless_store::transact`]. Generic over any [`forkless_store::Store`].
//!
//! ```no_run
//! # use forkless_server::{Handler, RequestContext, RpcError, Server, ServerConfig, ServerInfo};
//! # use serde_json::{Value, json};
//! struct Echo;
//! impl Handler for Echo {
//!     fn info(&self) -> ServerInfo {
//!         ServerInfo { name: "echo".into(), version: "1".into(), capabilities: json!({}), instructions: None }
//!     }
//!     async fn handle_request(&self, method: &str, params: Option<Value>, _ctx: RequestContext)
//!         -> Result<Value, RpcError> {
//!         match method {
//!             "echo" => Ok(params.unwrap_or(Value::Null)),
//!             other => Err(RpcError::method_not_found(other)),
//!         }
//!     }
//! }
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let server = Server::new(forkless_store::MemoryStore::new(), Echo, ServerConfig::default())?;
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
//! # drop(stop);
//! server.serve(listener, async { let _ = stopped.await; }).await?;
//! # Ok(()) }
//! ```
//!
//! ## Modules
//!
//! | module | owns |
//! |---|---|
//! | `handler` | the [`Handler`] trait and the handles a handler talks back through |
//! | `server` | routing, POST/GET/DELETE, the sweeper, graceful shutdown |
//! | `writer` | the one SSE writer per attachment (replay and live on one path) |
//! | `sse` | the SSE wire encoding |
//! | `jsonrpc` | classifying POST bodies |
//! | `error` | the crate's error enum and its (HTTP status, JSON-RPC code) mapping |
//! | `config` | [`ServerConfig`] and its validation |
//! | `metrics` | the Prometheus counters of `/metrics` |

mod config;
mod error;
mod handler;
mod jsonrpc;
mod metrics;
mod server;
mod sse;
mod writer;

pub use config::{AllowedOrigins, AnswerMode, ConfigError, PrincipalClosure, PrincipalFn, ServerConfig};
pub use error::{Error, INTERNAL_ERROR, INVALID_REQUEST, PARSE_ERROR, SESSION_ENDED, STREAM_CONFLICT};
pub use handler::{Handler, RequestContext, RpcError, SendError, ServerInfo, SessionHandle};
pub use server::{
    LAST_EVENT_ID, PROTOCOL_VERSION, SESSION_ID, STREAM_GRACE_MS, STREAM_ID, STREAM_RESUMED, Server,
};
