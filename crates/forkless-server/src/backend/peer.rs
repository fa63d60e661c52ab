//! One backend connection, and how its messages meet its sessions' clients.
//!
//! Every request forwarded to the backend gets an id of this connection's own (a counter),
//! and every progress token one too (`fl-<n>`): client ids never reach the backend, so two
//! clients (or a client and forkless's own `initialize`) can never collide, and whatever
//! the backend sends back is matched to exactly one request. Messages from the backend are
//! handled in the order it sent them, one at a time: a notification is on its stream before
//! the response that follows it. Only a request to the client runs on its own, since it
//! waits for the client.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use forkless_core::{EndReason, SessionId};
use serde_json::{Map, Value, json};
use tokio::sync::{mpsc, oneshot};

use super::{BackendStats, ExitReason, FromBackend, Link, LinkFacts, Sharing};
use crate::context::{RequestContext, SessionHandle};
use crate::jsonrpc::RpcError;
use crate::session::{SendError, lock};

/// The error a request gets when the backend behind its session is gone.
pub(crate) fn backend_exited() -> RpcError {
    gone(EndReason::BackendExited)
}

/// The error a request gets when the backend behind its session is gone, for `reason`.
fn gone(reason: EndReason) -> RpcError {
    let message = match reason {
        EndReason::UpstreamSessionLost => "the MCP server behind this session no longer knows it",
        _ => "the MCP server behind this session exited",
    };
    RpcError::internal(message).with_data(json!({ "reason": reason.as_str() }))
}

/// JSON-RPC: the request was cancelled (as MCP clients expect for a withdrawn request).
const REQUEST_CANCELLED: i64 = -32800;

/// One backend connection.
pub(crate) struct Peer {
    to: mpsc::Sender<Value>,
    sharing: Sharing,
    next_id: AtomicU64,
    state: Mutex<State>,
    guard: Mutex<Option<Box<dyn Send + Sync>>>,
    exit: ExitReason,
    facts: LinkFacts,
    stats: Arc<BackendStats>,
}

impl std::fmt::Debug for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Peer").field("sharing", &self.sharing).finish_non_exhaustive()
    }
}

#[derive(Default)]
struct State {
    /// Requests sent to the backend, by the id they were sent with.
    waiting: HashMap<u64, Waiting>,
    /// Progress tokens of ours, to the request that carried the client's.
    progress: HashMap<String, Progress>,
    sessions: HashMap<SessionId, SessionHandle>,
    /// The backend's `initialize` result.
    initialized: Option<Value>,
    /// The backend's messages ended: nothing sent to it will be answered.
    exited: bool,
}

struct Waiting {
    tx: oneshot::Sender<Result<Value, RpcError>>,
    /// The client request it forwards (`None` for forkless's own).
    ctx: Option<RequestContext>,
}

struct Progress {
    ctx: RequestContext,
    token: Value,
}

impl Peer {
    /// Serve `link`: its messages are read and routed until the backend exits.
    pub(crate) fn start(link: Link, sharing: Sharing, stats: Arc<BackendStats>) -> Arc<Self> {
        let peer = Arc::new(Self {
            to: link.to_backend,
            sharing,
            next_id: AtomicU64::new(1),
            state: Mutex::default(),
            guard: Mutex::new(Some(link.guard)),
            exit: link.exit,
            facts: link.facts,
            stats,
        });
        tokio::spawn(peer.clone().read(link.from_backend));
        peer
    }

    pub(crate) fn attach(&self, session: SessionHandle) {
        lock(&self.state).sessions.insert(session.id(), session);
    }

    pub(crate) fn detach(&self, session: SessionId) {
        lock(&self.state).sessions.remove(&session);
    }

    pub(crate) fn set_initialized(&self, result: Value) {
        lock(&self.state).initialized = Some(result);
    }

    pub(crate) fn initialized(&self) -> Option<Value> {
        lock(&self.state).initialized.clone()
    }

    /// What the connector said it needs to reach this backend again.
    pub(crate) fn facts(&self) -> Option<Arc<str>> {
        self.facts.get()
    }

    pub(crate) fn has_exited(&self) -> bool {
        lock(&self.state).exited
    }

    /// Let go of the backend: the connector stops it.
    pub(crate) fn stop(&self) {
        drop(lock(&self.guard).take());
    }

    /// A request of forkless's own (`initialize`), answered by the backend.
    pub(crate) async fn call(&self, method: &str, params: Option<Value>) -> Result<Value, RpcError> {
        let (id, rx) = self.register(None)?;
        self.send(id, method, params).await?;
        rx.await.unwrap_or_else(|_| Err(gone(self.exit.get())))
    }

    /// A notification to the backend.
    pub(crate) async fn notify(&self, method: &str, params: Option<Value>) {
        let mut message = json!({ "jsonrpc": "2.0", "method": method });
        if let Some(params) = params {
            message["params"] = params;
        }
        let _ = self.to.send(message).await;
    }

