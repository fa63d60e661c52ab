//! `forkless connect URL` as an MCP host runs it: a host driver writes newline-delimited
//! JSON-RPC to the bridge's stdin and reads its stdout, while a relay between the bridge and
//! the server resets the bridge's connections mid-call. The oracle (`support::host::judge`):
//! every notification of a call reaches the host exactly once and in order with the result,
//! or a gap-free prefix of them reaches it and the call fails with its own id and a typed
//! reason; never a duplicate, never a silent end.
//!
//! Against `forkless serve` every cut call is answered whole (a proven continuation); against
//! the SDKs' reference servers (which cannot prove one) and a deliberately forking server a cut
//! call fails with its id and the host is told; against a 2026-07-28 server a cut call is
//! re-issued under its key and the tool runs once.

mod forking;
mod support;

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use support::host::{HostDriver, Outcome, judge, numbered, told};
use support::relay::Relay;
use support::{Serve, counter, metrics, peer, reference};

/// The port of `url` (`http://127.0.0.1:PORT/mcp`).
fn port(url: &str) -> u16 {
    reqwest::Url::parse(url).expect("url").port().expect("a port")
}

/// `url` with its port replaced by the relay's.
fn through(relay: &Relay, url: &str) -> String {
    let mut u = reqwest::Url::parse(url).expect("url");
    u.set_port(Some(relay.port)).expect("port");
    u.to_string()
}

/// Call `start-notification-stream` (`count` notifications, `interval` ms apart) as request
/// `id`, resetting the bridge's connections when the server sends each of `cuts` (inside the
/// call's stream, whatever the host's lag): the answer and the numbers the host saw.
async fn call_with_cuts(
    host: &mut HostDriver,
    relay: &Relay,
    id: u64,
    count: u64,
    cuts: &[u64],
) -> (Value, Vec<Value>) {
    let call = json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": "start-notification-stream", "arguments": { "interval": 25, "count": count },
    }});
    for k in cuts {
        relay.reset_on(format!("#{k}\""));
    }
    host.send(call).await;
    host.until_answer(&json!(id), |_| {}).await
}

