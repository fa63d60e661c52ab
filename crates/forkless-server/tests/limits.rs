//! Server limits over real sockets: slow and silent connections are closed within their
//! timeouts, a slow body gets 408, the connection limit makes room by closing idle
//! connections (and refuses with 503 when none is idle), server-wide session and byte limits
//! refuse `initialize` with 503 and move their metric, evictions are counted by limit, and an
//! MCP header sent twice is refused, never guessed.

mod common;

use std::time::Duration;

use common::{Sse, TestServer, counter, guard, metrics};
use forkless_server::ServerConfig;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

fn with(f: impl FnOnce(&mut ServerConfig)) -> ServerConfig {
    let mut cfg = ServerConfig::default();
    f(&mut cfg);
    cfg
}

/// Read until the server closes the connection; what it sent.
async fn until_closed(tcp: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let _ = guard("the server to close the connection", tcp.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test]
async fn a_silent_connection_is_closed_after_the_idle_timeout() {
    let server = TestServer::start(with(|c| c.idle_timeout = Duration::from_millis(300))).await;
    let mut tcp = TcpStream::connect(server.addr).await.unwrap();
    let sent = until_closed(&mut tcp).await;
    assert!(sent.is_empty(), "{sent}");
    assert_eq!(counter(&metrics(&server).await, "forkless_idle_timeouts_total"), 1);
}

#[tokio::test]
async fn headers_sent_a_byte_at_a_time_are_cut_off() {
    // The idle timeout is long: only the header timeout, from the first byte, can cut it off.
    let server = TestServer::start(with(|c| {
        c.header_read_timeout = Duration::from_millis(300);
        c.idle_timeout = Duration::from_secs(600);
    }))
    .await;
    let mut tcp = TcpStream::connect(server.addr).await.unwrap();
    let (mut rd, mut wr) = tcp.split();
    let drip = async {
        for b in b"GET /mcp HTTP/1.1\r\nhost: x\r\naccept: text/event-stream\r\n" {
            if wr.write_all(&[*b]).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        std::future::pending::<()>().await;
    };
    let mut out = Vec::new();
    tokio::select! {
        () = drip => {}
        r = guard("the server to close the connection", rd.read_to_end(&mut out)) => { let _ = r; }
    }
    let _ = tcp.shutdown().await;
    assert_eq!(counter(&metrics(&server).await, "forkless_header_timeouts_total"), 1);
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed_after_the_idle_timeout() {
    let server = TestServer::start(with(|c| c.idle_timeout = Duration::from_millis(300))).await;
    let mut tcp = TcpStream::connect(server.addr).await.unwrap();
    tcp.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n").await.unwrap();
    let sent = until_closed(&mut tcp).await;
    assert!(sent.starts_with("HTTP/1.1 200"), "the request was served first: {sent}");
}

#[tokio::test]
async fn a_slow_body_gets_408_with_a_json_rpc_error() {
    let server = TestServer::start(with(|c| c.body_read_timeout = Duration::from_millis(300))).await;
    let mut tcp = TcpStream::connect(server.addr).await.unwrap();
    let head = "POST /mcp HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\ncontent-length: 1000\r\n\r\n{\"jsonrpc\"";
    tcp.write_all(head.as_bytes()).await.unwrap();
    let sent = until_closed(&mut tcp).await;
    assert!(sent.starts_with("HTTP/1.1 408"), "{sent}");
    assert!(sent.contains("\"reason\":\"body_timeout\""), "{sent}");
    assert!(metrics(&server).await.contains("forkless_body_timeouts_total 1"));
}

#[tokio::test]
async fn at_the_connection_limit_idle_connections_make_room_and_busy_ones_refuse() {
    let server = TestServer::start(with(|c| c.max_connections = 3)).await;
    // Three silent connections fill the limit; a real client still gets served.
    let mut silent = Vec::new();
    for _ in 0..3 {
        silent.push(TcpStream::connect(server.addr).await.unwrap());
    }
    let mut client = server.client();
    client.initialize().await;
    assert!(counter(&metrics(&server).await, "forkless_connections_dropped_idle_total") >= 1);
    drop(silent);
    // Three SSE streams in flight fill the limit with busy connections: the next is refused.
    let mut streams = Vec::new();
    for n in 0..3 {
        let mut c = server.client();
        c.initialize().await;
        let resp = c.call(n, "wait", json!({})).await;
        streams.push((c, Sse::new(resp)));
    }
    let mut tcp = TcpStream::connect(server.addr).await.unwrap();
    let sent = until_closed(&mut tcp).await;
    assert!(sent.starts_with("HTTP/1.1 503"), "{sent}");
    assert!(sent.contains("\"reason\":\"max_connections\"") && sent.contains("retry-after: 1"), "{sent}");
    server.controls.gate.add_permits(3);
    for (_, mut sse) in streams {
        assert!(!sse.rest().await.is_empty(), "the busy streams were not disturbed");
    }
}

#[tokio::test]
async fn at_max_sessions_initialize_is_refused_with_503_and_existing_sessions_go_on() {
    let server = TestServer::start(with(|c| c.max_sessions = 2)).await;
    let mut a = server.client();
    a.initialize().await;
    let mut b = server.client();
    b.initialize().await;
    let body = json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": { "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": "t", "version": "1" } } });
    let refused = server.client().post_raw(&body).await;
    assert_eq!(refused.status(), 503);
    assert_eq!(refused.headers().get("retry-after").unwrap(), "5");
    let error: Value = refused.json().await.unwrap();
    assert_eq!(error["error"]["data"]["reason"], "max_sessions");
    assert_eq!(a.call(1, "echo", json!({ "still": "here" })).await.status(), 200, "no session was dropped");
    assert!(metrics(&server).await.contains("forkless_capacity_refusals_total{limit=\"max_sessions\"} 1"));
    // Room again once a session ends.
    assert_eq!(b.delete().await.status(), 200);
    assert_eq!(server.client().post_raw(&body).await.status(), 200);
}

#[tokio::test]
async fn at_max_retained_bytes_notifications_and_new_sessions_are_refused() {
    let server = TestServer::start(with(|c| c.max_retained_bytes = 4096)).await;
    let mut client = server.client();
    client.initialize().await;
    let filler = "x".repeat(1000);
    let resp = client.call(1, "standalone-big", json!({ "n": 10, "filler": filler })).await;
    let text = resp.text().await.unwrap();
    assert!(text.contains("max_retained_bytes"), "the handler was told its notification was refused: {text}");
    let body = json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": { "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": "t", "version": "1" } } });
    let refused = server.client().post_raw(&body).await;
    assert_eq!(refused.status(), 503);
    let error: Value = refused.json().await.unwrap();
    assert_eq!(error["error"]["data"]["reason"], "max_retained_bytes");
    let m = metrics(&server).await;
    assert!(m.contains("forkless_capacity_refusals_total{limit=\"max_retained_bytes\"}"), "{m}");
    assert!(m.contains("forkless_retained_bytes "), "{m}");
}

#[tokio::test]
async fn evictions_are_counted_by_the_limit_that_made_them() {
    let server = TestServer::start(with(|c| c.core.limits.stream_max_events = 5)).await;
    let mut client = server.client();
    client.initialize().await;
    let resp = client.call(1, "standalone", json!({ "n": 20 })).await;
    assert_eq!(resp.status(), 200);
    let _ = resp.text().await;
    let m = metrics(&server).await;
    assert!(m.contains("forkless_evictions_total{reason=\"stream_max_events\"} 15"), "{m}");
}

#[tokio::test]
async fn a_single_valued_mcp_header_sent_twice_is_refused() {
    let server = TestServer::default().await;
    let mut client = server.client();
    client.initialize().await;
    let sid = client.sid().to_owned();
    for (name, value) in [
        ("mcp-session-id", sid.as_str()),
        ("mcp-protocol-version", "2025-11-25"),
        ("last-event-id", "AAAAAAAAAAAAAAAA.1"),
        ("mcp-stream-id", "AAAAAAAAAAAAAAAA"),
    ] {
        for method in ["GET", "POST", "DELETE"] {
            let mut tcp = TcpStream::connect(server.addr).await.unwrap();
            let request = format!(
                "{method} /mcp HTTP/1.1\r\nhost: x\r\naccept: application/json, text/event-stream\r\ncontent-type: application/json\r\nmcp-session-id: {sid}\r\n{name}: {value}\r\nconnection: close\r\ncontent-length: 2\r\n\r\n{{}}"
            );
            let request = if name == "mcp-session-id" {
                request.replacen(&format!("mcp-session-id: {sid}\r\n"), "", 1).replacen(
                    "host: x\r\n",
                    &format!("host: x\r\nmcp-session-id: {sid}\r\nmcp-session-id: {sid}\r\n"),
                    1,
                )
            } else {
                request.replacen("host: x\r\n", &format!("host: x\r\n{name}: {value}\r\n"), 1)
            };
            tcp.write_all(request.as_bytes()).await.unwrap();
            let sent = until_closed(&mut tcp).await;
            assert!(sent.starts_with("HTTP/1.1 400"), "{method} with two {name}: {sent}");
            assert!(sent.contains("\"reason\":\"header_repeated\""), "{method} with two {name}: {sent}");
        }
    }
    assert_eq!(client.call(1, "echo", json!({})).await.status(), 200, "the session is untouched");
}

#[tokio::test]
async fn oversized_headers_get_431_with_a_json_rpc_error() {
    // Below hyper's smallest buffer the router measures; above it hyper refuses by itself.
    let server = TestServer::start(with(|c| c.max_header_bytes = 1024)).await;
    assert_431(&server, 2000).await;
}

/// A GET padded with `padding` header bytes is refused with 431 and a typed JSON-RPC error.
async fn assert_431(server: &TestServer, padding: usize) {
    let resp = reqwest::Client::new()
        .get(&server.url)
        .header("accept", "text/event-stream")
        .header("x-padding", "p".repeat(padding))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 431);
    let error: Value = resp.json().await.unwrap();
    assert_eq!(error["error"]["data"]["reason"], "headers_too_large");
}

#[tokio::test]
async fn what_hyper_rejects_by_itself_still_gets_a_json_rpc_error() {
    let server = TestServer::default().await;
    for request in [
        &b"GET /mcp HTTP/1.1\r\nhost: x\r\nx-bad: a\x01b\r\n\r\n"[..],
        b"GET /mcp HTTP/1.1\r\nhost: x\r\nno colon here\r\n\r\n",
        b"NOT HTTP AT ALL\r\n\r\n",
    ] {
        let mut tcp = TcpStream::connect(server.addr).await.unwrap();
        tcp.write_all(request).await.unwrap();
        let sent = until_closed(&mut tcp).await;
        assert!(sent.starts_with("HTTP/1.1 400"), "{sent}");
        assert!(
            sent.contains("content-type: application/json")
                && sent.contains("\"reason\":\"request_malformed\""),
            "{sent}"
        );
    }
    // The server goes on serving.
    let mut client = server.client();
    client.initialize().await;
}

#[tokio::test]
async fn an_idle_connection_is_closed_after_the_idle_timeout_and_a_busy_one_is_not() {
    let server = TestServer::start(with(|c| {
        c.idle_timeout = Duration::from_millis(300);
        c.header_read_timeout = Duration::from_secs(600);
    }))
    .await;
    let mut tcp = TcpStream::connect(server.addr).await.unwrap();
    tcp.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n").await.unwrap();
    // Closed long before the ten-minute header timeout: the guard is ten seconds.
    let sent = until_closed(&mut tcp).await;
    assert!(sent.starts_with("HTTP/1.1 200"), "{sent}");
    assert_eq!(counter(&metrics(&server).await, "forkless_idle_timeouts_total"), 1);
    // An SSE response in flight keeps its connection past the idle timeout.
    let mut client = server.client();
    client.initialize().await;
    let mut sse = Sse::new(client.call(1, "gated", json!({ "first": 1, "rest": 1 })).await);
    sse.next_content().await.expect("the first event");
    tokio::time::sleep(Duration::from_millis(900)).await;
    server.controls.gate.add_permits(1);
    let rest = sse.rest().await;
    assert!(
        rest.iter().any(|e| e.json().get("result").is_some()),
        "the stream went on to its result: {rest:?}"
    );
}

#[tokio::test]
async fn headers_beyond_the_default_limit_get_431_with_a_json_rpc_error() {
    assert_431(&TestServer::default().await, 20 * 1024).await;
}
