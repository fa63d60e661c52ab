//! `forkless gateway --upstream URL` in front of Streamable HTTP MCP servers, as real
//! processes: the official TypeScript and Python SDKs' reference servers (`tests/interop/`),
//! which fail some of `forkless check`'s scenarios when checked directly and pass every one
//! through the gateway; and `forkless serve` as the upstream, killed mid-answer (the call
//! gets its error with its id, `upstream_lost`, never a silent end) and restarted without
//! its sessions (the session ends `upstream_session_lost`, never re-initialized upstream).
//!
//! The SDKs are installed project-locally by `scripts/peers/install.sh`; without them these
//! tests say so and pass locally, but fail under `CI=true`.

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::{Value, json};
use support::restartable::Restartable;
use support::{Serve, Session, SseReader, counter, forkless, guard, metrics, peer, reference, root};
use tokio::io::AsyncBufReadExt as _;

/// `forkless check URL --json [ARGS]`: each scenario's verdict.
async fn verdicts(url: &str, args: &[&str]) -> BTreeMap<String, String> {
    let (_, stdout) = forkless(&[&["check", url, "--json"], args].concat()).await;
    let report: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"));
    report["scenarios"]
        .as_array()
        .expect("scenarios")
        .iter()
        .map(|s| (s["name"].as_str().unwrap().to_owned(), s["verdict"].as_str().unwrap().to_owned()))
        .collect()
}

#[tokio::test]
async fn check_passes_through_the_gateway_in_front_of_sdk_servers_that_fail_it_directly() {
    let mut servers: Vec<(PathBuf, &str)> = Vec::new();
    if let Some(py) = peer(".peers/py/bin/python") {
        servers.push((py, "tests/interop/python/reference_server.py"));
    }
    if peer(".peers/node/node_modules/@modelcontextprotocol/sdk").is_some() {
        servers.push((PathBuf::from("node"), "tests/interop/ts/reference_server.mjs"));
    }
    for (program, script) in servers {
        let (_server, url) = reference(&program, script).await;
        // Directly: the SDK's own resumption passes a stream off as continued (docs/peers.md).
        let direct = verdicts(&url, &[]).await;
        for scenario in ["cursor-lost", "foreign-cursor"] {
            assert_eq!(direct[scenario], "FAIL", "{script} directly, {scenario}: {direct:?}");
        }
        // Through the gateway on its durable store, which `--restart-cmd` kills (-9) and starts
        // again mid-call: forkless owns the sessions and streams, every scenario passes (the
        // task scenarios need 2026-07-28, which a gateway does not serve).
        let dir = support::fresh_data_dir();
        let flags = format!("--upstream {url} --data-dir \"{}/data\"", dir.display());
        let gw = Restartable::start_as(dir, "gateway", &flags).await;
        let through = verdicts(&gw.url, &["--restart-cmd", &gw.command]).await;
        for (name, verdict) in &through {
            let want = if name.starts_with("task-") { "UNSUPPORTED" } else { "PASS" };
            assert_eq!(verdict, want, "{script} through the gateway, {name}: {through:?}");
        }
        assert_eq!(through["crash-restart"], "PASS", "{through:?}");
        let text = metrics(&gw.url).await;
        assert!(counter(&text, "forkless_upstream_sessions_total") > 0, "{text}");
        assert_eq!(counter(&text, "forkless_upstream_lost_total"), 0, "{text}");
    }
}

/// Read `sse` to the message with an `id` (the answer), counting numbered log messages.
async fn to_answer(sse: &mut SseReader, numbered: &mut u64) -> Value {
    loop {
        let (_, message) =
            guard("the answer", sse.next_message()).await.expect("an answer, not a silent end");
        if message.get("id").is_some() {
            return message;
        }
        if message["method"] == "notifications/message" {
            *numbered += 1;
        }
    }
}

