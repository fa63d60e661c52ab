//! The tasks extension over HTTP (2026-07-28): a request that declared it becomes a task the
//! client reads with `tasks/get`, answers with `tasks/update` and cancels with `tasks/cancel`;
//! a client that did not declare it is refused `-32021`; a task is bound to its principal, so
//! another principal's `tasks/get` of its id reads as unknown.

mod common;

use common::TestServer;
use forkless_server::{PrincipalFn, ServerConfig};
use serde_json::{Value, json};

/// The `_meta` of a 2026-07-28 request; `tasks` declares the extension.
fn meta(tasks: bool) -> Value {
    let extensions = if tasks { json!({ "io.modelcontextprotocol/tasks": {} }) } else { json!({}) };
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": { "extensions": extensions },
    })
}

/// POST `method` with `params` (and `_meta`) as `user`; the HTTP status and the JSON-RPC answer.
async fn rpc(server: &TestServer, user: &str, method: &str, params: Value, tasks: bool) -> (u16, Value) {
    post(server, &[("x-user", user)], method, params, tasks).await
}

/// POST `method` with `params` (and `_meta`) and `headers` besides the revision's.
async fn post(
    server: &TestServer,
    headers: &[(&str, &str)],
    method: &str,
    mut params: Value,
    tasks: bool,
) -> (u16, Value) {
    params["_meta"] = meta(tasks);
    let name = params.get("taskId").and_then(Value::as_str).map(str::to_owned);
    let mut rb = reqwest::Client::new()
        .post(&server.url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method);
    for (name, value) in headers {
        rb = rb.header(*name, *value);
    }
    if let Some(name) = name {
        rb = rb.header("mcp-name", name);
    }
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params });
    let resp = rb.body(body.to_string()).send().await.expect("send");
    let status = resp.status().as_u16();
    let text = resp.text().await.expect("body");
    let last = text.lines().filter_map(|l| l.strip_prefix("data:")).next_back().unwrap_or(&text);
    (status, serde_json::from_str(last.trim()).expect("a JSON-RPC answer"))
}

fn config() -> ServerConfig {
    let principal = PrincipalFn::new(|h| h.get("x-user").and_then(|v| v.to_str().ok()).map(str::to_owned));
    ServerConfig { principal: Some(principal), ..ServerConfig::default() }
}

async fn server() -> TestServer {
    TestServer::start(config()).await
}

#[tokio::test]
async fn a_task_is_created_read_answered_and_completed_by_its_principal_only() {
    a_task_runs_for_its_principal_only(server().await).await;
}

/// The same on a store with nothing but sessions and logs: the process keeps the task.
#[tokio::test]
async fn on_a_store_without_tasks_the_process_keeps_them() {
    a_task_runs_for_its_principal_only(TestServer::start_core_only(config()).await).await;
}

async fn a_task_runs_for_its_principal_only(server: TestServer) {
    let (status, created) = rpc(&server, "alice", "as-task", json!({ "x": 7 }), true).await;
    assert_eq!(status, 200, "{created}");
    let created = &created["result"];
    assert_eq!(created["resultType"], "task", "{created}");
    let id = created["taskId"].as_str().expect("a task id").to_owned();
    let task = json!({ "taskId": id });

    // Bob knows the id but is told it does not exist; Alice sees her task wait for input.
    let (_, bob) = rpc(&server, "bob", "tasks/get", task.clone(), true).await;
    assert_eq!(bob["error"]["code"], -32602, "{bob}");
    let (_, bob) =
        rpc(&server, "bob", "tasks/update", json!({ "taskId": id, "inputResponses": { "go": 1 } }), true)
            .await;
    // Acknowledged as for an id that names no task (SEP-2663), and changes nothing: Alice's
    // answer below is the one the work gets.
    assert_eq!(bob["result"], json!({ "resultType": "complete" }), "another principal cannot answer: {bob}");
    let waiting = loop {
        let (_, got) = rpc(&server, "alice", "tasks/get", task.clone(), true).await;
        if got["result"]["status"] == "input_required" {
            break got["result"].clone();
        }
        tokio::task::yield_now().await;
    };
    assert!(waiting["inputRequests"].get("go").is_some(), "{waiting}");

    let (_, ack) = rpc(
        &server,
        "alice",
        "tasks/update",
        json!({ "taskId": id, "inputResponses": { "go": "yes" } }),
        true,
    )
    .await;
    assert_eq!(ack["result"], json!({ "resultType": "complete" }), "{ack}");
    let done = loop {
        let (_, got) = rpc(&server, "alice", "tasks/get", task.clone(), true).await;
        if got["result"]["status"] == "completed" {
            break got["result"].clone();
        }
        tokio::task::yield_now().await;
    };
    assert_eq!(done["result"]["answers"], json!({ "go": "yes" }), "{done}");
    assert_eq!(done["result"]["asked"]["x"], 7, "{done}");
}

