//! A node that may no longer serve: its store refuses work (a node lease it no longer trusts,
//! a failed durable write). From the moment it knows, every request on the MCP endpoint, the
//! new ones and those still waiting for their answer, is refused with 503 `node_stopped` and
//! `Retry-After`, at once: a request waiting on a database behind a silent partition, or one
//! forwarded here by another node, is not held until a drain ends. Streams already answered
//! end with the graceful shutdown that follows.
//!
//! It owns that refusal, not the decision to stop (the caller's: `forkless serve` stops when
//! its lease is lost or the durable store failed).

use std::sync::OnceLock;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio_util::sync::CancellationToken;

use crate::Error;

/// Whether, and why, this node stopped serving.
#[derive(Debug, Default)]
pub(crate) struct Stopped {
    token: CancellationToken,
    why: OnceLock<String>,
}

impl Stopped {
    /// Stop serving for `why` (the first reason given is kept).
    pub(crate) fn stop(&self, why: String) {
        let _ = self.why.set(why);
        self.token.cancel();
    }

    fn refusal(&self) -> Response {
        let why = self.why.get().cloned().unwrap_or_default();
        Error::NodeStopped(why).into_response()
    }
}

/// The middleware: refuse when stopped, and refuse a request still in flight the moment the
/// node stops.
pub(crate) async fn refuse_when_stopped(
    State(stopped): State<std::sync::Arc<Stopped>>,
    request: Request,
    next: Next,
) -> Response {
    guard(&stopped, next.run(request)).await
}

/// `answer`, unless the node is stopped or stops before it is ready: then the refusal.
pub(crate) async fn guard(stopped: &Stopped, answer: impl Future<Output = Response>) -> Response {
    if stopped.token.is_cancelled() {
        return stopped.refusal();
    }
    tokio::select! {
        biased;
        response = answer => response,
        () = stopped.token.cancelled() => stopped.refusal(),
    }
}
