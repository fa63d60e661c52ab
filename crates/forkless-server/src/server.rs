//! The HTTP shell: the MCP endpoint (POST, GET, DELETE), `/metrics`, `/healthz`, the sweeper
//! and graceful shutdown.
//!
//! This module owns turning HTTP requests into core transitions (always through
//! [`forkless_store::transact`]) and core outcomes into HTTP answers. It decides nothing about
//! streams itself: which stream a GET gets, whether an append is allowed, when a session ends
//! by time are all the core's decisions. It keeps only in-process state that cannot live in
//! the store: handler tasks, pending server-to-client requests and the registry of running
//! writers.
//!
//! A POST answered over SSE opens its request stream only when it has to: when the handler
//! sends something on it, or is still running after its first poll. A handler that answers at
//! once is stored with one append that opens, fills and releases the stream
//! ([`forkless_core::AppendTarget::Answer`]), and the answer leaves as a finished body.

use std::collections::{HashMap, HashSet};
use std::future::{Future, IntoFuture as _};
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use bytes::Bytes;
use forkless_core::{
    AppendTarget, ClientFacts, EndReason, Epoch, EventId, GetOutcome, GetRequest, Grant, IdHashBuilder,
    NewSession, OsEntropy, Revision, SessionId, SessionRecord, SessionState, StreamId, Timestamp,
};
use forkless_store::{Store, transact};
use futures::FutureExt as _;
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use http_body_util::BodyExt as _;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::config::{AnswerMode, ConfigError, ServerConfig};
use crate::error::Error;
use crate::handler::{
    BoxFuture, Handler, Outbox, Outlet, RequestContext, RequestStream, RpcError, SendError, SessionHandle,
    SessionShared,
};
use crate::jsonrpc::{self, Message};
use crate::metrics::Metrics;
use crate::writer::{self, Preamble, WriterOptions};

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

/// The wall clock as the core sees it.
pub(crate) fn now() -> Timestamp {
    let ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis());
    Timestamp::from_millis(u64::try_from(ms).unwrap_or(u64::MAX))
}

/// State shared by the endpoint, the writers and the sweeper.
pub(crate) struct Common<S> {
    pub(crate) store: Arc<S>,
    pub(crate) cfg: ServerConfig,
    pub(crate) metrics: Arc<Metrics>,
    /// Cancelled when graceful shutdown starts: every SSE body ends, every handler is told.
    pub(crate) shutdown: CancellationToken,
    sessions: Mutex<HashMap<SessionId, Arc<SessionShared>, IdHashBuilder>>,
    /// The running writer of each stream in this process (its epoch), so that a resume waits
    /// for the displaced writer to stop.
    writers: Mutex<WriterRegistry>,
    outbox: Arc<dyn Outbox>,
    /// `Mcp-Stream-Grace-Ms`, the same on every SSE answer.
    grace_ms: HeaderValue,
}

/// The epoch of the writer currently running for each stream in this process.
pub(crate) type WriterRegistry = HashMap<(SessionId, StreamId), watch::Sender<Option<Epoch>>, IdHashBuilder>;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl<S: Store> Common<S> {
    pub(crate) fn lock_writers(&self) -> MutexGuard<'_, WriterRegistry> {
        lock(&self.writers)
    }

    /// The in-process state of an active session (created on first use after a restart, with
    /// what the client said at initialize read back from the record).
    fn live(&self, record: &SessionRecord) -> Arc<SessionShared> {
        let mut sessions = lock(&self.sessions);
        sessions
            .entry(record.id())
            .or_insert_with(|| {
                let client = record.session().client();
                let json = |text: &Option<Arc<str>>| {
                    text.as_deref().and_then(|t| serde_json::from_str(t).ok()).unwrap_or(Value::Null)
                };
                Arc::new(SessionShared::new(
                    record.id(),
                    record.session().revision(),
                    json(&client.capabilities),
                    json(&client.info),
                    Some(self.outbox.clone()),
                    self.shutdown.child_token(),
                ))
            })
            .clone()
    }

    /// Tear down the in-process state of an ended session: cancel its handlers, fail its
    /// pending requests.
    fn end_local(&self, id: SessionId, reason: EndReason) {
        let shared = lock(&self.sessions).remove(&id);
        if let Some(shared) = shared {
            tracing::info!(session = %id, reason = reason.as_str(), "session torn down");
            shared.end(reason);
        }
    }

    /// One pass of the sweeper: time-driven transitions for every session whose deadline
    /// passed, tombstone removal, and teardown of sessions that vanished.
    async fn sweep(&self) {
        let ids = match self.store.sessions().await {
            Ok(ids) => ids,
            Err(e) => {
                tracing::warn!(error = %e, "sweep: listing sessions failed");
                return;
            }
        };
        let now = now();
        let cfg = self.cfg.core;
        for &id in &ids {
            let record = match self.store.load(id).await {
                Ok(Some(v)) => v.value,
                Ok(None) => continue,
                Err(e) => {
                    tracing::info!(session = %id, error = %e, "sweep: load failed");
                    continue;
                }
            };
            match record.session().state() {
                SessionState::Ended(ended) => {
                    self.end_local(id, ended.reason);
                    if now.saturating_since(ended.at) >= self.cfg.tombstone_ttl
                        && let Err(e) = self.store.remove(id).await
                    {
                        tracing::info!(session = %id, error = %e, "sweep: removing tombstone failed");
                    }
                }
                SessionState::Active(_) => {
                    if record.next_deadline(&cfg).is_none_or(|d| d > now) {
                        continue;
                    }
                    match transact(&*self.store, id, |r| Ok(r.on_tick(now, &cfg))).await {
                        Ok((tick, _)) => {
                            Metrics::add(&self.metrics.liveness_expired, tick.detached.len() as u64);
                            Metrics::add(&self.metrics.evictions, tick.evicted.len() as u64);
                            if tick.ended {
                                self.metrics.session_ended(EndReason::IdleExpired.as_str());
                                self.end_local(id, EndReason::IdleExpired);
                            }
                        }
                        Err(e) => {
                            if let Some(reason) = e.ended() {
                                self.end_local(id, reason);
                            } else {
                                tracing::info!(session = %id, error = %e, "sweep: tick failed");
                            }
                        }
                    }
                }
            }
        }
        let known: HashSet<SessionId> = ids.into_iter().collect();
        let vanished: Vec<SessionId> =
            lock(&self.sessions).keys().filter(|id| !known.contains(id)).copied().collect();
        for id in vanished {
            self.end_local(id, EndReason::Failed);
        }
    }
}

