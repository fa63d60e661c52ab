//! A small fuzz suite on stable Rust: whole HTTP requests (methods, paths, headers with
//! repeats and junk values, bodies from valid JSON-RPC to random bytes) against the router.
//! Whatever arrives, the server never panics and always answers with a status it documents;
//! every refusal carries a JSON-RPC error body with a typed reason.

mod common;

use axum::body::Body;
use common::{Controls, TestHandler};
use forkless_server::{Server, ServerConfig};
use forkless_store::MemoryStore;
use http::Request;
use http_body_util::BodyExt as _;
use proptest::prelude::*;
use serde_json::{Value, json};
use tower::ServiceExt as _;

const METHODS: [&str; 7] = ["GET", "POST", "DELETE", "PUT", "HEAD", "OPTIONS", "PATCH"];
const PATHS: [&str; 4] = ["/mcp", "/metrics", "/healthz", "/elsewhere"];
const NAMES: [&str; 10] = [
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
    "mcp-stream-id",
    "accept",
    "content-type",
    "origin",
    "content-length",
    "authorization",
    "x-junk",
];

/// Statuses the server documents for its endpoints.
const DOCUMENTED: [u16; 15] = [200, 202, 400, 403, 404, 405, 406, 408, 409, 413, 415, 429, 431, 500, 503];

fn header_value(session: String) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(session.into_bytes()),
        Just(b"2025-11-25".to_vec()),
        Just(b"2026-07-28".to_vec()),
        Just(b"application/json, text/event-stream".to_vec()),
        Just(b"application/json".to_vec()),
        Just(b"text/event-stream".to_vec()),
        Just(b"AAAAAAAAAAAAAAAA.1".to_vec()),
        Just(b"AAAAAAAAAAAAAAAA".to_vec()),
        Just(b"http://evil.example".to_vec()),
        "[ -~]{0,40}".prop_map(String::into_bytes),
        prop::collection::vec(any::<u8>(), 0..24),
    ]
}

fn body() -> impl Strategy<Value = Vec<u8>> {
    let init = json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": { "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": "f", "version": "1" } } });
    prop_oneof![
        Just(Vec::new()),
        Just(init.to_string().into_bytes()),
        Just(br#"{"jsonrpc":"2.0","id":2,"method":"echo","params":{"a":1}}"#.to_vec()),
        Just(br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}"#.to_vec()),
        Just(br#"{"jsonrpc":"2.0","id":77,"result":{}}"#.to_vec()),
        Just(br#"[{"jsonrpc":"2.0","id":3,"method":"echo"},{"jsonrpc":"2.0","method":"x"}]"#.to_vec()),
        Just(br#"[]"#.to_vec()),
        Just(format!("{}1{}", "[".repeat(200), "]".repeat(200)).into_bytes()),
        "[ -~]{0,60}".prop_map(String::into_bytes),
        prop::collection::vec(any::<u8>(), 0..64),
    ]
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

#[test]
fn any_request_gets_a_documented_status_and_refusals_a_typed_json_rpc_error() {
    let rt = runtime();
    let server =
        Server::new(MemoryStore::new(), TestHandler { controls: Controls::new() }, ServerConfig::default())
            .expect("config");
    let router = server.router();
    // One real session, so requests can reach past the session lookup.
    let session = rt.block_on(async {
        let init = json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": { "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": "f", "version": "1" } } });
        let req = Request::post("/mcp")
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(Body::from(init.to_string()))
            .unwrap();
        let resp = router.clone().oneshot(req).await.unwrap();
        resp.headers()["mcp-session-id"].to_str().unwrap().to_owned()
    });
    let headers = prop::collection::vec((0..NAMES.len(), header_value(session)), 0..8);
    let strategy = (0..METHODS.len(), 0..PATHS.len(), headers, body());
    let config = ProptestConfig { cases: 1500, failure_persistence: None, ..ProptestConfig::default() };
    proptest!(config, |((m, p, hs, body) in strategy)| {
        let mut req = Request::builder().method(METHODS[m]).uri(PATHS[p]);
        for (n, v) in &hs {
            if let Ok(value) = http::HeaderValue::from_bytes(v) {
                req = req.header(NAMES[*n], value);
            }
        }
        let Ok(req) = req.body(Body::from(body.clone())) else { return Ok(()) };
        let outcome = rt.block_on(async {
            let resp = router.clone().oneshot(req).await.expect("infallible");
            let status = resp.status();
            let is_sse = resp.headers().get("content-type").is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
            // A refusal's body is small and complete; a success may be a stream that stays open.
            let bytes = if status.is_success() || is_sse {
                Vec::new()
            } else {
                tokio::time::timeout(std::time::Duration::from_secs(5), resp.into_body().collect())
                    .await
                    .expect("a refusal's body completes")
                    .expect("readable")
                    .to_bytes()
                    .to_vec()
            };
            (status, bytes)
        });
        let (status, bytes) = outcome;
        prop_assert!(DOCUMENTED.contains(&status.as_u16()), "undocumented status {status}");
        // A HEAD response never carries a body (HTTP), whatever it would have said.
        if !status.is_success() && METHODS[m] != "HEAD" {
            let v: Value = serde_json::from_slice(&bytes).map_err(|e| TestCaseError::fail(format!("{status}: body is not JSON ({e}): {:?}", String::from_utf8_lossy(&bytes))))?;
            prop_assert_eq!(&v["jsonrpc"], "2.0");
            prop_assert!(v["error"]["code"].is_i64(), "{v}");
            prop_assert!(v["error"]["data"]["reason"].as_str().is_some_and(|r| !r.is_empty()), "{v}");
        }
    });
}
