//! Every status code of the endpoint, over real HTTP, and bad input of every kind.

mod common;

use common::{Client, Sse, TestServer, assert_refused, error_body};
use forkless_server::{AnswerMode, ServerConfig};
use serde_json::{Value, json};

fn json_mode() -> ServerConfig {
    ServerConfig { answer: AnswerMode::Json, ..ServerConfig::default() }
}

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

#[tokio::test]
async fn bogus_and_foreign_session_ids_are_404() {
    let srv = TestServer::default().await;
    let other = TestServer::default().await;
    let mut foreign = other.client();
    foreign.initialize().await;
    for sid in ["nonsense", "AAAAAAAAAAAAAAAAAAAAAA", foreign.sid()] {
        let mut c = srv.client();
        c.session = Some(sid.to_owned());
        let e = assert_refused(c.call(1, "echo", json!({})).await, 404, -32001, "session_unknown").await;
        assert!(e["message"].as_str().unwrap().ends_with("; start a new session"));
        assert_refused(c.resume(None, None).await, 404, -32001, "session_unknown").await;
        assert_refused(c.delete().await, 404, -32001, "session_unknown").await;
    }
}

#[tokio::test]
async fn wrong_accept_is_406_and_wrong_content_type_is_415() {
    let srv = TestServer::default().await;
    let mut c = srv.client();
    c.initialize().await;
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "echo" }).to_string();
    let post = || {
        c.http
            .post(&c.url)
            .header("mcp-session-id", c.sid())
            .header("content-type", "application/json")
            .body(body.clone())
    };
    let resp = post().header("accept", "application/json").send().await.unwrap();
    assert_refused(resp, 406, -32600, "not_acceptable").await;
    let resp = post().header("accept", "text/html").send().await.unwrap();
    assert_refused(resp, 406, -32600, "not_acceptable").await;
    let resp = post().header("accept", "*/*").send().await.unwrap();
    assert_eq!(resp.status(), 200, "*/* admits both");
    let resp = c
        .http
        .get(&c.url)
        .header("mcp-session-id", c.sid())
        .header("accept", "application/json")
        .send()
        .await
        .unwrap();
    assert_refused(resp, 406, -32600, "not_acceptable").await;
    let resp = c
        .http
        .post(&c.url)
        .header("mcp-session-id", c.sid())
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "text/plain")
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_refused(resp, 415, -32600, "unsupported_media_type").await;
}

#[tokio::test]
async fn foreign_origins_are_403_local_ones_and_none_pass() {
    let srv = TestServer::default().await;
    let mut c = srv.client();
    c.initialize().await;
    let resp = c.post().header("origin", "http://evil.example").body("{}").send().await.unwrap();
    assert_refused(resp, 403, -32600, "origin_forbidden").await;
    let resp = c.get().header("origin", "http://evil.example").send().await.unwrap();
    assert_refused(resp, 403, -32600, "origin_forbidden").await;
    let ok = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }).to_string();
    let resp = c.post().header("origin", "http://localhost:5173").body(ok).send().await.unwrap();
    assert_eq!(resp.status(), 202);
}

#[tokio::test]
async fn other_methods_are_405_with_allow() {
    let srv = TestServer::default().await;
    let resp = reqwest::Client::new().put(&srv.url).send().await.unwrap();
    assert_eq!(resp.status(), 405);
    let allow = resp.headers().get("allow").expect("Allow header").to_str().unwrap().to_owned();
    for m in ["GET", "POST", "DELETE"] {
        assert!(allow.contains(m), "{allow}");
    }
    let mut c = srv.client();
    c.initialize().await;
    let resp = c.http.head(&c.url).header("mcp-session-id", c.sid()).send().await.unwrap();
    assert_eq!(resp.status(), 405, "HEAD attaches nothing");
    assert!(c.resume(None, None).await.status().is_success(), "the session is untouched");
    // The stateless revision has no GET stream and nothing to delete.
    let mut c = srv.client();
    c.version = Some("2026-07-28".into());
    let resp = c.get().send().await.unwrap();
    assert_eq!(resp.status(), 405);
    assert_eq!(resp.headers().get("allow").unwrap(), "POST");
    let resp = c.http.delete(&c.url).header("mcp-protocol-version", "2026-07-28").send().await.unwrap();
    assert_eq!(resp.status(), 405);
}

