//! Reading one 2026-07-28 answer: a JSON body, or an SSE stream whose notifications are handed
//! on as they arrive and whose one response is the answer. A stream that ends (or breaks)
//! before its response lost the answer ([`Error::AnswerLost`], which a keyed request
//! re-issues).
//!
//! It owns reading a body, not deciding what a lost answer means (`super`'s).

use futures::StreamExt;
use serde_json::Value;
use sse_stream::SseByteStream;
use tokio::sync::mpsc;

use crate::error::Error;
use crate::http::{BodyKind, body_kind};
use crate::jsonrpc::{self, Incoming, Notification};

/// The response `resp` carries, its notifications sent to `sink` on the way.
pub(super) async fn read(
    resp: reqwest::Response,
    sink: Option<&mpsc::UnboundedSender<Notification>>,
) -> Result<Value, Error> {
    if body_kind(resp.headers()) != BodyKind::Sse {
        let text = resp.text().await?;
        return serde_json::from_str(&text).map_err(|e| Error::Protocol(format!("not JSON ({e}): {text}")));
    }
    let mut events = Box::pin(SseByteStream::new(resp.bytes_stream()));
    while let Some(event) = events.next().await {
        // A broken body is a lost answer: whatever it carried so far was handed on once.
        let Ok(event) = event else { return Err(Error::AnswerLost) };
        let Some(data) = event.data.filter(|d| !d.trim().is_empty()) else { continue };
        for message in jsonrpc::parse(&data)? {
            match message {
                Incoming::Response { id, outcome } => return Ok(response(id, outcome)),
                Incoming::Notification(n) => {
                    if let Some(sink) = sink {
                        let _ = sink.send(n);
                    }
                }
                Incoming::Request { method, .. } => {
                    tracing::warn!(%method, "a request on a 2026-07-28 answer stream; ignored (input goes through input_required)");
                }
            }
        }
    }
    Err(Error::AnswerLost)
}

/// A response back in its JSON-RPC shape, for `super::rpc_outcome`.
fn response(id: Value, outcome: Result<Value, Error>) -> Value {
    match outcome {
        Ok(result) => serde_json::json!({ "jsonrpc": "2.0", "id": id, "result": result }),
        Err(Error::Rpc { code, message, data }) => {
            let mut error = serde_json::json!({ "code": code, "message": message });
            if let Some(data) = data {
                error["data"] = data;
            }
            serde_json::json!({ "jsonrpc": "2.0", "id": id, "error": error })
        }
        Err(other) => {
            serde_json::json!({ "jsonrpc": "2.0", "id": id, "error": { "code": -32603, "message": other.to_string() } })
        }
    }
}
