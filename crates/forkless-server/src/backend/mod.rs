//! Sessions backed by another MCP server that forkless talks to as a stream of JSON-RPC
//! messages (PROTOCOL section 11): a stdio child behind `forkless gateway`, or an in-process
//! service such as an `rmcp` server.
//!
//! [`MessageBackend`] is a [`Handler`] over a [`Connector`], which starts backends and hands
//! back a [`Link`] (messages in, messages out). This module owns how the two sides' messages
//! meet, in `peer`: ids rewritten so no client id can collide with the backend's or with
//! another session's, responses to their request's stream, progress to its request's
//! stream, other notifications to the standalone stream, the backend's requests (sampling,
//! elicitation, roots) to the client and their answers back, and a backend that exits
//! ending its sessions (reason `backend_exited`, requests in flight answered with errors
//! carrying their ids, never restarted under the same session). It does not own processes,
//! pipes or framing: a connector does.

mod config;
mod peer;
mod rounds;
mod stateless;

pub use config::{BackendConfig, Sharing};

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use forkless_core::{EndReason, SessionId};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::context::{RequestContext, SessionHandle};
use crate::handler::{Handler, Restorable, Revisions, ServerInfo};
use crate::jsonrpc::RpcError;
use crate::session::lock;

use peer::Peer;

/// A connection to one backend MCP server.
pub struct Link {
    /// Messages to the backend, in order.
    pub to_backend: mpsc::Sender<Value>,
    /// Messages from the backend, in order; ends when the backend exits.
    pub from_backend: mpsc::Receiver<FromBackend>,
    /// Held while the link serves a session and dropped when it no longer does: a connector
    /// stops its backend then (a stdio child's process group is terminated).
    pub guard: Box<dyn Send + Sync>,
    /// Why its messages ended, when the connector knows more than "the backend exited"
    /// (an HTTP upstream that forgot the session). Default: [`EndReason::BackendExited`].
    pub exit: ExitReason,
    /// What the backend needs to reach this session again from any node, once the
    /// connector knows it (after `initialize`); kept in the session's record.
    pub facts: LinkFacts,
}

/// What a connector says it needs to reach a session's backend again
/// ([`Connector::reconnect`]): set by the connector, read once the backend is initialized.
#[derive(Clone, Debug, Default)]
pub struct LinkFacts(Arc<Mutex<Option<Arc<str>>>>);

impl LinkFacts {
    /// Say it (replacing what was said).
    pub fn set(&self, facts: impl Into<Arc<str>>) {
        *lock(&self.0) = Some(facts.into());
    }

    /// What was said, if anything.
    pub fn get(&self) -> Option<Arc<str>> {
        lock(&self.0).clone()
    }
}

/// A message from a backend, and, when the connector knows it, the request it belongs to.
#[derive(Clone, Debug, PartialEq)]
pub enum FromBackend {
    /// A message on its own: a notification goes to its progress token's request, else to
    /// the standalone stream; a request to the one client request in flight, else there.
    Message(Value),
    /// A message that came with the answer to the request sent with id `request` (an HTTP
    /// upstream's notification or request on that request's SSE stream): it goes on that
    /// request's stream.
    Related {
        /// The message.
        message: Value,
        /// The id the request was sent to the backend with.
        request: Value,
    },
}

impl From<Value> for FromBackend {
    fn from(message: Value) -> Self {
        Self::Message(message)
    }
}

/// Why a backend's messages ended, as its connector says it (once) before they end; its
/// sessions end with it, and its requests in flight get it as their error's reason.
#[derive(Clone, Debug, Default)]
pub struct ExitReason(Arc<std::sync::OnceLock<EndReason>>);

impl ExitReason {
    /// Say why (the first reason given is kept).
    pub fn set(&self, reason: EndReason) {
        let _ = self.0.set(reason);
    }

    /// The reason given, or [`EndReason::BackendExited`].
    pub fn get(&self) -> EndReason {
        self.0.get().copied().unwrap_or(EndReason::BackendExited)
    }
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link").finish_non_exhaustive()
    }
}

/// Starts backends.
pub trait Connector: Send + Sync + 'static {
    /// Start a backend: for `session` (one per session), or the one every session shares
    /// (`None`). An error refuses the `initialize` that asked.
    fn connect(&self, session: Option<SessionId>) -> impl Future<Output = Result<Link, RpcError>> + Send;

    /// Reach again, for `session`, the backend [`LinkFacts`] describe (a session restored on
    /// another node, or after a restart): no `initialize`, the backend knows the session.
    /// Default: refused (a stdio child died with its process).
    fn reconnect(
        &self,
        session: SessionId,
        facts: Arc<str>,
    ) -> impl Future<Output = Result<Link, RpcError>> + Send {
        let _ = (session, facts);
        async { Err(RpcError::internal("this backend cannot be reached again")) }
    }

    /// Figures of the connector's own for `/metrics`. Default none.
    fn metrics(&self) -> Vec<forkless_store::StoreMetric> {
        Vec::new()
    }
}