#[tokio::test]
async fn a_host_gets_every_notification_once_across_cuts_from_forkless_serve() {
    let server = Serve::start(&["--store", "memory"]).await;
    let relay = Relay::start(port(&server.url)).await;
    let mut host = HostDriver::start(&through(&relay, &server.url), &[]);
    let init = host.initialize().await;
    assert_eq!(init["protocolVersion"], "2025-11-25", "{init}");

    let (answer, messages) = call_with_cuts(&mut host, &relay, 1, 30, &[5, 14, 23]).await;
    let numbers = numbered(&messages);
    assert_eq!(judge(&answer, &numbers, 30), Ok(Outcome::Answered), "{answer} {numbers:?}");
    assert_eq!(answer["id"], 1);

    // Progress under the host's own token, through two cuts: each value once, in order.
    relay.reset_on("step 3 of");
    relay.reset_on("step 8 of");
    host.send(json!({ "jsonrpc": "2.0", "id": "p", "method": "tools/call", "params": {
        "name": "long-task", "arguments": { "steps": 12, "interval": 25 },
        "_meta": { "progressToken": "host-token" },
    }}))
    .await;
    let mut progress = Vec::new();
    let (answer, _) = host
        .until_answer(&json!("p"), |m| {
            if m["method"] == "notifications/progress" {
                assert_eq!(m["params"]["progressToken"], "host-token", "{m}");
                let p = m["params"]["progress"].as_f64().expect("progress");
                progress.push(p);
            }
        })
        .await;
    assert!(answer.get("result").is_some(), "{answer}");
    let expected: Vec<f64> = (1..=12).map(f64::from).collect();
    assert_eq!(progress, expected, "every progress notification once, in order");

    // A burst: the last notifications and the answer arrive together; the host still gets
    // every notification before the answer (they travel on two paths inside the bridge).
    for id in 10..15 {
        host.send(json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": "start-notification-stream", "arguments": { "interval": 0, "count": 50 } } }))
            .await;
        let (answer, messages) = host.until_answer(&json!(id), |_| {}).await;
        assert_eq!(judge(&answer, &numbered(&messages), 50), Ok(Outcome::Answered), "burst {id}: {answer}");
    }

    let text = metrics(&server.url).await;
    let resumed: u64 = text
        .lines()
        .filter(|l| l.starts_with("forkless_get_outcomes_total{outcome=\"resumed\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum();
    // Five cuts, each inside a live call stream: five resumes at least.
    assert!(resumed >= 5, "{text}");
    assert!(host.finish().await.success());
}

#[tokio::test]
async fn a_forking_server_never_reaches_the_host_the_call_fails_with_its_id() {
    let url = forking::server().await;
    let relay = Relay::start(port(&url)).await;
    let mut host = HostDriver::start(&through(&relay, &url), &["--revision", "sessions"]);
    host.initialize().await;
    let (answer, messages) = call_with_cuts(&mut host, &relay, 7, 10, &[3]).await;
    let numbers = numbered(&messages);
    // The server's "continuation" starts again at #1: the bridge refuses it.
    assert_eq!(
        judge(&answer, &numbers, 10),
        Ok(Outcome::Refused("unproven_continuation".into())),
        "{answer}"
    );
    // What came before the cut (it lands as #3 leaves the server), once.
    assert!((2..10).contains(&numbers.len()), "{numbers:?}");
    assert_eq!(answer["id"], 7);
    assert!(told(&messages).iter().any(|t| t.contains("given up")), "{messages:?}");
    // The oracle itself catches what a bridge that followed the fork would have handed on.
    let forked = judge(&json!({ "id": 7, "result": {} }), &[1, 2, 3, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 10);
    assert!(forked.is_err(), "{forked:?}");
}

/// The SDKs' reference servers, when installed (CI installs them).
fn sdk_servers() -> Vec<(PathBuf, &'static str)> {
    let mut servers = Vec::new();
    if let Some(py) = peer(".peers/py/bin/python") {
        servers.push((py, "tests/interop/python/reference_server.py"));
    }
    if peer(".peers/node/node_modules/@modelcontextprotocol/sdk").is_some() {
        servers.push((PathBuf::from("node"), "tests/interop/ts/reference_server.mjs"));
    }
    servers
}

#[tokio::test]
async fn against_the_sdks_servers_a_call_is_whole_or_fails_with_its_id_never_twice() {
    for (program, script) in sdk_servers() {
        let (_server, url) = reference(&program, script).await;
        let relay = Relay::start(port(&url)).await;
        // The SDKs' servers accept only their own Host (DNS-rebinding protection): the relay
        // is invisible to them.
        let own_host = format!("Host: 127.0.0.1:{}", port(&url));
        let mut host = HostDriver::start(&through(&relay, &url), &["--header", &own_host]);
        host.initialize().await;
        // Uncut: every notification, then the result.
        let (answer, messages) = call_with_cuts(&mut host, &relay, 1, 8, &[]).await;
        assert_eq!(judge(&answer, &numbered(&messages), 8), Ok(Outcome::Answered), "{script}: {answer}");
        // Cut: the SDK cannot prove a resume continues the stream, so the call fails with its
        // id once what it proved was handed on; never a duplicate.
        let (answer, messages) = call_with_cuts(&mut host, &relay, 2, 20, &[4]).await;
        let numbers = numbered(&messages);
        let outcome = judge(&answer, &numbers, 20).unwrap_or_else(|e| panic!("{script}: {e}"));
        assert!(matches!(outcome, Outcome::Refused(_)), "{script}: {outcome:?} {answer}");
        assert_eq!(answer["id"], 2, "{script}");
        assert!(!told(&messages).is_empty(), "{script}: the host was not told: {messages:?}");
        // The session goes on for the next call.
        let (answer, messages) = call_with_cuts(&mut host, &relay, 3, 3, &[]).await;
        assert_eq!(judge(&answer, &numbered(&messages), 3), Ok(Outcome::Answered), "{script}: {answer}");
        assert!(host.finish().await.success(), "{script}");
    }
}

#[tokio::test]
async fn a_2026_server_is_spoken_to_in_its_revision_and_a_cut_call_runs_once() {
    let server = Serve::start(&["--store", "memory", "--revisions", "all"]).await;
    let relay = Relay::start(port(&server.url)).await;
    let mut host = HostDriver::start(&through(&relay, &server.url), &[]);
    // The host speaks 2025-11-25 and is answered in it, from server/discover.
    let init = host.initialize().await;
    assert_eq!(init["protocolVersion"], "2025-11-25", "{init}");
    assert!(init["capabilities"]["tools"].is_object(), "{init}");
    let (answer, messages) = call_with_cuts(&mut host, &relay, 1, 20, &[4]).await;
    assert!(answer.get("result").is_some(), "a keyed re-issue gets the answer: {answer}");
    let numbers = numbered(&messages);
    let mut unique = numbers.clone();
    unique.dedup();
    assert_eq!(unique, numbers, "nothing twice: {numbers:?}");
    let text = metrics(&server.url).await;
    assert_eq!(counter(&text, "forkless_keyed_requests_total{outcome=\"ran\"}"), 1, "{text}");
    assert!(counter(&text, "forkless_keyed_requests_total{outcome=\"answered\"}") >= 1, "{text}");
    assert!(host.finish().await.success());
}

/// Call `test_elicitation` as request `id` and answer the server's question as the host: the
/// call's answer and the question the host was asked.
async fn elicit_through(host: &mut HostDriver, id: u64) -> (Value, Value) {
    host.send(json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": "test_elicitation", "arguments": { "message": "who are you?" },
    }}))
    .await;
    let question = loop {
        let m = host.next().await.expect("the server's question");
        if m["method"] == "elicitation/create" {
            break m;
        }
    };
    host.send(json!({ "jsonrpc": "2.0", "id": question["id"], "result": {
        "action": "accept", "content": { "username": "ada", "email": "ada@example.com" },
    }}))
    .await;
    (host.until_answer(&json!(id), |_| {}).await.0, question)
}

#[tokio::test]
async fn the_host_answers_the_servers_questions_in_both_eras_and_bad_lines_get_typed_errors() {
    for revisions in ["sessions", "all"] {
        let server = Serve::start(&["--store", "memory", "--revisions", revisions]).await;
        let mut host = HostDriver::start(&server.url, &[]);
        // Before initialize: a request is refused with its id, a line that is not JSON with -32700.
        host.send(json!({ "jsonrpc": "2.0", "id": "early", "method": "tools/list" })).await;
        let early = host.next().await.expect("an answer");
        assert_eq!(
            (early["id"].as_str(), early["error"]["code"].as_i64()),
            (Some("early"), Some(-32600)),
            "{early}"
        );
        host.initialize().await;
        let (answer, question) = elicit_through(&mut host, 5).await;
        assert_eq!(question["params"]["message"], "who are you?", "{revisions}: {question}");
        let text = answer["result"]["content"][0]["text"].as_str().unwrap_or_default();
        assert!(text.contains("action=accept") && text.contains("ada@example.com"), "{revisions}: {answer}");
        // Bad input from the host: typed errors, and the bridge goes on.
        for (line, code) in
            [("{not json", -32700), ("[1,2]", -32600), (r#"{"jsonrpc":"2.0","id":9}"#, -32600)]
        {
            host.send_line(line).await;
            let refusal = host.next().await.expect("a refusal");
            assert_eq!(refusal["error"]["code"].as_i64(), Some(code), "{revisions}, {line}: {refusal}");
        }
        host.send(json!({ "jsonrpc": "2.0", "id": 6, "method": "tools/list" })).await;
        let (answer, _) = host.until_answer(&json!(6), |_| {}).await;
        assert!(answer["result"]["tools"].is_array(), "{revisions}: {answer}");
        assert!(host.finish().await.success());
    }
}

/// What one host saw of one call through one bridge.
#[derive(Debug)]
struct Observed {
    /// The call's answer, if one came within the guard.
    answer: Option<Value>,
    /// The call's numbered notifications, in order.
    numbers: Vec<u64>,
    /// Notifications of the server's other (GET) stream that reached the host meanwhile.
    background: usize,
}

impl Observed {
    /// The oracle's verdict; no answer at all breaks it (a silent end).
    fn verdict(&self, count: u64) -> Result<Outcome, String> {
        match &self.answer {
            Some(answer) => judge(answer, &self.numbers, count),
            None => Err(format!("no answer, after {:?}", self.numbers)),
        }
    }
}

/// Through `bridge`, call `start-notification-stream` at `url` and reset the bridge's
/// connections when the host sees each of `cuts`.
async fn observe(
    bridge: &mut HostDriver,
    relay: &Relay,
    interval: u64,
    count: u64,
    cuts: &[u64],
) -> Observed {
    bridge.initialize().await;
    bridge
        .send(json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "start-notification-stream", "arguments": { "interval": interval, "count": count },
        }}))
        .await;
    let mut seen = Observed { answer: None, numbers: Vec::new(), background: 0 };
    let id = json!(1);
    let wait = bridge.until_answer(&id, |m| {
        let n = numbered(std::slice::from_ref(m));
        if let Some(k) = n.first()
            && cuts.contains(k)
        {
            relay.reset();
        }
        seen.numbers.extend(n);
        let data = m["params"]["data"].as_str().unwrap_or_default();
        seen.background += usize::from(data.starts_with("background"));
    });
    // Ten seconds is far beyond any of these calls (at most 0.8 s of notifications).
    seen.answer = tokio::time::timeout(std::time::Duration::from_secs(10), wait).await.ok().map(|(a, _)| a);
    seen
}