#[tokio::test]
async fn without_the_extension_tasks_are_refused_with_the_capability_they_need() {
    let server = server().await;
    for (method, params) in [
        ("as-task", json!({})),
        ("tasks/get", json!({ "taskId": "gate" })),
        ("tasks/cancel", json!({ "taskId": "gate" })),
    ] {
        let (status, v) = rpc(&server, "alice", method, params, false).await;
        assert_eq!((status, v["error"]["code"].as_i64()), (400, Some(-32021)), "{method}: {v}");
        assert!(
            v["error"]["data"]["requiredCapabilities"]["extensions"]["io.modelcontextprotocol/tasks"]
                .is_object()
        );
    }
    for removed in ["tasks/result", "tasks/list"] {
        let (status, v) = rpc(&server, "alice", removed, json!({ "taskId": "x" }), true).await;
        assert_eq!((status, v["error"]["code"].as_i64()), (404, Some(-32601)), "{removed}: {v}");
    }
}

#[tokio::test]
async fn a_cancelled_task_stays_cancelled_and_discover_advertises_the_extension() {
    let server = server().await;
    let (_, created) = rpc(&server, "alice", "as-task", json!({}), true).await;
    let task = json!({ "taskId": created["result"]["taskId"] });
    let (_, ack) = rpc(&server, "alice", "tasks/cancel", task.clone(), true).await;
    assert_eq!(ack["result"], json!({ "resultType": "complete" }), "{ack}");
    let (_, got) = rpc(&server, "alice", "tasks/get", task.clone(), true).await;
    assert_eq!(got["result"]["status"], "cancelled", "{got}");
    let (_, again) = rpc(&server, "alice", "tasks/cancel", task, true).await;
    assert_eq!(again["result"], json!({ "resultType": "complete" }), "idempotent: {again}");
    let (_, discover) = rpc(&server, "alice", "server/discover", json!({}), false).await;
    let extensions = &discover["result"]["capabilities"]["extensions"];
    assert_eq!(extensions["io.modelcontextprotocol/tasks"], json!({}), "{discover}");
}

/// Round two of `rounds` as `user`, echoing `state`.
async fn second_round(server: &TestServer, user: &str, state: &Value) -> Value {
    rpc(
        server,
        user,
        "rounds",
        json!({ "inputResponses": { "go": { "roots": [] } }, "requestState": state }),
        false,
    )
    .await
    .1
}

#[tokio::test]
async fn a_request_state_is_sealed_by_the_server_and_accepted_once_for_its_principal() {
    a_request_state_is_accepted_once(server().await).await;
}

/// The same on a store that cannot spend keys: the process keeps its own ledger.
#[tokio::test]
async fn on_a_store_without_spending_the_process_spends_request_states_once() {
    a_request_state_is_accepted_once(TestServer::start_core_only(config()).await).await;
}

async fn a_request_state_is_accepted_once(server: TestServer) {
    let (_, first) = rpc(&server, "alice", "rounds", json!({}), false).await;
    assert_eq!(first["result"]["resultType"], "input_required", "{first}");
    let state = first["result"]["requestState"].clone();
    assert!(!state.as_str().unwrap_or_default().contains("round"), "sealed, not readable: {state}");

    // Bob cannot use it, and his attempt does not use it up.
    let bob = second_round(&server, "bob", &state).await;
    assert_eq!(
        (bob["error"]["code"].as_i64(), &bob["error"]["data"]["reason"]),
        (Some(-32602), &json!("other_principal")),
        "{bob}"
    );
    let done = second_round(&server, "alice", &state).await;
    assert_eq!(done["result"]["state"], json!({ "round": 1 }), "{done}");
    let again = second_round(&server, "alice", &state).await;
    assert_eq!(again["error"]["data"]["reason"], "replayed", "{again}");
    assert!(again.get("result").is_none(), "a replay never reaches the handler: {again}");

    let mut altered = state.as_str().unwrap_or_default().to_owned();
    let last = altered.pop().map_or('A', |c| if c == 'A' { 'B' } else { 'A' });
    altered.push(last);
    let tampered = second_round(&server, "alice", &json!(altered)).await;
    assert_eq!(tampered["error"]["code"], -32602, "{tampered}");
    assert!(
        ["tampered", "malformed"].contains(&tampered["error"]["data"]["reason"].as_str().unwrap_or_default()),
        "{tampered}"
    );
    let wrong_type = second_round(&server, "alice", &json!(7)).await;
    assert_eq!(wrong_type["error"]["code"], -32602, "{wrong_type}");
}

