//! What the client tells the application besides responses: server notifications, stream
//! identity changes, resumptions and session ends, on one ordered channel; and the
//! application's answer to server-to-client requests.

use std::pin::Pin;
use std::task::{Context, Poll};

use forkless_core::StreamId;
use futures::Stream;
use futures::future::BoxFuture;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::error::Error;
pub use crate::jsonrpc::{Notification, RpcError};
use crate::resume::Continuity;

/// Which SSE stream an event concerns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StreamOrigin {
    /// The session's standalone GET stream.
    Standalone,
    /// The stream answering our request with this JSON-RPC id.
    Request(u64),
}

/// One item of [`crate::Client::notifications`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum ClientEvent {
    /// A server notification not claimed by a progress callback.
    Notification(Notification),
    /// A reconnect was answered by a stream that is not a proven continuation of the one we
    /// had: its cursor was reset. Work pending on `previous` may need reconciling.
    NewStream {
        /// The stream concerned.
        origin: StreamOrigin,
        /// The identity we tried to continue (`None` on a plain-specification server).
        previous: Option<StreamId>,
        /// The identity we got (`None` if the server did not name it).
        current: Option<StreamId>,
    },
    /// A stream was resumed after losing its connection.
    Resumed {
        /// The stream concerned.
        origin: StreamOrigin,
        /// Its identity, when the server named it.
        stream: Option<StreamId>,
        /// Whether the continuation was verified.
        continuity: Continuity,
    },
    /// A stream stopped for good with an error that did not end the session (its request, if
    /// any, got the same error).
    StreamFailed {
        /// The stream concerned.
        origin: StreamOrigin,
        /// Why.
        error: Error,
    },
    /// The session ended (404 from the server, a gap, or [`crate::Client::close`]).
    SessionEnded {
        /// The error every in-flight request received.
        error: Error,
    },
    /// A new session was initialized after the previous one ended (re-initialize on 404).
    SessionStarted {
        /// The new `Mcp-Session-Id`, if the server assigned one.
        session_id: Option<String>,
    },
}

/// The client's event stream: a [`Stream`] of [`ClientEvent`]s, in the order the client saw
/// them. Unbounded, so a slow reader never stalls the stream drivers; read it.
#[derive(Debug)]
pub struct Notifications {
    rx: mpsc::UnboundedReceiver<ClientEvent>,
}

impl Notifications {
    pub(crate) fn new(rx: mpsc::UnboundedReceiver<ClientEvent>) -> Self {
        Self { rx }
    }

    /// The next event; `None` once the client is dropped.
    pub async fn recv(&mut self) -> Option<ClientEvent> {
        self.rx.recv().await
    }
}

impl Stream for Notifications {
    type Item = ClientEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<ClientEvent>> {
        self.rx.poll_recv(cx)
    }
}

/// A `notifications/progress` for a call made with a progress callback.
#[derive(Clone, Debug, PartialEq)]
pub struct Progress {
    /// Progress so far.
    pub progress: f64,
    /// The total, if known.
    pub total: Option<f64>,
    /// A message, if any.
    pub message: Option<String>,
}

impl Progress {
    pub(crate) fn from_params(params: &Value) -> Option<Self> {
        Some(Self {
            progress: params.get("progress")?.as_f64()?,
            total: params.get("total").and_then(Value::as_f64),
            message: params.get("message").and_then(Value::as_str).map(str::to_owned),
        })
    }
}

/// The application's answer to server-to-client requests (`sampling/createMessage`,
/// `elicitation/create`, `roots/list`, …). The client POSTs whatever it returns as the
/// JSON-RPC response. `ping` is answered by the client itself.
pub trait ServerRequestHandler: Send + Sync + 'static {
    /// Answer one request.
    fn handle(&self, method: String, params: Option<Value>) -> BoxFuture<'static, Result<Value, RpcError>>;
}

/// The default handler: every request is answered with "method not found".
#[derive(Clone, Copy, Debug, Default)]
pub struct RejectAll;

impl ServerRequestHandler for RejectAll {
    fn handle(&self, method: String, _params: Option<Value>) -> BoxFuture<'static, Result<Value, RpcError>> {
        Box::pin(async move { Err(RpcError::method_not_found(&method)) })
    }
}

/// A [`ServerRequestHandler`] from an async closure; see [`handler_fn`].
#[derive(Clone, Copy, Debug)]
pub struct HandlerFn<F>(F);

/// Build a [`ServerRequestHandler`] from `|method, params| async move { … }`.
pub fn handler_fn<F, Fut>(f: F) -> HandlerFn<F>
where
    F: Fn(String, Option<Value>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Value, RpcError>> + Send + 'static,
{
    HandlerFn(f)
}

impl<F, Fut> ServerRequestHandler for HandlerFn<F>
where
    F: Fn(String, Option<Value>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Value, RpcError>> + Send + 'static,
{
    fn handle(&self, method: String, params: Option<Value>) -> BoxFuture<'static, Result<Value, RpcError>> {
        Box::pin((self.0)(method, params))
    }
}