/// The same host, the same cuts, through `mcp-remote` (the bridge hosts launch for remote
/// servers, on the TypeScript SDK's client) and through `forkless connect`, side by side; the
/// table in `docs/peers.md` is what this prints.
#[tokio::test]
async fn side_by_side_with_mcp_remote() {
    let Some(remote) = peer(".peers/bridges/node_modules/mcp-remote/dist/proxy.js") else { return };
    let honest = Serve::start(&["--store", "memory"]).await;
    let polling = Serve::start(&["--store", "memory", "--poll-after", "100"]).await;
    let forking = forking::server().await;
    let scenarios = [
        ("forkless serve, 3 cuts", honest.url.clone(), 25, 30, vec![5, 14, 23]),
        ("forkless serve closing every 100 ms", polling.url.clone(), 300, 6, vec![]),
        ("forking server, 1 cut", forking, 25, 10, vec![3]),
    ];
    for (name, url, interval, count, cuts) in scenarios {
        for bridge in ["mcp-remote 0.15.1", "forkless connect"] {
            let relay = Relay::start(port(&url)).await;
            let via = through(&relay, &url);
            let mut host = if bridge == "forkless connect" {
                HostDriver::start(&via, &[])
            } else {
                HostDriver::start_other(
                    Path::new("node"),
                    &[remote.to_str().expect("path"), &via, "--transport", "http-only"],
                )
            };
            let seen = observe(&mut host, &relay, interval, count, &cuts).await;
            let verdict = seen.verdict(count);
            eprintln!("| {name} | {bridge} | {verdict:?} | {:?} | {} |", seen.numbers, seen.background);
            if bridge == "forkless connect" {
                assert!(verdict.is_ok(), "{name}: {seen:?}");
            } else if name.starts_with("forking") {
                // mcp-remote takes the forking server's new stream for the call's continuation:
                // the call is never answered and the host is not told (the seed's client half).
                assert!(verdict.is_err(), "mcp-remote 0.15.1 was expected to miss the fork: {seen:?}");
            }
        }
    }
}

