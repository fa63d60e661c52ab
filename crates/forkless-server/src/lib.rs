//! # forkless-server: the MCP Streamable HTTP server of forkless
//!
//! (Work in progress: the handler API below is stable; the HTTP server follows.)

mod handler;

pub use handler::{Handler, RequestContext, RpcError, SendError, ServerInfo, SessionHandle};