#[tokio::test]
async fn delete_ends_the_session() {
    let srv = TestServer::default().await;
    let mut c = srv.client();
    c.initialize().await;
    let resp = c.delete().await;
    assert_eq!(resp.status(), 200);
    assert_refused(c.call(1, "echo", json!({})).await, 404, -32001, "deleted").await;
    assert_refused(c.delete().await, 404, -32001, "deleted").await;
    let mut none = Client::new(&srv.url);
    none.session = None;
    assert_refused(none.delete().await, 400, -32600, "session_id_missing").await;
}

#[tokio::test]
async fn stateless_2026_requests_create_no_session() {
    for answer in [AnswerMode::Json, AnswerMode::Sse] {
        let srv = TestServer::start(ServerConfig { answer, ..ServerConfig::default() }).await;
        let mut c = srv.client();
        c.version = Some("2026-07-28".into());
        let resp = c.call(1, "count", json!({ "n": 2 })).await;
        assert_eq!(resp.status(), 200);
        assert!(resp.headers().get("mcp-session-id").is_none());
        let response = match answer {
            AnswerMode::Json => resp.json::<Value>().await.unwrap(),
            AnswerMode::Sse => {
                let mut sse = Sse::new(resp);
                assert!(sse.stream_id.is_none());
                let events = sse.rest().await;
                assert!(events.iter().all(|e| e.id.is_none()), "no ids without resumption");
                assert_eq!(events.len(), 3, "two notifications, then the response");
                events[2].json()
            }
        };
        match answer {
            // With a JSON answer there is nowhere to send notifications: the handler is told.
            AnswerMode::Json => assert_eq!(response["error"]["code"], -32603),
            AnswerMode::Sse => assert_eq!(response["result"], json!({ "done": 2, "resultType": "complete" })),
        }
        assert!(srv.store.sessions().await.unwrap().is_empty());
        let e = error_body(c.post_raw(&json!([{ "jsonrpc": "2.0", "id": 1, "method": "echo" }])).await).await;
        assert_eq!(e["data"]["reason"], "batch_not_allowed");
        assert_eq!(c.call(2, "ask", json!({})).await.status(), 200);
    }
}

#[tokio::test]
async fn metrics_and_healthz() {
    let srv = TestServer::default().await;
    let mut c = srv.client();
    c.initialize().await;
    c.resume(Some("41"), None).await;
    let text = reqwest::get(format!("{}/metrics", srv.base())).await.unwrap().text().await.unwrap();
    assert!(text.contains("forkless_sessions_created_total 1"), "{text}");
    assert!(text.contains("forkless_get_outcomes_total{outcome=\"rejected\",reason=\"cursor_malformed\"} 1"));
    assert!(text.contains("forkless_sessions_ended_total{reason=\"cursor_malformed\"} 1"));
    let health = reqwest::get(format!("{}/healthz", srv.base())).await.unwrap();
    assert_eq!(health.status(), 200);
}

use forkless_store::Store as _;

/// A session its store ended because the store lost history (a Redis restarted from an
/// older snapshot) is refused like any ended session: 404 with reason `history_lost`, never
/// served on under its id.
#[tokio::test]
async fn a_session_whose_history_was_lost_is_refused_with_its_reason() {
    let srv = TestServer::default().await;
    let mut c = srv.client();
    c.initialize().await;
    let id: forkless_core::SessionId = c.session.clone().unwrap().parse().unwrap();
    // Ended now, so its tombstone outlives the test: ended at an instant long past, the
    // sweeper may remove it first and the session would read as unknown.
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis();
    let now = forkless_core::Timestamp::from_millis(u64::try_from(now).unwrap());
    forkless_store::transact(&srv.store, id, |r| r.on_end(forkless_core::EndReason::HistoryLost, now))
        .await
        .unwrap();
    assert_refused(c.call(1, "echo", json!({})).await, 404, -32001, "history_lost").await;
}