/// Follow the authorization URL the bridge told the user about, as a browser would: the
/// authorization server approves and redirects to the bridge's loopback listener.
async fn authorize_as_the_user(told: &mut tokio::sync::mpsc::UnboundedReceiver<String>) {
    let url = loop {
        let line = support::guard("the authorization URL", told.recv()).await.expect("the bridge's stderr");
        if let Some((_, url)) = line.split_once(", open ") {
            break url.trim().to_owned();
        }
    };
    let browser = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let approved = browser.get(&url).send().await.expect("the authorization endpoint");
    assert_eq!(approved.status(), 303, "approved and redirected: {url}");
    let back = approved.headers()["location"].to_str().unwrap().to_owned();
    assert!(back.starts_with("http://127.0.0.1:"), "a loopback redirect: {back}");
    let page = browser.get(&back).send().await.expect("the bridge's redirect listener");
    assert_eq!(page.status(), 200, "{}", page.text().await.unwrap_or_default());
}

#[tokio::test]
async fn oauth_is_authorized_once_kept_in_a_private_file_and_refreshed() {
    use std::os::unix::fs::PermissionsExt as _;
    let addr = support::free_addr();
    let resource = format!("http://{addr}/mcp");
    let issuer = support::authorization::AuthorizationServer::start(&resource).await;
    let jwks = support::jwks_file();
    let jwks = jwks.to_str().unwrap();
    let server = Serve::start_at(
        &addr,
        &[
            "--store",
            "memory",
            "--auth-issuer",
            &issuer.issuer,
            "--auth-audience",
            &resource,
            "--auth-jwks",
            jwks,
        ],
    )
    .await;
    let tokens = support::fresh_data_dir().join("tokens.json");
    // An API key meant for the MCP server alone rides along: it must never reach the issuer.
    let token_flag =
        ["--oauth-token-file", tokens.to_str().unwrap(), "--header", "X-Api-Key: for-the-server"];

    // First launch: discovery, registration, the user's authorization, the code for tokens.
    let (mut host, mut told) = HostDriver::start_telling(&server.url, &token_flag);
    authorize_as_the_user(&mut told).await;
    host.initialize().await;
    let call = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "echo", "arguments": { "text": "signed in" } } });
    host.send(call.clone()).await;
    let (answer, _) = host.until_answer(&json!(1), |_| {}).await;
    assert_eq!(answer["result"]["content"][0]["text"], "signed in", "{answer}");
    assert!(host.finish().await.success());
    let counts = issuer.counts();
    assert_eq!(
        (counts.registrations, counts.authorizations, counts.codes_exchanged),
        (1, 1, 1),
        "{counts:?}"
    );
    let mode = std::fs::metadata(&tokens).expect("the token file").permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "only the user reads the tokens");

    // Second launch: the kept token, nobody asked.
    let mut host = HostDriver::start(&server.url, &token_flag);
    host.initialize().await;
    host.send(call.clone()).await;
    assert!(host.until_answer(&json!(1), |_| {}).await.0.get("result").is_some());
    assert!(host.finish().await.success());
    assert_eq!(issuer.counts().authorizations, 1, "no second authorization");

    // Third launch with the kept token expired: refreshed, nobody asked.
    let mut kept: Value = serde_json::from_str(&std::fs::read_to_string(&tokens).unwrap()).unwrap();
    kept["expires_at"] = json!(kept["issued_at"].as_u64().unwrap() + 1);
    std::fs::write(&tokens, kept.to_string()).unwrap();
    let mut host = HostDriver::start(&server.url, &token_flag);
    host.initialize().await;
    host.send(call).await;
    assert!(host.until_answer(&json!(1), |_| {}).await.0.get("result").is_some());
    assert!(host.finish().await.success());
    let counts = issuer.counts();
    assert_eq!((counts.refreshes, counts.authorizations), (1, 1), "{counts:?}");
    assert_eq!(counts.foreign_headers, 0, "the server's own headers reached the issuer: {counts:?}");
    let refreshed: Value = serde_json::from_str(&std::fs::read_to_string(&tokens).unwrap()).unwrap();
    assert_ne!(refreshed["access_token"], kept["access_token"], "the refreshed token is kept");

    // Fourth launch with a kept token the server refuses (revoked; here one it never
    // issued) that has not expired: dropped, and the user is asked again.
    let mut revoked = refreshed.clone();
    revoked["access_token"] = json!("revoked-token");
    std::fs::write(&tokens, revoked.to_string()).unwrap();
    let (mut host, mut told) = HostDriver::start_telling(&server.url, &token_flag);
    authorize_as_the_user(&mut told).await;
    host.initialize().await;
    host.send(json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list" })).await;
    assert!(host.until_answer(&json!(1), |_| {}).await.0["result"]["tools"].is_array());
    assert!(host.finish().await.success());
    assert_eq!(issuer.counts().authorizations, 2, "asked again: {:?}", issuer.counts());
}

