//! Test support: run `forkless serve` as a real process and talk MCP to it over HTTP.
//!
//! - [`Serve`] spawns the binary on `127.0.0.1:0`, reads the bound address from its start-up
//!   line, and can send it SIGTERM. Dropping it kills a process still running.
//! - [`Session`] is a minimal MCP client: initialize, requests over POST (SSE or JSON
//!   answers), the standalone GET stream.
//! - [`SseReader`] parses an SSE body into events, keeping `id:` and `retry:`.
//!
//! Timeouts here are failure guards only; nothing waits for time to pass. The servers log
//! at `warn`; `FORKLESS_TEST_LOG` (a `RUST_LOG` filter) says otherwise when a test is debugged.

#![allow(dead_code, unreachable_pub)] // each test binary uses a different part of this module

pub mod gateway;
pub mod haproxy;
mod peers;
mod procs;
pub mod shared;
pub mod view;

// Each test binary uses some of these.
#[allow(unused_imports)]
pub use peers::{peer, peer_passes, peer_passes_with, root};
#[allow(unused_imports)]
pub use procs::{children_of, forkless_output, running};

use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};

/// How long any single step may take before the test fails.
pub const GUARD: Duration = Duration::from_secs(15);

/// The protocol revision the tests speak.
pub const REVISION: &str = "2025-11-25";

/// Await `fut`, failing the test if it takes longer than [`GUARD`].
pub async fn guard<T>(what: &str, fut: impl Future<Output = T>) -> T {
    match tokio::time::timeout(GUARD, fut).await {
        Ok(v) => v,
        Err(_) => panic!("timed out after {GUARD:?}: {what}"),
    }
}

/// Run `forkless <args>` to its end (failing after six guards); its exit code and stdout.
pub async fn forkless(args: &[&str]) -> (Option<i32>, String) {
    forkless_within(args, GUARD * 6).await
}

/// [`forkless`] for a run that lasts `planned` by design (a timed chaos run): it fails only
/// after `planned` and six guards more.
pub async fn forkless_for(args: &[&str], planned: Duration) -> (Option<i32>, String) {
    forkless_within(args, planned + GUARD * 6).await
}

async fn forkless_within(args: &[&str], limit: Duration) -> (Option<i32>, String) {
    let out = tokio::time::timeout(
        limit,
        Command::new(env!("CARGO_BIN_EXE_forkless"))
            .args(args)
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .output(),
    )
    .await
    .unwrap_or_else(|_| panic!("forkless {args:?} did not finish"))
    .expect("run forkless");
    (out.status.code(), String::from_utf8(out.stdout).expect("utf-8 output"))
}

/// A running `forkless serve` process.
pub struct Serve {
    child: Child,
    stdout: Lines<BufReader<ChildStdout>>,
    /// The MCP endpoint, e.g. `http://127.0.0.1:41234/mcp`.
    pub url: String,
    /// The start-up line as printed.
    pub banner: String,
}

impl Serve {
    /// Start `forkless serve --listen 127.0.0.1:0 <extra>` and wait for its start-up line.
    /// Unless `extra` picks a store, the default durable store runs in a fresh temporary
    /// data directory, so tests never share a data file.
    pub async fn start(extra: &[&str]) -> Self {
        Self::start_at("127.0.0.1:0", extra).await
    }

    /// Like [`Self::start`], listening on `listen` (to restart on the same address).
    pub async fn start_at(listen: &str, extra: &[&str]) -> Self {
        Self::start_with_env(listen, extra, &[]).await
    }

    /// Like [`Self::start_at`], with extra environment variables for the process.
    pub async fn start_with_env(listen: &str, extra: &[&str], env: &[(&str, &str)]) -> Self {
        let mut command = Command::new(env!("CARGO_BIN_EXE_forkless"));
        command.arg("serve").args(["--listen", listen]).args(extra);
        Self::spawn(command, extra, env).await
    }

    /// `forkless gateway --listen 127.0.0.1:0 <extra> -- <child>`, up to its start-up line.
    pub async fn gateway(extra: &[&str], child: &[String]) -> Self {
        Self::gateway_at("127.0.0.1:0", extra, child).await
    }

    /// Like [`Self::gateway`], listening on `listen` (to restart on the same address).
    pub async fn gateway_at(listen: &str, extra: &[&str], child: &[String]) -> Self {
        let mut command = Command::new(env!("CARGO_BIN_EXE_forkless"));
        command.arg("gateway").args(["--listen", listen]).args(extra).arg("--").args(child);
        Self::spawn(command, extra, &[]).await
    }

    /// The process ids of its children now (from `/proc`).
    pub fn children(&self) -> Vec<u32> {
        children_of(self.child.id().expect("process still running"))
    }