/// What a [`MessageBackend`] counted.
#[derive(Debug, Default)]
pub struct BackendStats {
    /// Backends started.
    pub started: AtomicU64,
    /// Backends that exited while serving a session.
    pub exited: AtomicU64,
    /// Notifications from a shared backend that named no session's request (dropped).
    pub unattributed: AtomicU64,
    /// Requests from a shared backend to a client, refused with `-32601`.
    pub refused_requests: AtomicU64,
    /// Messages from a backend that were not JSON-RPC (skipped).
    pub malformed: AtomicU64,
}

impl BackendStats {
    pub(crate) fn count(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// A [`Handler`] whose sessions are served by backend MCP servers.
#[derive(Debug)]
pub struct MessageBackend<C> {
    connector: Arc<C>,
    cfg: BackendConfig,
    peers: Mutex<HashMap<SessionId, Arc<Peer>>>,
    /// [`Sharing::Shared`]: the one backend, once started.
    shared: tokio::sync::Mutex<Option<Arc<Peer>>>,
    /// Held while a session is restored, so that two requests do not start two backends.
    restoring: tokio::sync::Mutex<()>,
    stats: Arc<BackendStats>,
    /// What the backend said of itself at its first `initialize` (for `server/discover`).
    discovered: std::sync::OnceLock<ServerInfo>,
    /// 2026-07-28 calls waiting for their client's input, between rounds.
    parked: rounds::Parked,
}

impl<C: Connector> MessageBackend<C> {
    /// A handler starting backends with `connector`.
    pub fn new(connector: C, cfg: BackendConfig) -> Self {
        Self {
            connector: Arc::new(connector),
            cfg,
            peers: Mutex::default(),
            shared: tokio::sync::Mutex::new(None),
            restoring: tokio::sync::Mutex::new(()),
            stats: Arc::default(),
            discovered: std::sync::OnceLock::new(),
            parked: rounds::Parked::default(),
        }
    }

    /// What it counted.
    pub fn stats(&self) -> &BackendStats {
        &self.stats
    }

    fn peer(&self, session: SessionId) -> Option<Arc<Peer>> {
        lock(&self.peers).get(&session).cloned()
    }

    async fn start(&self, session: Option<SessionId>) -> Result<Arc<Peer>, RpcError> {
        let link = self.connector.connect(session).await?;
        BackendStats::count(&self.stats.started);
        Ok(Peer::start(link, self.cfg.sharing, self.stats.clone()))
    }

    /// The shared backend, started and initialized by forkless on first use (again after it
    /// exited: sessions that used the old one have ended).
    async fn shared_peer(&self, params: &Value) -> Result<Arc<Peer>, RpcError> {
        let mut shared = self.shared.lock().await;
        if let Some(peer) = shared.as_ref().filter(|p| !p.has_exited()) {
            return Ok(peer.clone());
        }
        let peer = self.start(None).await?;
        let own = json!({
            "protocolVersion": params.get("protocolVersion").cloned().unwrap_or(json!("2025-06-18")),
            "capabilities": {},
            "clientInfo": { "name": "forkless-gateway", "version": env!("CARGO_PKG_VERSION") },
        });
        let result = self.handshake(&peer, own).await.inspect_err(|_| peer.stop())?;
        peer.set_initialized(result);
        *shared = Some(peer.clone());
        Ok(peer)
    }

    /// A new backend for a session restored here (its own died with another process),
    /// initialized with what the session's client said at `initialize`.
    async fn restore(&self, session: &SessionHandle) -> Result<Arc<Peer>, RpcError> {
        let _one_at_a_time = self.restoring.lock().await;
        if let Some(peer) = self.peer(session.id()) {
            return Ok(peer);
        }
        if let Some(facts) = session.backend_facts().filter(|_| self.cfg.sharing == Sharing::PerSession) {
            // The backend still has the session (an HTTP upstream's): reach it, never
            // initialize it anew under the client's session.
            let link = self.connector.reconnect(session.id(), facts).await?;
            BackendStats::count(&self.stats.started);
            let peer = Peer::start(link, self.cfg.sharing, self.stats.clone());
            peer.attach(session.clone());
            lock(&self.peers).insert(session.id(), peer.clone());
            tracing::info!(session = %session.id(), "session restored: its backend reached again");
            return Ok(peer);
        }
        let peer = self.initialized_for(session, session.revision().as_str()).await?;
        peer.attach(session.clone());
        lock(&self.peers).insert(session.id(), peer.clone());
        tracing::info!(session = %session.id(), "session restored on a new backend");
        Ok(peer)
    }

    /// A backend for `session`, initialized in `version` with what its client said of itself
    /// (the shared one in [`Sharing::Shared`]).
    async fn initialized_for(&self, session: &SessionHandle, version: &str) -> Result<Arc<Peer>, RpcError> {
        let params = json!({
            "protocolVersion": version,
            "capabilities": session.client_capabilities(),
            "clientInfo": session.client_info(),
        });
        match self.cfg.sharing {
            Sharing::Shared => self.shared_peer(&params).await,
            Sharing::PerSession => {
                let peer = self.start(Some(session.id())).await?;
                let result = self.handshake(&peer, params).await.inspect_err(|_| peer.stop())?;
                peer.set_initialized(result);
                Ok(peer)
            }
        }
    }

    /// `initialize` to the backend, then `notifications/initialized`; its result. On an error
    /// the caller stops the backend.
    async fn handshake(&self, peer: &Peer, params: Value) -> Result<Value, RpcError> {
        let asked = peer.call("initialize", Some(params));
        let result = match tokio::time::timeout(self.cfg.initialize_timeout, asked).await {
            Ok(result) => result,
            Err(_) => Err(RpcError::internal(format!(
                "the MCP server did not answer initialize within {:?}",
                self.cfg.initialize_timeout
            ))),
        };
        if result.is_ok() {
            peer.notify("notifications/initialized", None).await;
        }
        result
    }
}

/// What the backend said of itself, as the server answers `initialize` with it. The
/// backend's `protocolVersion` is kept in `capabilities.experimental["forkless/backend"]`
/// when it differs from the one the client asked for.
fn server_info(result: &Value, asked: Option<&Value>) -> ServerInfo {
    let text = |v: Option<&Value>, default: &str| v.and_then(Value::as_str).unwrap_or(default).to_owned();
    let mut capabilities = result.get("capabilities").cloned().filter(Value::is_object).unwrap_or(json!({}));
    let spoken = result.get("protocolVersion");
    if spoken.is_some() && spoken != asked {
        let note = json!({ "protocolVersion": spoken });
        match capabilities.get_mut("experimental").and_then(Value::as_object_mut) {
            Some(experimental) => {
                experimental.insert("forkless/backend".into(), note);
            }
            None => capabilities["experimental"] = json!({ "forkless/backend": note }),
        }
    }
    ServerInfo {
        name: text(result.pointer("/serverInfo/name"), "mcp-server"),
        version: text(result.pointer("/serverInfo/version"), "0"),
        capabilities,
        instructions: result.get("instructions").and_then(Value::as_str).map(str::to_owned),
    }
}

impl<C: Connector> Handler for MessageBackend<C> {
    fn info(&self) -> ServerInfo {
        self.discovered.get().cloned().unwrap_or_else(|| ServerInfo {
            name: "forkless-gateway".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            capabilities: json!({}),
            instructions: None,
        })
    }

    fn restorable(&self) -> Restorable {
        self.cfg.restorable
    }

    fn metrics(&self) -> Vec<forkless_store::StoreMetric> {
        self.connector.metrics()
    }

    fn revisions(&self) -> Revisions {
        self.cfg.revisions
    }

    async fn initialize(&self, params: &Value, session: SessionHandle) -> Result<ServerInfo, RpcError> {
        let asked = params.get("protocolVersion");
        let peer = match self.cfg.sharing {
            Sharing::PerSession => {
                let peer = self.start(Some(session.id())).await?;
                // Attached first, so that a backend exiting right after its answer still ends
                // the session; detached before it is stopped if it refuses.
                peer.attach(session.clone());
                match self.handshake(&peer, params.clone()).await {
                    Ok(result) => {
                        peer.set_initialized(result);
                        if let Some(facts) = peer.facts()
                            && let Err(e) = session.remember_backend(facts).await
                        {
                            tracing::warn!(session = %session.id(), error = %e, "backend facts not kept: the session cannot move to another node");
                        }
                    }
                    Err(e) => {
                        peer.detach(session.id());
                        peer.stop();
                        return Err(e);
                    }
                }
                peer
            }
            Sharing::Shared => {
                let peer = self.shared_peer(params).await?;
                peer.attach(session.clone());
                peer
            }
        };
        let info = server_info(&peer.initialized().unwrap_or(Value::Null), asked);
        let _ = self.discovered.set(info.clone());
        lock(&self.peers).insert(session.id(), peer);
        Ok(info)
    }

    async fn session_ended(&self, session: SessionId, reason: EndReason) {
        let Some(peer) = lock(&self.peers).remove(&session) else { return };
        peer.detach(session);
        if self.cfg.sharing == Sharing::PerSession {
            tracing::info!(%session, reason = reason.as_str(), "session ended: stopping its MCP server");
            peer.stop();
        }
    }

    async fn handle_request(
        &self,
        method: &str,
        params: Option<Value>,
        ctx: RequestContext,
    ) -> Result<Value, RpcError> {
        if ctx.session().revision().is_stateless() {
            return self.answer_statelessly(method, params, ctx).await;
        }
        let peer = match self.peer(ctx.session().id()) {
            Some(peer) => peer,
            None if self.cfg.restorable == Restorable::Yes => self.restore(ctx.session()).await?,
            None => return Err(peer::backend_exited()),
        };
        peer.forward(method, params, ctx).await
    }

    async fn handle_notification(&self, method: &str, params: Option<Value>, session: SessionHandle) {
        if let Some(peer) = self.peer(session.id()) {
            peer.forward_notification(method, params).await;
        }
    }
}