#[tokio::test]
async fn an_upstream_killed_mid_answer_answers_the_call_with_its_id_and_a_restart_ends_the_session() {
    let upstream = Serve::start(&["--store", "memory"]).await;
    let addr = upstream.addr();
    // The gateway tries to resume the cut answer for --upstream-timeout: the upstream is gone.
    let gw = Serve::gateway_upstream(&upstream.url, &["--store", "memory", "--upstream-timeout", "2s"]).await;
    let (mut s, _) = Session::open(&gw.url).await;
    let call = json!({ "name": "start-notification-stream", "arguments": { "interval": 20, "count": 500 } });
    let (id, response) = s.send("tools/call", call).await;
    let mut sse = SseReader::new(response);
    let mut numbered = 0;
    while numbered < 5 {
        let (_, message) = guard("a notification", sse.next_message()).await.expect("the call runs");
        // The upstream's notifications come on the call's own stream, as they went upstream.
        if message["method"] == "notifications/message" {
            numbered += 1;
        }
    }
    upstream.signal("KILL");
    upstream.wait().await;
    let answer = to_answer(&mut sse, &mut numbered).await;
    assert_eq!(answer["id"], id, "{answer}");
    assert_eq!(answer["error"]["data"]["reason"], "upstream_lost", "{answer}");
    assert!(numbered < 500, "the stream did not go on after the upstream died");

    // The upstream comes back without its sessions: the session ends, never re-initialized.
    let _upstream = Serve::start_at(&addr, &["--store", "memory"]).await;
    let first = s.send_unchecked("tools/list", json!({})).await;
    let status = first.status().as_u16();
    let body: Value = match first.headers().get("content-type").and_then(|v| v.to_str().ok()) {
        Some(t) if t.starts_with("text/event-stream") => {
            let mut sse = SseReader::new(first);
            to_answer(&mut sse, &mut numbered).await
        }
        _ => first.json().await.expect("a JSON body"),
    };
    assert!(matches!(status, 200 | 404), "{status}: {body}");
    assert_eq!(body["error"]["data"]["reason"], "upstream_session_lost", "{body}");
    let next = s.send_unchecked("tools/list", json!({})).await;
    assert_eq!(next.status(), 404);
    let body: Value = next.json().await.expect("a JSON body");
    assert_eq!(body["error"]["data"]["reason"], "upstream_session_lost", "{body}");
    let text = metrics(&gw.url).await;
    assert_eq!(counter(&text, "forkless_upstream_lost_total"), 1, "{text}");
    assert_eq!(counter(&text, "forkless_upstream_sessions_lost_total"), 1, "{text}");
}

#[tokio::test]
async fn bad_upstream_settings_are_refused_at_start_naming_the_flag() {
    for (args, says) in [
        (vec!["--upstream", "ftp://x/mcp"], "not an http:// or https:// URL"),
        (
            vec!["--upstream", "http://127.0.0.1:1/mcp", "--upstream-header", "no colon"],
            "is not `Name: value`",
        ),
        (vec!["--upstream", "https://127.0.0.1:1/mcp", "--upstream-ca", "/nonexistent.pem"], "--upstream-ca"),
    ] {
        let mut all = vec!["gateway", "--store", "memory"];
        all.extend(args);
        let out = support::forkless_output(&all, &[]).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{all:?} started");
        assert!(stderr.contains(says), "{all:?}: {stderr}");
    }
}

/// The official SDK clients (v1, and the TypeScript v2 client) through the gateway in front of
/// the TypeScript SDK's reference server: a tool's numbered notifications on the call's own
/// stream, a cut stream resumed with each SDK's own resumption API, every notification once,
/// in order.
#[tokio::test]
async fn sdk_clients_resume_cut_streams_through_the_gateway() {
    if peer(".peers/node/node_modules/@modelcontextprotocol/sdk").is_none() {
        return;
    }
    let (_server, url) = reference(Path::new("node"), "tests/interop/ts/reference_server.mjs").await;
    let gw = Serve::gateway_upstream(&url, &["--store", "memory"]).await;
    if let Some(py) = peer(".peers/py/bin/python") {
        support::peer_passes(&py, "tests/interop/python/client_resume.py", &gw.url, &[]).await;
    }
    support::peer_passes(Path::new("node"), "tests/interop/ts/client_resume.mjs", &gw.url, &[]).await;
    if peer(".peers/node2/node_modules/@modelcontextprotocol/client").is_some() {
        support::peer_passes(Path::new("node"), "tests/interop/ts2/client_resume.mjs", &gw.url, &[]).await;
    }
}

