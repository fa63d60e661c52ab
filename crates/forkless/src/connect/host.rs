//! The host's side of the bridge: newline-delimited JSON-RPC on stdin and stdout. One writer
//! task owns stdout, so messages never interleave; requests the bridge asks of the host
//! (sampling, elicitation, roots) wait here for the host's answer; what the host must be told
//! (a stream given up, a session ended) goes to stderr and, as `notifications/message`, to
//! the host itself.
//!
//! It owns the framing and the host's pending answers, not what is forwarded (`super::era`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use forkless_client::{Error as ClientError, Progress, RpcError, ServerRequestHandler};
use futures::future::BoxFuture;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::sync::{mpsc, oneshot};

/// JSON-RPC: the host sent something that is not JSON.
pub(crate) const PARSE_ERROR: i64 = -32700;
/// JSON-RPC: the host sent JSON that is not a request, notification or response.
pub(crate) const INVALID_REQUEST: i64 = -32600;
/// The code of a request the bridge could not carry to its end (the reason is in `data`).
pub(crate) const NOT_DELIVERED: i64 = -32000;

/// One message from the host.
#[derive(Debug)]
pub(crate) enum FromHost {
    Request { id: Value, method: String, params: Option<Value> },
    Notification { method: String, params: Option<Value> },
    Response { id: Value, outcome: Result<Value, RpcError> },
}

impl FromHost {
    /// Read one line; `Err` holds the error answer the host gets for it.
    pub(crate) fn parse(line: &str) -> Result<Self, Value> {
        let value: Value = serde_json::from_str(line)
            .map_err(|e| error_message(&Value::Null, PARSE_ERROR, &format!("not JSON: {e}"), None))?;
        let invalid = |why: &str| {
            let id = value.get("id").cloned().unwrap_or(Value::Null);
            error_message(&id, INVALID_REQUEST, why, None)
        };
        let Value::Object(mut m) = value.clone() else { return Err(invalid("a message must be an object")) };
        let params = m.remove("params");
        match (m.remove("method"), m.remove("id")) {
            (Some(Value::String(method)), Some(id)) => Ok(Self::Request { id, method, params }),
            (Some(Value::String(method)), None) => Ok(Self::Notification { method, params }),
            (None, Some(id)) => match (m.remove("result"), m.remove("error")) {
                (Some(result), None) => Ok(Self::Response { id, outcome: Ok(result) }),
                (None, Some(error)) => Ok(Self::Response {
                    id,
                    outcome: Err(RpcError {
                        code: error.get("code").and_then(Value::as_i64).unwrap_or(-32603),
                        message: error.get("message").and_then(Value::as_str).unwrap_or_default().to_owned(),
                        data: error.get("data").cloned(),
                    }),
                }),
                _ => Err(invalid("a response needs exactly one of result and error")),
            },
            _ => Err(invalid("a message needs a method or an id")),
        }
    }
}

/// Where the host's answer to one of the bridge's questions goes.
type Answer = oneshot::Sender<Result<Value, RpcError>>;

/// The host: where messages to it are written, and its answers awaited.
#[derive(Clone, Debug)]
pub(crate) struct Host {
    out: mpsc::UnboundedSender<Value>,
    asked: Arc<Mutex<HashMap<String, Answer>>>,
    next: Arc<AtomicU64>,
}

impl Host {
    /// A host on `writer` (stdout); the task writing to it ends when every `Host` is dropped.
    pub(crate) fn new(
        writer: impl tokio::io::AsyncWrite + Unpin + Send + 'static,
    ) -> (Self, tokio::task::JoinHandle<()>) {
        let (out, mut rx) = mpsc::unbounded_channel::<Value>();
        let writing = tokio::spawn(async move {
            let mut writer = writer;
            while let Some(message) = rx.recv().await {
                let mut line = message.to_string();
                line.push('\n');
                if writer.write_all(line.as_bytes()).await.is_err() || writer.flush().await.is_err() {
                    tracing::warn!("the host's stdout is closed; nothing more reaches it");
                    return;
                }
            }
        });
        (Self { out, asked: Arc::default(), next: Arc::new(AtomicU64::new(1)) }, writing)
    }

