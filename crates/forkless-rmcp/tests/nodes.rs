//! Two processes of the counter example (`examples/counter`, exactly its setup lines) on one
//! shared store, PostgreSQL or Redis, behind HAProxy, each a node of the library's
//! `forkless_server::Node` (its lease, its takeover of lost nodes): the process that owns a
//! session is killed with SIGKILL in the middle of a call. With `--restorable` the session
//! goes on from the other process: the client resumes the cut stream with its cursor, gets
//! every event after it exactly once and then the lost call's answer, an error carrying the
//! call's id (`owner_lost`), and its next call is answered. Without it (the negative control)
//! the lost call is answered the same way but the session ends: the next call gets 404.

#[path = "../examples/counter/service.rs"]
mod service;
#[allow(dead_code)]
#[path = "../examples/counter/setup.rs"]
mod setup;

#[allow(unreachable_pub)]
#[path = "../../forkless/tests/support/haproxy.rs"]
mod haproxy;

const GUARD: Duration = Duration::from_secs(30);

/// `fut`, or a failed test after [`GUARD`].
async fn guard<T>(what: &str, fut: impl Future<Output = T>) -> T {
    match tokio::time::timeout(GUARD, fut).await {
        Ok(v) => v,
        Err(_) => panic!("timed out after {GUARD:?}: {what}"),
    }
}

/// A fresh directory of this test process's own (HAProxy's configuration).
fn fresh_data_dir() -> std::path::PathBuf {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("forkless-rmcp-nodes-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a directory");
    dir
}

use std::future::Future;
use std::time::Duration;

use forkless_server::Restorable;
use haproxy::Haproxy;
use serde_json::{Value, json};

/// Set in the processes the tests start: `LISTEN STORE NODE RESTORABLE` (`yes` or `no`).
const NODE: &str = "FORKLESS_RMCP_NODE";
/// The node lease's time to live: short, so a killed node's sessions are taken over soon.
const LEASE_TTL: Duration = Duration::from_millis(1_000);

/// Not a check: one node's process. This test binary, run with [`NODE`] set and this test's
/// name, serves the example's setup as a node of the shared store until it is killed.
#[test]
fn node_process() {
    let Ok(spec) = std::env::var(NODE) else { return };
    let parts: Vec<&str> = spec.split(' ').collect();
    let [listen, store, node, restorable] = parts[..] else { panic!("{NODE}: LISTEN STORE NODE RESTORABLE") };
    let lease = forkless_server::node::Lease {
        node: node.parse().expect("a node name"),
        ttl: LEASE_TTL,
        advertise: Some(format!("http://{listen}").parse().expect("an address")),
    };
    let restorable = if restorable == "yes" { Restorable::Yes } else { Restorable::No };
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    runtime
        .block_on(setup::run(
            listen,
            setup::Keep::Shared { url: store, lease: Some(lease) },
            restorable,
            std::future::pending(),
        ))
        .expect("the example serves");
}

/// One node's process, killed when dropped.
struct Process {
    child: tokio::process::Child,
    url: String,
}

