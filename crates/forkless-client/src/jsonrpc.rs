//! JSON-RPC 2.0 framing: building the client's messages and sorting the server's.
//!
//! Owns only the envelope; method semantics (initialize, tools, progress) live in
//! `client.rs`. Messages stay `serde_json::Value` so that unknown fields pass through untouched.

use serde_json::{Map, Value, json};

use crate::error::Error;

/// A message from the server, sorted by shape.
#[derive(Clone, Debug)]
pub(crate) enum Incoming {
    /// A request the client must answer (sampling, elicitation, roots, ping).
    Request { id: Value, method: String, params: Option<Value> },
    /// A notification.
    Notification(Notification),
    /// A response to one of our requests.
    Response { id: Value, outcome: Result<Value, Error> },
}

/// A server notification, as delivered to the application.
#[derive(Clone, Debug, PartialEq)]
pub struct Notification {
    /// The method, e.g. `notifications/message`.
    pub method: String,
    /// The params, if any.
    pub params: Option<Value>,
}

/// An error the application's server-request handler answers with.
#[derive(Clone, Debug, PartialEq)]
pub struct RpcError {
    /// JSON-RPC error code.
    pub code: i64,
    /// Human-readable message.
    pub message: String,
    /// Optional structured data.
    pub data: Option<Value>,
}

impl RpcError {
    /// `-32601 Method not found`.
    pub fn method_not_found(method: &str) -> Self {
        Self { code: -32601, message: format!("method not found: {method}"), data: None }
    }
}

pub(crate) fn request(id: u64, method: &str, params: Option<Value>) -> Value {
    let mut m = envelope();
    m.insert("id".into(), id.into());
    m.insert("method".into(), method.into());
    if let Some(p) = params {
        m.insert("params".into(), p);
    }
    Value::Object(m)
}

pub(crate) fn notification(method: &str, params: Option<Value>) -> Value {
    let mut m = envelope();
    m.insert("method".into(), method.into());
    if let Some(p) = params {
        m.insert("params".into(), p);
    }
    Value::Object(m)
}

pub(crate) fn response(id: Value, outcome: Result<Value, RpcError>) -> Value {
    match outcome {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err(e) => {
            let mut err = json!({"code": e.code, "message": e.message});
            if let (Some(data), Some(obj)) = (e.data, err.as_object_mut()) {
                obj.insert("data".into(), data);
            }
            json!({"jsonrpc": "2.0", "id": id, "error": err})
        }
    }
}

fn envelope() -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("jsonrpc".into(), "2.0".into());
    m
}

/// Sort one SSE `data` payload or JSON body: a single message or (2025-03-26) a batch.
pub(crate) fn parse(text: &str) -> Result<Vec<Incoming>, Error> {
    let value: Value =
        serde_json::from_str(text).map_err(|e| Error::Protocol(format!("message is not JSON: {e}")))?;
    match value {
        Value::Array(items) => items.into_iter().map(classify).collect(),
        other => Ok(vec![classify(other)?]),
    }
}

fn classify(value: Value) -> Result<Incoming, Error> {
    let Value::Object(mut m) = value else {
        return Err(Error::Protocol("JSON-RPC message is not an object".into()));
    };
    let id = m.remove("id");
    let params = m.remove("params");
    match (m.remove("method"), id) {
        (Some(Value::String(method)), Some(id)) => Ok(Incoming::Request { id, method, params }),
        (Some(Value::String(method)), None) => Ok(Incoming::Notification(Notification { method, params })),
        (None, Some(id)) => {
            let outcome = match (m.remove("result"), m.remove("error")) {
                (Some(result), None) => Ok(result),
                (None, Some(error)) => Err(rpc_error(&error)),
                _ => return Err(Error::Protocol("response needs exactly one of result and error".into())),
            };
            Ok(Incoming::Response { id, outcome })
        }
        _ => Err(Error::Protocol("JSON-RPC message has neither a method nor an id".into())),
    }
}

pub(crate) fn rpc_error(error: &Value) -> Error {
    Error::Rpc {
        code: error.get("code").and_then(Value::as_i64).unwrap_or(0),
        message: error.get("message").and_then(Value::as_str).unwrap_or_default().to_owned(),
        data: error.get("data").cloned(),
    }
}

/// `error.data.reason` of a 404 body (PROTOCOL section 4), if the body has one.
pub(crate) fn end_reason(body: &str) -> Option<String> {
    let v: Value = serde_json::from_str(body).ok()?;
    v.pointer("/error/data/reason").and_then(Value::as_str).map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_messages() {
        let got = parse(r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"x":1}}"#).unwrap();
        assert!(matches!(&got[0], Incoming::Notification(n) if n.method == "notifications/message"));
        let got = parse(r#"{"jsonrpc":"2.0","id":"s1","method":"roots/list"}"#).unwrap();
        assert!(matches!(&got[0], Incoming::Request { method, .. } if method == "roots/list"));
        let got = parse(r#"[{"jsonrpc":"2.0","id":3,"result":{}},{"jsonrpc":"2.0","id":4,"error":{"code":-1,"message":"no"}}]"#).unwrap();
        assert!(matches!(&got[0], Incoming::Response { outcome: Ok(_), .. }));
        assert!(matches!(&got[1], Incoming::Response { outcome: Err(Error::Rpc { code: -1, .. }), .. }));
        assert!(matches!(parse("not json"), Err(Error::Protocol(_))));
        assert!(matches!(parse(r#"{"jsonrpc":"2.0"}"#), Err(Error::Protocol(_))));
    }

    #[test]
    fn reads_the_end_reason() {
        let body =
            r#"{"jsonrpc":"2.0","error":{"code":-32001,"message":"x","data":{"reason":"cursor_evicted"}}}"#;
        assert_eq!(end_reason(body).as_deref(), Some("cursor_evicted"));
        assert_eq!(end_reason("Not Found"), None);
    }

    #[test]
    fn builds_responses() {
        let ok = response("s1".into(), Ok(json!({"roots": []})));
        assert_eq!(ok, json!({"jsonrpc":"2.0","id":"s1","result":{"roots":[]}}));
        let err = response(7.into(), Err(RpcError::method_not_found("x")));
        assert_eq!(err["error"]["code"], -32601);
    }
}
