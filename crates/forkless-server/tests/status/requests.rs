//! JSON-RPC shapes, batches, notifications, unknown methods and body sizes.

use super::*;

#[tokio::test]
async fn initialize_negotiates_and_advertises_the_resume_capability() {
    let srv = TestServer::default().await;
    let mut c = srv.client();
    let v = c.initialize().await;
    assert_eq!(v["id"], 0);
    let r = &v["result"];
    assert_eq!(r["protocolVersion"], "2025-11-25");
    assert_eq!(r["serverInfo"]["name"], "test");
    assert_eq!(r["instructions"], "for tests");
    assert!(r["capabilities"]["tools"].is_object());
    let resume = &r["capabilities"]["experimental"]["forkless/resume"];
    assert_eq!(resume["version"], 1);
    assert_eq!(resume["graceMs"], 10_000);
    assert_eq!(resume["retryBudgetMs"], 30_000);
    assert_eq!(c.sid().len(), 22);
    assert!(srv.record(c.sid()).await.session().reset_contract());

    let mut old = srv.client();
    let v = old.initialize_with("2025-03-26", json!({})).await;
    assert_eq!(v["result"]["protocolVersion"], "2025-03-26");
    assert!(!srv.record(old.sid()).await.session().reset_contract());
    let mut future = srv.client();
    let v = future.initialize_with("2031-01-01", json!({})).await;
    assert_eq!(
        v["result"]["protocolVersion"], "2025-11-25",
        "unsupported requests get the latest with sessions"
    );
}

#[tokio::test]
async fn malformed_json_is_400_parse_error() {
    let srv = TestServer::default().await;
    let resp = srv.client().post().body("{\"jsonrpc\":").send().await.unwrap();
    assert_refused(resp, 400, -32700, "parse_error").await;
}

#[tokio::test]
async fn wrong_shapes_are_400_invalid_request() {
    let srv = TestServer::default().await;
    let c = srv.client();
    for bad in [json!(42), json!({"id": 1, "method": "x"}), json!({"jsonrpc": "2.0", "id": 1}), json!([])] {
        assert_refused(c.post_raw(&bad).await, 400, -32600, "invalid_message").await;
    }
}

#[tokio::test]
async fn missing_session_id_is_400() {
    let srv = TestServer::default().await;
    let resp = srv.client().call(1, "echo", json!({})).await;
    assert_refused(resp, 400, -32600, "session_id_missing").await;
    let resp = srv.client().get().send().await.unwrap();
    assert_refused(resp, 400, -32600, "session_id_missing").await;
}

#[tokio::test]
async fn bad_protocol_version_is_400() {
    let srv = TestServer::default().await;
    let mut c = srv.client();
    c.initialize().await;
    c.version = Some("1999-01-01".into());
    assert_refused(c.call(1, "echo", json!({})).await, 400, -32022, "protocol_version_unsupported").await;
    assert_refused(c.resume(None, None).await, 400, -32022, "protocol_version_unsupported").await;
    // Absent: the negotiated revision is assumed.
    c.version = None;
    assert_eq!(c.call(2, "echo", json!({})).await.status(), 200);
}

#[tokio::test]
async fn initialize_on_an_existing_session_is_400() {
    let srv = TestServer::default().await;
    let mut c = srv.client();
    c.initialize().await;
    let resp = c.call(1, "initialize", json!({ "protocolVersion": "2025-11-25", "capabilities": {} })).await;
    assert_refused(resp, 400, -32600, "already_initialized").await;
}

#[tokio::test]
async fn batches_only_in_2025_03_26() {
    let srv = TestServer::start(json_mode()).await;
    let batch = json!([
        { "jsonrpc": "2.0", "id": 1, "method": "echo", "params": { "a": 1 } },
        { "jsonrpc": "2.0", "method": "notifications/whatever" },
        { "jsonrpc": "2.0", "id": 2, "method": "ping" },
    ]);
    let mut new = srv.client();
    new.initialize_with("2025-06-18", json!({})).await;
    assert_refused(new.post_raw(&batch).await, 400, -32600, "batch_not_allowed").await;

    let mut old = srv.client();
    old.initialize_with("2025-03-26", json!({})).await;
    old.version = None; // 2025-03-26 has no MCP-Protocol-Version header
    let resp = old.post_raw(&batch).await;
    assert_eq!(resp.status(), 200);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(
        v,
        json!([
            { "jsonrpc": "2.0", "id": 1, "result": { "a": 1 } },
            { "jsonrpc": "2.0", "id": 2, "result": {} },
        ])
    );
    let init_in_batch = json!([{ "jsonrpc": "2.0", "id": 9, "method": "initialize", "params": {} }]);
    assert_refused(old.post_raw(&init_in_batch).await, 400, -32600, "invalid_message").await;
}

