//! Re-issue that never runs twice (PROTOCOL section 14), over real processes: a 2026-07-28
//! request carrying `_meta["dev.forkless/idempotencyKey"]` runs once per key and principal,
//! whatever happens to its response stream, to the process that ran it or to the node the
//! re-issue reaches. The oracle is a side effect outside the server (the demo's
//! `counted_call` appends a line per start to a file) and the answers the client got.
//! The negative controls: the same re-issue without a key, which the revision runs again; and a
//! store that acknowledges a key before its sync, whose call a kill then lets run twice.

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use support::shared::{Backend, SharedStore};
use support::{Serve, fresh_data_dir, guard};

/// A 2026-07-28 `tools/call` of `counted_call`, keyed by `key` if given.
fn body(label: &str, millis: u64, key: Option<&str>) -> Value {
    let mut meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    if let Some(key) = key {
        meta["dev.forkless/idempotencyKey"] = json!(key);
    }
    json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "counted_call", "arguments": { "millis": millis, "label": label }, "_meta": meta } })
}

fn post(url: &str, body: &Value) -> reqwest::RequestBuilder {
    let method = body["method"].as_str().unwrap_or_default().to_owned();
    let mut rb = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", &method);
    if let Some(name) = body["params"]["name"].as_str() {
        rb = rb.header("mcp-name", name);
    }
    rb.body(body.to_string())
}

/// Send `body` and read its JSON-RPC answer (the last SSE `data:` or the JSON body).
async fn answer(url: &str, body: &Value) -> Value {
    let text =
        guard("an answer", async { post(url, body).send().await.expect("send").text().await.expect("body") })
            .await;
    let last = text.lines().filter_map(|l| l.strip_prefix("data:")).next_back().unwrap_or(&text);
    serde_json::from_str(last.trim()).unwrap_or_else(|e| panic!("not a JSON-RPC answer ({e}): {text}"))
}