impl Process {
    /// Start node `node` on `store`; returns once it serves (`/healthz` answers 200).
    async fn start(store: &str, node: &str, restorable: Restorable) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let listen = format!("127.0.0.1:{port}");
        let restorable = if restorable == Restorable::Yes { "yes" } else { "no" };
        let child = tokio::process::Command::new(std::env::current_exe().expect("this test binary"))
            .args(["--exact", "node_process", "--nocapture"])
            .env(NODE, format!("{listen} {store} {node} {restorable}"))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start a node");
        let health = format!("http://{listen}/healthz");
        guard("the node serves", async {
            loop {
                if let Ok(r) = reqwest::get(&health).await
                    && r.status() == 200
                {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
        Self { child, url: format!("http://{listen}") }
    }

    /// SIGKILL, and wait until the process is gone.
    async fn kill(&mut self) {
        self.child.start_kill().expect("kill -9");
        let _ = self.child.wait().await;
    }
}

/// An MCP request as the client sends it.
fn post(http: &reqwest::Client, url: &str, session: Option<&str>, body: &Value) -> reqwest::RequestBuilder {
    let mut request = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .json(body);
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    request
}

/// One SSE event: its id and data.
#[derive(Debug, Clone)]
struct Event {
    id: Option<String>,
    data: String,
}

impl Event {
    /// The sequence number its id ends with.
    fn seq(&self) -> u64 {
        let id = self.id.as_deref().expect("an id");
        id.rsplit_once('.').and_then(|(_, seq)| seq.parse().ok()).expect("STREAM.SEQ")
    }

    fn json(&self) -> Option<Value> {
        serde_json::from_str(&self.data).ok()
    }
}

/// Reads events from an SSE response body as they come.
struct Events {
    response: reqwest::Response,
    buffer: String,
}

impl Events {
    fn new(response: reqwest::Response) -> Self {
        Self { response, buffer: String::new() }
    }

    /// The next event with data, or `None` when the body ends (or breaks).
    async fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let (mut id, mut data) = (None, Vec::new());
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("id:") {
                        id = Some(v.trim().to_owned());
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push(v.trim_start().to_owned());
                    }
                }
                let data = data.join("\n");
                if !data.is_empty() {
                    return Some(Event { id, data });
                }
                continue;
            }
            match self.response.chunk().await {
                Ok(Some(chunk)) => self.buffer.push_str(&String::from_utf8_lossy(&chunk)),
                Ok(None) | Err(_) => return None,
            }
        }
    }
}

/// What the run saw after the owner died.
#[derive(Debug)]
enum Outcome {
    /// The resume continued the stream to the lost call's answer; the status of the call made
    /// after it.
    Continued { next_call: u16 },
    /// The resume was refused: its status and body.
    Refused { status: u16, body: String },
}