/// The store operations handles need, for one concrete store.
struct StoreOutbox<S> {
    store: Arc<S>,
    cfg: forkless_core::Config,
    metrics: Arc<Metrics>,
}

impl<S: Store> Outbox for StoreOutbox<S> {
    fn append(
        &self,
        session: SessionId,
        target: AppendTarget,
        payload: Bytes,
        complete: bool,
    ) -> BoxFuture<'_, Result<EventId, SendError>> {
        Box::pin(async move {
            let id = self
                .store
                .append(session, target, payload, complete, now(), &self.cfg.limits)
                .await
                .map_err(SendError::from_store)?;
            Metrics::inc(&self.metrics.events_appended);
            Ok(id)
        })
    }

    fn complete(&self, session: SessionId, stream: StreamId) -> BoxFuture<'_, Result<(), SendError>> {
        Box::pin(async move {
            transact(&*self.store, session, |r| r.on_complete(stream, now()))
                .await
                .map(|_| ())
                .map_err(SendError::from_store)
        })
    }

    fn open(
        &self,
        session: SessionId,
        stream: &RequestStream,
    ) -> BoxFuture<'_, Result<Option<Grant>, SendError>> {
        let (id, label) = (stream.id, stream.label.clone());
        Box::pin(async move {
            let cfg = &self.cfg;
            let open = |r: &mut SessionRecord| r.open_labeled_request_stream(id, label.clone(), now(), cfg);
            match transact(&*self.store, session, open).await {
                Ok((grant, _)) => Ok(Some(grant)),
                // Stream ids are 96 random bits: an existing stream with this id was opened for
                // this very request, by a POST that stopped waiting (its client went away)
                // after the store had applied the opening. The answer still belongs on it, or
                // the stream would stay open, counting against the session's limit, forever.
                Err(forkless_store::Error::Core(forkless_core::Error::StreamExists)) => Ok(None),
                Err(e) => Err(SendError::from_store(e)),
            }
        })
    }
}

/// The MCP Streamable HTTP server around a store and a handler.
pub struct Server<S, H> {
    common: Arc<Common<S>>,
    handler: Arc<H>,
}

impl<S, H> std::fmt::Debug for Server<S, H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").field("config", &self.common.cfg).finish_non_exhaustive()
    }
}

impl<S: Store, H: Handler> Server<S, H> {
    /// A server over `store` and `handler`; refuses an invalid configuration.
    pub fn new(store: S, handler: H, config: ServerConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        let store = Arc::new(store);
        let metrics = Arc::new(Metrics::default());
        let outbox: Arc<dyn Outbox> =
            Arc::new(StoreOutbox { store: store.clone(), cfg: config.core, metrics: metrics.clone() });
        let common = Common {
            grace_ms: HeaderValue::from(millis(config.core.grace)),
            store,
            cfg: config,
            metrics,
            shutdown: CancellationToken::new(),
            sessions: Mutex::default(),
            writers: Mutex::default(),
            outbox,
        };
        Ok(Self { common: Arc::new(common), handler: Arc::new(handler) })
    }

    /// The configuration.
    pub fn config(&self) -> &ServerConfig {
        &self.common.cfg
    }

    /// The store.
    pub fn store(&self) -> &S {
        &self.common.store
    }

    /// The token whose cancellation ends every SSE body and tells every handler to stop
    /// (cancelled by [`Self::serve`] when its shutdown signal fires).
    pub fn shutdown_token(&self) -> CancellationToken {
        self.common.shutdown.clone()
    }

    /// The Prometheus text of `/metrics`.
    pub fn metrics_text(&self) -> String {
        self.common.metrics.render()
    }

    /// The router: the MCP endpoint at `config.path`, `GET /metrics`, `GET /healthz`.
    /// Other methods on these paths are answered 405 with `Allow`.
    pub fn router(&self) -> Router {
        let app = App { common: self.common.clone(), handler: self.handler.clone() };
        let mcp = axum::routing::post(post_endpoint::<S, H>)
            .get(get_endpoint::<S, H>)
            .delete(delete_endpoint::<S, H>);
        let router = Router::new()
            .route(&self.common.cfg.path, mcp)
            .route("/metrics", get(metrics_endpoint::<S, H>))
            .route("/healthz", get(|| async { "ok\n" }));
        // A span and two clock reads per request even when nothing records them: the HTTP
        // trace layer is there only if the subscriber wants tower_http's debug events
        // (`RUST_LOG=tower_http=debug`) when the router is built.
        let router = if tracing::enabled!(target: "tower_http::trace", tracing::Level::DEBUG) {
            router.layer(tower_http::trace::TraceLayer::new_for_http())
        } else {
            router
        };
        router.with_state(app)
    }

    /// Answer requests whose handler died with an earlier process (the store's recovery lists
    /// them, [`forkless_store::Recovery::orphans`]): each gets a JSON-RPC error carrying its
    /// request id (`-32603`, "the server restarted while handling this request; it was lost")
    /// as the final event of its stream, which completes it, so no client waits for ever.
    /// Call before serving. Returns how many were answered; one that cannot be (its session
    /// ended meanwhile) is logged and skipped.
    pub async fn answer_orphans(&self, orphans: &[forkless_store::Orphan]) -> usize {
        // The answer must land even in a session at its byte budget: it is the last event.
        let limits = forkless_core::Limits {
            stream_max_bytes: u64::MAX,
            session_max_bytes: u64::MAX,
            ..self.common.cfg.core.limits
        };
        let mut answered = 0;
        for orphan in orphans {
            let id = jsonrpc::label_id(orphan.label.as_ref());
            let error = RpcError::internal("the server restarted while handling this request; it was lost");
            let payload = jsonrpc::response_payload(&id, &Err(error));
            let target = AppendTarget::Stream(orphan.stream);
            match self.common.store.append(orphan.session, target, payload, true, now(), &limits).await {
                Ok(event) => {
                    answered += 1;
                    tracing::info!(session = %orphan.session, %event, request = %id, "lost request answered");
                }
                Err(e) => {
                    tracing::info!(session = %orphan.session, stream = %orphan.stream, error = %e, "lost request not answered");
                }
            }
        }
        answered
    }