    /// Like [`Self::start`], in a process whose open-file limit (soft and hard) is `nofile`.
    pub async fn start_with_file_limit(nofile: u64, extra: &[&str]) -> Self {
        let mut command = Command::new("sh");
        command
            .args([
                "-c",
                &format!("ulimit -n {nofile} && exec \"$0\" \"$@\""),
                env!("CARGO_BIN_EXE_forkless"),
            ])
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(extra);
        Self::spawn(command, extra, &[]).await
    }

    async fn spawn(mut command: Command, extra: &[&str], env: &[(&str, &str)]) -> Self {
        command.envs(env.iter().copied());
        if !extra.iter().any(|a| *a == "--store" || *a == "--data-dir") {
            // Before a gateway's `--`, which is last.
            let args: Vec<_> = command.as_std().get_args().map(ToOwned::to_owned).collect();
            let split = args.iter().position(|a| a == "--").unwrap_or(args.len());
            let mut fresh = Command::new(command.as_std().get_program());
            fresh.args(&args[..split]).arg("--data-dir").arg(fresh_data_dir()).args(&args[split..]);
            command = fresh;
        }
        let mut child = command
            .env("RUST_LOG", std::env::var("FORKLESS_TEST_LOG").unwrap_or_else(|_| "warn".into()))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn forkless serve");
        let mut stdout = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
        let banner = guard("start-up line", stdout.next_line())
            .await
            .expect("read stdout")
            .expect("forkless serve exited before printing its start-up line");
        let url = banner
            .strip_prefix("forkless serve: listening on ")
            .or_else(|| banner.strip_prefix("forkless gateway: listening on "))
            .and_then(|rest| rest.split(' ').next())
            .unwrap_or_else(|| panic!("unexpected start-up line: {banner}"))
            .to_owned();
        Self { child, stdout, url, banner }
    }

    /// The `host:port` the server listens on.
    pub fn addr(&self) -> String {
        self.url.trim_start_matches("http://").split('/').next().unwrap_or_default().to_owned()
    }

    /// Send SIGTERM.
    pub fn terminate(&self) {
        self.signal("TERM");
    }

    /// Send a signal by name (`TERM`, `INT`, ...).
    pub fn signal(&self, name: &str) {
        let pid = self.child.id().expect("process still running");
        let status = std::process::Command::new("kill")
            .args([&format!("-{name}"), &pid.to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{name} {pid} failed");
    }

    /// Wait for the process to exit; returns its status and the rest of its stdout.
    pub async fn wait(mut self) -> (ExitStatus, Vec<String>) {
        let mut rest = Vec::new();
        while let Some(line) = guard("stdout", self.stdout.next_line()).await.expect("read stdout") {
            rest.push(line);
        }
        let status = guard("process exit", self.child.wait()).await.expect("wait for child");
        (status, rest)
    }
}

/// A new, empty directory under the system temp dir, unique to this process and call.
pub fn fresh_data_dir() -> std::path::PathBuf {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    static SWEPT: std::sync::Once = std::sync::Once::new();
    SWEPT.call_once(sweep_dead_data_dirs);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("forkless-test-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create data dir");
    dir
}

/// Remove the data directories of test processes that are gone (`forkless-test-<pid>-<n>`
/// whose pid is not alive): a test keeps its directories while it runs (its servers may be
/// killed and restarted on them), and nothing else would remove them, so a machine that
/// runs the suite again and again (CI) would gather about 370 MB a run. A live process's
/// are never touched, whoever it is.
fn sweep_dead_data_dirs() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let pid = name
            .to_str()
            .and_then(|n| n.strip_prefix("forkless-test-"))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok());
        let Some(pid) = pid else { continue };
        if pid != std::process::id() && !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// One server-sent event.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SseEvent {
    pub id: Option<String>,
    pub data: String,
    pub retry: Option<u64>,
}

impl SseEvent {
    /// The data as JSON (`None` for the empty priming event).
    pub fn json(&self) -> Option<Value> {
        if self.data.is_empty() {
            return None;
        }
        Some(serde_json::from_str(&self.data).unwrap_or_else(|e| panic!("bad SSE data {:?}: {e}", self.data)))
    }
}

/// Reads an SSE body event by event.
pub struct SseReader {
    body: BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    buf: Vec<u8>,
}

impl SseReader {
    pub fn new(response: reqwest::Response) -> Self {
        Self { body: response.bytes_stream().boxed(), buf: Vec::new() }
    }

    /// The next event, or `None` when the body ended; a body that fails (the server died)
    /// also ends it.
    pub async fn next_event_or_end(&mut self) -> Option<SseEvent> {
        self.next_event_inner(false).await
    }

