//! Liveness per node: an idle attached stream costs the store nothing, a connection that
//! stops draining is detached by the node's stall watch after grace, and a session created by
//! another process is restored only for a handler that says its sessions can be.

mod common;

use std::time::Duration;

use common::{Client, GUARD, Sse, TestHandler, TestServer, guard};
use forkless_core::{Liveness, SessionId, Timestamp};
use forkless_server::{Handler, RequestContext, Restorable, RpcError, Server, ServerConfig, ServerInfo};
use forkless_store::{MemoryStore, Store};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

fn now() -> Timestamp {
    let ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis();
    Timestamp::from_millis(ms as u64)
}

fn quick(liveness: Liveness) -> ServerConfig {
    let mut cfg = ServerConfig::default();
    cfg.core.keep_alive = Duration::from_millis(50);
    cfg.core.grace = Duration::from_millis(600);
    cfg.core.liveness = liveness;
    cfg.sweep_interval = Duration::from_millis(50);
    cfg
}

async fn version(server: &TestServer, sid: &str) -> u64 {
    let id: SessionId = sid.parse().unwrap();
    server.store.load(id).await.unwrap().expect("stored").version.get()
}

/// Attach the standalone stream and read `n` keep-alive comments; the record's version
/// before and after.
async fn idle_for_keep_alives(liveness: Liveness, n: usize) -> (u64, u64) {
    let server = TestServer::start(quick(liveness)).await;
    let mut client = server.client();
    client.initialize().await;
    let mut sse = Sse::new(client.resume(None, None).await);
    sse.next_block().await.expect("the preamble");
    let before = version(&server, client.sid()).await;
    let mut comments = 0;
    while comments < n {
        let block = sse.next_block().await.expect("the stream stays open");
        if block.comment {
            comments += 1;
        }
    }
    (before, version(&server, client.sid()).await)
}

#[tokio::test]
async fn an_idle_attached_stream_costs_no_store_write() {
    // Twenty keep-alives span more than one grace window: a per-connection deadline would
    // have been renewed several times.
    let (before, after) = idle_for_keep_alives(Liveness::PerNode, 20).await;
    assert_eq!(before, after, "no write to the session while its stream idles");
}

#[tokio::test]
async fn negative_control_per_connection_liveness_writes_while_idle() {
    let (before, after) = idle_for_keep_alives(Liveness::PerConnection, 20).await;
    assert!(after > before, "per-connection renewals write the record ({before} -> {after})");
}

#[tokio::test]
async fn a_connection_that_stops_draining_is_detached_after_grace() {
    let server = TestServer::start(quick(Liveness::PerNode)).await;
    let mut client = server.client();
    client.initialize().await;
    // A raw connection with a small receive window that reads the head and then nothing.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut tcp = socket.connect(server.addr).await.unwrap();
    let request = format!(
        "GET /mcp HTTP/1.1\r\nhost: {}\r\naccept: text/event-stream\r\nmcp-session-id: {}\r\nmcp-protocol-version: 2025-11-25\r\n\r\n",
        server.addr,
        client.sid()
    );
    tcp.write_all(request.as_bytes()).await.unwrap();
    let mut head = [0u8; 256];
    let n = guard("the SSE head", tcp.read(&mut head)).await.unwrap();
    assert!(head[..n].starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&head[..n]));
    server.wait_record(client.sid(), "the stream attached", |r| r.standalone().is_live(now())).await;
    // Far more than the socket buffers hold, so the writer stops being polled.
    let filler = "x".repeat(1000);
    let resp = client.call(1, "standalone-big", json!({ "n": 8000, "filler": filler })).await;
    assert_eq!(resp.status(), 200);
    let text = resp.text().await.unwrap();
    assert!(text.contains("\"result\""), "the handler finished: {text}");
    server
        .wait_record(client.sid(), "the stalled connection detached", |r| !r.standalone().is_live(now()))
        .await;
    let metrics = reqwest::get(format!("{}/metrics", server.base())).await.unwrap().text().await.unwrap();
    assert!(metrics.contains("forkless_liveness_expired_total 1"), "{metrics}");
    drop(tcp);
}

/// A handler whose sessions live only in the process that made them.
struct ProcessBound;

impl Handler for ProcessBound {
    fn info(&self) -> ServerInfo {
        ServerInfo { name: "bound".into(), version: "0".into(), capabilities: json!({}), instructions: None }
    }
    fn restorable(&self) -> Restorable {
        Restorable::No
    }
    async fn handle_request(
        &self,
        _: &str,
        params: Option<Value>,
        _: RequestContext,
    ) -> Result<Value, RpcError> {
        Ok(params.unwrap_or(Value::Null))
    }
}

async fn serve<H: Handler>(store: MemoryStore, handler: H) -> String {
    let server = Server::new(store, handler, ServerConfig::default()).expect("config");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(server.serve(listener, std::future::pending()));
    url
}

#[tokio::test]
async fn a_session_from_another_process_is_restored_only_when_the_handler_says_so() {
    let store = MemoryStore::new();
    let first = serve(store.clone(), ProcessBound).await;
    let mut client = Client::new(&first);
    client.initialize().await;
    assert_eq!(client.call(1, "echo", json!({ "a": 1 })).await.status(), 200, "served where it was made");

    // The same store, another process: a restorable handler carries the session on.
    let restoring = serve(store.clone(), TestHandler { controls: common::Controls::new() }).await;
    let mut elsewhere = Client::new(&restoring);
    elsewhere.session = client.session.clone();
    elsewhere.version = client.version.clone();
    assert_eq!(elsewhere.call(2, "echo", json!({})).await.status(), 200, "restored");

    // A process-bound handler elsewhere ends it: 404 owner_lost, now and on every later try.
    let bound = serve(store.clone(), ProcessBound).await;
    let mut lost = Client::new(&bound);
    lost.session = client.session.clone();
    lost.version = client.version.clone();
    common::assert_refused(lost.call(3, "echo", json!({})).await, 404, -32001, "owner_lost").await;
    common::assert_refused(client.call(4, "echo", json!({})).await, 404, -32001, "owner_lost").await;
    let _ = GUARD;
}

#[tokio::test]
async fn a_lost_process_bound_session_stays_readable_until_its_next_request() {
    let store = MemoryStore::new();
    let first = serve(store.clone(), ProcessBound).await;
    let mut client = Client::new(&first);
    client.initialize().await;
    let answered = client.call(1, "echo", json!({ "a": 1 })).await;
    let stream = answered.headers().get("mcp-stream-id").expect("an SSE answer").to_str().unwrap().to_owned();
    let answer = Sse::new(answered).next_content().await.expect("the answer");
    let before =
        answer.id.as_deref().and_then(|id| id.rsplit_once('.')).map(|(s, _)| format!("{s}.0")).unwrap();

    // Another process, the same store, a handler whose sessions die with their process: the
    // client can still read what it was sent (after a restart: what was delivered and the
    // answers to its lost requests) ...
    let bound = serve(store.clone(), ProcessBound).await;
    let mut lost = Client::new(&bound);
    lost.session = client.session.clone();
    lost.version = client.version.clone();
    let mut again = Sse::new(lost.resume(Some(&before), Some(&stream)).await);
    assert_eq!(again.next_content().await.expect("the answer, read again").json(), answer.json());
    // ... and its next request ends it: never served by a handler that does not have it.
    common::assert_refused(lost.call(2, "echo", json!({})).await, 404, -32001, "owner_lost").await;
    common::assert_refused(lost.resume(None, None).await, 404, -32001, "owner_lost").await;
}