    /// Send one message.
    pub(crate) fn send(&self, message: Value) {
        let _ = self.out.send(message);
    }

    /// Answer the host's request `id`.
    pub(crate) fn answer(&self, id: &Value, outcome: Result<Value, ClientError>) {
        self.send(match outcome {
            Ok(result) => json!({ "jsonrpc": "2.0", "id": id, "result": result }),
            Err(e) => refusal(id, &e),
        });
    }

    /// A notification to the host.
    pub(crate) fn notify(&self, method: &str, params: Option<Value>) {
        let mut message = json!({ "jsonrpc": "2.0", "method": method });
        if let Some(params) = params {
            message["params"] = params;
        }
        self.send(message);
    }

    /// `notifications/progress` for the host's own `token`.
    pub(crate) fn progress(&self, token: &Value, p: &Progress) {
        let mut params = json!({ "progressToken": token, "progress": p.progress });
        if let Some(total) = p.total {
            params["total"] = json!(total);
        }
        if let Some(message) = &p.message {
            params["message"] = json!(message);
        }
        self.notify("notifications/progress", Some(params));
    }

    /// Tell the host (and stderr) something it must know: `level` is an MCP logging level.
    pub(crate) fn tell(&self, level: &str, text: &str) {
        match level {
            "error" | "critical" | "alert" | "emergency" => tracing::error!("{text}"),
            "warning" => tracing::warn!("{text}"),
            _ => tracing::info!("{text}"),
        }
        let params = json!({ "level": level, "logger": "forkless-connect", "data": text });
        self.notify("notifications/message", Some(params));
    }

    /// Ask the host `method` and wait for its answer (the host's stdin closing fails it).
    pub(crate) async fn ask(&self, method: &str, params: Option<Value>) -> Result<Value, RpcError> {
        let id = format!("forkless-connect-{}", self.next.fetch_add(1, Ordering::Relaxed));
        let (tx, rx) = oneshot::channel();
        lock(&self.asked).insert(id.clone(), tx);
        let mut message = json!({ "jsonrpc": "2.0", "id": id, "method": method });
        if let Some(params) = params {
            message["params"] = params;
        }
        self.send(message);
        rx.await.unwrap_or_else(|_| {
            Err(RpcError {
                code: NOT_DELIVERED,
                message: "the host went away before answering".into(),
                data: None,
            })
        })
    }

    /// The host answered one of [`Host::ask`]'s requests.
    pub(crate) fn answered(&self, id: &Value, outcome: Result<Value, RpcError>) {
        let key = id.as_str().map_or_else(|| id.to_string(), str::to_owned);
        match lock(&self.asked).remove(&key) {
            Some(tx) => {
                let _ = tx.send(outcome);
            }
            None => tracing::warn!(%id, "the host answered a request the bridge never asked; dropped"),
        }
    }

    /// Fail every question still waiting for the host (its stdin closed).
    pub(crate) fn gone(&self) {
        lock(&self.asked).clear();
    }
}

/// The server's requests go to the host, its answers back.
impl ServerRequestHandler for Host {
    fn handle(&self, method: String, params: Option<Value>) -> BoxFuture<'static, Result<Value, RpcError>> {
        let host = self.clone();
        Box::pin(async move { host.ask(&method, params).await })
    }
}

/// The error answer for request `id` that failed with `e`: the server's own JSON-RPC error
/// as it sent it; anything else as [`NOT_DELIVERED`] with `data.reason` naming the failure.
pub(crate) fn refusal(id: &Value, e: &ClientError) -> Value {
    match e {
        ClientError::Rpc { code, message, data } => error_message(id, *code, message, data.clone()),
        other => error_message(
            id,
            NOT_DELIVERED,
            &format!("forkless connect: {other}"),
            Some(json!({ "reason": other.reason() })),
        ),
    }
}

/// A JSON-RPC error message.
pub(crate) fn error_message(id: &Value, code: i64, message: &str, data: Option<Value>) -> Value {
    let mut error = json!({ "code": code, "message": message });
    if let Some(data) = data {
        error["data"] = data;
    }
    json!({ "jsonrpc": "2.0", "id": id, "error": error })
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