    /// The next event, or `None` when the body ended.
    pub async fn next_event(&mut self) -> Option<SseEvent> {
        self.next_event_inner(true).await
    }

    async fn next_event_inner(&mut self, fail_on_error: bool) -> Option<SseEvent> {
        let mut event = SseEvent::default();
        let mut has_field = false;
        loop {
            while let Some(pos) = self.buf.iter().position(|&b| b == b'\n') {
                let raw: Vec<u8> = self.buf.drain(..=pos).collect();
                let line = String::from_utf8(raw).expect("utf-8 SSE");
                let line = line.trim_end_matches(['\n', '\r']);
                if line.is_empty() {
                    if has_field {
                        return Some(event);
                    }
                    continue;
                }
                if line.starts_with(':') {
                    continue; // keep-alive comment
                }
                let (field, value) = line.split_once(':').unwrap_or((line, ""));
                let value = value.strip_prefix(' ').unwrap_or(value);
                has_field = true;
                match field {
                    "id" => event.id = Some(value.to_owned()),
                    "data" => {
                        if !event.data.is_empty() {
                            event.data.push('\n');
                        }
                        event.data.push_str(value);
                    }
                    "retry" => event.retry = value.parse().ok(),
                    _ => {}
                }
            }
            match self.body.next().await {
                Some(Ok(chunk)) => self.buf.extend_from_slice(&chunk),
                Some(Err(e)) if fail_on_error => panic!("SSE body failed: {e}"),
                Some(Err(_)) => return None,
                None => return None,
            }
        }
    }

    /// The next event that carries a JSON-RPC message (skips priming events).
    pub async fn next_message(&mut self) -> Option<(SseEvent, Value)> {
        loop {
            let event = self.next_event().await?;
            if let Some(message) = event.json() {
                return Some((event, message));
            }
        }
    }
}

/// What a request got back: the messages before the response, and the response.
#[derive(Debug)]
pub struct Answer {
    pub before: Vec<Value>,
    pub response: Value,
}

impl Answer {
    /// The `result`, failing the test on an error response.
    pub fn result(&self) -> &Value {
        assert!(self.response.get("error").is_none(), "error response: {}", self.response);
        &self.response["result"]
    }

    /// The `error`, failing the test on a result.
    pub fn error(&self) -> &Value {
        assert!(self.response.get("result").is_none(), "expected an error, got: {}", self.response);
        &self.response["error"]
    }

    /// The `data` of every `notifications/message` received before the response.
    pub fn log_data(&self) -> Vec<String> {
        log_data(&self.before)
    }
}

/// The string `data` of every `notifications/message` among `messages`.
pub fn log_data(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .filter(|m| m["method"] == "notifications/message")
        .map(|m| m["params"]["data"].as_str().expect("string log data").to_owned())
        .collect()
}

/// A minimal MCP client session.
pub struct Session {
    http: reqwest::Client,
    pub url: String,
    pub id: String,
    next_id: u64,
}

impl Session {
    /// `initialize` + `notifications/initialized`.
    pub async fn open(url: &str) -> (Self, Value) {
        Self::open_with(url, json!({})).await
    }

    /// Like [`Self::open`], declaring `capabilities`.
    pub async fn open_with(url: &str, capabilities: Value) -> (Self, Value) {
        let http = reqwest::Client::new();
        let body = json!({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {
                "protocolVersion": REVISION,
                "capabilities": capabilities,
                "clientInfo": { "name": "forkless-serve-tests", "version": "0" }
            }
        });
        let response = guard(
            "initialize",
            http.post(url)
                .header("accept", "application/json, text/event-stream")
                .header("content-type", "application/json")
                .json(&body)
                .send(),
        )
        .await
        .expect("POST initialize");
        assert_eq!(response.status(), 200, "initialize");
        let id = response
            .headers()
            .get("mcp-session-id")
            .expect("Mcp-Session-Id on initialize")
            .to_str()
            .expect("ascii session id")
            .to_owned();
        let answer = read_answer(response, &json!(0)).await;
        let session = Self { http, url: url.to_owned(), id, next_id: 1 };
        let status = session.notify("notifications/initialized", json!({})).await;
        assert_eq!(status, 202, "notifications/initialized");
        let result = answer.result().clone();
        (session, result)
    }

    /// The same session, its requests sent to `url` (another node's endpoint).
    pub fn at(&self, url: &str) -> Self {
        Self {
            http: reqwest::Client::new(),
            url: url.to_owned(),
            id: self.id.clone(),
            next_id: self.next_id + 1000,
        }
    }

    /// `DELETE` the session; the HTTP status.
    pub async fn delete(&self) -> u16 {
        let request = self.http.delete(&self.url).header("mcp-session-id", &self.id);
        guard("DELETE", request.send()).await.expect("DELETE").status().as_u16()
    }

