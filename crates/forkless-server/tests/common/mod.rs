//! Test harness: a real server on 127.0.0.1:0, a small test handler, a raw HTTP client and an
//! SSE reader. Timeouts here only guard against hangs; nothing waits a fixed time to
//! synchronise.
#![allow(dead_code, unreachable_pub)]

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use forkless_core::{SessionId, SessionRecord};
use forkless_server::{Server, ServerConfig};
use forkless_store::{MemoryStore, Store};
use futures::{Stream, StreamExt};
use serde_json::{Value, json};
use tokio::sync::oneshot;

mod handler;
pub use handler::{Controls, TestHandler};

/// How long any single wait may take before the test fails.
pub const GUARD: Duration = Duration::from_secs(10);

pub async fn guard<F: Future>(what: &str, f: F) -> F::Output {
    match tokio::time::timeout(GUARD, f).await {
        Ok(v) => v,
        Err(_) => panic!("timed out waiting for {what}"),
    }
}

/// The value of an unlabelled counter in a `/metrics` text.
pub fn counter(text: &str, name: &str) -> u64 {
    let line = text
        .lines()
        .find(|l| l.starts_with(&format!("{name} ")))
        .unwrap_or_else(|| panic!("{name} in {text}"));
    line[name.len() + 1..].parse().unwrap()
}

/// The server's `/metrics` text.
pub async fn metrics(server: &TestServer) -> String {
    reqwest::get(format!("{}/metrics", server.base())).await.unwrap().text().await.unwrap()
}

/// A 2026-07-28 POST of `method`, its headers set (the body is the caller's).
pub fn request_2026(server: &TestServer, method: &str) -> reqwest::RequestBuilder {
    reqwest::Client::new()
        .post(&server.url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method)
}

/// A running server.
pub struct TestServer {
    pub addr: SocketAddr,
    pub url: String,
    pub store: MemoryStore,
    pub controls: Controls,
    shutdown: Option<oneshot::Sender<()>>,
    pub task: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

impl TestServer {
    pub async fn start(config: ServerConfig) -> Self {
        Self::start_on(MemoryStore::new(), config).await
    }

    /// A server on `store` (another server may share it: a clone shares its state).
    pub async fn start_on(store: MemoryStore, config: ServerConfig) -> Self {
        Self::serving(store.clone(), store, config).await
    }

    /// A server on `store`'s sessions and logs only: the process keeps its tasks, spent keys
    /// and listen notifications (a store with nothing but the core).
    pub async fn start_core_only(config: ServerConfig) -> Self {
        let store = MemoryStore::new();
        Self::serving(forkless_store::testing::CoreOnly(store.clone()), store, config).await
    }

    /// A server on `served`, whose records `store` reads.
    async fn serving<S: Store>(served: S, store: MemoryStore, config: ServerConfig) -> Self {
        let controls = Controls::new();
        let handler = TestHandler { controls: controls.clone() };
        let path = config.path.clone();
        let server = Server::new(served, handler, config).expect("valid config");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(server.serve(listener, async move {
            let _ = rx.await;
        }));
        Self {
            addr,
            url: format!("http://{addr}{path}"),
            store,
            controls,
            shutdown: Some(tx),
            task: Some(task),
        }
    }

    pub async fn default() -> Self {
        Self::start(ServerConfig::default()).await
    }

    pub fn client(&self) -> Client {
        Client::new(&self.url)
    }