/// `@modelcontextprotocol/server-everything` over Streamable HTTP on a free port: the process
/// and its URL; `None` when it is not installed (a failure under `CI=true`).
async fn everything_http() -> Option<(tokio::process::Child, String)> {
    let script = peer(".peers/stdio/node_modules/@modelcontextprotocol/server-everything/dist/index.js")?;
    let port = std::net::TcpListener::bind("127.0.0.1:0").ok()?.local_addr().ok()?.port();
    let mut child = tokio::process::Command::new("node")
        .arg(script)
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .current_dir(root())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start server-everything");
    let mut lines = tokio::io::BufReader::new(child.stderr.take().expect("stderr")).lines();
    loop {
        let line = guard("server-everything listening", lines.next_line()).await.expect("stderr");
        if line.expect("a listening line").contains("listening on port") {
            break;
        }
    }
    // Drain the rest of its log, so a full pipe never stalls it.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Some((child, format!("http://127.0.0.1:{port}/mcp")))
}

/// The official SDK clients, v1 and v2 (auto mode: falling back to a session revision), through
/// the gateway in front of `server-everything` over Streamable HTTP, a server neither side
/// wrote: tools, progress in order, a sampling round trip answered by the client (the
/// upstream's request on the call's stream, the client's answer POSTed back up), and a log
/// message from the upstream's GET stream on the client's standalone stream.
#[tokio::test]
async fn sdk_clients_v1_and_v2_use_server_everything_over_http_through_the_gateway() {
    let Some((_upstream, url)) = everything_http().await else { return };
    let gw = Serve::gateway_upstream(&url, &["--store", "memory"]).await;
    if let Some(py) = peer(".peers/py/bin/python") {
        support::peer_passes(&py, "tests/interop/gateway/everything.py", &gw.url, &[]).await;
    }
    if let Some(py2) = peer(".peers/py2/bin/python") {
        support::peer_passes(&py2, "tests/interop/gateway/everything_v2.py", &gw.url, &[]).await;
    }
    if peer(".peers/node/node_modules/@modelcontextprotocol/sdk").is_some() {
        support::peer_passes(Path::new("node"), "tests/interop/gateway/everything.mjs", &gw.url, &[]).await;
    }
    if peer(".peers/node2/node_modules/@modelcontextprotocol/client").is_some() {
        support::peer_passes(Path::new("node"), "tests/interop/gateway/everything_v2.mjs", &gw.url, &[])
            .await;
    }
    // Offering 2026-07-28 too, the v2 client in auto mode takes it: each request is served
    // statelessly on an upstream session of its own.
    let current = Serve::gateway_upstream(&url, &["--store", "memory", "--revisions", "all"]).await;
    if let Some(py2) = peer(".peers/py2/bin/python") {
        let script = "tests/interop/gateway/everything_v2.py";
        support::peer_passes_with(&py2, script, &current.url, &["--current"], &[]).await;
    }
}

/// Two gateway nodes on one PostgreSQL database in front of one upstream, the session's
/// owner killed `-9` mid-call: the other node takes the session over, the client resumes
/// the call's stream there and reads every event it had not seen once, then the lost call's
/// error with its id; the session goes on from that node on the same upstream session (the
/// upstream saw one `initialize`: its session id was in the record, never re-initialized).
#[tokio::test]
async fn an_owner_killed_mid_call_hands_the_session_and_its_upstream_session_to_another_node() {
    owner_killed_mid_call(&["--store", "memory"], 1).await;
}

/// The same in front of a 2026-07-28 upstream, called statelessly: the node that takes the
/// session over speaks for its client from the record (its info and capabilities), and the
/// upstream never saw a session.
#[tokio::test]
async fn an_owner_killed_mid_call_hands_a_stateless_upstreams_session_to_another_node() {
    owner_killed_mid_call(&["--store", "memory", "--revisions", "2026-07-28"], 0).await;
}

