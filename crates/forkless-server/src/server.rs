//! The router and [`Server`]: the MCP endpoint (POST, GET, DELETE), `/metrics`, `/healthz`,
//! the sweeper task and graceful shutdown.
//!
//! The server turns HTTP requests into core transitions (always through
//! [`forkless_store::transact`]) and core outcomes into HTTP answers; it decides nothing about
//! streams itself. A request's path through the files: [`crate::request`] (headers, session),
//! [`crate::post`] or [`crate::stateless`] or [`crate::get`], [`crate::answer`] (the handler
//! run and its answer stored), [`crate::respond`] (JSON, finished SSE body, or
//! [`crate::writer`]), with shared state in [`crate::common`], the store-facing
//! [`crate::outbox`] and the [`crate::sweeper`].

use std::future::Future;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use forkless_store::Store;
use http::{HeaderValue, StatusCode, header};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::config::{ConfigError, ServerConfig};
use crate::error::Error;
use crate::handler::Handler;
use crate::metrics::Metrics;
use crate::node::{LiveSessions, LocalAttachments};
use crate::session::Outbox;

use crate::answer::Answerer;
use crate::clock::millis;
use crate::common::Common;
use crate::endpoint;
use crate::outbox::StoreOutbox;

/// The MCP Streamable HTTP server around a store and a handler.
pub struct Server<S, H> {
    common: Arc<Common<S>>,
    handler: Arc<H>,
    answerer: Arc<Answerer<H>>,
    auth: Option<Arc<crate::auth::Authenticator>>,
}

