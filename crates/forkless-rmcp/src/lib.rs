//! # forkless-rmcp: an `rmcp` server on the fork-free forkless transport
//!
//! Keep the server code written with `rmcp`, the official Rust MCP SDK (`#[tool_router]`,
//! `ServerHandler`), and serve it through forkless: every reconnect continues right after the
//! client's cursor or is refused with a typed reason, on any forkless store.
//!
//! ```ignore
//! // rmcp's own transport:
//! let service = StreamableHttpService::new(|| Ok(Counter::new()), Default::default(), config);
//! let router = axum::Router::new().nest_service("/mcp", service);
//! // forkless:
//! let server = forkless_rmcp::server(MemoryStore::new(), || Ok(Counter::new()), ServerConfig::default())?;
//! let router = server.router();
//! ```
//!
//! Each session runs one service instance, made by the factory at the session's `initialize`
//! and connected to forkless by an in-process message channel, routed by
//! `forkless_server::backend` (the layer `forkless gateway` uses for stdio children):
//! responses and progress to their request's stream, other notifications to the standalone
//! stream, the service's requests to the client (sampling, elicitation, roots) and their
//! answers back. A session's state is its service instance, so by default a session is not
//! restored after a restart or on another node (it ends with `owner_lost`);
//! [`Options::restorable`] says otherwise for a service whose state lives elsewhere.
//!
//! This crate owns the channel between an rmcp service and the message layer, and nothing
//! else: no routing, no HTTP, no store.

use std::future::Future;
use std::sync::Arc;

use forkless_core::SessionId;
use forkless_server::backend::{BackendConfig, Connector, ExitReason, FromBackend, Link, MessageBackend};
use forkless_server::{ConfigError, Restorable, RpcError, Server, ServerConfig};
use forkless_store::Store;
use futures::{SinkExt as _, StreamExt as _};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::{ServerHandler, ServiceExt as _};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// How an rmcp service is served.
#[derive(Clone, Copy, Debug, Default)]
pub struct Options {
    /// Whether the service's sessions survive the process that created them: `Yes` only if
    /// a new instance made by the factory, initialized with what the client said at
    /// `initialize`, carries the session on (its state is shared, not in the instance).
    /// Default `No`.
    pub restorable: Restorable,
}

/// The forkless server for services made by `factory`, on `store`.
pub fn server<S, F, H>(
    store: S,
    factory: F,
    config: ServerConfig,
) -> Result<Server<S, MessageBackend<RmcpConnector<F>>>, ConfigError>
where
    S: Store,
    F: Fn() -> Result<H, std::io::Error> + Send + Sync + 'static,
    H: ServerHandler,
{
    server_with(store, factory, config, Options::default())
}

/// [`server`], with [`Options`].
pub fn server_with<S, F, H>(
    store: S,
    factory: F,
    config: ServerConfig,
    options: Options,
) -> Result<Server<S, MessageBackend<RmcpConnector<F>>>, ConfigError>
where
    S: Store,
    F: Fn() -> Result<H, std::io::Error> + Send + Sync + 'static,
    H: ServerHandler,
{
    let backend = BackendConfig { restorable: options.restorable, ..BackendConfig::default() };
    Server::new(store, MessageBackend::new(RmcpConnector { factory: Arc::new(factory) }, backend), config)
}

/// Starts one service instance per session, connected by an in-process channel.
#[derive(Debug)]
pub struct RmcpConnector<F> {
    factory: Arc<F>,
}

/// Stops a session's service instance when the session lets go of it.
struct Running(CancellationToken);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

impl<F, H> Connector for RmcpConnector<F>
where
    F: Fn() -> Result<H, std::io::Error> + Send + Sync + 'static,
    H: ServerHandler,
{
    fn connect(&self, session: Option<SessionId>) -> impl Future<Output = Result<Link, RpcError>> + Send {
        let made = (self.factory)();
        async move {
            let service =
                made.map_err(|e| RpcError::internal(format!("the service could not be made: {e}")))?;
            let (to_backend, incoming) = mpsc::channel::<Value>(64);
            let (outgoing, from_backend) = mpsc::channel::<FromBackend>(64);
            let cancel = CancellationToken::new();
            tokio::spawn(run(service, incoming, outgoing, cancel.clone(), session));
            Ok(Link {
                to_backend,
                from_backend,
                guard: Box::new(Running(cancel)),
                exit: ExitReason::default(),
                facts: Default::default(),
            })
        }
    }
}

/// Run one service instance over the channel until it ends or is cancelled; its messages out
/// end with it, which tells the message layer it exited.
async fn run<H: ServerHandler>(
    service: H,
    incoming: mpsc::Receiver<Value>,
    outgoing: mpsc::Sender<FromBackend>,
    cancel: CancellationToken,
    session: Option<SessionId>,
) {
    let who = session.map_or_else(|| "shared".to_owned(), |s| s.to_string());
    // What forkless sends, as the service's messages in; what is not one is logged and skipped.
    let stream = futures::stream::unfold(incoming, |mut incoming| async move {
        loop {
            let value = incoming.recv().await?;
            match serde_json::from_value::<ClientJsonRpcMessage>(value) {
                Ok(message) => return Some((message, incoming)),
                Err(e) => tracing::warn!(error = %e, "a message the rmcp service cannot take: skipped"),
            }
        }
    })
    .boxed();
    let sink = futures::sink::unfold(outgoing, |outgoing, message: ServerJsonRpcMessage| async move {
        let value = serde_json::to_value(message).map_err(std::io::Error::other)?;
        outgoing.send(value.into()).await.map_err(|_| std::io::Error::other("the session is gone"))?;
        Ok::<_, std::io::Error>(outgoing)
    });
    let sink = Box::pin(sink.sink_map_err(|e: std::io::Error| e));
    match service.serve_with_ct((sink, stream), cancel).await {
        Ok(running) => match running.waiting().await {
            Ok(reason) => tracing::debug!(session = %who, ?reason, "rmcp service ended"),
            Err(e) => tracing::warn!(session = %who, error = %e, "rmcp service failed"),
        },
        Err(e) => tracing::warn!(session = %who, error = %e, "rmcp service did not initialize"),
    }
}