/// Two gateway nodes on PostgreSQL in front of an upstream started with `upstream_args`, the
/// owner of a session killed mid-call; the upstream then counts `sessions` sessions created.
async fn owner_killed_mid_call(upstream_args: &[&str], sessions: u64) {
    use support::shared::{Backend, SharedStore};
    use support::view::{Streaming, read_to_5, resume_to_orphan_answer};
    let Some(db) = SharedStore::fresh(Backend::Postgres).await else { return };
    let upstream = Serve::start(upstream_args).await;
    let mut nodes = Vec::new();
    for name in ["a", "b"] {
        let addr = support::free_addr();
        let advertise = format!("http://{addr}");
        let args =
            ["--store", &db.store, "--node-id", name, "--lease-ttl", "1000", "--advertise", &advertise];
        nodes.push(Serve::gateway_upstream_at(&addr, &upstream.url, &args).await);
    }
    let b = nodes.pop().expect("b");
    let a = nodes.pop().expect("a");
    let Streaming { session, request, stream, seen, reader } = read_to_5(&a.url, 40).await;
    a.signal("KILL");
    a.wait().await;
    drop(reader);
    let mut session = session.at(&b.url);
    resume_to_orphan_answer(&session, &seen, &stream, &request, "node b, which took the session over").await;
    let listed = session.request("tools/list", json!({})).await;
    assert!(listed.result()["tools"].is_array(), "{:?}", listed.response);
    let called = session.call_tool("start-notification-stream", json!({ "interval": 1, "count": 3 })).await;
    assert_eq!(called.log_data().len(), 3, "the upstream session goes on: {:?}", called.before);
    let seen_upstream = metrics(&upstream.url).await;
    assert_eq!(counter(&seen_upstream, "forkless_sessions_created_total"), sessions, "{seen_upstream}");
    assert_eq!(counter(&metrics(&b.url).await, "forkless_takeovers_total"), 1);
}

/// Three gateway nodes on one PostgreSQL database behind HAProxy (round-robin, no
/// stickiness) in front of one upstream: `forkless chaos` (sessions streaming numbered
/// notifications through the upstream, connections cut at random, every resume landing on
/// any node) sees no duplicate, gap, reordering, fork or foreign event.
#[tokio::test]
async fn three_gateway_nodes_behind_haproxy_in_front_of_one_upstream_pass_chaos() {
    use support::haproxy::Haproxy;
    use support::shared::{Backend, SharedStore};
    let Some(db) = SharedStore::fresh(Backend::Postgres).await else { return };
    let upstream = Serve::start(&["--store", "memory"]).await;
    let mut nodes = Vec::new();
    for name in ["n1", "n2", "n3"] {
        let addr = support::free_addr();
        let advertise = format!("http://{addr}");
        let args =
            ["--store", &db.store, "--node-id", name, "--lease-ttl", "2000", "--advertise", &advertise];
        nodes.push(Serve::gateway_upstream_at(&addr, &upstream.url, &args).await);
    }
    let Some(lb) = Haproxy::start(&nodes.iter().map(Serve::addr).collect::<Vec<_>>()).await else { return };
    let args = [
        "chaos",
        &lb.url,
        "--sessions",
        "10",
        "--duration",
        "20s",
        "--drop-every",
        "2s",
        "--interval",
        "40",
        "--json",
    ];
    let (code, stdout) = support::forkless_for(&args, std::time::Duration::from_secs(20)).await;
    let s: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"));
    for key in ["duplicates", "gaps", "forks", "reordered", "foreign"] {
        assert_eq!(s[key], 0, "{key}: {s}");
    }
    assert_eq!(s["sessions_completed"], 10, "{s}");
    assert!(s["resumes"].as_u64().is_some_and(|n| n > 0), "resumes happened: {s}");
    assert_eq!(s["resumes_verified"], s["resumes"], "every resume verified: {s}");
    assert_eq!(code, Some(0), "{s}");
    let seen_upstream = metrics(&upstream.url).await;
    assert_eq!(counter(&seen_upstream, "forkless_sessions_created_total"), 10, "one upstream session each");
}