impl<S, H> Clone for Server<S, H> {
    fn clone(&self) -> Self {
        Self {
            common: Arc::clone(&self.common),
            handler: Arc::clone(&self.handler),
            answerer: Arc::clone(&self.answerer),
            auth: self.auth.clone(),
        }
    }
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
        let store = Arc::new(forkless_store::Equipped::new(store));
        let metrics = Arc::new(Metrics::default());
        let handler = Arc::new(handler);
        let restorable = handler.restorable();
        let served = config.revisions.intersect(match handler.revisions() {
            crate::Revisions::All => forkless_core::RevisionSet::ALL,
            crate::Revisions::SessionsOnly => forkless_core::RevisionSet::SESSIONS,
        });
        if served.is_empty() {
            return Err(ConfigError::NoRevision { offered: config.revisions });
        }
        let told = handler.clone();
        let on_end = Box::new(move |session, reason| {
            let handler = told.clone();
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(async move { handler.session_ended(session, reason).await });
            }
        });
        let sessions = Arc::new(LiveSessions::new(on_end));
        let outbox: Arc<dyn Outbox> = Arc::new(StoreOutbox {
            store: store.clone(),
            cfg: config.core,
            metrics: metrics.clone(),
            max_retained_bytes: config.max_retained_bytes,
            max_retained_bytes_per_principal: config.quotas.max_retained_bytes_per_principal,
            sessions: Arc::downgrade(&sessions),
        });
        let config_forward = (config.forward_connect_timeout, config.forward_head_timeout);
        let shutdown = CancellationToken::new();
        let tasks = Arc::new(crate::tasks::TaskTable::new(
            Box::new(store.clone()),
            config.tasks,
            config.idempotency,
            shutdown.clone(),
            metrics.clone(),
        ));
        let runner_handler = handler.clone();
        tasks.set_runner(Arc::new(move |inputs, task| {
            let handler = runner_handler.clone();
            Box::pin(async move { handler.run_task(inputs, task).await })
        }));
        let request_states = Arc::new(crate::request_state::RequestStates::new(&config.request_state));
        let listeners: Arc<dyn crate::listeners::Publish> = Arc::new(store.clone());
        let common = Common {
            grace_ms: HeaderValue::from(millis(config.core.grace)),
            store,
            cfg: config,
            metrics,
            shutdown,
            stopped: Arc::default(),
            listeners,
            tasks,
            request_states,
            sessions: sessions.clone(),
            attachments: Arc::new(LocalAttachments::default()),
            inbox: sessions,
            restorable,
            served,
            connections: Arc::new(crate::listener::Registry::default()),
            capacity_log: crate::clock::RateLimit::new(std::time::Duration::from_secs(10)),
            evictions_logged: std::sync::Mutex::default(),
            eviction_log: crate::clock::RateLimit::new(std::time::Duration::from_secs(10)),
            outbox,
            routes: crate::node::Routes::default(),
            forwarder: crate::node::Forwarder::new(config_forward.0, config_forward.1),
        };
        let auth = common.cfg.auth.clone().map(|cfg| Arc::new(crate::auth::Authenticator::new(cfg)));
        let answerer = Arc::new(Answerer {
            handler: handler.clone(),
            outbox: common.outbox.clone(),
            tasks: common.tasks.clone(),
            request_states: common.request_states.clone(),
            listeners: common.listeners.clone(),
            metrics: common.metrics.clone(),
            shutdown: common.shutdown.clone(),
            linger: common.cfg.answer_linger,
        });
        Ok(Self { common: Arc::new(common), handler, answerer, auth })
    }

    /// The bearer-token check, when [`ServerConfig::auth`] is set.
    pub fn authenticator(&self) -> Option<&crate::auth::Authenticator> {
        self.auth.as_deref()
    }

    /// The configuration.
    pub fn config(&self) -> &ServerConfig {
        &self.common.cfg
    }

    /// The handler.
    pub fn handler(&self) -> &H {
        &self.handler
    }

    /// The store.
    pub fn store(&self) -> &S {
        self.common.store.inner()
    }

    /// Announce a change to every 2026-07-28 listener whose filter admits it, on every node
    /// sharing the store (see [`crate::RequestContext::notify_listeners`]).
    pub async fn notify_listeners(
        &self,
        method: &str,
        params: serde_json::Value,
    ) -> Result<(), crate::SendError> {
        crate::listeners::announce(self.common.listeners.as_ref(), method, params).await
    }

    /// The token whose cancellation ends every SSE body and tells every handler to stop
    /// (cancelled by [`Self::serve`] when its shutdown signal fires).
    pub fn shutdown_token(&self) -> CancellationToken {
        self.common.shutdown.clone()
    }

    /// The Prometheus text of `/metrics`.
    pub fn metrics_text(&self) -> String {
        self.common.render_metrics(self.handler.metrics())
    }

    /// The router: the MCP endpoint at `config.path`, `GET /metrics`, `GET /healthz`.
    /// Other methods on these paths are answered 405 with `Allow`.
    pub fn router(&self) -> Router {
        let app = App {
            common: self.common.clone(),
            handler: self.handler.clone(),
            answerer: self.answerer.clone(),
        };
        let mcp = axum::routing::post(endpoint::post::<S, H>)
            .get(endpoint::get::<S, H>)
            .delete(endpoint::delete::<S, H>)
            .fallback(|| async { Error::MethodNotAllowed { allow: "GET, POST, DELETE" }.into_response() });
        let get_only = || async { Error::MethodNotAllowed { allow: "GET" }.into_response() };
        let mcp = match &self.auth {
            Some(auth) => {
                mcp.layer(axum::middleware::from_fn_with_state(auth.clone(), crate::auth::require_token))
            }
            None => mcp,
        };
        let stopped = Arc::clone(&self.common.stopped);
        let mcp =
            mcp.layer(axum::middleware::from_fn_with_state(stopped, crate::stopped::refuse_when_stopped));
        let mut router = Router::new()
            .route(&self.common.cfg.path, mcp)
            .route("/metrics", get(metrics_endpoint::<S, H>).fallback(get_only))
            .route("/healthz", get(healthz_endpoint::<S, H>).fallback(get_only))
            .fallback(|| async { Error::PathUnknown.into_response() });
        if let Some(auth) = &self.auth {
            let doc = auth.metadata();
            let metadata = get(move || {
                let doc = doc.clone();
                async move { axum::Json(doc).into_response() }
            })
            .fallback(get_only);
            router = router.route(&auth.metadata_path(), metadata.clone());
            if auth.metadata_path() != "/.well-known/oauth-protected-resource" {
                router = router.route("/.well-known/oauth-protected-resource", metadata);
            }
        }
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

    /// What the listener hands each request to: a POST to the MCP endpoint straight to it
    /// (the router's checks, stopped and token, made inline), the rest through [`Self::router`].
    fn dispatch(&self) -> endpoint::Dispatch {
        let app = App {
            common: self.common.clone(),
            handler: self.handler.clone(),
            answerer: self.answerer.clone(),
        };
        // With the HTTP trace layer every request goes through the router, to be traced.
        let direct = !tracing::enabled!(target: "tower_http::trace", tracing::Level::DEBUG);
        endpoint::dispatch(self.router(), app, self.auth.clone(), direct)
    }

    /// Stop serving at once, for `why`: every request on the MCP endpoint from now on, and
    /// every one still waiting for its answer, is refused with 503 `node_stopped` (call it
    /// when the store refuses work, before a graceful shutdown; `/healthz` says 503 by the
    /// store's own health).
    pub fn stop_serving(&self, why: &str) {
        tracing::warn!(why, "refusing every request from now on");
        self.common.stopped.stop(why.to_owned());
    }

    /// Answer requests whose handler died with an earlier process (the store's recovery lists
    /// them: `Recovery::orphans` in `forkless-store-redb`): each gets a JSON-RPC error carrying its
    /// request id (`-32603`, "the server restarted while handling this request; it was lost",
    /// `data.reason` `restarted`) as the final event of its stream, which completes it, so no
    /// client waits for ever. Call before serving. Returns how many were answered; one that
    /// cannot be (its session ended meanwhile) is logged and skipped.
    pub async fn answer_orphans(&self, orphans: &[forkless_store::Orphan]) -> usize {
        self.common.answer_orphans(orphans, crate::common::Lost::Restart).await
    }

    /// Like [`Self::answer_orphans`], for the requests of sessions this node took over from a
    /// lost one (`SharedStore::take_over`): the error says so (`data.reason` `owner_lost`).
    pub async fn answer_taken_over(&self, orphans: &[forkless_store::Orphan]) -> usize {
        self.common.answer_orphans(orphans, crate::common::Lost::Takeover).await
    }

    /// The revisions this server offers: the configuration's, within the handler's.
    pub fn revisions(&self) -> forkless_core::RevisionSet {
        self.common.served
    }

    /// Settle the tasks (2026-07-28 tasks extension) this node's previous process left: each
    /// open task it owned ends `failed` with reason `owner_lost` or, if its handler declared
    /// it restartable, runs again here under a new epoch ([`Handler::run_task`]). Call before
    /// serving, after the store's recovery; how many were settled.
    pub async fn settle_tasks_left(&self) -> Result<usize, forkless_store::Error> {
        self.common.tasks.settle_left(crate::clock::now()).await
    }

    /// Settle the open tasks of nodes whose lease lapsed (a store shared by many nodes), as
    /// [`Self::settle_tasks_left`] does for this node's own: of every node doing this at once,
    /// exactly one settles each task. How many this node settled.
    pub async fn settle_lapsed_tasks(&self) -> Result<usize, forkless_store::Error> {
        self.common.tasks.settle_lapsed(crate::clock::now()).await
    }

    /// One sweep now (the sweeper task runs this every `sweep_interval`), with the checks
    /// a sweep makes only now and then (live sessions against the store) included.
    pub async fn sweep(&self) {
        self.common.sweep(0).await;
    }

    /// Run the sweeper until shutdown. [`Self::serve`] does this itself.
    pub fn spawn_sweeper(&self) -> JoinHandle<()> {
        let common = self.common.clone();
        tokio::spawn(async move {
            let mut interval = tokio::time::interval(common.cfg.sweep_interval);
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut round = 0u64;
            loop {
                tokio::select! {
                    _ = interval.tick() => {
                        round = round.wrapping_add(1);
                        common.sweep(round).await;
                    }
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
        let signal_task = tokio::spawn(async move {
            shutdown.await;
            tracing::info!("shutting down: ending SSE streams");
            token.cancel();
            let _ = fired_tx.send(());
        });
        let cfg = &self.common.cfg;
        let mut max_connections = cfg.max_connections;
        match crate::listener::open_file_limit() {
            Some(limit) => {
                let room = usize::try_from(limit.saturating_sub(FILES_KEPT)).unwrap_or(usize::MAX).max(1);
                if room < max_connections {
                    tracing::warn!(
                        open_file_limit = limit,
                        max_connections,
                        capped_to = room,
                        "max_connections capped below the open-file limit"
                    );
                    max_connections = room;
                }
                tracing::info!(open_file_limit = limit, max_connections, "connection limits");
            }
            None => tracing::info!(max_connections, "connection limits"),
        }
        let bounds = crate::listener::Bounds {
            header_read_timeout: cfg.header_read_timeout,
            idle_timeout: cfg.idle_timeout,
            max_connections,
            max_header_bytes: cfg.max_header_bytes,
        };
        let accept = crate::listener::Accept::of(&cfg.transport).map_err(std::io::Error::other)?;
        let stop_accepting = CancellationToken::new();
        let accepting = tokio::spawn(crate::listener::serve(
            listener,
            accept,
            self.dispatch(),
            bounds,
            self.common.metrics.clone(),
            self.common.connections.clone(),
            stop_accepting.clone(),
        ));
        let _ = fired_rx.await;
        let _ = signal_task.await;
        stop_accepting.cancel();
        let drain = self.common.cfg.drain_timeout;
        let out = match accepting.await {
            Ok(connections) => {
                if tokio::time::timeout(drain, connections.wait()).await.is_err() {
                    tracing::warn!(?drain, "drain timeout passed; dropping remaining connections");
                }
                Ok(())
            }
            Err(e) => Err(std::io::Error::other(e)),
        };
        self.common.shutdown.cancel();
        sweeper.abort();
        out
    }
}

/// File descriptors kept out of `max_connections`: the store's files, logs, the listener.
const FILES_KEPT: u64 = 64;

/// The router's state.
pub(crate) struct App<S, H> {
    pub(crate) common: Arc<Common<S>>,
    pub(crate) handler: Arc<H>,
    /// Runs the requests and delivers their answers.
    pub(crate) answerer: Arc<Answerer<H>>,
}

impl<S, H> Clone for App<S, H> {
    fn clone(&self) -> Self {
        Self { common: self.common.clone(), handler: self.handler.clone(), answerer: self.answerer.clone() }
    }
}

async fn metrics_endpoint<S: Store, H: Handler>(State(app): State<App<S, H>>) -> Response {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], app.common.render_metrics(app.handler.metrics()))
        .into_response()
}

/// `/healthz`: 200 `ok` while the store can serve, else 503 with the store's reason (a
/// load balancer stops sending requests to a node whose database is gone, or that lost its
/// node lease), and 503 as well when the store has not answered within `health_timeout`.
async fn healthz_endpoint<S: Store, H: Handler>(State(app): State<App<S, H>>) -> Response {
    let limit = app.common.cfg.health_timeout;
    let why = match tokio::time::timeout(limit, app.common.store.health()).await {
        Ok(Ok(())) => return "ok\n".into_response(),
        Ok(Err(e)) => e.to_string(),
        Err(_) => format!("the store did not answer within {} ms", limit.as_millis()),
    };
    let body = serde_json::json!({ "status": "unavailable", "store": why });
    (StatusCode::SERVICE_UNAVAILABLE, axum::Json(body)).into_response()
}
