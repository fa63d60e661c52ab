//! JSON-RPC 2.0 message shapes as they arrive in a POST body, and the responses the server
//! writes.
//!
//! This module owns classifying a body into requests, notifications and responses (or a
//! typed error). It does not dispatch anything.

use std::fmt;

use serde_json::{Value, json};

use crate::error::Error;

/// A JSON-RPC error object, as a handler returns it and as the client may answer with it.
#[derive(Clone, Debug, PartialEq)]
pub struct RpcError {
    /// The JSON-RPC error code.
    pub code: i64,
    /// A short description.
    pub message: String,
    /// Optional structured detail.
    pub data: Option<Value>,
}

impl RpcError {
    /// JSON-RPC: the method does not exist ([`crate::METHOD_NOT_FOUND`]).
    pub const METHOD_NOT_FOUND: i64 = crate::error::METHOD_NOT_FOUND;
    /// JSON-RPC: invalid method parameters ([`crate::INVALID_PARAMS`]).
    pub const INVALID_PARAMS: i64 = crate::error::INVALID_PARAMS;
    /// JSON-RPC: internal error ([`crate::INTERNAL_ERROR`]).
    pub const INTERNAL_ERROR: i64 = crate::error::INTERNAL_ERROR;

    /// An error with `code` and `message` and no data.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self { code, message: message.into(), data: None }
    }

    /// The same error carrying `data`.
    pub fn with_data(self, data: Value) -> Self {
        Self { data: Some(data), ..self }
    }

    /// -32601 for `method`.
    pub fn method_not_found(method: &str) -> Self {
        Self::new(Self::METHOD_NOT_FOUND, format!("method not found: {method}"))
    }

    /// -32602.
    pub fn invalid_params(msg: impl Into<String>) -> Self {
        Self::new(Self::INVALID_PARAMS, msg)
    }

    /// -32603.
    pub fn internal(msg: impl Into<String>) -> Self {
        Self::new(Self::INTERNAL_ERROR, msg)
    }

    /// The JSON-RPC `error` object.
    pub fn to_json(&self) -> Value {
        let mut obj = json!({ "code": self.code, "message": self.message });
        if let Some(data) = &self.data {
            obj["data"] = data.clone();
        }
        obj
    }

    /// Read an `error` object sent by the client; anything malformed becomes an internal error
    /// that says so.
    pub(crate) fn from_json(v: &Value) -> Self {
        let code = v.get("code").and_then(Value::as_i64);
        let message = v.get("message").and_then(Value::as_str);
        match (code, message) {
            (Some(code), Some(message)) => {
                Self { code, message: message.to_owned(), data: v.get("data").cloned() }
            }
            _ => Self::internal("the client answered with a malformed error object").with_data(v.clone()),
        }
    }
}

impl fmt::Display for RpcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "JSON-RPC error {}: {}", self.code, self.message)
    }
}

impl std::error::Error for RpcError {}

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
    if let Some(message) = parse_plain(bytes) {
        return Ok(Body { messages: vec![message?], batch: false });
    }
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

/// The fields of one message, read straight from the body.
#[derive(serde::Deserialize)]
struct Envelope<'a> {
    #[serde(borrow, default)]
    jsonrpc: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, deserialize_with = "present")]
    id: Option<Value>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default, deserialize_with = "present")]
    params: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    result: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    error: Option<Value>,
}

/// A field that is present, even as `null` (serde's default reads `null` as absent).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    <Value as serde::Deserialize>::deserialize(d).map(Some)
}

/// The common case, a single message object, without building a map for its envelope: each
/// request pays for this parse. `None` when the body is anything else or has a field of an
/// unexpected type; the general path then parses it and names the problem.
fn parse_plain(bytes: &[u8]) -> Option<Result<Message, Error>> {
    if bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return None;
    }
    let e: Envelope<'_> = serde_json::from_slice(bytes).ok()?;
    Some(classify(e.jsonrpc.as_deref() == Some("2.0"), e.id, e.method, e.params, e.result, e.error))
}

fn message(v: Value) -> Result<Message, Error> {
    let Value::Object(mut obj) = v else {
        return Err(Error::InvalidMessage("a message must be a JSON object".into()));
    };
    let jsonrpc = obj.get("jsonrpc").and_then(Value::as_str) == Some("2.0");
    let method = match obj.remove("method") {
        None => None,
        Some(Value::String(method)) => Some(method),
        Some(_) if !jsonrpc => None,
        Some(_) => return Err(Error::InvalidMessage("\"method\" must be a string".into())),
    };
    let (id, params) = (obj.remove("id"), obj.remove("params"));
    classify(jsonrpc, id, method, params, obj.remove("result"), obj.remove("error"))
}

/// Classify a message by its fields (present ones are `Some`, even when `null`).
fn classify(
    jsonrpc: bool,
    id: Option<Value>,
    method: Option<String>,
    params: Option<Value>,
    result: Option<Value>,
    error: Option<Value>,
) -> Result<Message, Error> {
    if !jsonrpc {
        return Err(Error::InvalidMessage("\"jsonrpc\" must be \"2.0\"".into()));
    }
    if let Some(id) = &id
        && !(id.is_string() || id.is_i64() || id.is_u64() || id.is_null())
    {
        return Err(Error::InvalidMessage("\"id\" must be a string or an integer".into()));
    }
    let Some(method) = method else {
        return response(id, result, error);
    };
    let params = match params {
        None => None,
        Some(p @ (Value::Object(_) | Value::Array(_))) => Some(p),
        Some(_) => return Err(Error::InvalidMessage("\"params\" must be an object or an array".into())),
    };
    match id {
        None => Ok(Message::Notification { method, params }),
        Some(Value::Null) => Err(Error::InvalidMessage("a request id must not be null".into())),
        Some(id) => Ok(Message::Request { id, method, params }),
    }
}