    /// A client's notification: to a per-session backend as it came; a shared backend is
    /// not told what one session says.
    pub(crate) async fn forward_notification(&self, method: &str, params: Option<Value>) {
        match self.sharing {
            Sharing::PerSession => self.notify(method, params).await,
            Sharing::Shared => {
                tracing::debug!(method, "client notification not passed to the shared MCP server");
            }
        }
    }

    /// A client's request, under an id of ours, with a progress token of ours; resolved by
    /// the backend's response, or by the client's cancellation (the backend is told).
    pub(crate) async fn forward(
        &self,
        method: &str,
        mut params: Option<Value>,
        ctx: RequestContext,
    ) -> Result<Value, RpcError> {
        let cancel = ctx.cancellation().clone();
        let (id, rx) = self.register(Some(ctx.clone()))?;
        let token = ctx.progress_token().cloned().map(|client_token| {
            let ours = format!("fl-{id}");
            if let Some(meta) =
                params.as_mut().and_then(|p| p.get_mut("_meta")).and_then(Value::as_object_mut)
            {
                meta.insert("progressToken".into(), json!(ours));
            }
            lock(&self.state).progress.insert(ours.clone(), Progress { ctx, token: client_token });
            ours
        });
        let out = match self.send(id, method, params).await {
            Err(e) => Err(e),
            Ok(()) => tokio::select! {
                out = rx => out.unwrap_or_else(|_| Err(gone(self.exit.get()))),
                () = cancel.cancelled() => {
                    lock(&self.state).waiting.remove(&id);
                    let params = json!({ "requestId": id, "reason": "cancelled by the client" });
                    self.notify("notifications/cancelled", Some(params)).await;
                    Err(RpcError::new(REQUEST_CANCELLED, "request cancelled"))
                }
            },
        };
        if let Some(token) = token {
            lock(&self.state).progress.remove(&token);
        }
        out
    }