    fn post(&self) -> reqwest::RequestBuilder {
        self.http
            .post(&self.url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .header("mcp-session-id", &self.id)
            .header("mcp-protocol-version", REVISION)
    }

    /// POST a notification; returns the HTTP status.
    pub async fn notify(&self, method: &str, params: Value) -> u16 {
        let body = json!({ "jsonrpc": "2.0", "method": method, "params": params });
        let response = guard(method, self.post().json(&body).send()).await.expect("POST notification");
        response.status().as_u16()
    }

    /// POST a request and send it; the raw response (its body not read yet).
    pub async fn send(&mut self, method: &str, params: Value) -> (Value, reqwest::Response) {
        let id = json!(self.next_id);
        self.next_id += 1;
        let body = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
        let response = guard(method, self.post().json(&body).send()).await.expect("POST request");
        assert_eq!(response.status(), 200, "{method}");
        (id, response)
    }

    /// POST a request whatever the answer's status; the raw response.
    pub async fn send_unchecked(&mut self, method: &str, params: Value) -> reqwest::Response {
        let id = json!(self.next_id);
        self.next_id += 1;
        let body = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
        guard(method, self.post().json(&body).send()).await.expect("POST request")
    }

    /// POST `initialize` whatever the answer; the raw response.
    pub async fn initialize_raw(url: &str) -> reqwest::Response {
        let body = json!({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": { "protocolVersion": REVISION, "capabilities": {}, "clientInfo": { "name": "t", "version": "0" } }
        });
        let request = reqwest::Client::new()
            .post(url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .json(&body);
        guard("initialize", request.send()).await.expect("POST initialize")
    }

    /// A request and everything its answer carried.
    pub async fn request(&mut self, method: &str, params: Value) -> Answer {
        let (id, response) = self.send(method, params).await;
        guard(method, read_answer(response, &id)).await
    }

    /// `tools/call`.
    pub async fn call_tool(&mut self, name: &str, arguments: Value) -> Answer {
        self.request("tools/call", json!({ "name": name, "arguments": arguments })).await
    }

    /// Open the standalone GET stream.
    pub async fn get_stream(&self) -> reqwest::Response {
        let response = guard(
            "GET",
            self.http
                .get(&self.url)
                .header("accept", "text/event-stream")
                .header("mcp-session-id", &self.id)
                .header("mcp-protocol-version", REVISION)
                .send(),
        )
        .await
        .expect("GET stream");
        assert_eq!(response.status(), 200, "GET stream");
        response
    }
}

impl Session {
    /// Resume a stream: `GET` with `Last-Event-ID` (and `Mcp-Stream-Id` when given).
    pub async fn resume(&self, last_event_id: &str, stream_id: Option<&str>) -> reqwest::Response {
        let mut request = self
            .http
            .get(&self.url)
            .header("accept", "text/event-stream")
            .header("mcp-session-id", &self.id)
            .header("mcp-protocol-version", REVISION)
            .header("last-event-id", last_event_id);
        if let Some(stream) = stream_id {
            request = request.header("mcp-stream-id", stream);
        }
        let response = guard("resume", request.send()).await.expect("GET resume");
        assert_eq!(response.status(), 200, "resume from {last_event_id}");
        response
    }
}

/// Read a POST answer (SSE or JSON) up to the response with `id`.
async fn read_answer(response: reqwest::Response, id: &Value) -> Answer {
    let content_type =
        response.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
    if content_type.starts_with("application/json") {
        let response: Value = response.json().await.expect("JSON answer");
        return Answer { before: Vec::new(), response };
    }
    assert!(content_type.starts_with("text/event-stream"), "unexpected content type {content_type:?}");
    let mut sse = SseReader::new(response);
    let mut before = Vec::new();
    while let Some((_, message)) = sse.next_message().await {
        if message.get("id") == Some(id) && message.get("method").is_none() {
            return Answer { before, response: message };
        }
        before.push(message);
    }
    panic!("SSE answer ended without the response to {id}; got {before:?}");
}

/// A free `127.0.0.1:PORT` to listen on (for a node that must name its address before it
/// starts, as `--advertise` does).
pub fn free_addr() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("local address").to_string()
}

/// `/metrics` of the node serving `url`.
pub async fn metrics(url: &str) -> String {
    let url = url.replace("/mcp", "/metrics");
    guard("GET /metrics", async { reqwest::get(url).await.unwrap().text().await.unwrap() }).await
}

/// The value of the counter line `name` in a `/metrics` text (0 if absent).
pub fn counter(metrics: &str, name: &str) -> u64 {
    metrics.lines().find_map(|l| l.strip_prefix(name).and_then(|v| v.trim().parse().ok())).unwrap_or(0)
}
