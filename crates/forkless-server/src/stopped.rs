//! A node that may no longer serve: its store refuses work (a node lease it no longer trusts,
//! a failed durable write). From the moment it knows, every request on the MCP endpoint, the
//! new ones and those still waiting for their answer, is refused with 503 `node_stopped` and
//! `Retry-After`, at once: a request waiting on a database behind a silent partition, or one
//! forwarded here by another node, is not held until a drain ends. Streams already answered
//! end with the graceful shutdown that follows.
//!
//! It owns that refusal, not the decision to stop (the caller's: `forkless serve` stops when
//! its lease is lost or the durable store failed).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

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
    State(stopped): State<Arc<Stopped>>,
    request: Request,
    next: Next,
) -> Response {
    guard(stopped, next.run(request)).await
}

/// `answer`, unless the node is stopped or stops before it is ready: then the refusal.
pub(crate) fn guard<F: Future<Output = Response>>(stopped: Arc<Stopped>, answer: F) -> Guarded<F> {
    Guarded { answer, stopped, stop: None }
}

pin_project_lite::pin_project! {
    /// The future [`guard`] returns. Written out rather than an `async fn` with `select!`: that
    /// held the answer's future twice (as the argument, and moved into the selection), and a
    /// POST's future is moved into its task on every request. The wait for the stop is made
    /// only once the answer is not ready at once (the common answer is).
    pub(crate) struct Guarded<F> {
        #[pin]
        answer: F,
        stopped: Arc<Stopped>,
        stop: Option<Pin<Box<WaitForCancellationFutureOwned>>>,
    }
}

impl<F: Future<Output = Response>> Future for Guarded<F> {
    type Output = Response;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Response> {
        let this = self.project();
        if this.stopped.token.is_cancelled() {
            return Poll::Ready(this.stopped.refusal());
        }
        if let Poll::Ready(response) = this.answer.poll(cx) {
            return Poll::Ready(response);
        }
        let token = &this.stopped.token;
        let stop = this.stop.get_or_insert_with(|| Box::pin(token.clone().cancelled_owned()));
        match stop.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(this.stopped.refusal()),
            Poll::Pending => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use http::StatusCode;

    use super::*;

    fn answer() -> Response {
        StatusCode::OK.into_response()
    }

    #[tokio::test]
    async fn a_ready_answer_goes_out_and_a_stopped_node_refuses_without_running_it() {
        let stopped = Arc::new(Stopped::default());
        assert_eq!(guard(stopped.clone(), async { answer() }).await.status(), StatusCode::OK);

        stopped.stop("lease lost".into());
        let ran = AtomicBool::new(false);
        let refused = guard(stopped, async {
            ran.store(true, Ordering::Relaxed);
            answer()
        })
        .await;
        assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(!ran.load(Ordering::Relaxed), "the answer ran on a stopped node");
    }

    #[tokio::test]
    async fn an_answer_still_waiting_when_the_node_stops_is_refused_at_once() {
        let stopped = Arc::new(Stopped::default());
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let waiting = tokio::spawn(guard(stopped.clone(), async move {
            let _ = rx.await; // never sent while the guard waits: a store behind a partition
            answer()
        }));
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        stopped.stop("lease lost".into());
        let refused = tokio::time::timeout(std::time::Duration::from_secs(5), waiting)
            .await
            .expect("the waiting answer was not refused when the node stopped")
            .unwrap();
        assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
        let body = axum::body::to_bytes(refused.into_body(), 4096).await.unwrap();
        assert!(String::from_utf8_lossy(&body).contains("node_stopped"), "{body:?}");
        drop(tx);
    }
}