    fn register(
        &self,
        ctx: Option<RequestContext>,
    ) -> Result<(u64, oneshot::Receiver<Result<Value, RpcError>>), RpcError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        let mut state = lock(&self.state);
        // Checked under the lock the reader drains with: nothing registers after the drain.
        if state.exited {
            return Err(gone(self.exit.get()));
        }
        state.waiting.insert(id, Waiting { tx, ctx });
        Ok((id, rx))
    }

    async fn send(&self, id: u64, method: &str, params: Option<Value>) -> Result<(), RpcError> {
        let mut message = json!({ "jsonrpc": "2.0", "id": id, "method": method });
        if let Some(params) = params {
            message["params"] = params;
        }
        if self.to.send(message).await.is_err() {
            lock(&self.state).waiting.remove(&id);
            return Err(gone(self.exit.get()));
        }
        Ok(())
    }

    /// Route the backend's messages until it exits, then end what depended on it.
    async fn read(self: Arc<Self>, mut from: mpsc::Receiver<FromBackend>) {
        while let Some(message) = from.recv().await {
            let (message, related) = match message {
                FromBackend::Message(message) => (message, None),
                FromBackend::Related { message, request } => (message, Some(request)),
            };
            match message {
                Value::Object(message) => self.route(message, related).await,
                other => {
                    BackendStats::count(&self.stats.malformed);
                    tracing::warn!(message = %other, "MCP server sent a message that is not a JSON-RPC object");
                }
            }
        }
        self.exited();
    }

    /// The client request whose forwarded copy the backend knows by `id`, if still waiting.
    fn waiting_ctx(&self, id: Option<&Value>) -> Option<RequestContext> {
        let id = id?.as_u64()?;
        lock(&self.state).waiting.get(&id).and_then(|w| w.ctx.clone())
    }

    async fn route(self: &Arc<Self>, mut message: Map<String, Value>, related: Option<Value>) {
        let method = message.remove("method");
        let id = message.remove("id");
        let params = message.remove("params");
        let related = self.waiting_ctx(related.as_ref());
        match (method, id) {
            (Some(Value::String(method)), Some(id)) => self.backend_request(id, method, params, related),
            (Some(Value::String(method)), None) => self.backend_notification(&method, params, related).await,
            (None, Some(id)) => {
                let outcome = match (message.remove("result"), message.remove("error")) {
                    (Some(result), _) => Ok(result),
                    (None, Some(error)) => Err(rpc_error(&error)),
                    (None, None) => {
                        Err(RpcError::internal("the MCP server answered with neither result nor error"))
                    }
                };
                let waiting = id.as_u64().and_then(|id| lock(&self.state).waiting.remove(&id));
                match waiting {
                    Some(w) => {
                        let _ = w.tx.send(outcome);
                    }
                    None => tracing::debug!(%id, "response from the MCP server for no request waiting"),
                }
            }
            _ => {
                BackendStats::count(&self.stats.malformed);
                tracing::warn!(
                    "MCP server sent a message that is neither request, notification nor response"
                );
            }
        }
    }

    async fn backend_notification(
        &self,
        method: &str,
        mut params: Option<Value>,
        related: Option<RequestContext>,
    ) {
        let ours = params.as_ref().and_then(|p| p.get("progressToken")).and_then(Value::as_str);
        let route =
            ours.and_then(|t| lock(&self.state).progress.get(t).map(|p| (p.ctx.clone(), p.token.clone())));
        if let Some((ctx, token)) = route {
            if let Some(p) = params.as_mut().and_then(Value::as_object_mut) {
                p.insert("progressToken".into(), token);
            }
            if let Err(e) = ctx.notify(method, params.unwrap_or(Value::Null)).await {
                tracing::debug!(method, error = %e, "progress not delivered");
            }
            return;
        }
        if let Some(ctx) = related {
            if let Err(e) = ctx.notify(method, params.unwrap_or(json!({}))).await {
                tracing::debug!(method, error = %e, "notification not delivered on its request's stream");
            }
            return;
        }
        match self.only_session() {
            Some(session) => {
                if let Err(e) = session.notify(method, params.unwrap_or(json!({}))).await {
                    tracing::debug!(method, error = %e, "notification not delivered");
                }
            }
            None => {
                BackendStats::count(&self.stats.unattributed);
                tracing::info!(
                    method,
                    "notification from the shared MCP server names no session's request: dropped"
                );
            }
        }
    }

    /// The session a per-session backend serves.
    fn only_session(&self) -> Option<SessionHandle> {
        if self.sharing == Sharing::Shared {
            return None;
        }
        lock(&self.state).sessions.values().next().cloned()
    }

    /// A request from the backend to the client: on the stream of the one client request in
    /// flight when there is exactly one (it caused it), else on the standalone stream; the
    /// client's answer goes back under the backend's id. A shared backend's are refused.
    fn backend_request(
        self: &Arc<Self>,
        id: Value,
        method: String,
        params: Option<Value>,
        related: Option<RequestContext>,
    ) {
        let Some(session) = self.only_session() else {
            BackendStats::count(&self.stats.refused_requests);
            tracing::info!(%method, "request from the shared MCP server to a client refused");
            let error = RpcError::method_not_found(&method);
            let reply = json!({ "jsonrpc": "2.0", "id": id, "error": error.to_json() });
            let to = self.to.clone();
            tokio::spawn(async move { to.send(reply).await });
            return;
        };
        let cause = related.or_else(|| {
            let state = lock(&self.state);
            let mut in_flight = state.waiting.values().filter_map(|w| w.ctx.as_ref());
            match (in_flight.next(), in_flight.next()) {
                (Some(only), None) => Some(only.clone()),
                _ => None,
            }
        });
        let to = self.to.clone();
        tokio::spawn(async move {
            let params = params.unwrap_or(json!({}));
            let answer = match &cause {
                Some(ctx) => ctx.request(&method, params).await,
                None => session.request(&method, params).await,
            };
            let reply = match answer {
                Ok(result) => json!({ "jsonrpc": "2.0", "id": id, "result": result }),
                Err(SendError::Rejected(e)) => json!({ "jsonrpc": "2.0", "id": id, "error": e.to_json() }),
                Err(e) => {
                    let error = RpcError::internal(format!("not answered by the client: {e}"));
                    json!({ "jsonrpc": "2.0", "id": id, "error": error.to_json() })
                }
            };
            let _ = to.send(reply).await;
        });
    }

    /// The backend is gone: every request waiting gets the error (with its id, from the
    /// server), then every session it served ends once those answers are on their streams.
    fn exited(&self) {
        let reason = self.exit.get();
        let (waiting, sessions) = {
            let mut state = lock(&self.state);
            state.exited = true;
            state.progress.clear();
            let waiting: Vec<_> = state.waiting.drain().map(|(_, w)| w).collect();
            (waiting, state.sessions.drain().map(|(_, s)| s).collect::<Vec<_>>())
        };
        if !sessions.is_empty() {
            BackendStats::count(&self.stats.exited);
            tracing::warn!(
                sessions = sessions.len(),
                requests = waiting.len(),
                reason = reason.as_str(),
                "MCP server gone; its sessions end"
            );
        }
        // Refused first, so that a request sent after a client saw one of these errors is
        // refused too (404 with the reason), not forwarded to the gone backend.
        for session in &sessions {
            session.refuse_new(reason);
        }
        for w in waiting {
            let _ = w.tx.send(Err(gone(reason)));
        }
        for session in sessions {
            tokio::spawn(async move {
                if let Err(e) = session.end(reason).await {
                    tracing::warn!(session = %session.id(), error = %e, "could not end the session");
                }
            });
        }
    }
}

/// A JSON-RPC error object as the backend sent it.
fn rpc_error(error: &Value) -> RpcError {
    let code = error.get("code").and_then(Value::as_i64).unwrap_or(RpcError::INTERNAL_ERROR);
    let message = error.get("message").and_then(Value::as_str).unwrap_or("error");
    let out = RpcError::new(code, message);
    match error.get("data") {
        Some(data) => out.with_data(data.clone()),
        None => out,
    }
}