#[tokio::test]
async fn a_session_the_server_forgot_fails_the_call_with_its_id_and_the_bridge_exits_1() {
    let addr = support::free_addr();
    let server = Serve::start_at(&addr, &["--store", "memory"]).await;
    let mut host = HostDriver::start(&server.url, &[]);
    host.initialize().await;
    // A call the host cancels gets no answer; the bridge goes on.
    host.send(json!({ "jsonrpc": "2.0", "id": "slow", "method": "tools/call", "params": {
        "name": "long-task", "arguments": { "steps": 100, "interval": 50 } } }))
        .await;
    host.send(
        json!({ "jsonrpc": "2.0", "method": "notifications/cancelled", "params": { "requestId": "slow" } }),
    )
    .await;
    host.send(json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/list" })).await;
    let (answer, before) = host.until_answer(&json!(2), |_| {}).await;
    assert!(answer["result"]["tools"].is_array(), "{answer}");
    assert!(!before.iter().any(|m| m["id"] == "slow"), "a cancelled call is not answered: {before:?}");
    // The server restarts without its sessions (the memory store): the session is gone.
    server.terminate();
    drop(server.wait().await);
    let server = Serve::start_at(&addr, &["--store", "memory"]).await;
    host.send(json!({ "jsonrpc": "2.0", "id": 3, "method": "tools/list" })).await;
    let (answer, before) = host.until_answer(&json!(3), |_| {}).await;
    assert_eq!(answer.pointer("/error/data/reason"), Some(&json!("session_ended")), "{answer}");
    let status = host.finish().await;
    assert_eq!(status.code(), Some(1), "the bridge exits so the host can start it again");
    let _ = (server, before);
}

#[tokio::test]
async fn a_task_is_polled_to_its_end_so_the_host_sees_an_ordinary_call() {
    let server = Serve::start(&["--store", "memory", "--revisions", "all"]).await;
    let mut host = HostDriver::start(&server.url, &["--revision", "2026-07-28"]);
    host.initialize().await;
    host.send(json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "slow_compute", "arguments": { "seconds": 1, "label": "job" } } }))
        .await;
    let (answer, _) = host.until_answer(&json!(1), |_| {}).await;
    assert_eq!(answer["result"]["content"][0]["text"], "computed `job` in 1 s", "{answer}");
    assert!(answer["result"].get("taskId").is_none(), "the host sees the result, not the task: {answer}");
    let text = metrics(&server.url).await;
    assert_eq!(counter(&text, "forkless_tasks_created_total"), 1, "it ran as a task: {text}");
    assert!(host.finish().await.success());
}

