//! A backend's call across 2026-07-28 rounds. The revision has no stream for a server's own
//! requests, so when the backend asks its client something mid-call (sampling, elicitation,
//! roots) the call is kept running on this node, the question goes out as an
//! `input_required` round (its key unique to the round, the round's id sealed in
//! `requestState`), and the client's retry brings the answer to the waiting backend; the call
//! then goes on to its result or its next question. The backend is never asked the same call
//! twice: nothing is re-run on a retry.
//!
//! A retry that reaches another node, or comes after [`super::BackendConfig::round_ttl`],
//! finds no call waiting and is refused (`-32602`, `data.reason: "round_expired"`). At most
//! [`super::BackendConfig::max_waiting_rounds`] calls wait at once; a question beyond that is
//! refused to the backend, whose tool sees the error.
//!
//! It owns the waiting calls, not the backend's messages (`super::peer`'s).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::BackendConfig;
use crate::context::{Question, RequestContext};
use crate::error::REQUEST_CANCELLED;
use crate::input::AskError;
use crate::jsonrpc::RpcError;

/// Where a round's id travels in the sealed `requestState`.
pub(super) const ROUND: &str = "dev.forkless/backendRound";

/// A call running on a backend, and the questions it asks its client.
pub(super) struct Call {
    pub(super) run: JoinHandle<Result<Value, RpcError>>,
    pub(super) questions: mpsc::Receiver<Question>,
    /// Stops the call (the backend is told, as for a client's cancellation).
    pub(super) cancel: CancellationToken,
}

/// A call waiting for its client's answer to `question`.
struct Waiting {
    call: Call,
    question: Question,
    key: String,
    since: Instant,
}

/// The calls waiting between rounds, by round id.
#[derive(Default)]
pub(super) struct Parked {
    calls: Mutex<HashMap<String, Waiting>>,
}

impl std::fmt::Debug for Parked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Parked").field("waiting", &self.lock().len()).finish()
    }
}

impl Parked {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Waiting>> {
        self.calls.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Stop the calls that waited longer than `ttl`.
    fn expire(&self, ttl: Duration) {
        let now = Instant::now();
        self.lock().retain(|_, w| {
            let keep = now.duration_since(w.since) < ttl;
            if !keep {
                w.call.cancel.cancel();
            }
            keep
        });
    }
}

/// Drive `call` until it answers or asks: this round's answer (the result, or the
/// `input_required` carrying its question).
pub(super) async fn round(
    parked: &Parked,
    cfg: &BackendConfig,
    mut call: Call,
    ctx: &RequestContext,
) -> Result<Value, RpcError> {
    parked.expire(cfg.round_ttl);
    loop {
        let question = tokio::select! {
            out = &mut call.run => return finished(out),
            question = call.questions.recv() => question,
            // The client gave up on this round: the call stops (the revision's rule).
            () = ctx.cancellation().cancelled() => {
                call.cancel.cancel();
                return Err(RpcError::new(REQUEST_CANCELLED, "request cancelled"));
            }
        };
        // No more questions can come: the outcome is all that is left.
        let Some(question) = question else { return finished((&mut call.run).await) };
        if parked.lock().len() >= cfg.max_waiting_rounds {
            let full = RpcError::internal("too many calls are waiting for their clients' input on this node");
            let _ = question.reply.send(Err(full));
            continue;
        }
        return Ok(ask(parked, call, question, ctx));
    }
}

/// Park `call` with `question`; the round's answer asks the client.
fn ask(parked: &Parked, call: Call, question: Question, ctx: &RequestContext) -> Value {
    let id = round_id();
    let key = format!("backend-{id}");
    let requests = json!({ &key: { "method": question.method, "params": question.params } });
    let answer = ctx.input_required(requests, Some(&json!({ ROUND: id })));
    parked.lock().insert(id, Waiting { call, question, key, since: Instant::now() });
    answer
}

/// The retry of round `id`: the client's answer to the waiting question, then the call
/// driven on.
pub(super) async fn resume(
    parked: &Parked,
    cfg: &BackendConfig,
    id: &str,
    ctx: &RequestContext,
) -> Result<Value, RpcError> {
    let Some(Waiting { call, question, key, .. }) = parked.lock().remove(id) else {
        return Err(RpcError::invalid_params(
            "the call this round answers is not waiting on this node (it expired, or the retry reached another node)",
        )
        .with_data(json!({ "reason": "round_expired" })));
    };
    match ctx.ask(&key, &question.method, question.params.clone()).await {
        Ok(answer) => {
            let _ = question.reply.send(Ok(answer));
        }
        // Retried without the answer: ask again, the same call still waiting.
        Err(AskError::Unanswered(_)) => return Ok(ask(parked, call, question, ctx)),
        Err(AskError::Failed(e)) => {
            let _ = question.reply.send(Err(RpcError::internal(format!("the client did not answer: {e}"))));
        }
    }
    round(parked, cfg, call, ctx).await
}

fn finished(out: Result<Result<Value, RpcError>, tokio::task::JoinError>) -> Result<Value, RpcError> {
    out.unwrap_or_else(|_| Err(RpcError::internal("the backend call failed")))
}

/// 128 bits from the OS CSPRNG, hex.
fn round_id() -> String {
    let mut bytes = [0u8; 16];
    forkless_core::EntropySource::fill(&mut forkless_core::OsEntropy, &mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