    /// One sweep now (the sweeper task runs this every `sweep_interval`).
    pub async fn sweep(&self) {
        self.common.sweep().await;
    }

    /// Run the sweeper until shutdown. [`Self::serve`] does this itself.
    pub fn spawn_sweeper(&self) -> JoinHandle<()> {
        let common = self.common.clone();
        tokio::spawn(async move {
            let mut interval = tokio::time::interval(common.cfg.sweep_interval);
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = interval.tick() => common.sweep().await,
                    () = common.shutdown.cancelled() => break,
                }
            }
        })
    }

    /// Serve on `listener` until `shutdown` completes; then end every SSE body, stop the
    /// sweeper, and wait at most `drain_timeout` for connections to finish.
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let sweeper = self.spawn_sweeper();
        let token = self.common.shutdown.clone();
        let (fired_tx, fired_rx) = tokio::sync::oneshot::channel::<()>();
        let signal = async move {
            shutdown.await;
            tracing::info!("shutting down: ending SSE streams");
            token.cancel();
            let _ = fired_tx.send(());
        };
        // SSE bodies go out as several small writes (priming event, events, response); with
        // Nagle's algorithm each write after the first waits for the client's delayed ACK
        // (about 40 ms on Linux), which capped a request answered over SSE at ~20 per second
        // per connection.
        let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
            if let Err(e) = tcp.set_nodelay(true) {
                tracing::debug!(error = %e, "TCP_NODELAY not set");
            }
        });
        let server = axum::serve(listener, self.router()).with_graceful_shutdown(signal).into_future();
        let mut server = std::pin::pin!(server);
        let drain = self.common.cfg.drain_timeout;
        let out = tokio::select! {
            out = &mut server => out,
            Ok(()) = fired_rx => match tokio::time::timeout(drain, &mut server).await {
                Ok(out) => out,
                Err(_) => {
                    tracing::warn!(?drain, "drain timeout passed; dropping remaining connections");
                    Ok(())
                }
            },
        };
        self.common.shutdown.cancel();
        sweeper.abort();
        out
    }
}

/// The router's state.
struct App<S, H> {
    common: Arc<Common<S>>,
    handler: Arc<H>,
}

impl<S, H> Clone for App<S, H> {
    fn clone(&self) -> Self {
        Self { common: self.common.clone(), handler: self.handler.clone() }
    }
}

// The endpoints take the whole request and borrow its headers: the `HeaderMap` extractor
// would copy them for every request.

async fn post_endpoint<S: Store, H: Handler>(State(app): State<App<S, H>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let out = app.post(&parts.headers, body).await;
    app.answer(out)
}

async fn get_endpoint<S: Store, H: Handler>(State(app): State<App<S, H>>, request: Request) -> Response {
    // axum routes HEAD to GET handlers; a HEAD must not attach (and maybe end) anything.
    if request.method() == http::Method::HEAD {
        return app.answer(Err(Error::MethodNotAllowed { allow: "GET, POST, DELETE" }));
    }
    let out = app.get(request.headers()).await;
    app.answer(out)
}

async fn delete_endpoint<S: Store, H: Handler>(State(app): State<App<S, H>>, request: Request) -> Response {
    let out = app.delete(request.headers()).await;
    app.answer(out)
}

async fn metrics_endpoint<S: Store, H: Handler>(State(app): State<App<S, H>>) -> Response {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], app.common.metrics.render()).into_response()
}

/// One client request's identity and input.
struct Call {
    id: Value,
    method: String,
    params: Option<Value>,
}

impl<S: Store, H: Handler> App<S, H> {
    fn answer(&self, out: Result<Response, Error>) -> Response {
        out.unwrap_or_else(|e| {
            let (status, _) = e.status_and_code();
            self.common.metrics.error(status.as_str(), e.reason());
            e.into_response()
        })
    }

    // ===== request checks =====

    fn check_origin(&self, headers: &HeaderMap) -> Result<(), Error> {
        let Some(origin) = headers.get(header::ORIGIN) else { return Ok(()) };
        match origin.to_str() {
            Ok(o) if self.common.cfg.allowed_origins.allows(o) => Ok(()),
            Ok(o) => Err(Error::OriginForbidden(o.to_owned())),
            Err(_) => Err(Error::OriginForbidden(String::from_utf8_lossy(origin.as_bytes()).into_owned())),
        }
    }

    fn principal(&self, headers: &HeaderMap) -> Option<String> {
        self.common.cfg.principal.as_ref().and_then(|p| (p.0)(headers))
    }

    /// The session named by `Mcp-Session-Id`, checked: known, active, same principal.
    async fn session(&self, headers: &HeaderMap) -> Result<(SessionRecord, Arc<SessionShared>), Error> {
        let raw = headers.get(SESSION_ID).ok_or(Error::MissingSessionId)?;
        let id: SessionId = raw.to_str().ok().and_then(|s| s.parse().ok()).ok_or(Error::SessionUnknown)?;
        let record = self.common.store.load(id).await?.ok_or(Error::SessionUnknown)?.value;
        if let Some(reason) = record.session().ended() {
            self.common.end_local(id, reason);
            return Err(Error::SessionEnded(reason));
        }
        if self.common.cfg.principal.is_some()
            && record.session().principal() != self.principal(headers).as_deref()
        {
            // Another principal's session looks exactly like an unknown one.
            return Err(Error::SessionUnknown);
        }
        let shared = self.common.live(&record);
        Ok((record, shared))
    }

    /// A store error on `session`: tear down locally if it says the session ended.
    fn store_error(&self, session: SessionId, e: forkless_store::Error) -> Error {
        if let Some(reason) = e.ended() {
            self.common.end_local(session, reason);
        }
        Error::from(e)
    }

    // ===== POST =====

