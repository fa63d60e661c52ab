//! Dispatch of one call: running a request's handler to its outcome (a panic becomes an
//! internal error), and the task helpers that keep requests running whatever happens to the
//! connection that asked.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use forkless_store::{Spent, Store};
use futures::FutureExt as _;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::context::LogOptIn;
use crate::context::StateSeal;
use crate::context::{Outlet, RequestContext, SessionHandle};
use crate::handler::{Handler, TaskSupport};
use crate::input::Rounds;
use crate::jsonrpc::RpcError;
use crate::request_state::{Binding, Refused};
use crate::session::SessionShared;
use crate::tasks::TaskStarter;

use crate::server::App;

/// One client request's identity and input.
pub(crate) struct Call {
    pub(crate) id: Value,
    pub(crate) method: String,
    pub(crate) params: Option<Value>,
}

impl<S: Store, H: Handler> App<S, H> {
    /// Run one request to its outcome (a panicking handler becomes an internal error, never a
    /// crashed server). Callers run this in a task of its own already, so the panic is caught
    /// here rather than by spawning yet another task per request.
    pub(crate) async fn run(
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
        // 2026-07-28: logs only for a request that opted in, at or above its level.
        let logs = match shared.revision {
            forkless_core::Revision::V2026_07_28 => LogOptIn::from_meta(
                call.params.as_ref().and_then(|p| p.get("_meta")?.get("io.modelcontextprotocol/logLevel")),
            ),
            _ => LogOptIn::Session,
        };
        // 2026-07-28: a request that declared the tasks extension may become a task.
        let tasks = (shared.revision == forkless_core::Revision::V2026_07_28
            && self.handler.task_support() == TaskSupport::Offered
            && crate::tasks::declared(&shared.client_capabilities))
        .then(|| TaskStarter {
            table: self.common.tasks.clone(),
            principal: shared.principal.clone(),
            share: shared.quota_key.get().cloned(),
        });
        // 2026-07-28: a retry's requestState is checked (and used up) before the handler runs.
        // Only then: the session revisions' hot path allocates nothing for it.
        let (state, rounds, seal) = match shared.revision {
            forkless_core::Revision::V2026_07_28 => {
                let (state, earlier) = self.opened_state(&shared, call).await?.unzip();
                let rounds = Rounds::new(earlier.unwrap_or_default(), call.params.as_ref());
                let seal = StateSeal {
                    states: self.common.request_states.clone(),
                    principal: shared.principal.clone(),
                    method: call.method.clone(),
                    name: request_name(call),
                };
                (state, Some(Arc::new(rounds)), Some(seal))
            }
            _ => (None, None, None),
        };
        let ctx = RequestContext {
            session: SessionHandle { shared: shared.clone() },
            request_id: call.id.clone(),
            progress_token,
            cancel,
            outlet,
            logs,
            tasks,
            states: seal.clone(),
            state,
            rounds: rounds.clone(),
            listeners: self.common.listeners.clone(),
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
        // 2026-07-28: a round that stopped on unanswered input is answered with what it asked.
        if let (Some(rounds), Some(seal)) = (&rounds, &seal)
            && let Some(requests) = rounds.unanswered(&out)
        {
            let binding = Binding {
                principal: seal.principal.as_deref(),
                method: &seal.method,
                name: seal.name.as_deref(),
            };
            let sealed = seal.states.seal(&Value::Null, rounds.answers(), &binding, crate::common::now());
            return Ok(
                json!({ "resultType": "input_required", "inputRequests": requests, "requestState": sealed }),
            );
        }
        out
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
        let now = crate::common::now();
        let opened = self.common.request_states.open(text, &binding, now).map_err(Refused::to_rpc)?;
        match self.common.store.spend(opened.key, opened.issued, opened.until, now).await {
            Ok(Spent::Now) => Ok(Some((opened.state, opened.answers))),
            Ok(Spent::Before) => Err(Refused::Replayed.to_rpc()),
            Ok(Spent::Unvouched) => Err(Refused::Unvouched.to_rpc()),
            Err(e) => Err(RpcError::internal(format!("requestState cannot be checked now: {e}"))),
        }
    }

    /// Whether a request was cancelled by the client (rather than by the end of its session or
    /// of the server, which answer it with an error).
    pub(crate) fn withdrawn(&self, shared: &SessionShared, cancel: &CancellationToken) -> bool {
        cancel.is_cancelled() && shared.ended().is_none() && !self.common.shutdown.is_cancelled()
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

/// A future started by [`start_detached`].
pub(crate) enum Detached<T> {
    /// It finished on its first poll.
    Done(T),
    /// It is running in a task of its own.
    Running(tokio::task::JoinHandle<T>),
}

impl<T> Detached<T> {
    /// Wait for the outcome (an error if the task panicked or was aborted).
    pub(crate) async fn finish(self) -> Result<T, tokio::task::JoinError> {
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

/// Run `fut`, and say whether it was done on its first poll.
pub(crate) async fn first_poll<F: Future>(fut: F) -> (F::Output, bool) {
    let mut fut = std::pin::pin!(fut);
    let mut first = true;
    std::future::poll_fn(move |cx| {
        let at_once = std::mem::replace(&mut first, false);
        fut.as_mut().poll(cx).map(|out| (out, at_once))
    })
    .await
}