/// `/healthz` asks the store: 503 with its reason while it cannot serve, 200 once it can.
#[tokio::test]
async fn healthz_reports_the_store() {
    use forkless_store::{Fault, FaultyStore, MemoryStore};
    let store = FaultyStore::new(MemoryStore::new());
    let handler = common::TestHandler { controls: common::Controls::new() };
    let server = forkless_server::Server::new(store.clone(), handler, json_mode()).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(server.serve(listener, std::future::pending()));
    store.inject(Fault::Health);
    let down = reqwest::get(format!("{base}/healthz")).await.unwrap();
    assert_eq!(down.status(), 503);
    let body: Value = down.json().await.unwrap();
    assert_eq!(body["status"], "unavailable");
    assert!(body["store"].as_str().is_some_and(|s| s.contains("injected fault: health")), "{body}");
    let up = reqwest::get(format!("{base}/healthz")).await.unwrap();
    assert_eq!(up.status(), 200, "the next check finds the store serving");
}

#[tokio::test]
async fn a_failing_store_is_a_typed_500_and_other_sessions_carry_on() {
    use forkless_store::{Fault, FaultyStore, MemoryStore};
    let store = FaultyStore::new(MemoryStore::new());
    let controls = common::Controls::new();
    let handler = common::TestHandler { controls: controls.clone() };
    let cfg = json_mode();
    let server = forkless_server::Server::new(store.clone(), handler, cfg).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(server.serve(listener, std::future::pending()));
    let mut a = Client::new(&url);
    a.initialize().await;
    let mut b = Client::new(&url);
    b.initialize().await;

    store.inject(Fault::Load);
    assert_refused(a.call(1, "echo", json!({})).await, 500, -32603, "store_failed").await;
    assert_eq!(b.call(1, "echo", json!({})).await.status(), 200, "another session is undisturbed");

    store.inject(Fault::Append);
    let v: Value = a.call(2, "count", json!({ "n": 1 })).await.json().await.unwrap();
    assert_eq!(v["error"]["code"], -32603, "the handler got a typed SendError::Store: {v}");
    assert!(v["error"]["message"].as_str().unwrap().contains("store"));
    assert_eq!(a.call(3, "echo", json!({})).await.status(), 200, "the session survives a failed append");
}

/// A POST whose stream opening is applied but never confirmed to it (its client went away
/// while the store synced, say) answers with an error; its handler, still running, must then
/// put its answer on that stream all the same, or the stream would stay open, counting
/// against the session's limit, for the rest of the session.
#[tokio::test]
async fn a_stream_opened_for_a_post_that_went_away_still_gets_its_answer() {
    use forkless_store::{Fault, FaultyStore, MemoryStore};
    let store = FaultyStore::new(MemoryStore::new());
    let controls = common::Controls::new();
    let handler = common::TestHandler { controls: controls.clone() };
    let server = forkless_server::Server::new(store.clone(), handler, ServerConfig::default()).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(server.serve(listener, std::future::pending()));
    let mut c = Client::new(&url);
    c.initialize().await;
    let sid: forkless_core::SessionId = c.sid().parse().unwrap();

    // `gated` waits for the gate, so the POST opens the stream itself: that opening is the
    // next compare-and-set, written but reported as failed.
    store.inject(Fault::CompareAndSetUnacknowledged);
    assert_refused(c.call(1, "gated", json!({ "first": 0, "rest": 0 })).await, 500, -32603, "store_failed")
        .await;
    controls.gate.add_permits(1);

    let answered = |r: &forkless_core::SessionRecord| {
        r.streams().any(|s| {
            s.kind() == forkless_core::StreamKind::Request && s.is_completed() && s.high_water().get() == 1
        })
    };
    common::guard("the handler's answer on the opened stream", async {
        loop {
            let record = store.load(sid).await.unwrap().unwrap().value;
            if answered(&record) {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    })
    .await;
}
