//! The 2026-07-28 revision's request checks and result fields: the standard headers checked
//! against the body (`MCP-Protocol-Version` against `_meta`, `Mcp-Method`, `Mcp-Name` with its
//! Base64 sentinel), methods the revision removed, `server/discover`, and `resultType` and
//! the caching hints on results.
//!
//! This module owns what the revision says about one request and its result. Dispatching it
//! is [`super`]'s.

use http::{HeaderMap, HeaderName, StatusCode};
use serde_json::{Value, json};

use crate::error::{HEADER_MISMATCH, MISSING_REQUIRED_CLIENT_CAPABILITY};
use crate::handler::{ServerInfo, TaskSupport};
use crate::headers::PROTOCOL_VERSION;

/// `Mcp-Method`.
pub(crate) const MCP_METHOD: HeaderName = HeaderName::from_static("mcp-method");
/// `Mcp-Name`.
pub(crate) const MCP_NAME: HeaderName = HeaderName::from_static("mcp-name");

/// Methods the 2026-07-28 revision removed: answered 404 with `-32601`.
const REMOVED: [&str; 5] =
    ["initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"];

/// Results that carry caching hints, with the scope each gets here.
const CACHEABLE: [(&str, &str); 6] = [
    ("server/discover", "public"),
    ("tools/list", "public"),
    ("prompts/list", "public"),
    ("resources/list", "public"),
    ("resources/templates/list", "public"),
    ("resources/read", "private"),
];

/// How long a cacheable result is fresh (`ttlMs`): lists change only when the server does.
const TTL_MS: u64 = 60_000;

/// A refusal of one request, with its id (a JSON-RPC error response).
#[derive(Debug)]
pub(crate) struct Refusal {
    pub(crate) status: StatusCode,
    pub(crate) code: i64,
    pub(crate) message: String,
    pub(crate) data: Option<Value>,
}

impl Refusal {
    fn mismatch(message: String) -> Self {
        Self { status: StatusCode::BAD_REQUEST, code: HEADER_MISMATCH, message, data: None }
    }

    /// The JSON-RPC error response for request `id`.
    pub(crate) fn body(&self, id: &Value) -> Value {
        let mut error = json!({ "code": self.code, "message": self.message });
        if let Some(data) = &self.data {
            error["data"] = data.clone();
        }
        json!({ "jsonrpc": "2.0", "id": id, "error": error })
    }
}

/// A header's value decoded from the Base64 sentinel (`=?base64?…?=`) if it uses it.
fn decoded(value: &str) -> Option<String> {
    use base64::Engine as _;
    match value.strip_prefix("=?base64?").and_then(|v| v.strip_suffix("?=")) {
        Some(encoded) => {
            let bytes = base64::engine::general_purpose::STANDARD.decode(encoded).ok()?;
            String::from_utf8(bytes).ok()
        }
        None => Some(value.to_owned()),
    }
}

