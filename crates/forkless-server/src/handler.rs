//! The application's side of the server: the [`Handler`] trait and what it says about itself
//! ([`ServerInfo`]); it answers with [`RpcError`]s ([`crate::jsonrpc`]).
//!
//! The handles a handler talks back through are in [`crate::context`]; the in-process session
//! state behind them is in [`crate::session`]. Nothing here touches HTTP or the store.

use std::future::Future;

use serde_json::Value;

use crate::context::{RequestContext, SessionHandle};
use crate::jsonrpc::RpcError;

/// What the server says about itself in the `initialize` result.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerInfo {
    /// `serverInfo.name`.
    pub name: String,
    /// `serverInfo.version`.
    pub version: String,
    /// `capabilities` (an object); the server adds `experimental["forkless/resume"]`.
    pub capabilities: Value,
    /// `instructions`, if any.
    pub instructions: Option<String>,
}

/// The application logic behind the MCP endpoint.
pub trait Handler: Send + Sync + 'static {
    /// serverInfo / capabilities / instructions for initialize results.
    fn info(&self) -> ServerInfo;

    /// A client request other than initialize and ping (which the server answers itself).
    /// Runs in its own task; not cancelled when the client disconnects (2025 revisions).
    fn handle_request(
        &self,
        method: &str,
        params: Option<Value>,
        ctx: RequestContext,
    ) -> impl Future<Output = Result<Value, RpcError>> + Send;

    /// A client notification other than notifications/initialized and notifications/cancelled.
    fn handle_notification(
        &self,
        method: &str,
        params: Option<Value>,
        session: SessionHandle,
    ) -> impl Future<Output = ()> + Send {
        let _ = (method, params, session);
        async {}
    }
}