#[tokio::test]
async fn a_bearer_token_file_signs_every_request_and_a_bad_one_is_refused_with_its_reason() {
    let (args, token) = support::oauth_setup();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let server = Serve::start(&args).await;
    let dir = support::fresh_data_dir();
    let good = dir.join("token");
    std::fs::write(&good, format!("{token}\n")).unwrap();
    let mut host = HostDriver::start(&server.url, &["--bearer-token-file", good.to_str().unwrap()]);
    host.initialize().await;
    host.send(json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list" })).await;
    assert!(host.until_answer(&json!(1), |_| {}).await.0["result"]["tools"].is_array());
    assert!(host.finish().await.success());
    // A token the server refuses: the host's initialize fails with the reason.
    let bad = dir.join("bad");
    std::fs::write(&bad, "not-a-jwt").unwrap();
    let mut host = HostDriver::start(&server.url, &["--bearer-token-file", bad.to_str().unwrap()]);
    host.send(json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": "h", "version": "1" } } }))
    .await;
    let (answer, _) = host.until_answer(&json!(0), |_| {}).await;
    assert_eq!(answer.pointer("/error/data/reason"), Some(&json!("http_status")), "{answer}");
    assert!(answer["error"]["message"].as_str().unwrap_or_default().contains("401"), "{answer}");
    assert!(!host.finish().await.success(), "the bridge cannot reach the server: it exits non-zero");
}

/// A server that records every POST and never finishes a call (its stream stays open).
async fn recording_server() -> (String, std::sync::Arc<std::sync::Mutex<Vec<Value>>>) {
    use axum::http::StatusCode;
    use axum::response::IntoResponse as _;
    let seen: std::sync::Arc<std::sync::Mutex<Vec<Value>>> = std::sync::Arc::default();
    let kept = std::sync::Arc::clone(&seen);
    let post = move |body: String| {
        let kept = std::sync::Arc::clone(&kept);
        async move {
            let message: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
            kept.lock().unwrap().push(message.clone());
            let Some(id) = message.get("id").cloned() else {
                return StatusCode::ACCEPTED.into_response();
            };
            match message["method"].as_str() {
                Some("tools/call") => axum::response::Response::builder()
                    .header("content-type", "text/event-stream")
                    .body(axum::body::Body::from_stream(futures::stream::pending::<
                        Result<String, std::io::Error>,
                    >()))
                    .unwrap(),
                _ => {
                    let result = json!({ "protocolVersion": "2025-11-25", "capabilities": { "tools": {} },
                                         "serverInfo": { "name": "recorder", "version": "0" } });
                    let mut r =
                        axum::Json(json!({ "jsonrpc": "2.0", "id": id, "result": result })).into_response();
                    r.headers_mut().insert("mcp-session-id", "recorded".parse().unwrap());
                    r
                }
            }
        }
    };
    let get = || async { StatusCode::METHOD_NOT_ALLOWED };
    let app = axum::Router::new().route("/mcp", axum::routing::post(post).get(get));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, seen)
}

#[tokio::test]
async fn a_hosts_cancellation_reaches_the_server_under_the_clients_id_only() {
    let (url, seen) = recording_server().await;
    let mut host = HostDriver::start(&url, &["--revision", "sessions"]);
    host.initialize().await;
    host.send(json!({ "jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": { "name": "x", "arguments": {} } }))
        .await;
    let called = support::guard("the call to reach the server", async {
        loop {
            if let Some(id) =
                seen.lock().unwrap().iter().find(|m| m["method"] == "tools/call").map(|m| m["id"].clone())
            {
                break id;
            }
            tokio::task::yield_now().await;
        }
    })
    .await;
    host.send(json!({ "jsonrpc": "2.0", "method": "notifications/cancelled", "params": { "requestId": 7 } }))
        .await;
    host.send(json!({ "jsonrpc": "2.0", "id": 8, "method": "ping" })).await;
    let (_, before) = host.until_answer(&json!(8), |_| {}).await;
    assert!(!before.iter().any(|m| m["id"] == 7), "a cancelled call is not answered: {before:?}");
    let cancelled = support::guard("the client's cancellation", async {
        loop {
            let found: Vec<Value> = seen
                .lock()
                .unwrap()
                .iter()
                .filter(|m| m["method"] == "notifications/cancelled")
                .map(|m| m["params"]["requestId"].clone())
                .collect();
            if !found.is_empty() {
                break found;
            }
            tokio::task::yield_now().await;
        }
    })
    .await;
    // Only the client's own id: the host's 7 names nothing (or another request) there.
    assert!(cancelled.iter().all(|id| *id == called), "cancelled {cancelled:?}, the call was {called}");
    assert!(host.finish().await.success());
}