fn header<'h>(headers: &'h HeaderMap, name: &HeaderName) -> Option<&'h str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Check request `method` with `params`: its per-request `_meta` fields, then its headers.
pub(crate) fn check_request(
    headers: &HeaderMap,
    method: &str,
    params: Option<&Value>,
) -> Result<(), Refusal> {
    let meta = params.and_then(|p| p.get("_meta"));
    for (key, what) in [
        ("io.modelcontextprotocol/protocolVersion", "protocol version"),
        ("io.modelcontextprotocol/clientCapabilities", "client capabilities"),
    ] {
        if meta.and_then(|m| m.get(key)).is_none() {
            return Err(Refusal {
                status: StatusCode::BAD_REQUEST,
                code: crate::error::INVALID_PARAMS,
                message: format!("invalid params: the request's _meta lacks {key} (its {what})"),
                data: None,
            });
        }
    }
    let meta_version = params
        .and_then(|p| p.pointer("/_meta/io.modelcontextprotocol~1protocolVersion"))
        .and_then(Value::as_str);
    let header_version = header(headers, &PROTOCOL_VERSION).unwrap_or_default();
    if let Some(body) = meta_version
        && body != header_version
    {
        return Err(Refusal::mismatch(format!(
            "Header mismatch: MCP-Protocol-Version header value '{header_version}' does not match body value '{body}'"
        )));
    }
    match header(headers, &MCP_METHOD) {
        None => return Err(Refusal::mismatch("Header mismatch: the Mcp-Method header is missing".into())),
        Some(m) if m != method => {
            return Err(Refusal::mismatch(format!(
                "Header mismatch: Mcp-Method header value '{m}' does not match body value '{method}'"
            )));
        }
        Some(_) => {}
    }
    let name_field = match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        "tasks/get" | "tasks/update" | "tasks/cancel" => Some("taskId"),
        _ => None,
    };
    if let Some(field) = name_field {
        let body = params.and_then(|p| p.get(field)).and_then(Value::as_str);
        match (headers.get(&MCP_NAME), body) {
            (None, _) => {
                return Err(Refusal::mismatch("Header mismatch: the Mcp-Name header is missing".into()));
            }
            (Some(raw), body) => {
                // RFC 9110 section 5.5: optional whitespace around a field value is not part of it.
                let value = raw.to_str().ok().map(|v| v.trim_matches([' ', '\t'])).and_then(decoded);
                match value {
                    None => {
                        return Err(Refusal::mismatch(
                            "Header mismatch: the Mcp-Name header is malformed".into(),
                        ));
                    }
                    Some(v) if Some(v.as_str()) != body => {
                        return Err(Refusal::mismatch(format!(
                            "Header mismatch: Mcp-Name header value '{v}' does not match body value '{}'",
                            body.unwrap_or_default()
                        )));
                    }
                    Some(_) => {}
                }
            }
        }
    }
    if REMOVED.contains(&method) {
        return Err(Refusal {
            status: StatusCode::NOT_FOUND,
            code: crate::error::METHOD_NOT_FOUND,
            message: format!("method not found: {method} is not part of revision 2026-07-28"),
            data: None,
        });
    }
    Ok(())
}

/// Check the `Mcp-Param-{Name}` headers of a `tools/call` against its arguments, for every
/// property of the tool's `schema` annotated with `x-mcp-header`: a present, non-null argument
/// needs its header (decoded from the Base64 sentinel, whitespace around it trimmed) with the
/// same value; numbers compare as numbers.
pub(crate) fn check_param_headers(
    headers: &HeaderMap,
    schema: &Value,
    arguments: Option<&Value>,
) -> Result<(), Refusal> {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else { return Ok(()) };
    for (property, spec) in properties {
        let Some(name) = spec.get("x-mcp-header").and_then(Value::as_str) else { continue };
        let header_name = format!("mcp-param-{}", name.to_ascii_lowercase());
        let value = arguments.and_then(|a| a.get(property)).filter(|v| !v.is_null());
        let raw = headers.get(header_name.as_str());
        let Some(value) = value else { continue };
        let Some(raw) = raw else {
            return Err(Refusal::mismatch(format!(
                "Header mismatch: the Mcp-Param-{name} header is missing"
            )));
        };
        let Some(text) = raw.to_str().ok().map(|v| v.trim_matches([' ', '\t'])).and_then(decoded) else {
            return Err(Refusal::mismatch(format!(
                "Header mismatch: the Mcp-Param-{name} header is malformed"
            )));
        };
        let same = match value {
            Value::String(s) => *s == text,
            Value::Number(n) => text.parse::<f64>().ok().zip(n.as_f64()).is_some_and(|(a, b)| a == b),
            Value::Bool(b) => text == if *b { "true" } else { "false" },
            _ => false,
        };
        if !same {
            return Err(Refusal::mismatch(format!(
                "Header mismatch: Mcp-Param-{name} header value '{text}' does not match body value {value}"
            )));
        }
    }
    Ok(())
}

