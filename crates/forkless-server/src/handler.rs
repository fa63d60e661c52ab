//! The application's side of the server: the [`Handler`] trait and what it says about itself
//! ([`ServerInfo`]); it answers with [`RpcError`]s ([`crate::jsonrpc`]).
//!
//! The handles a handler talks back through are in [`crate::context`]; the in-process session
//! state behind them is in [`crate::session`]. Nothing here touches HTTP or the store.

use std::future::Future;

use forkless_core::{EndReason, SessionId};
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

/// Whether a handler's sessions can be served by a process other than the one that created
/// them (after a restart, or on another node).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Restorable {
    /// Yes: everything a session needs is in its record (what the client said at initialize)
    /// or in the handler's own shared state. The demo server is such a handler.
    #[default]
    Yes,
    /// No: a session's state lives only in the process that created it (a stdio child
    /// behind a gateway). Elsewhere the session ends with reason `owner_lost` and its next
    /// request gets 404; it is never re-created silently under the old id.
    No,
}

impl Restorable {
    /// What a node taking over a lost node's sessions does with them: restores them (a
    /// restorable handler carries them on) or ends them `owner_lost`.
    pub const fn takeover(self) -> forkless_store::Takeover {
        match self {
            Self::Yes => forkless_store::Takeover::Restore,
            Self::No => forkless_store::Takeover::End,
        }
    }
}

/// Which MCP revisions a handler serves.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Revisions {
    /// Every revision the server speaks: the session revisions and stateless 2026-07-28.
    #[default]
    All,
    /// The session revisions only (2025-03-26, 2025-06-18, 2025-11-25): a handler backed by an
    /// MCP server that needs a session (a stdio child). A 2026-07-28 request is refused with
    /// 400 `-32022`, naming the revisions served, so a client falls back to `initialize`.
    SessionsOnly,
}

/// Whether a handler runs requests as tasks (the tasks extension of 2026-07-28).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TaskSupport {
    /// No: `tasks/…` methods are unknown (`-32601`) and the extension is not advertised.
    #[default]
    Unsupported,
    /// Yes: `server/discover` advertises `io.modelcontextprotocol/tasks`, the server answers
    /// `tasks/get`, `tasks/update` and `tasks/cancel`, and a request that declared the
    /// extension gives its handler a [`crate::tasks::TaskStarter`].
    Offered,
}

/// The application logic behind the MCP endpoint.
///
/// # Concurrency
///
/// One handler serves every session. [`Self::handle_request`] runs concurrently, for any
/// number of requests of one session or of many, each in its own task; a request keeps
/// running when its client disconnects (2025 revisions) and is told to stop through
/// [`RequestContext::cancellation`] (a `notifications/cancelled`, the session's end, server
/// shutdown, or in 2026-07-28 the client closing the response). Dropping the future a handler
/// returns is not how a request is cancelled: the server never drops one before it completes,
/// so a handler needs no cancel safety beyond honouring the token. [`Self::handle_notification`]
/// runs in a task of its own, concurrently with requests. [`Self::initialize`] runs once per
/// session, before any request of it; [`Self::session_ended`] at most once, after which no new
/// request of that session starts (those running are cancelled).
pub trait Handler: Send + Sync + 'static {
    /// serverInfo / capabilities / instructions for initialize results.
    fn info(&self) -> ServerInfo;

    /// Whether this handler's sessions survive the process that created them. Default
    /// [`Restorable::Yes`].
    fn restorable(&self) -> Restorable {
        Restorable::Yes
    }

    /// Which revisions this handler serves. Default [`Revisions::All`].
    fn revisions(&self) -> Revisions {
        Revisions::All
    }

    /// Whether this handler runs requests as tasks. Default [`TaskSupport::Unsupported`].
    fn task_support(&self) -> TaskSupport {
        TaskSupport::Unsupported
    }

    /// Answer `initialize` for a new session (`params` as the client sent them; `session` is
    /// already created). The default answers with [`Self::info`]; a handler backed by another
    /// MCP server (a gateway) forwards it. The server adds the negotiated `protocolVersion`
    /// and `capabilities.experimental["forkless/resume"]`. An error refuses the session: the
    /// client gets it as the JSON-RPC error of its `initialize`, and the session ends.
    fn initialize(
        &self,
        params: &Value,
        session: SessionHandle,
    ) -> impl Future<Output = Result<ServerInfo, RpcError>> + Send {
        let _ = (params, session);
        let info = self.info();
        async move { Ok(info) }
    }

    /// The session ended in this process, and why (deleted, a refused resume, idle, a failure):
    /// release what the handler holds for it. Called at most once per session, in a task of
    /// its own; the default does nothing.
    fn session_ended(&self, session: SessionId, reason: EndReason) -> impl Future<Output = ()> + Send {
        let _ = (session, reason);
        async {}
    }

    /// A client request other than initialize and ping (which the server answers itself).
    /// Runs in its own task; not cancelled when the client disconnects (2025 revisions).
    fn handle_request(
        &self,
        method: &str,
        params: Option<Value>,
        ctx: RequestContext,
    ) -> impl Future<Output = Result<Value, RpcError>> + Send;

    /// Run a restartable task's work on its `inputs` (what the request that started it with
    /// [`crate::tasks::TaskStarter::start_restartable`] kept): the first time, and again, under
    /// a new epoch, whenever the process running it was lost (a crash, a restart, a node
    /// loss). It must be safe to run again; input the client already gave comes back from
    /// [`crate::tasks::TaskContext::input`] without asking twice. The default refuses: a
    /// handler that starts no restartable task needs none.
    fn run_task(
        &self,
        inputs: Value,
        task: crate::tasks::TaskContext,
    ) -> impl Future<Output = Result<Value, RpcError>> + Send {
        let _ = (inputs, task);
        async { Err(RpcError::internal("this handler runs no restartable task")) }
    }

    /// The `inputSchema` of tool `name`, if the handler wants the server to check the
    /// `Mcp-Param-{Name}` headers of its calls (2026-07-28: every property annotated with
    /// `x-mcp-header` must arrive as that header, equal to the argument). Default `None`: no
    /// such check.
    fn tool_input_schema(&self, name: &str) -> Option<Value> {
        let _ = name;
        None
    }

    /// Figures of the handler's own for `/metrics` (a gateway's upstream counts). Default
    /// none.
    fn metrics(&self) -> Vec<forkless_store::StoreMetric> {
        Vec::new()
    }

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
