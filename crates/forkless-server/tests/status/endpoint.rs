//! Sessions (bogus, foreign, deleted, stateless), `Accept` and `Content-Type`, origins,
//! methods, `/metrics` and `/healthz`.

use super::*;

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