/// The `server/discover` result: versions, capabilities, identity and instructions.
///
/// It advertises forkless's idempotency extension (keyed requests run once; PROTOCOL section
/// 14) with the time a key is remembered, and the tasks extension when the handler offers it.
pub(crate) fn discover(
    info: &ServerInfo,
    tasks: TaskSupport,
    key_ttl: std::time::Duration,
    served: forkless_core::RevisionSet,
) -> Value {
    let mut capabilities = info.capabilities.clone();
    if let Some(caps) = capabilities.as_object_mut() {
        let extensions = caps.entry("extensions").or_insert_with(|| json!({}));
        if let Some(extensions) = extensions.as_object_mut() {
            if tasks == TaskSupport::Offered {
                extensions.insert(crate::tasks::EXTENSION.to_owned(), json!({}));
            }
            let ttl_ms = u64::try_from(key_ttl.as_millis()).unwrap_or(u64::MAX);
            extensions.insert(
                crate::tasks::IDEMPOTENCY_EXTENSION.to_owned(),
                json!({ "metaKey": crate::tasks::IDEMPOTENCY_KEY, "ttlMs": ttl_ms }),
            );
        }
    }
    let mut result = json!({
        "supportedVersions": served.newest_first().map(|r| r.as_str()).collect::<Vec<_>>(),
        "capabilities": capabilities,
        "_meta": { "io.modelcontextprotocol/serverInfo": { "name": info.name, "version": info.version } },
    });
    if let Some(text) = &info.instructions {
        result["instructions"] = json!(text);
    }
    result
}

/// The HTTP status of a response carrying `out`: an unknown method is 404 (the revision
/// distinguishes it from a legacy server's 404 by the body), everything else 200.
pub(crate) fn status_of(out: &Result<Value, crate::jsonrpc::RpcError>) -> StatusCode {
    status_of_code(out.as_ref().err().map(|e| e.code))
}

/// The HTTP status for a response whose error code is `code` (`None`: a result): an unknown
/// method 404, a missing client capability 400, else 200.
pub(crate) fn status_of_code(code: Option<i64>) -> StatusCode {
    match code {
        Some(crate::error::METHOD_NOT_FOUND) => StatusCode::NOT_FOUND,
        Some(MISSING_REQUIRED_CLIENT_CAPABILITY) => StatusCode::BAD_REQUEST,
        _ => StatusCode::OK,
    }
}

