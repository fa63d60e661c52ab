//! The test handler and the controls a test drives it with.

use std::sync::{Arc, Mutex};

use forkless_server::{Handler, RequestContext, RpcError, ServerInfo, SessionHandle, TaskSupport};
use serde_json::{Value, json};
use tokio::sync::Semaphore;

/// Controls shared between a test and its handler.
#[derive(Clone)]
pub struct Controls {
    /// Released by the test (`gate.add_permits(1)`); `gated` and `wait` take one permit.
    pub gate: Arc<Semaphore>,
    /// The last session handle a request ran on.
    pub last_session: Arc<Mutex<Option<SessionHandle>>>,
    /// Whether `wait` saw its cancellation.
    pub cancelled: Arc<Mutex<Vec<Value>>>,
    /// The last request context (kept past its response).
    pub last_ctx: Arc<Mutex<Option<RequestContext>>>,
}

impl Controls {
    pub fn new() -> Self {
        Self {
            gate: Arc::new(Semaphore::new(0)),
            last_session: Arc::default(),
            cancelled: Arc::default(),
            last_ctx: Arc::default(),
        }
    }
    pub fn session(&self) -> SessionHandle {
        self.last_session.lock().unwrap().clone().expect("a request ran")
    }
}

/// The test handler.
///
/// - `echo`: returns its params.
/// - `count {n}`: n numbered `notifications/message` on its stream, then `{"done": n}`.
/// - `gated {first, rest}`: `first` messages, waits for the gate, `rest` more, then returns.
/// - `standalone {n}`: n numbered notifications on the standalone stream, then returns.
/// - `standalone-big {n, filler}`: the same, each carrying `filler`.
/// - `wait`: waits for the gate or cancellation.
/// - `ask`: a `roots/list` request to the client; returns the client's result.
/// - `panic`: panics.
/// - `rounds`: (2026-07-28) first an `InputRequiredResult` with a sealed state; with the state
///   echoed, `{"state": …}` as the server opened it.
/// - `announce {method, params}`: a listen notification, to every listener it concerns.
/// - `two-questions`: asks `a` (an elicitation) then `b` (`roots/list`) with `RequestContext::ask`
///   and answers `{"a": …, "b": …}`.
/// - `as-task`: (2026-07-28 with the tasks extension) a task that asks for input `go`, then
///   answers with its params and the answers.
pub struct TestHandler {
    pub controls: Controls,
}

fn n(params: &Option<Value>, key: &str) -> u64 {
    params.as_ref().and_then(|p| p.get(key)).and_then(Value::as_u64).unwrap_or(0)
}

impl Handler for TestHandler {
    fn task_support(&self) -> TaskSupport {
        TaskSupport::Offered
    }

    fn info(&self) -> ServerInfo {
        ServerInfo {
            name: "test".into(),
            version: "0".into(),
            capabilities: json!({ "tools": { "listChanged": true }, "resources": { "subscribe": true } }),
            instructions: Some("for tests".into()),
        }
    }

    async fn handle_request(
        &self,
        method: &str,
        params: Option<Value>,
        ctx: RequestContext,
    ) -> Result<Value, RpcError> {
        *self.controls.last_session.lock().unwrap() = Some(ctx.session().clone());
        *self.controls.last_ctx.lock().unwrap() = Some(ctx.clone());
        let fail = |e: forkless_server::SendError| RpcError::internal(e.to_string());
        match method {
            "echo" => Ok(params.unwrap_or(Value::Null)),
            // Not done on its first poll, done on its second.
            "yield" => {
                tokio::task::yield_now().await;
                Ok(json!({ "yielded": true }))
            }
            "count" => {
                let total = n(&params, "n");
                for i in 1..=total {
                    ctx.log("info", json!({ "i": i })).await.map_err(fail)?;
                }
                Ok(json!({ "done": total }))
            }
            "gated" => {
                let (first, rest) = (n(&params, "first"), n(&params, "rest"));
                for i in 1..=first {
                    ctx.log("info", json!({ "i": i })).await.map_err(fail)?;
                }
                self.controls.gate.acquire().await.expect("gate open").forget();
                for i in first + 1..=first + rest {
                    ctx.log("info", json!({ "i": i })).await.map_err(fail)?;
                }
                Ok(json!({ "done": first + rest }))
            }
            "standalone-big" => {
                let filler = params.as_ref().and_then(|p| p.get("filler")).cloned().unwrap_or(Value::Null);
                for i in 1..=n(&params, "n") {
                    let data = json!({ "level": "info", "data": { "i": i, "filler": filler } });
                    ctx.session().notify("notifications/message", data).await.map_err(fail)?;
                }
                Ok(json!({}))
            }
            "standalone" => {
                for i in 1..=n(&params, "n") {
                    ctx.session()
                        .notify("notifications/message", json!({ "level": "info", "data": { "i": i } }))
                        .await
                        .map_err(fail)?;
                }
                Ok(json!({}))
            }
            "wait" => {
                tokio::select! {
                    p = self.controls.gate.acquire() => { p.expect("gate open").forget(); Ok(json!({ "waited": true })) }
                    () = ctx.cancellation().cancelled() => {
                        self.controls.cancelled.lock().unwrap().push(ctx.request_id().clone());
                        Err(RpcError::new(-32800, "cancelled"))
                    }
                }
            }
            "ask" => ctx.request("roots/list", json!({})).await.map_err(fail),
            "progress" => {
                ctx.progress(1.0, Some(2.0), Some("half")).await.map_err(fail)?;
                Ok(json!({ "token": ctx.progress_token() }))
            }
            "panic" => panic!("the test handler panics on purpose"),
            "rounds" => match ctx.request_state() {
                None => Ok(ctx.input_required(
                    json!({ "go": { "method": "roots/list" } }),
                    Some(&json!({ "round": 1 })),
                )),
                Some(state) => Ok(json!({ "state": state })),
            },
            "announce" => {
                let p = params.unwrap_or(Value::Null);
                let method = p["method"].as_str().unwrap_or_default().to_owned();
                ctx.notify_listeners(&method, p["params"].clone()).await.map_err(fail)?;
                Ok(json!({}))
            }
            "two-questions" => {
                // The same code in every revision: asked on the stream, or over rounds.
                let a = ctx.elicit("a", json!({ "message": "first?" })).await?;
                let b = ctx.ask("b", "roots/list", json!({})).await?;
                Ok(json!({ "a": a, "b": b }))
            }
            "as-task" => {
                let tasks = ctx.tasks().ok_or_else(forkless_server::tasks::missing_capability)?;
                let asked = params.unwrap_or(Value::Null);
                tasks
                    .start(move |task| async move {
                        let mut ask = serde_json::Map::new();
                        ask.insert("go".into(), json!({ "method": "elicitation/create", "params": {} }));
                        let answers = task.input(ask).await.map_err(|e| RpcError::internal(e.to_string()))?;
                        Ok(json!({ "asked": asked, "answers": answers }))
                    })
                    .await
            }
            other => Err(RpcError::method_not_found(other)),
        }
    }
}
