//! The 2026-07-28 revision on the shared endpoint: `server/discover`, the per-request `_meta`
//! fields, the standard headers checked against the body, removed and unknown methods, an
//! unsupported version, and `resultType` on results; each refusal with its request's id.

mod common;

use common::{TestServer, request_2026};
use serde_json::{Value, json};

fn meta() -> Value {
    json!({ "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {} })
}

async fn post(server: &TestServer, headers: &[(&str, &str)], body: Value) -> (u16, Value) {
    let mut rb = reqwest::Client::new()
        .post(&server.url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    for (k, v) in headers {
        rb = rb.header(*k, *v);
    }
    let resp = rb.body(body.to_string()).send().await.unwrap();
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    // An SSE answer: its last data line is the response.
    let json = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .next_back()
        .map_or_else(|| serde_json::from_str(&text).unwrap(), |d| serde_json::from_str(d.trim()).unwrap());
    (status, json)
}

const V: (&str, &str) = ("mcp-protocol-version", "2026-07-28");

/// Headers, body, and the HTTP status and JSON-RPC code the answer must have.
type Case<'a> = (Vec<(&'a str, &'a str)>, Value, u16, i64);

#[tokio::test]
async fn discover_names_the_versions_and_results_carry_their_type() {
    let server = TestServer::default().await;
    let body =
        json!({ "jsonrpc": "2.0", "id": "d", "method": "server/discover", "params": { "_meta": meta() } });
    let (status, v) = post(&server, &[V, ("mcp-method", "server/discover")], body).await;
    assert_eq!(status, 200);
    let r = &v["result"];
    assert_eq!(r["resultType"], "complete");
    assert!(r["supportedVersions"].as_array().unwrap().contains(&json!("2026-07-28")), "{r}");
    assert!(r["supportedVersions"].as_array().unwrap().contains(&json!("2025-11-25")), "{r}");
    assert!(r["ttlMs"].is_u64() && r["cacheScope"] == "public", "{r}");
    let call = json!({ "jsonrpc": "2.0", "id": 2, "method": "echo", "params": { "_meta": meta(), "x": 1 } });
    let (status, v) = post(&server, &[V, ("mcp-method", "echo")], call).await;
    assert_eq!(status, 200);
    assert_eq!(v["result"]["resultType"], "complete");
    assert_eq!(v["result"]["x"], 1);
}

#[tokio::test]
async fn every_refusal_has_its_status_code_and_request_id() {
    let server = TestServer::default().await;
    let req = |id: u64, method: &str, params: Value| json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
    let mut with_name = meta();
    with_name["x"] = json!(1);
    let cases: Vec<Case<'_>> = vec![
        // Mcp-Method missing, then naming another method.
        (vec![V], req(1, "echo", json!({ "_meta": meta() })), 400, -32020),
        (vec![V, ("mcp-method", "tools/list")], req(2, "echo", json!({ "_meta": meta() })), 400, -32020),
        // Mcp-Name for a tools/call: missing, then another tool.
        (
            vec![V, ("mcp-method", "tools/call")],
            req(3, "tools/call", json!({ "name": "echo", "_meta": meta() })),
            400,
            -32020,
        ),
        (
            vec![V, ("mcp-method", "tools/call"), ("mcp-name", "other")],
            req(4, "tools/call", json!({ "name": "echo", "_meta": meta() })),
            400,
            -32020,
        ),
        // The header's version against the body's.
        (
            vec![V, ("mcp-method", "echo")],
            req(
                5,
                "echo",
                json!({ "_meta": { "io.modelcontextprotocol/protocolVersion": "2025-11-25", "io.modelcontextprotocol/clientCapabilities": {} } }),
            ),
            400,
            -32020,
        ),
        // The required _meta fields.
        (vec![V, ("mcp-method", "echo")], req(6, "echo", json!({})), 400, -32602),
        // A method the revision removed, and one nobody serves.
        (vec![V, ("mcp-method", "ping")], req(7, "ping", json!({ "_meta": meta() })), 404, -32601),
        (vec![V, ("mcp-method", "no/such")], req(8, "no/such", json!({ "_meta": meta() })), 404, -32601),
        // A version nobody serves.
        (
            vec![("mcp-protocol-version", "1900-01-01"), ("mcp-method", "echo")],
            req(9, "echo", json!({ "_meta": meta() })),
            400,
            -32022,
        ),
    ];
    for (headers, body, want_status, want_code) in cases {
        let id = body["id"].clone();
        let (status, v) = post(&server, &headers, body).await;
        assert_eq!((status, v["error"]["code"].as_i64()), (want_status, Some(want_code)), "{v}");
        assert_eq!(v["id"], id, "the refusal names its request: {v}");
    }
    let (_, v) = post(&server, &[("mcp-protocol-version", "1900-01-01")], req(10, "echo", json!({}))).await;
    assert_eq!(v["error"]["data"]["requested"], "1900-01-01");
    assert!(v["error"]["data"]["supported"].as_array().unwrap().contains(&json!("2026-07-28")));
}

#[tokio::test]
async fn log_messages_go_only_to_a_request_that_opted_in_at_their_level() {
    let server = TestServer::default().await;
    let count = |meta: Value| json!({ "jsonrpc": "2.0", "id": 1, "method": "count", "params": { "n": 2, "_meta": meta } });
    let raw = |server: &TestServer, body: Value| {
        let req = request_2026(server, "count").body(body.to_string());
        async move { req.send().await.unwrap().text().await.unwrap() }
    };
    let silent = raw(&server, count(meta())).await;
    assert!(!silent.contains("notifications/message") && silent.contains("\"done\":2"), "{silent}");
    let mut opted = meta();
    opted["io.modelcontextprotocol/logLevel"] = json!("info");
    let loud = raw(&server, count(opted.clone())).await;
    assert_eq!(loud.matches("notifications/message").count(), 2, "{loud}");
    opted["io.modelcontextprotocol/logLevel"] = json!("error");
    let above = raw(&server, count(opted)).await;
    assert!(!above.contains("notifications/message"), "info is below error: {above}");
}

#[tokio::test]
async fn a_listen_stream_opens_with_its_acknowledgement() {
    use futures::StreamExt as _;
    let server = TestServer::default().await;
    let body = json!({ "jsonrpc": "2.0", "id": "l1", "method": "subscriptions/listen",
        "params": { "_meta": meta(), "notifications": { "toolsListChanged": true, "promptsListChanged": true } } });
    let resp = request_2026(&server, "subscriptions/listen").body(body.to_string()).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let mut chunks = resp.bytes_stream();
    let mut text = String::new();
    let ack = common::guard("the acknowledgement", async {
        loop {
            text.push_str(std::str::from_utf8(&chunks.next().await.unwrap().unwrap()).unwrap());
            if let Some(line) = text.lines().find_map(|l| l.strip_prefix("data:")) {
                return serde_json::from_str::<Value>(line.trim()).unwrap();
            }
        }
    })
    .await;
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], "l1");
    // The test handler declares tools list changes, not prompts ones: only those are honoured.
    assert_eq!(ack["params"]["notifications"], json!({ "toolsListChanged": true }));
}