/// Two servers on one store with one key ring (two nodes): a state sealed on one opens on the
/// other, once; the second use is refused on either, because the store spends its id.
#[tokio::test]
async fn a_request_state_is_accepted_once_across_servers_sharing_a_store() {
    let ring = format!("k1:{}", "5a".repeat(32));
    let keys = forkless_server::request_state::RequestStateKeys::parse(&ring).expect("ring");
    let with_keys = || {
        let mut cfg = config();
        cfg.request_state.keys = keys.clone();
        cfg
    };
    let a = TestServer::start(with_keys()).await;
    let b = TestServer::start_on(a.store.clone(), with_keys()).await;
    let (_, first) = rpc(&a, "alice", "rounds", json!({}), false).await;
    let state = first["result"]["requestState"].clone();
    let on_b = second_round(&b, "alice", &state).await;
    assert_eq!(on_b["result"]["state"], json!({ "round": 1 }), "sealed on a, opened on b: {on_b}");
    let back_on_a = second_round(&a, "alice", &state).await;
    assert_eq!(back_on_a["error"]["data"]["reason"], "replayed", "{back_on_a}");

    // A server with its own key (the default) cannot open it at all.
    let c = TestServer::start_on(a.store.clone(), config()).await;
    let (_, fresh) = rpc(&a, "alice", "rounds", json!({}), false).await;
    let on_c = second_round(&c, "alice", &fresh["result"]["requestState"]).await;
    assert_eq!(on_c["error"]["data"]["reason"], "unknown_key", "{on_c}");

    // A server restarted on a fresh store of one process (whose memory of spent states
    // begins after the state was sealed) cannot vouch for it: refused, never accepted twice.
    let (_, sealed) = rpc(&a, "alice", "rounds", json!({}), false).await;
    let after_seal = wall_ms();
    while wall_ms() <= after_seal {
        tokio::task::yield_now().await;
    }
    let restarted = TestServer::start_on(forkless_store::MemoryStore::new(), with_keys()).await;
    let on_restarted = second_round(&restarted, "alice", &sealed["result"]["requestState"]).await;
    assert_eq!(on_restarted["error"]["data"]["reason"], "unvouched", "{on_restarted}");
}

fn wall_ms() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis())
}

/// A state answered after its time to live is refused `expired`, and never reaches the handler.
#[tokio::test]
async fn a_request_state_past_its_time_to_live_is_refused_expired() {
    let mut cfg = config();
    cfg.request_state.ttl = std::time::Duration::from_millis(1);
    let server = TestServer::start(cfg).await;
    let (_, first) = rpc(&server, "alice", "rounds", json!({}), false).await;
    let sealed_by = wall_ms();
    while wall_ms() <= sealed_by + 1 {
        tokio::task::yield_now().await;
    }
    let late = second_round(&server, "alice", &first["result"]["requestState"]).await;
    assert_eq!(late["error"]["code"], -32602, "{late}");
    assert_eq!(late["error"]["data"]["reason"], "expired", "{late}");
    assert!(late.get("result").is_none(), "{late}");
}

/// POST `as-task` from client address `from` (named by the trusted proxy on loopback), with no
/// principal: the JSON-RPC answer.
async fn task_from(server: &TestServer, from: &str) -> Value {
    let forwarded = format!("{from}, 127.0.0.1");
    post(server, &[("x-forwarded-for", forwarded.as_str())], "as-task", json!({}), true).await.1
}

/// Without auth, tasks are shared out per client address: one address at its share is
/// refused (typed), another creates at once.
fn per_address(trusted: bool) -> ServerConfig {
    let mut cfg = ServerConfig::default();
    cfg.tasks.max_tasks_per_principal = 2;
    if trusted {
        cfg.quotas.trusted_proxies = vec!["127.0.0.1".parse().unwrap()];
    }
    cfg
}

#[tokio::test]
async fn without_auth_each_client_address_has_its_share_of_the_tasks() {
    let server = TestServer::start(per_address(true)).await;
    for _ in 0..2 {
        let created = task_from(&server, "203.0.113.1").await;
        assert!(created["result"]["taskId"].is_string(), "{created}");
    }
    let refused = task_from(&server, "203.0.113.1").await;
    assert_eq!(refused["error"]["data"]["reason"], "max_tasks_per_principal", "{refused}");
    let other = task_from(&server, "198.51.100.9").await;
    assert!(other["result"]["taskId"].is_string(), "another address is not held back: {other}");
}

/// The negative control: every client seen as one address (the proxy not trusted) shares one
/// share, and the second client is refused.
#[tokio::test]
async fn negative_control_one_share_for_everyone_locks_the_second_client_out() {
    let server = TestServer::start(per_address(false)).await;
    for _ in 0..2 {
        assert!(task_from(&server, "203.0.113.1").await["result"]["taskId"].is_string());
    }
    let other = task_from(&server, "198.51.100.9").await;
    assert_eq!(other["error"]["data"]["reason"], "max_tasks_per_principal", "{other}");
}