/// A result as the revision sends it: `resultType` (`complete` unless the handler said
/// otherwise) and, for cacheable methods, `ttlMs` and `cacheScope` unless already set.
pub(crate) fn complete(method: &str, result: &mut Value) {
    let Value::Object(map) = result else { return };
    let kind = map.entry("resultType").or_insert_with(|| json!("complete")).clone();
    if kind != "complete" {
        return;
    }
    if let Some((_, scope)) = CACHEABLE.iter().find(|(m, _)| *m == method) {
        map.entry("ttlMs").or_insert_with(|| json!(TTL_MS));
        map.entry("cacheScope").or_insert_with(|| json!(scope));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(pairs: &[(&HeaderName, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (n, v) in pairs {
            h.insert((*n).clone(), HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn the_per_request_meta_fields_are_required() {
        let h = headers(&[(&PROTOCOL_VERSION, "2026-07-28"), (&MCP_METHOD, "tools/list")]);
        for params in [
            json!({}),
            json!({ "_meta": { "io.modelcontextprotocol/clientCapabilities": {} } }),
            json!({ "_meta": { "io.modelcontextprotocol/protocolVersion": "2026-07-28" } }),
        ] {
            let r = check_request(&h, "tools/list", Some(&params)).expect_err("refused");
            assert_eq!(
                (r.status, r.code),
                (StatusCode::BAD_REQUEST, crate::error::INVALID_PARAMS),
                "{params}"
            );
        }
    }

    #[test]
    fn headers_must_match_the_body() {
        let p = json!({ "name": "echo", "_meta": { "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {} } });
        let ok =
            headers(&[(&PROTOCOL_VERSION, "2026-07-28"), (&MCP_METHOD, "tools/call"), (&MCP_NAME, "echo")]);
        assert!(check_request(&ok, "tools/call", Some(&p)).is_ok());
        let b64 = headers(&[
            (&PROTOCOL_VERSION, "2026-07-28"),
            (&MCP_METHOD, "tools/call"),
            (&MCP_NAME, "=?base64?ZWNobw==?="),
        ]);
        assert!(check_request(&b64, "tools/call", Some(&p)).is_ok(), "the sentinel is decoded");
        for bad in [
            headers(&[(&PROTOCOL_VERSION, "2026-07-28"), (&MCP_METHOD, "tools/list"), (&MCP_NAME, "echo")]),
            headers(&[(&PROTOCOL_VERSION, "2026-07-28"), (&MCP_METHOD, "tools/call"), (&MCP_NAME, "other")]),
            headers(&[(&PROTOCOL_VERSION, "2026-07-28"), (&MCP_METHOD, "tools/call")]),
            headers(&[(&PROTOCOL_VERSION, "2026-07-28"), (&MCP_NAME, "echo")]),
            headers(&[(&PROTOCOL_VERSION, "2025-11-25"), (&MCP_METHOD, "tools/call"), (&MCP_NAME, "echo")]),
        ] {
            let r = check_request(&bad, "tools/call", Some(&p)).expect_err("refused");
            assert_eq!((r.status, r.code), (StatusCode::BAD_REQUEST, HEADER_MISMATCH), "{}", r.message);
        }
        let removed = headers(&[(&PROTOCOL_VERSION, "2026-07-28"), (&MCP_METHOD, "ping")]);
        let r = check_request(&removed, "ping", Some(&p)).expect_err("removed");
        assert_eq!((r.status, r.code), (StatusCode::NOT_FOUND, crate::error::METHOD_NOT_FOUND));
    }

    #[test]
    fn results_carry_their_type_and_cacheable_ones_their_hints() {
        let mut list = json!({ "tools": [] });
        complete("tools/list", &mut list);
        assert_eq!(
            list,
            json!({ "tools": [], "resultType": "complete", "ttlMs": TTL_MS, "cacheScope": "public" })
        );
        let mut call = json!({ "content": [] });
        complete("tools/call", &mut call);
        assert_eq!(call, json!({ "content": [], "resultType": "complete" }));
        let mut read = json!({ "contents": [], "ttlMs": 5 });
        complete("resources/read", &mut read);
        assert_eq!(read["ttlMs"], 5, "the handler's own hint wins");
        assert_eq!(read["cacheScope"], "private");
    }

    #[test]
    fn annotated_arguments_must_arrive_as_their_headers() {
        let schema = json!({ "properties": {
            "region": { "type": "string", "x-mcp-header": "Region" },
            "count": { "type": "integer", "x-mcp-header": "Count" },
            "note": { "type": "string" },
        } });
        let region = HeaderName::from_static("mcp-param-region");
        let count = HeaderName::from_static("mcp-param-count");
        let args = json!({ "region": "eu-west", "count": 42, "note": "x" });
        let ok = headers(&[(&region, "eu-west"), (&count, "42.0")]);
        assert!(check_param_headers(&ok, &schema, Some(&args)).is_ok(), "numbers compare as numbers");
        let b64 = headers(&[(&region, "=?base64?ZXUtd2VzdA==?="), (&count, "42")]);
        assert!(check_param_headers(&b64, &schema, Some(&args)).is_ok(), "the sentinel is decoded");
        for bad in [
            headers(&[(&count, "42")]),
            headers(&[(&region, "us-east"), (&count, "42")]),
            headers(&[(&region, "eu-west"), (&count, "41")]),
        ] {
            let r = check_param_headers(&bad, &schema, Some(&args)).expect_err("refused");
            assert_eq!(r.code, HEADER_MISMATCH, "{}", r.message);
        }
        // An argument that is absent or null needs no header.
        let sparse = json!({ "region": null });
        assert!(check_param_headers(&HeaderMap::new(), &schema, Some(&sparse)).is_ok());
    }
}