fn response(id: Option<Value>, result: Option<Value>, error: Option<Value>) -> Result<Message, Error> {
    let Some(id) = id else {
        return Err(Error::InvalidMessage("neither a request, a notification nor a response".into()));
    };
    match (result, error) {
        (Some(result), None) => Ok(Message::Response { id, outcome: Ok(result) }),
        (None, Some(error @ Value::Object(_))) => {
            Ok(Message::Response { id, outcome: Err(RpcError::from_json(&error)) })
        }
        _ => Err(Error::InvalidMessage("a response needs exactly one of \"result\" and \"error\"".into())),
    }
}

/// A request id as the label of its stream: its JSON text. Ids that fit a label inline are
/// written into a stack buffer, so the common case allocates nothing.
pub(crate) fn id_label(id: &Value) -> forkless_core::Label {
    let mut buf = [0u8; forkless_core::Label::INLINE];
    let mut cursor = std::io::Cursor::new(&mut buf[..]);
    if serde_json::to_writer(&mut cursor, id).is_ok() {
        let len = usize::try_from(cursor.position()).unwrap_or(0);
        return forkless_core::Label::new(&buf[..len]);
    }
    forkless_core::Label::new(&serde_json::to_vec(id).unwrap_or_else(|_| b"null".to_vec()))
}

/// The request id a stream's label holds (`null` when there is none or it does not parse).
pub(crate) fn label_id(label: Option<&forkless_core::Label>) -> Value {
    label.and_then(|l| serde_json::from_slice(l.as_bytes()).ok()).unwrap_or(Value::Null)
}

/// A success response.
pub(crate) fn result(id: &Value, result: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "result": result })
}

/// An error response.
pub(crate) fn error(id: &Value, error: &RpcError) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "error": error.to_json() })
}

/// The response for a handler's outcome, serialized straight into one buffer (no envelope
/// map is built: this runs once per request).
pub(crate) fn response_payload(id: &Value, outcome: &Result<Value, RpcError>) -> bytes::Bytes {
    let mut out = Vec::with_capacity(96);
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    // Serializing a Value into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut out, id);
    match outcome {
        Ok(result) => {
            out.extend_from_slice(br#","result":"#);
            let _ = serde_json::to_writer(&mut out, result);
        }
        Err(error) => {
            out.extend_from_slice(br#","error":"#);
            let _ = serde_json::to_writer(&mut out, &error.to_json());
        }
    }
    out.push(b'}');
    out.into()
}

/// A JSON array of already serialized messages (a batch's responses).
pub(crate) fn batch_payload(messages: &[bytes::Bytes]) -> bytes::Bytes {
    let mut out = Vec::with_capacity(2 + messages.iter().map(|m| m.len() + 1).sum::<usize>());
    out.push(b'[');
    for (i, m) in messages.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(m);
    }
    out.push(b']');
    out.into()
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

    /// The envelope fast path and the general path classify every message alike.
    #[test]
    fn the_fast_path_agrees_with_the_general_one() {
        for text in [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}"#,
            r#"{"jsonrpc":"2.0","id":"x","method":"a","params":[1]}"#,
            r#"{"jsonrpc":"2.0","method":"n"}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":null}"#,
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"no"}}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"a"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"a","params":null}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"a","params":3}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":1,"error":{}}"#,
            r#"{"jsonrpc":"2.0","id":{},"method":"a"}"#,
            r#"{"jsonrpc":"2.\u0030","id":1,"method":"a","extra":true}"#,
            r#"{"jsonrpc":"2.0"}"#,
        ] {
            let fast = parse_plain(text.as_bytes()).expect("a plain object takes the fast path");
            let general = message(serde_json::from_str(text).unwrap());
            assert_eq!(format!("{fast:?}"), format!("{general:?}"), "{text}");
        }
    }

    #[test]
    fn serialized_responses_match_their_values() {
        let outcomes = [
            Ok(json!({ "content": [{ "type": "text", "text": "a\"b" }] })),
            Ok(Value::Null),
            Err(RpcError::new(-32601, "no such method")),
            Err(RpcError::invalid_params("bad").with_data(json!({ "field": "x" }))),
        ];
        let mut payloads = Vec::new();
        for (i, outcome) in outcomes.into_iter().enumerate() {
            let id = if i % 2 == 0 { json!(i) } else { json!(format!("id-{i}")) };
            let payload = response_payload(&id, &outcome);
            let parsed: Value = serde_json::from_slice(&payload).unwrap();
            assert_eq!(parsed, respond(&id, outcome));
            payloads.push(payload);
        }
        let batch: Value = serde_json::from_slice(&batch_payload(&payloads)).unwrap();
        assert_eq!(batch.as_array().map(Vec::len), Some(4));
        assert_eq!(batch_payload(&[]).as_ref(), b"[]");
    }

    #[test]
    fn ids_round_trip_through_labels_of_any_length() {
        let long = "y".repeat(100_000);
        for id in
            [json!(1), json!(-7), json!(u64::MAX), json!("req-1"), json!("\"quoted\" \u{e9}"), json!(long)]
        {
            assert_eq!(label_id(Some(&id_label(&id))), id);
        }
        assert_eq!(label_id(None), Value::Null);
        assert_eq!(label_id(Some(&forkless_core::Label::new(b"not json"))), Value::Null);
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