    pub fn base(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub async fn record(&self, id: &str) -> SessionRecord {
        let id: SessionId = id.parse().unwrap();
        self.store.load(id).await.unwrap().expect("session stored").value
    }

    /// Wait until `f` holds for the session's record (checked on every store change
    /// opportunity; a guard fails the test if it never does).
    pub async fn wait_record(&self, id: &str, what: &str, f: impl Fn(&SessionRecord) -> bool) {
        guard(what, async {
            loop {
                if f(&self.record(id).await) {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await;
    }

    /// Trigger graceful shutdown and wait for `serve` to return.
    pub async fn shutdown(&mut self) -> std::io::Result<()> {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        let task = self.task.take().expect("running");
        guard("serve to return", task).await.expect("serve task")
    }
}

/// A client speaking raw HTTP, keeping the session id.
#[derive(Clone)]
pub struct Client {
    pub http: reqwest::Client,
    pub url: String,
    pub session: Option<String>,
    pub version: Option<String>,
}

impl Client {
    pub fn new(url: &str) -> Self {
        Self { http: reqwest::Client::new(), url: url.to_owned(), session: None, version: None }
    }

    /// Initialize a session with `protocolVersion` and `capabilities`; keeps the session id.
    pub async fn initialize_with(&mut self, version: &str, capabilities: Value) -> Value {
        let body = json!({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": { "protocolVersion": version, "capabilities": capabilities, "clientInfo": { "name": "t", "version": "1" } },
        });
        let resp = self.post_raw(&body).await;
        assert_eq!(resp.status(), 200);
        let sid = resp.headers().get("mcp-session-id").expect("session id").to_str().unwrap().to_owned();
        self.session = Some(sid);
        self.version = Some(version.to_owned());
        let v: Value = resp.json().await.unwrap();
        v
    }

    /// Initialize with 2025-11-25 and the forkless reset contract.
    pub async fn initialize(&mut self) -> Value {
        self.initialize_with("2025-11-25", json!({ "experimental": { "forkless/resume": { "version": 1 } } }))
            .await
    }

    pub fn sid(&self) -> &str {
        self.session.as_deref().expect("initialized")
    }

    pub fn post(&self) -> reqwest::RequestBuilder {
        let mut rb = self
            .http
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream");
        if let Some(s) = &self.session {
            rb = rb.header("mcp-session-id", s);
        }
        if let Some(v) = &self.version {
            rb = rb.header("mcp-protocol-version", v);
        }
        rb
    }

    pub async fn post_raw(&self, body: &Value) -> reqwest::Response {
        self.post().body(body.to_string()).send().await.unwrap()
    }

    /// POST a request with `id` and return the response. In 2026-07-28 the request carries
    /// what that revision requires (the per-request `_meta` fields and `Mcp-Method`) and opts
    /// in to every log message.
    pub async fn call(&self, id: u64, method: &str, params: Value) -> reqwest::Response {
        if self.version.as_deref() == Some("2026-07-28") {
            let mut params = params;
            params["_meta"] = json!({
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/logLevel": "debug",
            });
            let body = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
            return self.post().header("mcp-method", method).body(body.to_string()).send().await.unwrap();
        }
        self.post_raw(&json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params })).await
    }

    pub fn get(&self) -> reqwest::RequestBuilder {
        let mut rb = self.http.get(&self.url).header("accept", "text/event-stream");
        if let Some(s) = &self.session {
            rb = rb.header("mcp-session-id", s);
        }
        if let Some(v) = &self.version {
            rb = rb.header("mcp-protocol-version", v);
        }
        rb
    }

    /// GET with an optional `Last-Event-ID` and `Mcp-Stream-Id`.
    pub async fn resume(&self, lei: Option<&str>, token: Option<&str>) -> reqwest::Response {
        let mut rb = self.get();
        if let Some(l) = lei {
            rb = rb.header("last-event-id", l);
        }
        if let Some(t) = token {
            rb = rb.header("mcp-stream-id", t);
        }
        rb.send().await.unwrap()
    }

    pub async fn delete(&self) -> reqwest::Response {
        let mut rb = self.http.delete(&self.url);
        if let Some(s) = &self.session {
            rb = rb.header("mcp-session-id", s);
        }
        rb.send().await.unwrap()
    }
}

/// The JSON-RPC error of a refused request. Its `id` is absent, or (where the refusal is of a
/// single request whose body was read, as 2026-07-28 asks) a number the test sent.
pub async fn error_body(resp: reqwest::Response) -> Value {
    let v: Value = resp.json().await.expect("JSON error body");
    assert_eq!(v["jsonrpc"], "2.0");
    assert!(v.get("id").is_none_or(Value::is_u64), "an error body's id is the request's: {v}");
    v["error"].clone()
}

/// Assert a refusal: status, JSON-RPC code and `data.reason`.
pub async fn assert_refused(resp: reqwest::Response, status: u16, code: i64, reason: &str) -> Value {
    assert_eq!(resp.status(), status, "status");
    let e = error_body(resp).await;
    assert_eq!(e["code"], code, "{e}");
    assert_eq!(e["data"]["reason"], reason, "{e}");
    e
}

/// One SSE block as received.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Event {
    pub id: Option<String>,
    pub data: Option<String>,
    pub retry: Option<u64>,
    pub comment: bool,
}

impl Event {
    pub fn json(&self) -> Value {
        serde_json::from_str(self.data.as_deref().unwrap_or("null")).expect("JSON data")
    }
    pub fn seq(&self) -> u64 {
        self.id
            .as_deref()
            .and_then(|i| i.rsplit_once('.'))
            .map(|(_, s)| s.parse().unwrap())
            .expect("event id")
    }
    /// The `i` of a numbered test notification.
    pub fn i(&self) -> Option<u64> {
        let v = self.json();
        v["params"]["data"]["i"].as_u64()
    }
}

/// Reads an SSE response block by block.
pub struct Sse {
    pub stream_id: Option<String>,
    pub resumed: Option<String>,
    pub grace_ms: Option<String>,
    body: Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>,
    buf: String,
}

impl Sse {
    pub fn new(resp: reqwest::Response) -> Self {
        assert_eq!(resp.status(), 200, "SSE status");
        let h = resp.headers();
        assert_eq!(h.get("content-type").unwrap(), "text/event-stream");
        let text = |name: &str| h.get(name).map(|v| v.to_str().unwrap().to_owned());
        Self {
            stream_id: text("mcp-stream-id"),
            resumed: text("mcp-stream-resumed"),
            grace_ms: text("mcp-stream-grace-ms"),
            body: Box::pin(resp.bytes_stream()),
            buf: String::new(),
        }
    }

    /// The next block (including comments and retry-only blocks); `None` at the end.
    pub async fn next_block(&mut self) -> Option<Event> {
        guard("an SSE block", async {
            loop {
                if let Some(end) = self.buf.find("\n\n") {
                    let block: String = self.buf.drain(..end + 2).collect();
                    return Some(parse_block(&block));
                }
                match self.body.next().await {
                    Some(Ok(chunk)) => self.buf.push_str(std::str::from_utf8(&chunk).unwrap()),
                    Some(Err(_)) | None => return None,
                }
            }
        })
        .await
    }

    /// The next block that carries data; `None` at the end.
    pub async fn next_event(&mut self) -> Option<Event> {
        loop {
            let b = self.next_block().await?;
            if b.data.is_some() {
                return Some(b);
            }
        }
    }

    /// The next data event that is not the priming event.
    pub async fn next_content(&mut self) -> Option<Event> {
        loop {
            let e = self.next_event().await?;
            if e.data.as_deref() != Some("") {
                return Some(e);
            }
        }
    }

    /// Read content events until the end of the body.
    pub async fn rest(&mut self) -> Vec<Event> {
        let mut out = Vec::new();
        while let Some(e) = self.next_content().await {
            out.push(e);
        }
        out
    }
}

fn parse_block(block: &str) -> Event {
    let mut e = Event::default();
    for line in block.lines() {
        if let Some(c) = line.strip_prefix(':') {
            let _ = c;
            e.comment = true;
        } else if let Some(v) = line.strip_prefix("id: ") {
            e.id = Some(v.to_owned());
        } else if let Some(v) = line.strip_prefix("retry: ") {
            e.retry = Some(v.parse().unwrap());
        } else if let Some(v) = line.strip_prefix("data:") {
            let v = v.strip_prefix(' ').unwrap_or(v);
            e.data = Some(match e.data.take() {
                Some(d) => format!("{d}\n{v}"),
                None => v.to_owned(),
            });
        }
    }
    e
}
