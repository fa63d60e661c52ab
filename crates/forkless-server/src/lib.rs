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
//! ## State a node holds, and what many nodes need
//!
//! Correctness leans on four things that are not in the store. Each has a named interface
//! and a single-process implementation today; a multi-node deployment replaces them:
//!
//! | what | interface | single-process implementation | a multi-node one must promise |
//! |---|---|---|---|
//! | who serves an attached stream; "the displaced writer has stopped" | [`node::Attachments`] | [`node::LocalAttachments`]: a watch per stream of the epoch whose writer runs here | a resume on any node waits until the old holder released or its node's lease lapsed, and a node that cannot renew its lease stops its writers first |
//! | client responses and cancellations | [`node::Inbox`] | the live-session registry: the owner is this process | a message reaches the session's owner node, once |
//! | which sessions a sweep visits | [`forkless_store::Store::due`] | the store engine's wake index | exactly the due sessions, from an index (not a scan) |
//! | liveness | [`forkless_core::Liveness::PerNode`] with the node's stall watch | progress reported to the lease in memory; no store write while idle | attachments name their node; the node's lease, renewed once per interval per node, bounds them |
//!
//! A handler says whether its sessions may be served by another process
//! ([`Handler::restorable`]); one whose sessions cannot be ends them with reason
//! `owner_lost` wherever they turn up, rather than re-creating them under the old id.
//!
//! ## Modules
//!
//! | module | owns |
//! |---|---|
//! | `server` | the router and [`Server`]: endpoints, the sweeper task, graceful shutdown |
//! | [`auth`] | OAuth resource server: bearer JWTs, the 401/403 challenges, RFC 9728 metadata |
//! | `listener` | accepting connections: header timeout, `max_connections` (idle ones make room), accept errors, the open-file limit |
//! | `headers` | the MCP header names |
//! | `request` | header checks, the session a request names, reading a body |
//! | `post` | POST on a session: initialize, requests, notifications, responses |
//! | `stateless` | POST in 2026-07-28 (no session) |
//! | `get` | GET (the resume decision, applied) and DELETE |
//! | `answer` | the answer path's one owner: running each call (detached from its connection) and putting its answer on its stream, or in a JSON body |
//! | `respond` | the answers as HTTP responses: JSON, a finished SSE body, a writer's stream |
//! | `writer` | the one SSE writer per attachment (replay and live on one path) |
//! | `common` | state shared by endpoints, writers and the sweeper |
//! | `clock` | the wall clock as the core sees it (a leaf) |
//! | `outbox` | the store operations the answer path and handles need, for one concrete store |
//! | `sweeper` | time-driven transitions for the sessions due, tombstones, the stall watch, sessions ended elsewhere |
//! | [`node`] | the node-local state behind interfaces: [`node::Attachments`] (leases, "the displaced writer stopped", liveness per node), [`node::Inbox`] |
//! | `handler` | the [`Handler`] trait, [`RpcError`], [`ServerInfo`], [`SendError`] |
//! | `context` | the handles a handler talks back through: [`SessionHandle`], [`RequestContext`] |
//! | [`backend`] | a [`Handler`] whose sessions are served by another MCP server spoken to as JSON-RPC messages (a stdio child, an in-process `rmcp` service): ids and tokens rewritten, messages routed to their streams, a backend that exits ending its sessions |
//! | `session` | the in-process state of a session behind those handles |
//! | `sse` | the SSE wire encoding, and every SSE response's head |
//! | `jsonrpc` | classifying POST bodies |
//! | `error` | the crate's error enum and its (HTTP status, JSON-RPC code) mapping |
//! | `config` | [`ServerConfig`] and its validation |
//! | `metrics` | the Prometheus counters of `/metrics` |

mod answer;
pub mod auth;
pub mod backend;
mod clock;
mod common;
mod config;
mod context;
mod endpoint;
mod error;
#[doc(hidden)]
pub mod fuzzing;
mod get;
mod handler;
mod headers;
pub mod input;
mod jsonrpc;
mod listener;
mod listeners;
mod metrics;
pub mod node;
mod outbox;
mod post;
mod quota;
mod request;
pub mod request_state;
mod respond;
mod server;
mod session;
mod sse;
mod stateless;
mod stopped;
mod sweeper;
pub mod tasks;
mod tls;
mod writer;
mod x509;

pub use config::{
    AllowedOrigins, AnswerMode, ConfigError, PrincipalClosure, PrincipalFn, ServerConfig, Transport,
};
pub use context::{RequestContext, SessionHandle};
pub use error::{
    Error, HEADER_MISMATCH, INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY, OwnerUnavailable, PARSE_ERROR, REQUEST_CANCELLED, SESSION_ENDED,
    STREAM_CONFLICT, UNSUPPORTED_PROTOCOL_VERSION,
};
pub use handler::{Handler, Restorable, Revisions, ServerInfo, TaskSupport};
pub use headers::{LAST_EVENT_ID, PROTOCOL_VERSION, SESSION_ID, STREAM_GRACE_MS, STREAM_ID, STREAM_RESUMED};
pub use jsonrpc::RpcError;
pub use listener::raise_open_file_limit;
pub use node::Node;
pub use quota::{AtCapacity, Quotas};
pub use server::Server;
pub use session::SendError;
pub use tls::TlsIdentity;
