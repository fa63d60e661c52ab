//! Running one call to its outcome: the request's context as its revision gives it (logs,
//! tasks, `requestState`), the handler, and a panic becoming an internal error.
//!
//! This module owns what a handler is given and what its outcome becomes; where the answer
//! goes is [`super`]'s.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use forkless_store::Spent;
use futures::FutureExt as _;
use serde_json::{Map, Value, json};
use tracing::Instrument as _;

use super::Answerer;
use crate::context::{LogOptIn, Outlet, RequestContext, SessionHandle, StateSeal};
use crate::handler::{Handler, TaskSupport};
use crate::input::Rounds;
use crate::jsonrpc::RpcError;
use crate::request_state::{Binding, Refused};
use crate::session::{RequestCancel, SessionShared};
use crate::tasks::TaskStarter;

/// One client request's identity and input.
pub(crate) struct Call {
    pub(crate) id: Value,
    pub(crate) method: String,
    pub(crate) params: Option<Value>,
}

impl<H: Handler> Answerer<H> {
    /// Run one request to its outcome (a panicking handler becomes an internal error, never a
    /// crashed server). Callers run this in a task of its own already, so the panic is caught
    /// here rather than by spawning yet another task per request.
    pub(crate) async fn run(
        &self,
        shared: Arc<SessionShared>,
        call: &mut Call,
        cancel: RequestCancel,
        outlet: Outlet,
    ) -> (Result<Value, RpcError>, Polled) {
        if call.method == "ping" {
            return (Ok(json!({})), Polled::AtOnce);
        }
        // 2026-07-28: a retry's requestState is checked (and used up) before the handler runs.
        // Only then: the session revisions' hot path allocates nothing for it.
        let (state, rounds) = match shared.revision.asks_by_retry() {
            true => {
                // Boxed in a statement of its own: this rare step's state stays out of `run`'s.
                let opening = Box::pin(self.opened_state(&shared, call));
                let (state, earlier) = match opening.await {
                    Ok(opened) => opened.unzip(),
                    Err(refused) => return (Err(refused), Polled::Longer),
                };
                (state, Some(self.rounds(&shared, call, earlier.unwrap_or_default())))
            }
            false => (None, None),
        };
        // Awaited where it is made: a future bound to a name first would take its room in this
        // state machine twice.
        let (out, polled, took) =
            timed(self.handling(&shared, call, cancel, outlet, state, rounds.as_ref())).await;
        self.metrics.request_took(took.as_secs_f64());
        // 2026-07-28: a round that stopped on unanswered input is answered with what it asked.
        if let Some((rounds, seal)) = &rounds
            && let Some(requests) = rounds.unanswered(&out)
        {
            let binding = Binding {
                principal: seal.principal.as_deref(),
                method: &seal.method,
                name: seal.name.as_deref(),
            };
            let sealed = seal.states.seal(&Value::Null, rounds.answers(), &binding, crate::clock::now());
            let asked =
                json!({ "resultType": "input_required", "inputRequests": requests, "requestState": sealed });
            return (Ok(asked), polled);
        }
        (out, polled)
    }

    /// 2026-07-28: the rounds of input of a request that may be retried with input (`earlier`:
    /// the answers its `requestState` carried), and the seal for its next `requestState`.
    fn rounds(
        &self,
        shared: &SessionShared,
        call: &Call,
        earlier: Map<String, Value>,
    ) -> (Arc<Rounds>, StateSeal) {
        let rounds = Arc::new(Rounds::new(earlier, call.params.as_ref()));
        let seal = StateSeal {
            states: self.request_states.clone(),
            principal: shared.principal.clone(),
            method: call.method.clone(),
            name: request_name(call),
        };
        (rounds, seal)
    }

