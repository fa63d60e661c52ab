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

/// Notifications of ~1 KB each from `client`'s session to its standalone stream: what the
/// handler was told (its result, or the refusal it got).
async fn notify(client: &Client, id: u64, n: u64) -> String {
    let filler = "x".repeat(1000);
    client.call(id, "standalone-big", json!({ "n": n, "filler": filler })).await.text().await.unwrap()
}

/// Shares of the retained bytes: 64 KiB across the server, 16 KiB per principal (or no
/// share, `u64::MAX`, for the control).
fn retaining(share: u64) -> ServerConfig {
    let mut cfg = config(100, 100, AtCapacity::Reclaim);
    cfg.max_retained_bytes = 64 << 10;
    cfg.quotas.max_retained_bytes_per_principal = share;
    cfg
}

#[tokio::test]
async fn a_principal_retaining_its_share_is_held_back_and_another_is_not() {
    let server = TestServer::start(retaining(16 << 10)).await;
    let a = initialize(&server, "203.0.113.1").await.1.expect("a session");
    let a2 = initialize(&server, "203.0.113.1").await.1.expect("a second session");
    let told = notify(&a, 1, 12).await;
    assert!(!told.contains("max_retained"), "within its share: {told}");
    // Its share counts both its sessions: the second one's notifications reach the limit.
    let told = notify(&a2, 2, 12).await;
    assert!(told.contains("max_retained_bytes_per_principal"), "the share is held: {told}");
    let (status, retry, body) = reason(initialize(&server, "203.0.113.1").await.0).await;
    assert_eq!((status, retry.is_some()), (429, true), "{body}");
    assert_eq!(body["error"]["data"]["reason"], "max_retained_bytes_per_principal", "{body}");
    // Another principal is not held back: the server's budget is far from full.
    let b = initialize(&server, "198.51.100.9").await.1.expect("another principal initializes");
    let told = notify(&b, 3, 12).await;
    assert!(!told.contains("max_retained"), "another principal's notifications land: {told}");
    let m = metrics(&server).await;
    assert!(
        counter(&m, "forkless_capacity_refusals_total{limit=\"max_retained_bytes_per_principal\"}") >= 2,
        "{m}"
    );
    // Ending a session gives its bytes back to its principal's share.
    assert_eq!(a2.delete().await.status(), 200);
    let (status, _, body) = reason(initialize(&server, "203.0.113.1").await.0).await;
    assert_eq!(status, 200, "room in the share again: {body}");
}

/// The negative control: without shares, one principal fills the server's budget and every
/// other principal's notifications are refused.
#[tokio::test]
async fn negative_control_without_a_share_one_principal_holds_back_everyone() {
    let server = TestServer::start(retaining(u64::MAX)).await;
    let a = initialize(&server, "203.0.113.1").await.1.expect("a session");
    let a2 = initialize(&server, "203.0.113.1").await.1.expect("a second session");
    notify(&a, 1, 40).await;
    notify(&a2, 2, 40).await;
    let b = initialize(&server, "198.51.100.9").await;
    assert_eq!(b.0.status(), 503, "the budget is full: initialize is refused");
}
