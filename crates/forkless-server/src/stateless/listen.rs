//! `subscriptions/listen` (2026-07-28): a stream that opens with its acknowledgement (the
//! subset of the requested notification filter this server honours, tagged with the
//! subscription id) and then stays open, with keep-alives, until the client closes it or the
//! server shuts down, when it ends with the listen result.
//!
//! This module owns that stream. It honours only what the handler's capabilities declare
//! (`listChanged` per list, `resources.subscribe`), and passes on the announcements of any
//! node ([`crate::listeners`]) that the honoured filter admits.

use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::{HeaderValue, header};
use serde_json::{Map, Value, json};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use crate::handler::ServerInfo;

use crate::listeners::{SUBSCRIPTION_ID, admits, tagged};

/// One open listen stream: its opening and closing messages, what ends it, where
/// announcements arrive, what it passes on and the id it tags them with.
struct Listening {
    first: Option<Bytes>,
    last: Option<Bytes>,
    shutdown: CancellationToken,
    rx: broadcast::Receiver<Bytes>,
    filter: Value,
    id: Value,
}

/// The part of `requested` this server honours, given its capabilities.
fn honoured(requested: Option<&Value>, capabilities: &Value) -> Value {
    let mut out = Map::new();
    let Some(requested) = requested.and_then(Value::as_object) else { return Value::Object(out) };
    let declared = |pointer: &str| capabilities.pointer(pointer).and_then(Value::as_bool) == Some(true);
    for (field, pointer) in [
        ("toolsListChanged", "/tools/listChanged"),
        ("promptsListChanged", "/prompts/listChanged"),
        ("resourcesListChanged", "/resources/listChanged"),
    ] {
        if requested.get(field).and_then(Value::as_bool) == Some(true) && declared(pointer) {
            out.insert(field.to_owned(), Value::Bool(true));
        }
    }
    if let Some(uris) = requested.get("resourceSubscriptions").filter(|_| declared("/resources/subscribe")) {
        out.insert("resourceSubscriptions".to_owned(), uris.clone());
    }
    Value::Object(out)
}

/// The stream answering `subscriptions/listen` request `id` with `params`.
pub(crate) fn listen(
    id: &Value,
    params: Option<&Value>,
    info: &ServerInfo,
    keep_alive: Duration,
    shutdown: CancellationToken,
    announcements: broadcast::Receiver<Bytes>,
) -> Response {
    let filter = honoured(params.and_then(|p| p.get("notifications")), &info.capabilities);
    let ack = json!({
        "jsonrpc": "2.0",
        "method": "notifications/subscriptions/acknowledged",
        "params": { "_meta": { SUBSCRIPTION_ID: id }, "notifications": filter },
    });
    let result = json!({
        "jsonrpc": "2.0",
        "id": id,
        "result": { "resultType": "complete", "_meta": { SUBSCRIPTION_ID: id } },
    });
    let first = crate::sse::event(None, ack.to_string().as_bytes());
    let last = crate::sse::event(None, result.to_string().as_bytes());
    // Everything the stream needs lives in its state: nothing is cloned per message.
    let state = Listening {
        first: Some(first),
        last: Some(last),
        shutdown,
        rx: announcements,
        filter,
        id: id.clone(),
    };
    let stream = futures::stream::unfold(state, move |mut s| async move {
        if let Some(chunk) = s.first.take() {
            return Some((Ok::<Bytes, std::convert::Infallible>(chunk), s));
        }
        let chunk = loop {
            tokio::select! {
                () = tokio::time::sleep(keep_alive) => break crate::sse::comment("keep-alive"),
                () = s.shutdown.cancelled() => break s.last.take()?,
                got = s.rx.recv() => match got {
                    Ok(message) => {
                        let Ok(message) = serde_json::from_slice::<Value>(&message) else { continue };
                        if admits(&s.filter, &message) {
                            break crate::sse::event(None, tagged(message, &s.id).to_string().as_bytes());
                        }
                    }
                    // Fallen behind: the oldest are missed, as by a listener not connected.
                    Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => break s.last.take()?,
                },
            }
        };
        Some((Ok(chunk), s))
    });
    let mut response = Response::new(Body::from_stream(stream));
    let h = response.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

#[cfg(test)]
mod tests {
    use super::honoured;
    use serde_json::json;

    #[test]
    fn only_what_the_capabilities_declare_is_acknowledged() {
        let caps = json!({ "tools": { "listChanged": true }, "prompts": { "listChanged": false }, "resources": { "subscribe": true } });
        let asked = json!({ "toolsListChanged": true, "promptsListChanged": true, "resourceSubscriptions": ["file:///a"] });
        assert_eq!(
            honoured(Some(&asked), &caps),
            json!({ "toolsListChanged": true, "resourceSubscriptions": ["file:///a"] })
        );
        assert_eq!(honoured(None, &caps), json!({}));
    }
}