    /// The handler's run of `call` in its context, a panic caught as an internal error. A plain
    /// function, not part of [`Self::run`]'s state machine: the context and the handler's
    /// future are held once, in the future returned, rather than also in `run`'s state, which
    /// is moved into a task for every request.
    fn handling(
        &self,
        shared: &Arc<SessionShared>,
        call: &mut Call,
        cancel: RequestCancel,
        outlet: Outlet,
        state: Option<Value>,
        rounds: Option<&(Arc<Rounds>, StateSeal)>,
    ) -> impl Future<Output = Result<Value, RpcError>> + Send + 'static {
        // Two lookups rather than `Value::pointer`, which allocates for every path segment.
        let progress_token = call.params.as_ref().and_then(|p| p.get("_meta")?.get("progressToken")).cloned();
        // 2026-07-28: logs only for a request that opted in, at or above its level.
        let logs = if shared.revision.logs_by_request() {
            LogOptIn::from_meta(
                call.params.as_ref().and_then(|p| p.get("_meta")?.get("io.modelcontextprotocol/logLevel")),
            )
        } else {
            LogOptIn::Session
        };
        // 2026-07-28: a request that declared the tasks extension may become a task.
        let tasks = (shared.revision.has_tasks()
            && self.handler.task_support() == TaskSupport::Offered
            && crate::tasks::declared(&shared.client_capabilities))
        .then(|| TaskStarter {
            table: self.tasks.clone(),
            principal: shared.principal.clone(),
            share: shared.quota_key.get().cloned(),
        });
        let ctx = RequestContext {
            session: SessionHandle { shared: shared.clone() },
            request_id: call.id.clone(),
            progress_token,
            cancel,
            outlet,
            logs,
            tasks,
            states: rounds.map(|(_, seal)| seal.clone()),
            state,
            rounds: rounds.map(|(rounds, _)| rounds.clone()),
            listeners: self.listeners.clone(),
            parked: None,
        };
        let handler = self.handler.clone();
        let span = tracing::info_span!("request", session = %shared.id, id = %call.id, method = %call.method);
        // Moved, not cloned: after this only the call's id is needed (for the response).
        let (method, params) = (std::mem::take(&mut call.method), call.params.take());
        let session = shared.id;
        let handling = async move { handler.handle_request(&method, params, ctx).await }.instrument(span);
        AssertUnwindSafe(handling).catch_unwind().map(move |out| {
            out.unwrap_or_else(|panic| {
                let why = panic
                    .downcast_ref::<&str>()
                    .copied()
                    .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
                    .unwrap_or("a panic");
                tracing::warn!(%session, error = why, "handler panicked");
                Err(RpcError::internal("the handler failed"))
            })
        })
    }

    /// The `requestState` a 2026-07-28 request carries, opened for its principal, method and
    /// name, and spent in the store (once, on any node sharing it); a refused one answers the
    /// request with `-32602` and its reason.
    async fn opened_state(
        &self,
        shared: &SessionShared,
        call: &Call,
    ) -> Result<Option<(Value, Map<String, Value>)>, RpcError> {
        let text = match call.params.as_ref().and_then(|p| p.get("requestState")) {
            None | Some(Value::Null) => return Ok(None),
            Some(Value::String(text)) => text,
            Some(_) => return Err(RpcError::invalid_params("invalid params: requestState must be a string")),
        };
        let name = request_name(call);
        let binding =
            Binding { principal: shared.principal.as_deref(), method: &call.method, name: name.as_deref() };
        let now = crate::clock::now();
        let opened = self.request_states.open(text, &binding, now).map_err(Refused::to_rpc)?;
        match self.outbox.spend(opened.key, opened.issued, opened.until, now).await {
            Ok(Spent::Now) => Ok(Some((opened.state, opened.answers))),
            Ok(Spent::Before) => Err(Refused::Replayed.to_rpc()),
            Ok(Spent::Unvouched) => Err(Refused::Unvouched.to_rpc()),
            Err(e) => Err(RpcError::internal(format!("requestState cannot be checked now: {e}"))),
        }
    }

    /// Whether a request was cancelled by the client (rather than by the end of its session or
    /// of the server, which answer it with an error).
    pub(crate) fn withdrawn(&self, shared: &SessionShared, cancel: &RequestCancel) -> bool {
        cancel.is_cancelled(&shared.cancel) && shared.ended().is_none() && !self.shutdown.is_cancelled()
    }
}

/// Whether a request's handler was done on its first poll.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Polled {
    /// Done on its first poll: its answer is known before anything else happens.
    AtOnce,
    /// It waited for something (or a step before it did).
    Longer,
}

/// Run `fut`, and say whether it was done on its first poll and how long it took from the end
/// of that poll: a handler done on its first poll (most are) took no time the request
/// histogram's buckets can tell (the smallest is a millisecond) and costs no clock read; a
/// longer one's first poll, a few microseconds, is not counted. (This one wrapper tells both:
/// each wrapper around the handler's future is one more move of it.)
fn timed<F: Future>(fut: F) -> Timed<F> {
    Timed { fut, started: None }
}

pin_project_lite::pin_project! {
    /// The future of [`timed`].
    struct Timed<F> {
        #[pin]
        fut: F,
        started: Option<tokio::time::Instant>,
    }
}

impl<F: Future> Future for Timed<F> {
    type Output = (F::Output, Polled, std::time::Duration);

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let this = self.project();
        match this.fut.poll(cx) {
            std::task::Poll::Ready(out) => std::task::Poll::Ready(match this.started {
                None => (out, Polled::AtOnce, std::time::Duration::ZERO),
                Some(started) => (out, Polled::Longer, started.elapsed()),
            }),
            std::task::Poll::Pending => {
                this.started.get_or_insert_with(tokio::time::Instant::now);
                std::task::Poll::Pending
            }
        }
    }
}

/// The tool or prompt a `tools/call` or `prompts/get` names (what a `requestState` is bound to
/// beside the method).
fn request_name(call: &Call) -> Option<String> {
    let field = match call.method.as_str() {
        "tools/call" | "prompts/get" => "name",
        "resources/read" => "uri",
        _ => return None,
    };
    call.params.as_ref().and_then(|p| p.get(field)).and_then(Value::as_str).map(str::to_owned)
}