/// Initialize on node A, start a call whose progress arrives through HAProxy, kill A after
/// three progress events, resume through HAProxy; the client's oracle over what it saw.
async fn owner_killed_mid_call(store: &str, restorable: Restorable) -> Option<Outcome> {
    let mut a = Process::start(store, "a", restorable).await;
    let b = Process::start(store, "b", restorable).await;
    let lb = Haproxy::start(&[
        a.url.trim_start_matches("http://").to_owned(),
        b.url.trim_start_matches("http://").to_owned(),
    ])
    .await?;
    let front = lb.url.clone();
    let http = reqwest::Client::new();
    // The session is A's: initialized on A itself.
    let init = json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": "nodes-test", "version": "1" } } });
    let answer = guard("initialize", post(&http, &format!("{}/mcp", a.url), None, &init).send())
        .await
        .expect("initialize");
    assert_eq!(answer.status(), 200);
    let session = answer.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    let initialized = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
    let sent = guard("initialized", post(&http, &front, Some(&session), &initialized).send()).await.unwrap();
    assert_eq!(sent.status(), 202, "{:?}", sent.text().await);
    // A long call through the balancer (forwarded to A when B gets it).
    let call = json!({ "jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "start-notification-stream", "arguments": { "count": 600, "interval": 50 },
        "_meta": { "progressToken": "p" } } });
    let response =
        guard("the call", post(&http, &front, Some(&session), &call).send()).await.expect("the call");
    assert_eq!(response.status(), 200);
    let mut events = Events::new(response);
    let mut seen = Vec::new();
    while seen.len() < 3 {
        let event = guard("progress", events.next()).await.expect("progress before the kill");
        assert!(event.json().is_some_and(|m| m["method"] == "notifications/progress"), "{event:?}");
        seen.push(event);
    }
    a.kill().await;
    // Whatever was on the wire when A died; the cut comes after.
    while let Some(event) = guard("the cut", events.next()).await {
        seen.push(event);
    }
    // Resume through the balancer (B) from the last event seen, again from the newest each
    // time a body ends before the answer: a 503 (the store still names A, whose lease has not
    // lapsed) is retried; anything but a continuation fails the test.
    let mut after: Vec<Event> = Vec::new();
    let last = guard("the lost call's answer", async {
        loop {
            let cursor = after.last().or(seen.last()).and_then(|e| e.id.clone()).expect("a cursor");
            let r = http
                .get(&front)
                .header("accept", "text/event-stream")
                .header("mcp-session-id", &session)
                .header("mcp-protocol-version", "2025-11-25")
                .header("last-event-id", &cursor)
                .send()
                .await
                .expect("GET");
            match r.status().as_u16() {
                200 => {}
                503 => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
                other => return Err((other, r.text().await.unwrap_or_default())),
            }
            assert_eq!(r.headers()["mcp-stream-resumed"], "true", "a continuation, not a new stream");
            let mut rest = Events::new(r);
            while let Some(event) = rest.next().await {
                match event.json() {
                    Some(m) if m.get("id").is_some() => {
                        after.push(event);
                        return Ok(m);
                    }
                    _ => after.push(event),
                }
            }
        }
    })
    .await;
    let last = match last {
        Ok(last) => last,
        Err((status, body)) => {
            drop(b);
            return Some(Outcome::Refused { status, body });
        }
    };
    // The oracle: every event after the cursor once, in order, then the answer; the lost call
    // is answered with its own id and a typed reason.
    for (expected, event) in (1..).zip(&seen) {
        assert_eq!(event.seq(), expected, "gap-free from the stream's start: {seen:?}");
    }
    let first = seen.last().map(Event::seq).unwrap() + 1;
    for (expected, event) in (first..).zip(&after) {
        assert_eq!(event.seq(), expected, "gap-free after the cursor: {after:?}");
    }
    assert_eq!(last["id"], 7, "the lost call's answer carries its id: {last}");
    assert_eq!(last["error"]["data"]["reason"], "owner_lost", "{last}");
    // The session's next call, through the balancer: answered by the node that restored it.
    let next = json!({ "jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": { "name": "echo", "arguments": { "text": "still here" } } });
    let answer = guard("the next call", post(&http, &front, Some(&session), &next).send())
        .await
        .expect("the next call");
    let status = answer.status().as_u16();
    if status == 200 {
        let mut events = Events::new(answer);
        let reply = guard("the next answer", events.next()).await.and_then(|e| e.json()).expect("an answer");
        assert_eq!(reply["id"], 8);
        assert_eq!(reply["result"]["content"][0]["text"], "still here", "{reply}");
    }
    drop(b);
    Some(Outcome::Continued { next_call: status })
}

/// A fresh store's URL, and what keeps it (dropped, the database or keys go).
type Fresh = Option<(String, Box<dyn std::any::Any + Send>)>;

/// The two runs, each on a fresh store from `store`: restorable, the session goes on; not
/// (the negative control), the resume is refused 404 `owner_lost`, never served from a new
/// stream.
async fn both_runs<F: Future<Output = Fresh>>(store: impl Fn() -> F) {
    let Some((url, _kept)) = store().await else { return };
    let Some(outcome) = owner_killed_mid_call(&url, Restorable::Yes).await else { return };
    assert!(matches!(outcome, Outcome::Continued { next_call: 200 }), "the session goes on: {outcome:?}");
    let Some((url, _kept)) = store().await else { return };
    let Some(outcome) = owner_killed_mid_call(&url, Restorable::No).await else { return };
    assert!(
        matches!(&outcome, Outcome::Refused { status: 404, body } if body.contains("owner_lost")),
        "negative control: a session that cannot be restored ends, typed: {outcome:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_a_restorable_session_goes_on_from_the_other_node() {
    both_runs(|| async {
        let db = forkless_store_postgres::testing::fresh().await?;
        Some((db.url.clone(), Box::new(db) as Box<dyn std::any::Any + Send>))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_redis_a_restorable_session_goes_on_from_the_other_node() {
    both_runs(|| async {
        let prefix = forkless_store_redis::testing::fresh().await?;
        let url = format!("{}#{}", prefix.url, prefix.prefix);
        Some((url, Box::new(prefix) as Box<dyn std::any::Any + Send>))
    })
    .await;
}