    async fn post(&self, headers: &HeaderMap, body: Body) -> Result<Response, Error> {
        self.check_origin(headers)?;
        if !is_json(headers) {
            return Err(Error::UnsupportedMediaType);
        }
        if !accepts(headers, "application/json") || !accepts(headers, "text/event-stream") {
            return Err(Error::NotAcceptable("application/json and text/event-stream"));
        }
        let bytes = read_body(headers, body, self.common.cfg.max_body_bytes).await?;
        let body = jsonrpc::parse(&bytes)?;
        let version = protocol_version(headers)?;
        if version == Some(Revision::V2026_07_28) {
            return self.post_stateless(body).await;
        }
        if let Some(Message::Request { id, method, params }) = body.single()
            && method == "initialize"
        {
            if headers.contains_key(SESSION_ID) {
                return Err(Error::AlreadyInitialized);
            }
            return self.initialize(headers, id, params.as_ref()).await;
        }
        if body
            .messages
            .iter()
            .any(|m| matches!(m, Message::Request { method, .. } if method == "initialize"))
        {
            return Err(Error::InvalidMessage("initialize must not be part of a batch".into()));
        }
        let (record, shared) = self.session(headers).await?;
        let revision = record.session().revision();
        if body.batch && !revision.accepts_batches() {
            return Err(Error::BatchNotAllowed(revision.as_str()));
        }
        let sid = record.id();
        let has_requests = body.has_requests();
        // A request answered over SSE opens its stream through the core, which checks the
        // session and records the activity itself: a separate `on_request` would be one more
        // load and compare-and-set of the whole record per request.
        // Otherwise the idle clock moves only when it is due (a second's resolution), so a
        // busy session is not rewritten by every request.
        if !(has_requests && self.common.cfg.answer == AnswerMode::Sse)
            && record.activity_due(now(), &self.common.cfg.core)
        {
            transact(&*self.common.store, sid, |r| r.on_request(now()))
                .await
                .map_err(|e| self.store_error(sid, e))?;
        }
        // Whether a request stream could be opened, judged now; the copy of the record goes
        // before any handler runs, so the store's own copy is not shared when it changes.
        let room = record.check_request_stream_room(&self.common.cfg.core.limits);
        drop(record);
        let mut calls = Vec::new();
        for message in body.messages {
            match message {
                Message::Request { id, method, params } => calls.push(Call { id, method, params }),
                Message::Notification { method, params } => self.on_notification(&shared, method, params),
                Message::Response { id, outcome } => {
                    if !shared.resolve(&id, outcome) {
                        tracing::debug!(session = %sid, %id, "response to no pending request");
                    }
                }
            }
        }
        if !has_requests {
            return Ok(StatusCode::ACCEPTED.into_response());
        }
        match self.common.cfg.answer {
            AnswerMode::Json => Ok(self.answer_json(shared, calls, body.batch).await),
            AnswerMode::Sse => self.answer_sse(shared, revision, room, calls).await,
        }
    }

    async fn initialize(
        &self,
        headers: &HeaderMap,
        id: &Value,
        params: Option<&Value>,
    ) -> Result<Response, Error> {
        let params = params.cloned().unwrap_or(Value::Null);
        let revision = params
            .get("protocolVersion")
            .and_then(Value::as_str)
            .and_then(|v| v.parse::<Revision>().ok())
            .filter(|r| r.has_sessions())
            .unwrap_or(Revision::LATEST_WITH_SESSIONS);
        let capabilities = params.get("capabilities").cloned().unwrap_or_else(|| json!({}));
        let reset_contract =
            capabilities.pointer("/experimental/forkless~1resume/version").and_then(Value::as_u64) == Some(1);
        let client_info = params.get("clientInfo").cloned().unwrap_or(Value::Null);
        let principal = self.principal(headers);
        // Kept with the session, so a handler still knows its client after a restart.
        let client = ClientFacts {
            capabilities: Some(capabilities.to_string().into()),
            info: (!client_info.is_null()).then(|| client_info.to_string().into()),
        };
        let record = self.create_session(revision, reset_contract, principal, client).await?;
        let sid = record.id();
        Metrics::inc(&self.common.metrics.sessions_created);
        self.common.metrics.stream_opened("standalone");
        let shared = Arc::new(SessionShared::new(
            sid,
            revision,
            capabilities,
            client_info,
            Some(self.common.outbox.clone()),
            self.common.shutdown.child_token(),
        ));
        lock(&self.common.sessions).insert(sid, shared);
        tracing::info!(session = %sid, revision = revision.as_str(), reset_contract, "session created");

        let info = self.handler.info();
        let core = &self.common.cfg.core;
        let mut caps = if info.capabilities.is_object() { info.capabilities } else { json!({}) };
        let resume = json!({
            "version": 1,
            "graceMs": millis(core.grace),
            "retryBudgetMs": millis(core.retry_budget),
        });
        match caps.get_mut("experimental").and_then(Value::as_object_mut) {
            Some(experimental) => {
                experimental.insert("forkless/resume".into(), resume);
            }
            None => caps["experimental"] = json!({ "forkless/resume": resume }),
        }
        let mut result = json!({
            "protocolVersion": revision.as_str(),
            "capabilities": caps,
            "serverInfo": { "name": info.name, "version": info.version },
        });
        if let Some(instructions) = info.instructions {
            result["instructions"] = json!(instructions);
        }
        let mut response = axum::Json(jsonrpc::result(id, result)).into_response();
        response.headers_mut().insert(SESSION_ID, header_value(sid.to_string()));
        Ok(response)
    }