/// The client's token never goes upstream (MCP forbids token passthrough): a gateway that
/// requires OAuth tokens, in front of an upstream that records the `Authorization` of every
/// request it gets, sends only its own `--upstream-header` credentials, on every request.
#[tokio::test]
async fn the_clients_token_never_reaches_the_upstream_only_the_gateways_own_header() {
    use axum::http::{HeaderMap, StatusCode};
    use std::sync::{Arc, Mutex};
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let record = seen.clone();
    let app = axum::Router::new().route(
        "/mcp",
        axum::routing::post(move |headers: HeaderMap, body: String| {
            let record = record.clone();
            async move {
                let auth = headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or("none");
                record.lock().unwrap().push(auth.to_owned());
                let message: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
                let Some(id) = message.get("id").cloned() else {
                    return (StatusCode::ACCEPTED, HeaderMap::new(), String::new());
                };
                let result = match message["method"].as_str() {
                    Some("initialize") => json!({ "protocolVersion": "2025-06-18", "capabilities": {},
                        "serverInfo": { "name": "recorder", "version": "1" } }),
                    _ => json!({ "tools": [] }),
                };
                let mut head = HeaderMap::new();
                head.insert("content-type", "application/json".parse().unwrap());
                head.insert("mcp-session-id", "upstream-1".parse().unwrap());
                let answer = json!({ "jsonrpc": "2.0", "id": id, "result": result });
                (StatusCode::OK, head, answer.to_string())
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let upstream = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });

    let (mut args, token) = support::oauth_setup();
    args.extend(["--upstream-header".to_owned(), "Authorization: Bearer upstream-secret".to_owned()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let gw = Serve::gateway_upstream(&upstream, &args).await;
    let http = reqwest::Client::new();
    let post = |body: Value, session: Option<String>| {
        let mut request = http
            .post(&gw.url)
            .bearer_auth(&token)
            .header("accept", "application/json, text/event-stream")
            .json(&body);
        if let Some(session) = session {
            request = request.header("mcp-session-id", session).header("mcp-protocol-version", "2025-06-18");
        }
        request.send()
    };
    let init = json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": { "name": "t", "version": "0" } } });
    let response = guard("initialize", post(init, None)).await.expect("initialize");
    assert_eq!(response.status(), 200);
    let session = response.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    let listed = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list" });
    let response = guard("tools/list", post(listed, Some(session))).await.expect("tools/list");
    assert_eq!(response.status(), 200);
    let _ = response.text().await;
    let seen = seen.lock().unwrap().clone();
    assert!(seen.len() >= 3, "initialize, initialized and tools/list reached the upstream: {seen:?}");
    assert!(
        seen.iter().all(|a| a == "Bearer upstream-secret"),
        "only the gateway's own credentials: {seen:?}"
    );
    assert!(!seen.iter().any(|a| a.contains(&token)), "the client's token never went upstream");
}

/// The number `#N` a demo log notification ends with.
fn number(message: &Value) -> Option<u64> {
    message["params"]["data"].as_str()?.rsplit_once('#')?.1.parse().ok()
}

/// Read `sse` to the answer, checking that the numbered notifications arrive each once, in
/// order from 1: their count, and the answer.
async fn numbered_to_answer(sse: &mut SseReader, mut numbered: u64) -> (u64, Value) {
    loop {
        let (_, message) =
            guard("the answer", sse.next_message()).await.expect("an answer, not a silent end");
        if message.get("id").is_some() {
            return (numbered, message);
        }
        if let Some(n) = number(&message) {
            assert_eq!(n, numbered + 1, "each notification once, in order: {message}");
            numbered = n;
        }
    }
}

/// An upstream answer cut mid-stream, by a link that resets (`reset`) or goes silent
/// (`stall`), is resumed upstream: the upstream is `forkless serve`, which numbers its
/// streams, so the gateway proves the continuation and the client reads every notification
/// once, in order, then the result; the upstream ran the call once.
async fn a_cut_upstream_answer_is_resumed(cut: fn(&support::relay::Relay)) {
    let upstream = Serve::start(&["--store", "memory"]).await;
    let port: u16 = upstream.addr().rsplit_once(':').and_then(|(_, p)| p.parse().ok()).expect("a port");
    let relay = support::relay::Relay::start(port).await;
    let through = format!("http://127.0.0.1:{}/mcp", relay.port);
    let gw = Serve::gateway_upstream(&through, &["--store", "memory", "--upstream-timeout", "5s"]).await;
    let (mut s, _) = Session::open(&gw.url).await;
    let count = 60;
    let call =
        json!({ "name": "start-notification-stream", "arguments": { "interval": 20, "count": count } });
    let (id, response) = s.send("tools/call", call).await;
    let mut sse = SseReader::new(response);
    let mut numbered = 0;
    while numbered < 5 {
        let (_, message) = guard("a notification", sse.next_message()).await.expect("the call runs");
        if let Some(n) = number(&message) {
            assert_eq!(n, numbered + 1, "{message}");
            numbered = n;
        }
    }
    cut(&relay);
    let (numbered, answer) = numbered_to_answer(&mut sse, numbered).await;
    assert_eq!(answer["id"], id, "{answer}");
    assert!(answer.get("error").is_none(), "the call's own result, not an error: {answer}");
    assert_eq!(numbered, count, "every notification reached the client once");
    let text = metrics(&gw.url).await;
    assert!(counter(&text, "forkless_upstream_resumed_total") >= 1, "{text}");
    assert_eq!(counter(&text, "forkless_upstream_lost_total"), 0, "{text}");
    assert_eq!(counter(&text, "forkless_upstream_forks_refused_total"), 0, "{text}");
}

#[tokio::test]
async fn an_upstream_answer_cut_by_a_reset_is_resumed_and_every_notification_arrives_once() {
    a_cut_upstream_answer_is_resumed(support::relay::Relay::reset).await;
}

#[tokio::test]
async fn an_upstream_answer_gone_silent_is_resumed_after_the_upstream_timeout() {
    a_cut_upstream_answer_is_resumed(support::relay::Relay::stall).await;
}

/// How a fault-injecting upstream answers the resume of the call it cut.
#[derive(Clone, Copy, Debug)]
enum Forks {
    /// A stream marked as continuing, whose next event skips ahead (a gap).
    WithAGap,
    /// A new stream, not marked as continuing the cut one.
    WithANewStream,
}

/// An upstream that numbers its streams, answers `tools/call` with two notifications and
/// cuts the stream, then answers the resume with a fork (and a result the client must never
/// see). Its URL.
async fn forking_upstream(forks: Forks) -> String {
    use axum::http::{HeaderMap, StatusCode};
    let sse = |stream: &str, resumed: bool, events: Vec<(String, Value)>| {
        let mut head = HeaderMap::new();
        head.insert("content-type", "text/event-stream".parse().unwrap());
        head.insert("mcp-stream-id", stream.parse().unwrap());
        head.insert("mcp-stream-resumed", if resumed { "true" } else { "false" }.parse().unwrap());
        let body: String = events.iter().map(|(id, m)| format!("id: {id}\ndata: {m}\n\n")).collect();
        (StatusCode::OK, head, body)
    };
    let note = |n: u64, text: &str| {
        json!({ "jsonrpc": "2.0", "method": "notifications/message",
            "params": { "level": "info", "data": format!("{text} #{n}") } })
    };
    // The call's id upstream (the gateway rewrites ids), for the forked result.
    let call: std::sync::Arc<std::sync::Mutex<Value>> = std::sync::Arc::default();
    let (posted, resumed) = (call.clone(), call);
    let app = axum::Router::new().route(
        "/mcp",
        axum::routing::post(move |body: String| async move {
            let message: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
            let Some(id) = message.get("id").cloned() else {
                return (StatusCode::ACCEPTED, HeaderMap::new(), String::new());
            };
            if message["method"] == "initialize" {
                let mut head = HeaderMap::new();
                head.insert("content-type", "application/json".parse().unwrap());
                head.insert("mcp-session-id", "upstream-1".parse().unwrap());
                let result = json!({ "protocolVersion": "2025-06-18", "capabilities": { "tools": {} },
                    "serverInfo": { "name": "forking", "version": "1" } });
                return (
                    StatusCode::OK,
                    head,
                    json!({ "jsonrpc": "2.0", "id": id, "result": result }).to_string(),
                );
            }
            // The call's stream: two notifications, then the stream ends without the result.
            *posted.lock().unwrap() = id;
            sse("s1", false, vec![("s1.1".into(), note(1, "call")), ("s1.2".into(), note(2, "call"))])
        })
        .get(move |headers: HeaderMap| async move {
            let cursor = headers.get("last-event-id").and_then(|v| v.to_str().ok()).unwrap_or("");
            if cursor != "s1.2" {
                return (StatusCode::METHOD_NOT_ALLOWED, HeaderMap::new(), String::new());
            }
            let id = resumed.lock().unwrap().clone();
            let forked = json!({ "jsonrpc": "2.0", "id": id, "result": { "forked": true } });
            match forks {
                Forks::WithAGap => {
                    sse("s1", true, vec![("s1.5".into(), note(5, "forked")), ("s1.6".into(), forked)])
                }
                Forks::WithANewStream => {
                    sse("s9", false, vec![("s9.1".into(), note(3, "forked")), ("s9.2".into(), forked)])
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

/// Through a gateway in front of a forking upstream, a call cut and resumed: the client must
/// see the two notifications before the cut, never the fork, and the call's error with its
/// id (`upstream_lost`). `Err` with what it saw otherwise.
async fn a_forked_resume_is_never_passed_on(forks: Forks, env: &[(&str, &str)]) -> Result<(), String> {
    let upstream = forking_upstream(forks).await;
    let gw = Serve::gateway_upstream_env(&upstream, &["--store", "memory"], env).await;
    let (mut s, _) = Session::open(&gw.url).await;
    let (id, response) = s.send("tools/call", json!({ "name": "any", "arguments": {} })).await;
    let mut sse = SseReader::new(response);
    let mut seen = Vec::new();
    let answer = loop {
        let (_, message) = guard("the answer", sse.next_message()).await.expect("an answer");
        if message.get("id").is_some() {
            break message;
        }
        seen.push(message["params"]["data"].as_str().unwrap_or_default().to_owned());
    };
    if seen != ["call #1", "call #2"] {
        return Err(format!("the client saw {seen:?}, not exactly the two notifications before the cut"));
    }
    if answer["id"] != id || answer["error"]["data"]["reason"] != "upstream_lost" {
        return Err(format!("the call was answered {answer}, not upstream_lost with its id"));
    }
    let text = metrics(&gw.url).await;
    if counter(&text, "forkless_upstream_forks_refused_total") != 1 {
        return Err(format!("the refused fork is not counted: {text}"));
    }
    Ok(())
}

#[tokio::test]
async fn an_upstream_that_answers_a_resume_with_a_gap_or_a_new_stream_is_never_passed_on() {
    for forks in [Forks::WithAGap, Forks::WithANewStream] {
        a_forked_resume_is_never_passed_on(forks, &[]).await.unwrap_or_else(|e| panic!("{forks:?}: {e}"));
    }
}

/// Negative control: a gateway that trusts the upstream's resume (the rule broken on purpose,
/// a test hook) passes the fork on, and the oracle above says so.
#[tokio::test]
async fn negative_control_trusting_the_upstreams_resume_passes_the_fork_on_and_is_caught() {
    let trusting = [("FORKLESS_TEST_TRUST_UPSTREAM_RESUME", "1")];
    for forks in [Forks::WithAGap, Forks::WithANewStream] {
        let caught = a_forked_resume_is_never_passed_on(forks, &trusting).await;
        assert!(caught.is_err(), "{forks:?}: a fork passed on must be caught");
    }
}

/// A 2026-07-28 upstream (`forkless serve --revisions 2026-07-28`: no `initialize`, no
/// sessions, no resumption) called statelessly: session clients get resumable sessions in
/// front of it. A numbered call's notifications come on its stream, then its result (without
/// the revision's `resultType`); `forkless check` through the gateway passes every scenario
/// but those needing a standalone stream the upstream fills, a restart or the tasks
/// extension; the upstream saw no session.
#[tokio::test]
async fn a_current_upstream_is_called_statelessly_behind_resumable_sessions() {
    let upstream = Serve::start(&["--store", "memory", "--revisions", "2026-07-28"]).await;
    let gw = Serve::gateway_upstream(&upstream.url, &["--store", "memory"]).await;
    let (mut s, init) = Session::open(&gw.url).await;
    assert_eq!(init["serverInfo"]["name"], "forkless-demo", "{init}");
    let call = json!({ "name": "start-notification-stream", "arguments": { "interval": 5, "count": 12 } });
    let (id, response) = s.send("tools/call", call).await;
    let mut sse = SseReader::new(response);
    let (numbered, answer) = numbered_to_answer(&mut sse, 0).await;
    assert_eq!((answer["id"].clone(), numbered), (id, 12), "{answer}");
    assert!(answer.get("error").is_none() && answer["result"].get("resultType").is_none(), "{answer}");

    let through = verdicts(&gw.url, &[]).await;
    for (name, verdict) in &through {
        // `cursor-lost` reads the background tool's numbers on the standalone stream, which
        // this upstream has none of to fill.
        let standalone = name == "cursor-lost";
        let needs_more = name == "crash-restart" || name.starts_with("task-");
        let want = if standalone || needs_more { "UNSUPPORTED" } else { "PASS" };
        assert_eq!(verdict, want, "{name}: {through:?}");
    }
    let text = metrics(&gw.url).await;
    assert_eq!(counter(&text, "forkless_upstream_lost_total"), 0, "{text}");
    let upstream_text = metrics(&upstream.url).await;
    assert_eq!(counter(&upstream_text, "forkless_sessions_created_total"), 0, "{upstream_text}");
}

/// The client's canned answer to a request the server sent it: every field of an
/// elicitation's schema filled with `ada`, a sampling answered `Paris`, no roots.
fn client_answer(request: &Value) -> Value {
    match request["method"].as_str() {
        Some("elicitation/create") => {
            let fields =
                request["params"]["requestedSchema"]["properties"].as_object().cloned().unwrap_or_default();
            let content: serde_json::Map<String, Value> = fields
                .iter()
                .map(|(k, schema)| {
                    (k.clone(), if schema["type"] == "boolean" { json!(true) } else { json!("ada") })
                })
                .collect();
            json!({ "action": "accept", "content": content })
        }
        Some("sampling/createMessage") => {
            json!({ "role": "assistant", "content": { "type": "text", "text": "Paris" }, "model": "m" })
        }
        _ => json!({ "roots": [] }),
    }
}

/// Call `tool` in session `s`, answering every request the server sends on the call's stream
/// with [`client_answer`]: the call's answer, and how many requests were answered.
async fn call_answering(s: &mut Session, tool: &str) -> (Value, usize) {
    let (id, response) = s.send("tools/call", json!({ "name": tool, "arguments": {} })).await;
    let mut sse = SseReader::new(response);
    let mut asked = 0;
    loop {
        let (_, message) = guard("the call's stream", sse.next_message()).await.expect("an answer");
        if message.get("method").is_some() && message.get("id").is_some() {
            asked += 1;
            let answer = json!({ "jsonrpc": "2.0", "id": message["id"], "result": client_answer(&message) });
            let status = reqwest::Client::new()
                .post(&s.url)
                .header("mcp-session-id", &s.id)
                .header("mcp-protocol-version", "2025-11-25")
                .header("accept", "application/json, text/event-stream")
                .json(&answer)
                .send()
                .await
                .expect("POST the client's answer")
                .status();
            assert_eq!(status, 202, "the client's answer is accepted");
        } else if message.get("id") == Some(&id) {
            return (message, asked);
        }
    }
}

/// A 2026-07-28 upstream that answers `input_required` (its multi-round trip): the gateway asks
/// the session client itself, on the call's stream, and sends the call again with the answers
/// and the upstream's `requestState`, round after round.
#[tokio::test]
async fn a_current_upstreams_input_requests_are_asked_of_the_session_client() {
    let upstream = Serve::start(&["--store", "memory", "--revisions", "2026-07-28"]).await;
    let gw = Serve::gateway_upstream(&upstream.url, &["--store", "memory"]).await;
    let caps = json!({ "elicitation": {}, "sampling": {}, "roots": {} });
    let (mut s, _) = Session::open_with(&gw.url, caps).await;
    let text =
        |answer: &Value| answer["result"]["content"][0]["text"].as_str().unwrap_or_default().to_owned();
    let (answer, asked) = call_answering(&mut s, "test_input_required_result_multi_round").await;
    assert_eq!(
        (text(&answer), asked),
        ("ada likes ada".to_owned(), 2),
        "two rounds, the state carried: {answer}"
    );
    let (answer, asked) = call_answering(&mut s, "test_input_required_result_multiple_inputs").await;
    assert_eq!(
        (text(&answer), asked),
        ("Paris, ada: 0 root(s)".to_owned(), 3),
        "three requests at once: {answer}"
    );
}
