//! Fair shares over real sockets: a principal (here, a client address named by a trusted
//! proxy's `X-Forwarded-For`) flooding `initialize` gets 429 at its share while another
//! initializes at once; at `max_sessions` the longest-idle session of the principal holding
//! the most is reclaimed (its client then gets 404 `reclaimed`) instead of refusing everyone;
//! the negative control, without shares and reclaiming, shows the lockout.

mod common;

use common::{Client, TestServer, counter, metrics};
use forkless_server::{AtCapacity, ServerConfig};
use serde_json::{Value, json};

/// Behind a proxy on loopback that names the client.
fn config(max_sessions: usize, share: usize, at_capacity: AtCapacity) -> ServerConfig {
    let mut cfg = ServerConfig { max_sessions, ..ServerConfig::default() };
    cfg.quotas.max_sessions_per_principal = share;
    cfg.quotas.trusted_proxies = vec!["127.0.0.1".parse().unwrap()];
    cfg.quotas.at_capacity = at_capacity;
    cfg
}

/// `initialize` from client address `from`: the response, and a client holding the session
/// if it was created.
async fn initialize(server: &TestServer, from: &str) -> (reqwest::Response, Option<Client>) {
    let body = json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": { "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": "t", "version": "1" } } });
    let client = server.client();
    let response = client
        .post()
        .header("x-forwarded-for", format!("{from}, 127.0.0.1"))
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let session = response.headers().get("mcp-session-id").map(|v| v.to_str().unwrap().to_owned());
    let client = session.map(|s| Client { session: Some(s), version: Some("2025-11-25".into()), ..client });
    (response, client)
}

async fn reason(response: reqwest::Response) -> (u16, Option<String>, Value) {
    let status = response.status().as_u16();
    let retry = response.headers().get("retry-after").map(|v| v.to_str().unwrap().to_owned());
    (status, retry, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn a_flooding_principal_gets_429_and_another_initializes_at_once() {
    let server = TestServer::start(config(100, 5, AtCapacity::Reclaim)).await;
    for _ in 0..5 {
        assert_eq!(initialize(&server, "203.0.113.1").await.0.status(), 200);
    }
    let (status, retry, body) = reason(initialize(&server, "203.0.113.1").await.0).await;
    assert_eq!((status, retry.is_some()), (429, true), "{body}");
    assert_eq!(body["error"]["data"]["reason"], "max_sessions_per_principal", "{body}");
    let (other, _) = initialize(&server, "198.51.100.9").await;
    assert_eq!(other.status(), 200, "another principal is not locked out");
    let m = metrics(&server).await;
    assert_eq!(
        counter(&m, "forkless_capacity_refusals_total{limit=\"max_sessions_per_principal\"}"),
        1,
        "{m}"
    );
}

#[tokio::test]
async fn at_max_sessions_the_longest_idle_session_of_the_biggest_principal_is_reclaimed() {
    let server = TestServer::start(config(6, 4, AtCapacity::Reclaim)).await;
    let mut flood = Vec::new();
    for _ in 0..4 {
        flood.push(initialize(&server, "203.0.113.1").await.1.expect("a session"));
    }
    let mut second = Vec::new();
    for _ in 0..2 {
        second.push(initialize(&server, "198.51.100.9").await.1.expect("a session"));
    }
    // The flooder's first session is used again; its second is now its longest idle.
    assert_eq!(flood[0].call(1, "echo", json!({})).await.status(), 200);
    let (third, _) = initialize(&server, "192.0.2.44").await;
    assert_eq!(third.status(), 200, "a third principal gets in at max_sessions");
    let (status, _, body) = reason(flood[1].call(2, "echo", json!({})).await).await;
    assert_eq!((status, &body["error"]["data"]["reason"]), (404, &json!("reclaimed")), "{body}");
    for kept in [&flood[0], &flood[2], &flood[3], &second[0], &second[1]] {
        assert_eq!(kept.call(3, "echo", json!({})).await.status(), 200, "only one session made room");
    }
    let m = metrics(&server).await;
    assert!(m.contains("reason=\"reclaimed\"} 1"), "{m}");
    // The third principal (1 session) asks again: the flooder (3) makes room once more.
    let (status, _, body) = reason(initialize(&server, "192.0.2.44").await.0).await;
    assert_eq!(status, 200, "{body}");
    // Now every principal holds 2: one asking for more holds as many as anyone, and is refused.
    let (status, retry, body) = reason(initialize(&server, "198.51.100.9").await.0).await;
    assert_eq!((status, retry.is_some()), (503, true), "{body}");
    assert_eq!(body["error"]["data"]["reason"], "max_sessions", "{body}");
}

/// The negative control: no shares, refusing at the limit: one principal fills the server and
/// every other is locked out with 503.
#[tokio::test]
async fn negative_control_without_shares_one_principal_locks_everyone_out() {
    let server = TestServer::start(config(5, usize::MAX, AtCapacity::Refuse)).await;
    for _ in 0..5 {
        assert_eq!(initialize(&server, "203.0.113.1").await.0.status(), 200);
    }
    let (status, _, body) = reason(initialize(&server, "198.51.100.9").await.0).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["data"]["reason"], "max_sessions", "{body}");
}
