//! JSON-RPC 2.0 message shapes as they arrive in a POST body, and the responses the server
//! writes.
//!
//! This module owns classifying a body into requests, notifications and responses (or a
//! typed error). It does not dispatch anything.

use serde_json::{Map, Value, json};

use crate::error::Error;
use crate::handler::RpcError;

/// One incoming message.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Message {
    /// A request (has `method` and a non-null `id`).
    Request { id: Value, method: String, params: Option<Value> },
    /// A notification (has `method`, no `id`).
    Notification { method: String, params: Option<Value> },
    /// A response to a server-to-client request.
    Response { id: Value, outcome: Result<Value, RpcError> },
}

/// A parsed body: its messages, and whether it was a batch (a JSON array).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Body {
    pub(crate) messages: Vec<Message>,
    pub(crate) batch: bool,
}

impl Body {
    /// The single message, if the body was not a batch.
    pub(crate) fn single(&self) -> Option<&Message> {
        if self.batch { None } else { self.messages.first() }
    }

    /// Whether any message is a request.
    pub(crate) fn has_requests(&self) -> bool {
        self.messages.iter().any(|m| matches!(m, Message::Request { .. }))
    }
}

/// Parse a POST body.
pub(crate) fn parse(bytes: &[u8]) -> Result<Body, Error> {
    let value: Value = serde_json::from_slice(bytes).map_err(|e| Error::Parse(e.to_string()))?;
    match value {
        Value::Array(items) => {
            if items.is_empty() {
                return Err(Error::InvalidMessage("empty batch".into()));
            }
            let messages = items.into_iter().map(message).collect::<Result<_, _>>()?;
            Ok(Body { messages, batch: true })
        }
        other => Ok(Body { messages: vec![message(other)?], batch: false }),
    }
}

fn message(v: Value) -> Result<Message, Error> {
    let Value::Object(mut obj) = v else {
        return Err(Error::InvalidMessage("a message must be a JSON object".into()));
    };
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(Error::InvalidMessage("\"jsonrpc\" must be \"2.0\"".into()));
    }
    let id = obj.remove("id");
    if let Some(id) = &id
        && !(id.is_string() || id.is_i64() || id.is_u64() || id.is_null())
    {
        return Err(Error::InvalidMessage("\"id\" must be a string or an integer".into()));
    }
    match obj.remove("method") {
        Some(Value::String(method)) => {
            let params = params(&mut obj)?;
            match id {
                None => Ok(Message::Notification { method, params }),
                Some(Value::Null) => Err(Error::InvalidMessage("a request id must not be null".into())),
                Some(id) => Ok(Message::Request { id, method, params }),
            }
        }
        Some(_) => Err(Error::InvalidMessage("\"method\" must be a string".into())),
        None => response(id, obj),
    }
}

fn params(obj: &mut Map<String, Value>) -> Result<Option<Value>, Error> {
    match obj.remove("params") {
        None => Ok(None),
        Some(p @ (Value::Object(_) | Value::Array(_))) => Ok(Some(p)),
        Some(_) => Err(Error::InvalidMessage("\"params\" must be an object or an array".into())),
    }
}

fn response(id: Option<Value>, mut obj: Map<String, Value>) -> Result<Message, Error> {
    let Some(id) = id else {
        return Err(Error::InvalidMessage("neither a request, a notification nor a response".into()));
    };
    match (obj.remove("result"), obj.remove("error")) {
        (Some(result), None) => Ok(Message::Response { id, outcome: Ok(result) }),
        (None, Some(error @ Value::Object(_))) => {
            Ok(Message::Response { id, outcome: Err(RpcError::from_json(&error)) })
        }
        _ => Err(Error::InvalidMessage("a response needs exactly one of \"result\" and \"error\"".into())),
    }
}

/// A success response.
pub(crate) fn result(id: &Value, result: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "result": result })
}

/// An error response.
pub(crate) fn error(id: &Value, error: &RpcError) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "error": error.to_json() })
}

/// The response for a handler's outcome.
pub(crate) fn respond(id: &Value, outcome: Result<Value, RpcError>) -> Value {
    match outcome {
        Ok(r) => result(id, r),
        Err(e) => error(id, &e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_the_three_kinds() {
        let b = parse(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#).unwrap();
        assert!(matches!(b.single(), Some(Message::Request { method, .. }) if method == "tools/list"));
        let b = parse(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).unwrap();
        assert!(matches!(b.single(), Some(Message::Notification { .. })));
        let b = parse(br#"{"jsonrpc":"2.0","id":"a","result":{}}"#).unwrap();
        assert!(matches!(b.single(), Some(Message::Response { outcome: Ok(_), .. })));
        let b = parse(br#"{"jsonrpc":"2.0","id":"a","error":{"code":-1,"message":"no"}}"#).unwrap();
        assert!(matches!(b.single(), Some(Message::Response { outcome: Err(e), .. }) if e.code == -1));
    }

    #[test]
    fn batches() {
        let b = parse(br#"[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","method":"b"}]"#).unwrap();
        assert!(b.batch);
        assert_eq!(b.messages.len(), 2);
        assert!(b.single().is_none());
        assert!(matches!(parse(b"[]"), Err(Error::InvalidMessage(_))));
    }

    #[test]
    fn malformed_and_wrong_shapes_are_typed() {
        assert!(matches!(parse(b"{"), Err(Error::Parse(_))));
        for bad in [
            &br#"42"#[..],
            br#"{"id":1,"method":"a"}"#,
            br#"{"jsonrpc":"1.0","id":1,"method":"a"}"#,
            br#"{"jsonrpc":"2.0","id":1.5,"method":"a"}"#,
            br#"{"jsonrpc":"2.0","id":null,"method":"a"}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":7}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"a","params":3}"#,
            br#"{"jsonrpc":"2.0","id":1}"#,
            br#"{"jsonrpc":"2.0","id":1,"result":1,"error":{}}"#,
            br#"{"jsonrpc":"2.0"}"#,
        ] {
            assert!(matches!(parse(bad), Err(Error::InvalidMessage(_))), "{}", String::from_utf8_lossy(bad));
        }
    }
}