    async fn create_session(
        &self,
        revision: Revision,
        reset_contract: bool,
        principal: Option<String>,
        client: ClientFacts,
    ) -> Result<SessionRecord, Error> {
        // A collision of 128 random bits is not going to happen; still, never overwrite.
        for _ in 0..3 {
            let new = NewSession {
                id: SessionId::generate(&mut OsEntropy),
                revision,
                reset_contract,
                principal: principal.clone(),
                client: client.clone(),
            };
            let record = SessionRecord::create(new, now(), &mut OsEntropy)
                .map_err(|e| Error::from(forkless_store::Error::Core(e)))?;
            match self.common.store.create(record.clone()).await {
                Ok(_) => return Ok(record),
                Err(forkless_store::Error::SessionExists) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(Error::Store(forkless_store::Error::SessionExists))
    }

    fn on_notification(&self, shared: &Arc<SessionShared>, method: String, params: Option<Value>) {
        match method.as_str() {
            "notifications/initialized" => {}
            "notifications/cancelled" => {
                let id = params.as_ref().and_then(|p| p.get("requestId"));
                let found = id.is_some_and(|id| shared.cancel_request(id));
                tracing::debug!(session = %shared.id, ?id, found, "cancellation");
            }
            _ => {
                let handler = self.handler.clone();
                let session = SessionHandle { shared: shared.clone() };
                let span = tracing::info_span!("notification", session = %shared.id, method = %method);
                tokio::spawn(
                    async move { handler.handle_notification(&method, params, session).await }
                        .instrument(span),
                );
            }
        }
    }

    /// Run one request to its outcome (a panicking handler becomes an internal error, never a
    /// crashed server). Callers run this in a task of its own already, so the panic is caught
    /// here rather than by spawning yet another task per request.
    async fn run(
        &self,
        shared: Arc<SessionShared>,
        call: &mut Call,
        cancel: CancellationToken,
        outlet: Outlet,
    ) -> Result<Value, RpcError> {
        if call.method == "ping" {
            return Ok(json!({}));
        }
        // Two lookups rather than `Value::pointer`, which allocates for every path segment.
        let progress_token = call.params.as_ref().and_then(|p| p.get("_meta")?.get("progressToken")).cloned();
        let ctx = RequestContext {
            session: SessionHandle { shared: shared.clone() },
            request_id: call.id.clone(),
            progress_token,
            cancel,
            outlet,
        };
        let handler = self.handler.clone();
        let span = tracing::info_span!("request", session = %shared.id, id = %call.id, method = %call.method);
        // Moved, not cloned: after this only the call's id is needed (for the response).
        let (method, params) = (std::mem::take(&mut call.method), call.params.take());
        let started = tokio::time::Instant::now();
        let handling = async move { handler.handle_request(&method, params, ctx).await }.instrument(span);
        let out = AssertUnwindSafe(handling).catch_unwind().await.unwrap_or_else(|panic| {
            let why = panic
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
                .unwrap_or("a panic");
            tracing::warn!(session = %shared.id, error = why, "handler panicked");
            Err(RpcError::internal("the handler failed"))
        });
        self.common.metrics.request_took(started.elapsed().as_secs_f64());
        out
    }

    async fn answer_json(&self, shared: Arc<SessionShared>, calls: Vec<Call>, batch: bool) -> Response {
        let tasks: Vec<_> = calls
            .into_iter()
            .map(|mut call| {
                let app = self.clone();
                let shared = shared.clone();
                // Detached: a client disconnecting does not cancel the request (2025 revisions).
                start_detached(async move {
                    let cancel = shared.begin_request(&call.id);
                    let out = app.run(shared.clone(), &mut call, cancel, Outlet::Standalone).await;
                    shared.finish_request(&call.id);
                    jsonrpc::response_payload(&call.id, &out)
                })
            })
            .collect();
        let mut responses = Vec::with_capacity(tasks.len());
        for task in tasks {
            match task.finish().await {
                Ok(v) => responses.push(v),
                Err(e) => tracing::warn!(error = %e, "request task failed"),
            }
        }
        let body = match (batch, responses.pop()) {
            (true, last) => {
                responses.extend(last);
                jsonrpc::batch_payload(&responses)
            }
            (false, Some(single)) => single,
            // Only if the request's task itself died (its handler's panics are caught).
            (false, None) => {
                jsonrpc::response_payload(&Value::Null, &Err(RpcError::internal("the request failed")))
            }
        };
        json_response(body)
    }

    /// `room`: whether the session could take another request stream when the request came.
    async fn answer_sse(
        &self,
        shared: Arc<SessionShared>,
        revision: Revision,
        room: Result<(), forkless_core::Error>,
        mut calls: Vec<Call>,
    ) -> Result<Response, Error> {
        let sid = shared.id;
        // A single request's stream keeps its id, so that a restart can still answer it.
        let label = match calls.as_slice() {
            [single] => Some(jsonrpc::id_label(&single.id)),
            _ => None,
        };
        let stream = RequestStream::new(StreamId::generate(&mut OsEntropy), label);
        let single = match calls.pop() {
            Some(call) if calls.is_empty() => call,
            last => {
                calls.extend(last);
                return self.answer_sse_batch(shared, revision, stream, calls).await;
            }
        };
        // Refused before the handler runs, not after, if the session could not take the stream.
        room.map_err(|e| self.store_error(sid, forkless_store::Error::Core(e)))?;
        // Detached (a client going away does not cancel the request).
        let task = start_detached(self.clone().run_on_stream(shared.clone(), single, stream.clone()));
        if let Detached::Done(Finished::AtOnce(Some(payload))) = &task
            && stream.claim_for_answer()
        {
            // The common case: the whole stream is known before its connection is served. One
            // append opens, fills and releases it, and the POST carries it as a finished body:
            // no writer, no wake-up, no detach. A client that loses the body resumes it.
            let limits = &self.common.cfg.core.limits;
            let event = self
                .common
                .store
                .append(sid, AppendTarget::Answer(stream.id), payload.clone(), true, now(), limits)
                .await
                .map_err(|e| self.store_error(sid, e))?;
            self.common.metrics.stream_opened("request");
            let retry = self.common.cfg.core.retry_interval;
            let body = writer::finished_body(preamble(revision, false), event, payload, retry);
            return Ok(self.sse_headers(Response::new(Body::from(body)), stream.id, false));
        }
        let grant = self.open_stream(sid, &stream).await?;
        if let Detached::Done(Finished::AtOnce(payload)) = task {
            // Done at once, but on a stream its handler opened to send something first (or
            // withdrawn): the answer goes on the open stream.
            let _ = start_detached(deliver(shared, stream, payload));
        }
        self.stream_response(sid, grant, revision).await
    }

    /// A batch (2025-03-26) answered over SSE: one stream, opened first, completed by the last
    /// response.
    async fn answer_sse_batch(
        &self,
        shared: Arc<SessionShared>,
        revision: Revision,
        stream: Arc<RequestStream>,
        calls: Vec<Call>,
    ) -> Result<Response, Error> {
        let sid = shared.id;
        let grant = self.open_stream(sid, &stream).await?;
        // The last response of the batch completes the stream; the count and the append are
        // one step under this lock, so no response lands after the completing one.
        let remaining = Arc::new(tokio::sync::Mutex::new(calls.len()));
        for mut call in calls {
            let (app, shared, remaining, stream) =
                (self.clone(), shared.clone(), remaining.clone(), stream.clone());
            // Detached (a client going away does not cancel the request).
            start_detached(async move {
                let cancel = shared.begin_request(&call.id);
                let outlet = Outlet::Stream(stream.clone());
                let out = app.run(shared.clone(), &mut call, cancel.clone(), outlet).await;
                shared.finish_request(&call.id);
                let withdrawn = app.withdrawn(&shared, &cancel);
                let mut left = remaining.lock().await;
                *left = left.saturating_sub(1);
                let last = *left == 0;
                let sent = if withdrawn {
                    // A cancelled request gets no response; its stream still completes.
                    match (&shared.outbox, last) {
                        (Some(outbox), true) => outbox.complete(sid, stream.id).await,
                        _ => Ok(()),
                    }
                } else {
                    let payload = jsonrpc::response_payload(&call.id, &out);
                    shared.append_payload(AppendTarget::Stream(stream.id), payload, last).await.map(|_| ())
                };
                if let Err(e) = sent {
                    tracing::debug!(session = %sid, stream = %stream.id, error = %e, "response not delivered");
                }
            });
        }
        self.stream_response(sid, grant, revision).await
    }

    /// Run one request whose answer goes on `stream`. A handler done on its first poll hands
    /// its answer back (the POST decides how it goes out); otherwise the answer is delivered
    /// here, on the stream the POST opened meanwhile.
    async fn run_on_stream(
        self,
        shared: Arc<SessionShared>,
        mut call: Call,
        stream: Arc<RequestStream>,
    ) -> Finished {
        let cancel = shared.begin_request(&call.id);
        let outlet = Outlet::Stream(stream.clone());
        let (out, at_once) = first_poll(self.run(shared.clone(), &mut call, cancel.clone(), outlet)).await;
        shared.finish_request(&call.id);
        // A cancelled request gets no response; its stream still completes.
        let payload = (!self.withdrawn(&shared, &cancel)).then(|| jsonrpc::response_payload(&call.id, &out));
        if at_once {
            return Finished::AtOnce(payload);
        }
        deliver(shared, stream, payload).await;
        Finished::Delivered
    }

    /// Whether a request was cancelled by the client (rather than by the end of its session or
    /// of the server, which answer it with an error).
    fn withdrawn(&self, shared: &SessionShared, cancel: &CancellationToken) -> bool {
        cancel.is_cancelled() && shared.ended().is_none() && !self.common.shutdown.is_cancelled()
    }

    /// Open `stream` (unless its handler did already), for the POST that asked.
    async fn open_stream(&self, sid: SessionId, stream: &RequestStream) -> Result<Grant, Error> {
        let cfg = self.common.cfg.core;
        let grant = stream
            .open(|| async {
                transact(&*self.common.store, sid, |r| {
                    r.open_labeled_request_stream(stream.id, stream.label.clone(), now(), &cfg)
                })
                .await
                .map(|(grant, _)| Some(grant))
            })
            .await
            .map_err(|e| self.store_error(sid, e))?
            // Claimed for an answer (only this POST claims, and then it never opens), or open
            // without a grant (only a handler's opening can end so, never this POST's).
            .ok_or(Error::Store(forkless_store::Error::Core(forkless_core::Error::StreamExists)))?;
        self.common.metrics.stream_opened("request");
        Ok(grant)
    }

    /// The SSE answer serving an open request stream through its writer.
    async fn stream_response(
        &self,
        sid: SessionId,
        grant: Grant,
        revision: Revision,
    ) -> Result<Response, Error> {
        let watch = self.common.store.watch(sid, grant.stream).await.map_err(|e| self.store_error(sid, e))?;
        let opts =
            WriterOptions { preamble: preamble(revision, false), poll_after: self.poll_after(revision) };
        Ok(self.sse_response(sid, grant, watch, opts))
    }

    fn poll_after(&self, revision: Revision) -> Option<Duration> {
        self.common.cfg.poll_after.filter(|_| revision == Revision::V2025_11_25)
    }

    fn sse_response(
        &self,
        session: SessionId,
        grant: Grant,
        watch: forkless_store::StreamWatch,
        opts: WriterOptions,
    ) -> Response {
        let body = writer::body(self.common.clone(), session, grant, watch, opts);
        self.sse_headers(Response::new(body), grant.stream, grant.resumed)
    }

    /// The headers of every SSE answer that serves a stream.
    fn sse_headers(&self, mut response: Response, stream: StreamId, resumed: bool) -> Response {
        // Sized for these and what hyper adds, so the map never grows.
        let mut h = HeaderMap::with_capacity(8);
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        h.insert(HeaderName::from_static("x-accel-buffering"), HeaderValue::from_static("no"));
        let id = HeaderValue::from_bytes(stream.wire().as_bytes())
            .unwrap_or_else(|_| HeaderValue::from_static("invalid"));
        h.insert(STREAM_ID, id);
        h.insert(STREAM_RESUMED, HeaderValue::from_static(if resumed { "true" } else { "false" }));
        h.insert(STREAM_GRACE_MS, self.common.grace_ms.clone());
        *response.headers_mut() = h;
        response
    }

    // ===== POST, 2026-07-28 (stateless) =====

    async fn post_stateless(&self, body: jsonrpc::Body) -> Result<Response, Error> {
        if body.batch {
            return Err(Error::BatchNotAllowed(Revision::V2026_07_28.as_str()));
        }
        let Some(message) = body.messages.into_iter().next() else {
            return Err(Error::InvalidMessage("empty body".into()));
        };
        let shared = Arc::new(SessionShared::new(
            SessionId::generate(&mut OsEntropy),
            Revision::V2026_07_28,
            Value::Null,
            Value::Null,
            None,
            self.common.shutdown.child_token(),
        ));
        let mut call = match message {
            Message::Response { .. } => {
                return Err(Error::InvalidMessage("clients send no responses in 2026-07-28".into()));
            }
            Message::Notification { method, params } => {
                if method != "notifications/cancelled" && method != "notifications/initialized" {
                    self.on_notification(&shared, method, params);
                }
                return Ok(StatusCode::ACCEPTED.into_response());
            }
            Message::Request { id, method, params } => Call { id, method, params },
        };
        // Closing the response cancels the request in this revision.
        let cancel = shared.cancel.child_token();
        match self.common.cfg.answer {
            AnswerMode::Json => {
                let guard = cancel.clone().drop_guard();
                let out = self.run(shared, &mut call, cancel, Outlet::Nowhere).await;
                guard.disarm();
                Ok(json_response(jsonrpc::response_payload(&call.id, &out)))
            }
            AnswerMode::Sse => {
                let (tx, rx) = mpsc::channel::<Value>(64);
                let app = self.clone();
                let task_cancel = cancel.clone();
                tokio::spawn(async move {
                    let out =
                        app.run(shared, &mut call, task_cancel.clone(), Outlet::Direct(tx.clone())).await;
                    if !task_cancel.is_cancelled() {
                        let _ = tx.send(jsonrpc::respond(&call.id, out)).await;
                    }
                });
                let state = (rx, Some(cancel.drop_guard()));
                let stream = futures::stream::unfold(state, |(mut rx, guard)| async move {
                    guard.as_ref()?;
                    let message = rx.recv().await?;
                    // The response (the one message with an id) ends the stream.
                    let guard = if message.get("id").is_some() {
                        if let Some(g) = guard {
                            g.disarm();
                        }
                        None
                    } else {
                        guard
                    };
                    let chunk = crate::sse::event(None, message.to_string().as_bytes());
                    Some((Ok::<_, std::convert::Infallible>(chunk), (rx, guard)))
                });
                let mut response = Response::new(Body::from_stream(stream));
                let h = response.headers_mut();
                h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
                h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
                h.insert(HeaderName::from_static("x-accel-buffering"), HeaderValue::from_static("no"));
                Ok(response)
            }
        }
    }

    // ===== GET =====

    async fn get(&self, headers: &HeaderMap) -> Result<Response, Error> {
        self.check_origin(headers)?;
        let version = protocol_version(headers)?;
        if version == Some(Revision::V2026_07_28) {
            return Err(Error::MethodNotAllowed { allow: "POST" });
        }
        if !accepts(headers, "text/event-stream") {
            return Err(Error::NotAcceptable("text/event-stream"));
        }
        let (record, shared) = self.session(headers).await?;
        let sid = record.id();
        let revision = record.session().revision();
        let last_event_id = lossy_header(headers, &LAST_EVENT_ID);
        let stream_token = lossy_header(headers, &STREAM_ID);
        let req =
            GetRequest { last_event_id: last_event_id.as_deref(), stream_token: stream_token.as_deref() };
        let cfg = self.common.cfg.core;
        let (outcome, _) =
            transact(&*self.common.store, sid, |r| r.on_get(&req, now(), &cfg, &mut OsEntropy))
                .await
                .map_err(|e| self.store_error(sid, e))?;
        let metrics = &self.common.metrics;
        match outcome {
            GetOutcome::Attached(grant) => {
                let (outcome, reason) = match (grant.resumed, grant.fenced) {
                    (true, _) => ("resumed", "continuation"),
                    (false, Some(_)) => ("new", "reset"),
                    (false, None) => ("new", "standalone"),
                };
                metrics.get_outcome(outcome, reason);
                if grant.displaced {
                    Metrics::inc(&metrics.displacements);
                }
                if let Some(old) = grant.fenced {
                    Metrics::inc(&metrics.fences);
                    shared.fail_pending_on(old);
                    metrics.stream_opened("standalone");
                    tracing::info!(session = %sid, fenced = %old, stream = %grant.stream, "standalone stream reset");
                }
                tracing::debug!(session = %sid, stream = %grant.stream, resumed = grant.resumed, after = grant.after.get(), "GET attached");
                let watch =
                    self.common.store.watch(sid, grant.stream).await.map_err(|e| self.store_error(sid, e))?;
                let opts = WriterOptions {
                    preamble: preamble(revision, grant.resumed),
                    poll_after: self.poll_after(revision),
                };
                Ok(self.sse_response(sid, grant, watch, opts))
            }
            GetOutcome::Conflict(reason) => {
                metrics.get_outcome("conflict", reason.as_str());
                Err(Error::Conflict(reason))
            }
            GetOutcome::Rejected(reason) => {
                metrics.get_outcome("rejected", reason.as_str());
                let end = EndReason::Rejected(reason);
                metrics.session_ended(end.as_str());
                tracing::info!(session = %sid, reason = reason.as_str(), "GET rejected; session ended");
                self.common.end_local(sid, end);
                Err(Error::SessionEnded(end))
            }
        }
    }

    // ===== DELETE =====

    async fn delete(&self, headers: &HeaderMap) -> Result<Response, Error> {
        self.check_origin(headers)?;
        if protocol_version(headers)? == Some(Revision::V2026_07_28) {
            return Err(Error::MethodNotAllowed { allow: "POST" });
        }
        let (record, _shared) = self.session(headers).await?;
        let sid = record.id();
        transact(&*self.common.store, sid, |r| r.on_end(EndReason::Deleted, now()))
            .await
            .map_err(|e| self.store_error(sid, e))?;
        self.common.metrics.session_ended(EndReason::Deleted.as_str());
        self.common.end_local(sid, EndReason::Deleted);
        Ok(StatusCode::OK.into_response())
    }
}

fn preamble(revision: Revision, resumed: bool) -> Preamble {
    if revision.sends_priming_event() && !resumed { Preamble::Priming } else { Preamble::Retry }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Ids and numbers are visible ASCII, so this never takes the fallback.
fn header_value(s: String) -> HeaderValue {
    HeaderValue::try_from(s).unwrap_or_else(|_| HeaderValue::from_static("invalid"))
}

/// A header's text; a value that is not visible ASCII becomes the empty string, which no
/// identifier parser accepts (so it is judged malformed, never ignored).
fn lossy_header(headers: &HeaderMap, name: &HeaderName) -> Option<String> {
    headers.get(name).map(|v| v.to_str().map(str::to_owned).unwrap_or_default())
}

fn protocol_version(headers: &HeaderMap) -> Result<Option<Revision>, Error> {
    let Some(v) = headers.get(PROTOCOL_VERSION) else { return Ok(None) };
    let text = String::from_utf8_lossy(v.as_bytes()).into_owned();
    text.trim().parse::<Revision>().map(Some).map_err(|_| Error::UnsupportedVersion(text))
}

fn is_json(headers: &HeaderMap) -> bool {
    let Some(ct) = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()) else { return false };
    let media = ct.split(';').next().unwrap_or("").trim();
    media.eq_ignore_ascii_case("application/json")
}

/// Whether `Accept` admits `wanted` (exactly, by `type/*`, or by `*/*`).
fn accepts(headers: &HeaderMap, wanted: &str) -> bool {
    // Bytes, not str, and no allocation: this runs on every POST and GET.
    let wanted_type = wanted.split('/').next().unwrap_or("").as_bytes();
    headers.get_all(header::ACCEPT).iter().any(|value| {
        value.as_bytes().split(|&b| b == b',').any(|range| {
            let media = range.split(|&b| b == b';').next().unwrap_or_default().trim_ascii();
            media.eq_ignore_ascii_case(wanted.as_bytes())
                || media == b"*/*"
                || media.strip_suffix(b"/*").is_some_and(|t| t.eq_ignore_ascii_case(wanted_type))
        })
    })
}

/// A `200` with an already serialized JSON body.
fn json_response(body: Bytes) -> Response {
    ([(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], body).into_response()
}

/// A future started by [`start_detached`].
pub(crate) enum Detached<T> {
    /// It finished on its first poll.
    Done(T),
    /// It is running in a task of its own.
    Running(tokio::task::JoinHandle<T>),
}

impl<T> Detached<T> {
    /// Wait for the outcome (an error if the task panicked or was aborted).
    async fn finish(self) -> Result<T, tokio::task::JoinError> {
        match self {
            Self::Done(v) => Ok(v),
            Self::Running(task) => task.await,
        }
    }
}

/// Poll `fut` once here and, if it is not done, finish it in a task of its own, so that it
/// runs to the end whatever happens to the caller. Most requests are done on their first poll
/// and so cost no task, no wake-up and no hand-off between tasks.
pub(crate) fn start_detached<F>(fut: F) -> Detached<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let mut fut = Box::pin(fut);
    match (&mut fut).now_or_never() {
        Some(v) => Detached::Done(v),
        None => Detached::Running(tokio::spawn(fut)),
    }
}

/// How a request run by [`App::run_on_stream`] ended.
enum Finished {
    /// Its handler was done on its first poll: here is its answer (`None`: it was withdrawn),
    /// not yet on any stream.
    AtOnce(Option<Bytes>),
    /// It ran longer, and its answer is on its stream.
    Delivered,
}

/// Put a request's answer on its stream as the final event (or, if it was withdrawn, complete
/// the stream without one), opening the stream if nobody has yet.
async fn deliver(shared: Arc<SessionShared>, stream: Arc<RequestStream>, payload: Option<Bytes>) {
    let sent = match shared.open_stream(&stream).await {
        Err(e) => Err(e),
        Ok(()) => match (payload, &shared.outbox) {
            (Some(payload), _) => {
                shared.append_payload(AppendTarget::Stream(stream.id), payload, true).await.map(|_| ())
            }
            (None, Some(outbox)) => outbox.complete(shared.id, stream.id).await,
            (None, None) => Ok(()),
        },
    };
    if let Err(e) = sent {
        tracing::debug!(session = %shared.id, stream = %stream.id, error = %e, "response not delivered");
    }
}

/// Run `fut`, and say whether it was done on its first poll.
async fn first_poll<F: Future>(fut: F) -> (F::Output, bool) {
    let mut fut = std::pin::pin!(fut);
    let mut first = true;
    std::future::poll_fn(move |cx| {
        let at_once = std::mem::replace(&mut first, false);
        fut.as_mut().poll(cx).map(|out| (out, at_once))
    })
    .await
}

async fn read_body(headers: &HeaderMap, body: Body, max: usize) -> Result<Bytes, Error> {
    let declared =
        headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max as u64) {
        return Err(Error::BodyTooLarge { max });
    }
    match http_body_util::Limited::new(body, max).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() => {
            Err(Error::BodyTooLarge { max })
        }
        Err(e) => Err(Error::BodyRead(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(name: HeaderName, v: &'static str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(name, HeaderValue::from_static(v));
        h
    }

    #[test]
    fn accept_matching() {
        let h = with(header::ACCEPT, "application/json, text/event-stream");
        assert!(accepts(&h, "application/json") && accepts(&h, "text/event-stream"));
        let h = with(header::ACCEPT, "*/*");
        assert!(accepts(&h, "text/event-stream"));
        let h = with(header::ACCEPT, "text/*;q=0.5");
        assert!(accepts(&h, "text/event-stream") && !accepts(&h, "application/json"));
        assert!(!accepts(&HeaderMap::new(), "application/json"));
        let h = with(header::ACCEPT, "Application/JSON ; q=1,TEXT/Event-Stream");
        assert!(accepts(&h, "application/json") && accepts(&h, "text/event-stream"));
        let h = with(header::ACCEPT, "application/jsonx, text/event-streams");
        assert!(!accepts(&h, "application/json") && !accepts(&h, "text/event-stream"));
        // Both, as a POST needs them: each admitted by any range, in any header line.
        let both = |h: &HeaderMap| accepts(h, "application/json") && accepts(h, "text/event-stream");
        assert!(both(&with(header::ACCEPT, "text/event-stream, application/json")));
        assert!(both(&with(header::ACCEPT, "*/*")));
        assert!(!both(&with(header::ACCEPT, "text/*, application/xml")));
        let mut h = with(header::ACCEPT, "application/json");
        h.append(header::ACCEPT, HeaderValue::from_static("text/event-stream"));
        assert!(both(&h));
        assert!(!both(&HeaderMap::new()));
    }

    #[test]
    fn content_type_with_parameters() {
        assert!(is_json(&with(header::CONTENT_TYPE, "application/json; charset=utf-8")));
        assert!(!is_json(&with(header::CONTENT_TYPE, "text/plain")));
        assert!(!is_json(&HeaderMap::new()));
    }

    #[test]
    fn protocol_versions() {
        assert_eq!(protocol_version(&HeaderMap::new()).unwrap(), None);
        assert_eq!(
            protocol_version(&with(PROTOCOL_VERSION, "2025-06-18")).unwrap(),
            Some(Revision::V2025_06_18)
        );
        assert!(matches!(
            protocol_version(&with(PROTOCOL_VERSION, "2024-01-01")),
            Err(Error::UnsupportedVersion(_))
        ));
    }
}