#[tokio::test]
async fn a_2025_03_26_batch_is_answered_on_one_sse_stream() {
    let srv = TestServer::default().await;
    let mut c = srv.client();
    c.initialize_with("2025-03-26", json!({})).await;
    let batch = json!([
        { "jsonrpc": "2.0", "id": 1, "method": "count", "params": { "n": 2 } },
        { "jsonrpc": "2.0", "id": 2, "method": "echo", "params": { "b": 2 } },
    ]);
    let mut sse = Sse::new(c.post_raw(&batch).await);
    let events = sse.rest().await;
    let mut responses: Vec<Value> =
        events.iter().map(|e| e.json()).filter(|v| v.get("id").is_some()).collect();
    responses.sort_by_key(|v| v["id"].as_u64());
    assert_eq!(responses[0]["result"], json!({ "done": 2 }));
    assert_eq!(responses[1]["result"], json!({ "b": 2 }));
    assert_eq!(events.len(), 4, "two notifications and two responses");
    let seqs: Vec<u64> = events.iter().map(common::Event::seq).collect();
    assert_eq!(seqs, vec![1, 2, 3, 4], "one gap-free stream");
}

#[tokio::test]
async fn notifications_and_responses_are_202() {
    let srv = TestServer::default().await;
    let mut c = srv.client();
    c.initialize().await;
    let resp = c.post_raw(&json!({ "jsonrpc": "2.0", "method": "notifications/initialized" })).await;
    assert_eq!(resp.status(), 202);
    assert!(resp.bytes().await.unwrap().is_empty());
    let resp = c.post_raw(&json!({ "jsonrpc": "2.0", "id": 77, "result": {} })).await;
    assert_eq!(resp.status(), 202, "a response nobody waits for is accepted and ignored");
}

#[tokio::test]
async fn unknown_methods_are_jsonrpc_errors_in_the_response() {
    let srv = TestServer::start(json_mode()).await;
    let mut c = srv.client();
    c.initialize().await;
    let resp = c.call(5, "no/such/method", json!({})).await;
    assert_eq!(resp.status(), 200);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["id"], 5);
    assert_eq!(v["error"]["code"], -32601);

    let resp = c.call(6, "panic", json!({})).await;
    assert_eq!(resp.status(), 200, "a panicking handler is an internal error, not a crash");
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["error"]["code"], -32603);
    assert_eq!(c.call(7, "ping", json!({})).await.json::<Value>().await.unwrap()["result"], json!({}));
}

#[tokio::test]
async fn oversized_body_is_413() {
    let cfg = ServerConfig { max_body_bytes: 1024, ..ServerConfig::default() };
    let srv = TestServer::start(cfg).await;
    let mut c = srv.client();
    c.initialize().await;
    let big = json!({ "jsonrpc": "2.0", "id": 1, "method": "echo", "params": { "x": "y".repeat(4096) } });
    assert_refused(c.post_raw(&big).await, 413, -32600, "body_too_large").await;
    // Without Content-Length (chunked), the limit still holds.
    let chunks = futures::stream::iter(vec![Ok::<_, std::io::Error>(big.to_string().into_bytes())]);
    let resp = c.post().body(reqwest::Body::wrap_stream(chunks)).send().await.unwrap();
    assert_refused(resp, 413, -32600, "body_too_large").await;
}

#[tokio::test]
async fn bodies_up_to_the_configured_limit_are_accepted() {
    // 3 MiB: above axum's 2 MB extractor default, below the server's 4 MiB.
    let srv = TestServer::start(json_mode()).await;
    let mut c = srv.client();
    c.initialize().await;
    let big = "y".repeat(3 << 20);
    let resp = c.call(1, "echo", json!({ "x": big })).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.json::<Value>().await.unwrap()["result"]["x"].as_str().map(str::len), Some(3 << 20));
}

#[tokio::test]
async fn closing_a_stateless_stream_cancels_its_request() {
    let srv = TestServer::default().await;
    let mut c = srv.client();
    c.version = Some("2026-07-28".into());
    let resp = c.call(4, "wait", json!({})).await;
    assert_eq!(resp.status(), 200);
    common::guard("the handler to start", async {
        while srv.controls.last_session.lock().unwrap().is_none() {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    })
    .await;
    drop(resp);
    common::guard("the handler to see its cancellation", async {
        while srv.controls.cancelled.lock().unwrap().is_empty() {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    })
    .await;
    assert_eq!(*srv.controls.cancelled.lock().unwrap(), vec![json!(4)]);
}