/// Send `body` and cut the connection once the server has started the call (its side effect
/// is counted), before its answer.
async fn cut_after_start(url: &str, body: &Value, effects: &Path, label: &str) {
    let before = starts(effects, label);
    let request = post(url, body).send();
    let started = async {
        while starts(effects, label) == before {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::select! {
        _ = request => panic!("the call answered before its connection was cut"),
        () = guard("the call started", started) => {}
    }
}

fn starts(dir: &Path, label: &str) -> usize {
    std::fs::read_to_string(dir.join(label)).map_or(0, |s| s.lines().count())
}

fn effects_dir() -> PathBuf {
    let dir = fresh_data_dir();
    std::fs::create_dir_all(&dir).expect("a side-effect directory");
    dir
}

async fn serve(effects: &Path, args: &[&str]) -> Serve {
    serve_with(effects, args, &[]).await
}

async fn serve_with(effects: &Path, args: &[&str], env: &[(&str, &str)]) -> Serve {
    let dir = effects.display().to_string();
    let mut args = args.to_vec();
    args.extend(["--revisions", "all"]);
    let mut env = env.to_vec();
    env.push(("FORKLESS_DEMO_SIDE_EFFECTS", dir.as_str()));
    Serve::start_with_env("127.0.0.1:0", &args, &env).await
}

fn text(answer: &Value) -> &str {
    answer["result"]["content"][0]["text"].as_str().unwrap_or_else(|| panic!("a text result: {answer}"))
}

/// A keyed call whose response stream is cut after the server started it, re-issued: one
/// execution, and the re-issue gets its answer. Without a key, the same re-issue runs the call
/// a second time (the revision's rule, and what the oracle must catch).
#[tokio::test]
async fn a_cut_keyed_call_reissued_runs_once_and_without_a_key_twice() {
    let effects = effects_dir();
    let server = serve(&effects, &["--store", "memory"]).await;
    let keyed = body("keyed", 400, Some("k-1"));
    cut_after_start(&server.url, &keyed, &effects, "keyed").await;
    let again = answer(&server.url, &keyed).await;
    assert_eq!(text(&again), "keyed: start 1", "the first execution's answer: {again}");
    let third = answer(&server.url, &keyed).await;
    assert_eq!(third, again, "every re-issue gets the same answer");
    assert_eq!(starts(&effects, "keyed"), 1, "one execution");

    // The negative control: no key, the same cut and re-issue, two executions.
    let plain = body("plain", 400, None);
    cut_after_start(&server.url, &plain, &effects, "plain").await;
    let again = answer(&server.url, &plain).await;
    assert_eq!(text(&again), "plain: start 2");
    assert_eq!(starts(&effects, "plain"), 2, "without a key the re-issue runs again");
    server.terminate();
}

/// The same with answers as a single JSON body (`--answer json`): the connection closing
/// drops the request's handling there, never the keyed execution.
#[tokio::test]
async fn a_cut_keyed_call_answered_as_json_runs_once() {
    let effects = effects_dir();
    let server = serve(&effects, &["--store", "memory", "--answer", "json"]).await;
    let keyed = body("json", 400, Some("k-json"));
    cut_after_start(&server.url, &keyed, &effects, "json").await;
    let again = answer(&server.url, &keyed).await;
    assert_eq!(text(&again), "json: start 1", "{again}");
    assert_eq!(starts(&effects, "json"), 1, "one execution");
    server.terminate();
}

/// The key is bound to the request: other parameters under the same key are refused, a
/// malformed key is refused, and `server/discover` advertises the extension.
#[tokio::test]
async fn a_key_reused_with_other_parameters_or_malformed_is_refused_by_name() {
    let effects = effects_dir();
    let server = serve(&effects, &["--store", "memory"]).await;
    let first = answer(&server.url, &body("reuse", 0, Some("k-2"))).await;
    assert_eq!(text(&first), "reuse: start 1");
    let other = answer(&server.url, &body("reuse", 1, Some("k-2"))).await;
    assert_eq!(other["error"]["code"], -32602, "{other}");
    assert_eq!(other["error"]["data"]["reason"], "idempotency_key_reused", "{other}");
    for bad in [json!(""), json!(7), json!("a key with spaces")] {
        let mut b = body("reuse", 0, None);
        b["params"]["_meta"]["dev.forkless/idempotencyKey"] = bad.clone();
        let refused = answer(&server.url, &b).await;
        assert_eq!(refused["error"]["data"]["reason"], "idempotency_key_malformed", "{bad}: {refused}");
    }
    assert_eq!(starts(&effects, "reuse"), 1, "no refused request ran");
    let discover = json!({ "jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {
        "_meta": { "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {} } } });
    let found = answer(&server.url, &discover).await;
    let extension = &found["result"]["capabilities"]["extensions"]["dev.forkless/idempotency"];
    assert_eq!(extension["metaKey"], "dev.forkless/idempotencyKey", "{found}");
    assert!(extension["ttlMs"].as_u64().is_some_and(|ms| ms > 0), "{found}");
    server.terminate();
}

/// An explicit cancellation naming the key stops the execution; a re-issue gets `-32800`, and
/// the call never runs again.
#[tokio::test]
async fn a_cancellation_naming_the_key_cancels_and_the_reissue_says_so() {
    let effects = effects_dir();
    let server = serve(&effects, &["--store", "memory"]).await;
    let keyed = body("cancelled", 60_000, Some("k-3"));
    cut_after_start(&server.url, &keyed, &effects, "cancelled").await;
    let cancel = json!({ "jsonrpc": "2.0", "method": "notifications/cancelled", "params": {
        "requestId": 1, "_meta": { "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}, "dev.forkless/idempotencyKey": "k-3" } } });
    let sent = post(&server.url, &cancel).send().await.expect("send");
    assert_eq!(sent.status(), 202);
    let again = answer(&server.url, &keyed).await;
    assert_eq!(again["error"]["code"], -32800, "{again}");
    assert_eq!(starts(&effects, "cancelled"), 1);
    server.terminate();
}

/// On the durable default across `kill -9`: a keyed call answered before the kill is answered
/// the same after it, and one the kill interrupted is answered `owner_lost`, never run again.
#[tokio::test]
async fn a_keyed_call_across_kill_9_is_answered_the_same_or_owner_lost_never_twice() {
    let effects = effects_dir();
    let data = fresh_data_dir().display().to_string();
    let args = ["--data-dir", data.as_str()];
    let server = serve(&effects, &args).await;
    let done = body("answered", 0, Some("k-4"));
    let first = answer(&server.url, &done).await;
    assert_eq!(text(&first), "answered: start 1");
    let interrupted = body("interrupted", 60_000, Some("k-5"));
    cut_after_start(&server.url, &interrupted, &effects, "interrupted").await;
    server.signal("KILL");
    let _ = server.wait().await;

    let server = serve(&effects, &args).await;
    assert_eq!(answer(&server.url, &done).await, first, "the same answer after the crash");
    let lost = answer(&server.url, &interrupted).await;
    assert_eq!(lost["error"]["data"]["reason"], "owner_lost", "{lost}");
    assert_eq!((starts(&effects, "answered"), starts(&effects, "interrupted")), (1, 1), "never twice");
    server.terminate();
}

/// Two nodes on one shared store: a keyed call cut on the first node and re-issued on the
/// second waits for the first execution and gets its answer; once the first node is killed
/// after answering, the second still answers the same; a call the kill interrupted is
/// answered `owner_lost` once the second node settles the lost node's work.
async fn reissued_through_another_node(backend: Backend) {
    let Some(shared) = SharedStore::fresh(backend).await else { return };
    let effects = effects_dir();
    let node = |name: &'static str| {
        let store = shared.store.clone();
        let effects = effects.clone();
        async move { serve(&effects, &["--store", &store, "--node-id", name, "--lease-ttl", "1000"]).await }
    };
    let (a, b) = (node("a").await, node("b").await);
    let keyed = body("across", 500, Some("k-6"));
    cut_after_start(&a.url, &keyed, &effects, "across").await;
    let on_b = answer(&b.url, &keyed).await;
    assert_eq!(text(&on_b), "across: start 1", "{on_b}");
    let interrupted = body("cut-by-loss", 60_000, Some("k-7"));
    cut_after_start(&a.url, &interrupted, &effects, "cut-by-loss").await;
    a.signal("KILL");
    let _ = a.wait().await;
    assert_eq!(answer(&b.url, &keyed).await, on_b, "the same answer with its node gone");
    let lost = answer(&b.url, &interrupted).await;
    assert_eq!(lost["error"]["data"]["reason"], "owner_lost", "{lost}");
    assert_eq!((starts(&effects, "across"), starts(&effects, "cut-by-loss")), (1, 1), "never twice");
    b.terminate();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reissued_through_another_node_on_postgres() {
    reissued_through_another_node(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reissued_through_another_node_on_redis() {
    reissued_through_another_node(Backend::Redis).await;
}

/// `rounds` times: a keyed call started (its side effect counted) and the server killed
/// (`kill -9`) at once, restarted on the same files, the call re-issued; what went wrong.
/// With `early`, the store acknowledges its writes before their sync (its test hook). A long
/// batch window (200 ms) keeps an early-acknowledged key out of the log for longer than the
/// call takes to start, so the kill lands inside it (the correct rounds wait it out).
async fn reissued_after_a_kill_at_the_start(rounds: usize, early: bool) -> Vec<String> {
    let effects = effects_dir();
    let data = fresh_data_dir().display().to_string();
    let args = ["--data-dir", data.as_str(), "--batch-window", "200"];
    let env: &[(&str, &str)] = if early { &[("FORKLESS_TEST_EARLY_DELIVERY", "1")] } else { &[] };
    let mut server = serve_with(&effects, &args, env).await;
    let mut wrong = Vec::new();
    for r in 0..rounds {
        let (label, key) = (format!("killed-{r}"), format!("k-killed-{r}"));
        let call = body(&label, 60_000, Some(&key));
        cut_after_start(&server.url, &call, &effects, &label).await;
        server.signal("KILL");
        let _ = server.wait().await;
        server = serve_with(&effects, &args, env).await;
        // `owner_lost` comes at once; a call run again would take its minute.
        let again = tokio::time::timeout(Duration::from_secs(2), answer(&server.url, &call)).await;
        let runs = starts(&effects, &label);
        match again {
            Ok(again) if again["error"]["data"]["reason"] == "owner_lost" && runs == 1 => {}
            Ok(again) => wrong.push(format!("{key}: re-issued after the kill: {again}, {runs} execution(s)")),
            Err(_) => wrong.push(format!("{key}: the re-issue ran the call again ({runs} executions)")),
        }
    }
    server.terminate();
    wrong
}

/// A key is durable before its call runs: killed the moment the call started, the server
/// answers the re-issue `owner_lost` and never runs it again.
#[tokio::test]
async fn a_keyed_call_started_just_before_kill_9_is_never_run_again() {
    let wrong = reissued_after_a_kill_at_the_start(5, false).await;
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The negative control: with writes acknowledged before their sync, the same rounds run a
/// keyed call a second time (measured: in every round, thirty of thirty).
#[tokio::test]
async fn negative_control_a_key_acknowledged_before_its_sync_is_caught() {
    let wrong = reissued_after_a_kill_at_the_start(3, true).await;
    assert!(!wrong.is_empty(), "no keyed call ran twice in three rounds");
}
