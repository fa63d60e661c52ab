//! `forkless gateway` in front of real stdio MCP servers written by others
//! (`@modelcontextprotocol/server-everything` from npm, `mcp-server-time` from PyPI), as
//! real processes: the official SDK clients through it, a resumed stream, a child killed
//! mid-call, idle reaping, `--max-children`, shared mode, and no child left behind.
//!
//! The servers are installed project-locally by `scripts/peers/install.sh`; without them
//! these tests say so and pass locally, but fail under `CI=true`.

mod support;

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::{Value, json};
use support::gateway::{all_gone, children, everything};
use support::{
    Serve, Session, SseReader, fresh_data_dir, guard, peer, peer_passes, peer_passes_with, running,
};

fn long_call(steps: u64, seconds: u64, token: &str) -> Value {
    json!({
        "name": "trigger-long-running-operation",
        "arguments": { "duration": seconds, "steps": steps },
        "_meta": { "progressToken": token },
    })
}

#[tokio::test]
async fn python_sdk_v1_uses_server_everything_through_the_gateway() {
    let (Some(child), Some(py)) = (everything(), peer(".peers/py/bin/python")) else { return };
    let gw = Serve::gateway(&[], &child).await;
    peer_passes(&py, "tests/interop/gateway/everything.py", &gw.url, &[]).await;
}

#[tokio::test]
async fn python_sdk_v1_resumes_a_cut_stream_through_the_gateway_with_its_resumption_token() {
    let (Some(child), Some(py)) = (everything(), peer(".peers/py/bin/python")) else { return };
    let gw = Serve::gateway(&[], &child).await;
    let tool = [
        "--tool",
        "trigger-long-running-operation",
        "--args",
        r#"{"duration": 3, "steps": 30}"#,
        "--progress",
    ];
    peer_passes_with(&py, "tests/interop/python/client_resume.py", &gw.url, &tool, &[]).await;
}

#[tokio::test]
async fn typescript_sdk_v1_uses_server_everything_through_the_gateway() {
    let (Some(child), Some(_sdk)) =
        (everything(), peer(".peers/node/node_modules/@modelcontextprotocol/sdk"))
    else {
        return;
    };
    let gw = Serve::gateway(&[], &child).await;
    peer_passes(Path::new("node"), "tests/interop/gateway/everything.mjs", &gw.url, &[]).await;
}

#[tokio::test]
async fn typescript_sdk_v1_resumes_a_cut_stream_through_the_gateway_with_its_resumption_token() {
    let (Some(child), Some(_sdk)) =
        (everything(), peer(".peers/node/node_modules/@modelcontextprotocol/sdk"))
    else {
        return;
    };
    let gw = Serve::gateway(&[], &child).await;
    let tool = [
        "--tool",
        "trigger-long-running-operation",
        "--args",
        r#"{"duration": 3, "steps": 30}"#,
        "--progress",
    ];
    peer_passes_with(Path::new("node"), "tests/interop/ts/client_resume.mjs", &gw.url, &tool, &[]).await;
}

#[tokio::test]
async fn python_sdk_v2_falls_back_and_uses_mcp_server_time_through_the_gateway() {
    let (Some(time), Some(py)) = (peer(".peers/py2/bin/mcp-server-time"), peer(".peers/py2/bin/python"))
    else {
        return;
    };
    let gw = Serve::gateway(&[], &[time.display().to_string()]).await;
    peer_passes(&py, "tests/interop/gateway/time_v2.py", &gw.url, &[]).await;
}

/// With `--revisions all` the gateway serves 2026-07-28 too: the Python SDK v2 client in auto
/// mode takes it, and each of its requests is served statelessly on a child of its own
/// (tools, a call, progress in order); the discover result names the child, not the gateway.
#[tokio::test]
async fn python_sdk_v2_takes_2026_07_28_through_a_gateway_that_offers_it() {
    let (Some(child), Some(py)) = (everything(), peer(".peers/py2/bin/python")) else { return };
    let gw = Serve::gateway(&["--revisions", "all"], &child).await;
    peer_passes_with(&py, "tests/interop/gateway/everything_v2.py", &gw.url, &["--current"], &[]).await;
    let discover = reqwest::Client::new()
        .post(&gw.url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "server/discover")
        .json(&json!({ "jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": { "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {} } } }))
        .send()
        .await
        .expect("discover");
    let body: Value = discover.json().await.expect("a JSON body");
    let name = body.pointer("/result/_meta/io.modelcontextprotocol~1serverInfo/name").and_then(Value::as_str);
    assert!(name.is_some_and(|n| n.starts_with("mcp-servers/everything")), "{body}");
    assert!(body.pointer("/result/capabilities/tools").is_some(), "{body}");
}

/// A stdio server's own request to its client mid-call (`elicitation/create`), for a
/// 2026-07-28 client: an `input_required` round while the call waits in the gateway; the
/// client's retry brings the answer to the same child, which finishes the call once.
#[tokio::test]
async fn a_servers_elicitation_reaches_a_2026_client_as_a_round_and_the_call_finishes_once() {
    let Some(child) = everything() else { return };
    let gw = Serve::gateway(&["--revisions", "all"], &child).await;
    let asked = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = std::sync::Arc::clone(&asked);
    let input = forkless_client::handler_fn(move |method: String, _params| {
        let counted = std::sync::Arc::clone(&counted);
        async move {
            assert_eq!(method, "elicitation/create");
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok(json!({ "action": "accept", "content": {
                "name": "Ada Lovelace", "check": true, "email": "ada@example.com" } }))
        }
    });
    let settings =
        forkless_client::CurrentSettings { input: std::sync::Arc::new(input), ..Default::default() };
    let client =
        forkless_client::CurrentClient::connect(&gw.url, settings).await.expect("2026-07-28 offered");
    let result = guard("the elicitation round", client.call_tool("trigger-elicitation-request", json!({})))
        .await
        .expect("the call's result");
    assert_eq!(asked.load(std::sync::atomic::Ordering::SeqCst), 1, "asked once");
    let text = result.to_string();
    assert!(text.contains("Ada Lovelace") && text.contains("accept"), "the child got the answer: {result}");
    // A round that names no waiting call (forged, expired or another node's) is refused by
    // name, never run again: a retry of a state the client never got is not accepted either.
    let stale = reqwest::Client::new()
        .post(&gw.url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "trigger-elicitation-request")
        .json(&json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "trigger-elicitation-request", "arguments": {}, "requestState": "forged",
            "inputResponses": {},
            "_meta": { "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                       "io.modelcontextprotocol/clientCapabilities": { "elicitation": {} } } } }))
        .send()
        .await
        .expect("a retry");
    let body = stale.text().await.expect("a body");
    assert!(body.contains("-32602"), "a forged state is refused: {body}");
}

#[tokio::test]
async fn a_cut_stream_resumes_exactly_after_its_cursor_through_the_gateway() {
    let Some(child) = everything() else { return };
    let gw = Serve::gateway(&[], &child).await;
    let (mut s, _) = Session::open(&gw.url).await;
    let (id, response) = s.send("tools/call", long_call(10, 2, "cut")).await;
    let stream =
        response.headers().get("mcp-stream-id").expect("a request stream").to_str().unwrap().to_owned();
    let mut sse = SseReader::new(response);
    let mut seen = Vec::new();
    let mut last = String::new();
    while seen.len() < 3 {
        let (event, message) = guard("progress", sse.next_message()).await.expect("progress before the cut");
        assert_eq!(message["params"]["progressToken"], "cut", "{message}");
        seen.push(message["params"]["progress"].as_u64().expect("a progress value"));
        last = event.id.expect("an event id");
    }
    drop(sse); // the connection is cut; the child goes on
    let mut resumed = SseReader::new(s.resume(&last, Some(&stream)).await);
    let answer = loop {
        let (_, message) =
            guard("the rest", resumed.next_message()).await.expect("the stream goes on to the answer");
        match message.get("id") {
            Some(got) => break (got.clone(), message),
            None => seen.push(message["params"]["progress"].as_u64().expect("a progress value")),
        }
    };
    assert_eq!(seen, (1..=10).collect::<Vec<_>>(), "every progress notification once, in order");
    assert_eq!(answer.0, id, "then the answer to the call");
    assert!(answer.1.get("result").is_some(), "{}", answer.1);
}

#[tokio::test]
async fn a_killed_child_answers_the_call_in_flight_with_its_id_then_404_and_is_not_restarted() {
    let Some(child) = everything() else { return };
    let gw = Serve::gateway(&[], &child).await;
    let (mut s, _) = Session::open(&gw.url).await;
    let pid = children(&gw, 1).await[0];
    let (id, response) = s.send("tools/call", long_call(30, 30, "k")).await;
    let mut sse = SseReader::new(response);
    let (_, first) = guard("first progress", sse.next_message()).await.expect("the call is running");
    assert_eq!(first["method"], "notifications/progress");
    let killed = std::process::Command::new("kill").args(["-9", &pid.to_string()]).status().expect("kill");
    assert!(killed.success());
    let answer = loop {
        let (_, message) =
            guard("the answer", sse.next_message()).await.expect("an answer, not a silent end");
        if message.get("id").is_some() {
            break message;
        }
    };
    assert_eq!(answer["id"], id, "{answer}");
    assert_eq!(answer["error"]["data"]["reason"], "backend_exited", "{answer}");
    let next =
        s.send_unchecked("tools/call", json!({ "name": "echo", "arguments": { "message": "x" } })).await;
    assert_eq!(next.status(), 404);
    let body: Value = next.json().await.unwrap();
    assert_eq!(body["error"]["data"]["reason"], "backend_exited", "{body}");
    let now: Vec<u32> = gw.children().into_iter().filter(|p| running(*p)).collect();
    assert!(now.is_empty(), "no child started again: {now:?}");
}

#[tokio::test]
async fn stopping_the_gateway_stops_every_child_and_what_it_started() {
    let Some(child) = everything() else { return };
    // A child that is a shell running the server (so the server is a grandchild) and that
    // prints a line that is not JSON first: the line is skipped, the group is stopped whole.
    let script = format!("echo 'this is not JSON'; {} {} {}", child[0], child[1], child[2]);
    let gw = Serve::gateway(&[], &["sh".into(), "-c".into(), script]).await;
    let (mut a, _) = Session::open(&gw.url).await;
    let (mut b, _) = Session::open(&gw.url).await;
    for s in [&mut a, &mut b] {
        let echo = s.call_tool("echo", json!({ "message": "through the noise" })).await;
        assert!(
            echo.result()["content"][0]["text"].as_str().is_some_and(|t| t.contains("through the noise"))
        );
    }
    let shells = children(&gw, 2).await;
    let mut all: BTreeSet<u32> = shells.iter().copied().collect();
    for shell in &shells {
        all.extend(support::children_of(*shell));
    }
    assert!(all.len() >= 4, "two shells and their servers: {all:?}");
    gw.terminate();
    let (status, _) = gw.wait().await;
    assert!(status.success(), "{status}");
    all_gone(&all.into_iter().collect::<Vec<_>>(), "every child and grandchild to be gone").await;
}

#[tokio::test]
async fn at_max_children_initialize_is_refused_with_503() {
    let Some(child) = everything() else { return };
    let gw = Serve::gateway(&["--max-children", "1"], &child).await;
    let (_first, _) = Session::open(&gw.url).await;
    let refused = Session::initialize_raw(&gw.url).await;
    assert_eq!(refused.status(), 503);
    assert!(refused.headers().get("retry-after").is_some());
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["data"]["reason"], "max_sessions", "{body}");
    assert_eq!(children(&gw, 1).await.len(), 1, "no child started for the refused session");
}

#[tokio::test]
async fn an_idle_session_is_reaped_with_its_child_even_with_a_get_stream_open() {
    let Some(child) = everything() else { return };
    let gw = Serve::gateway(&["--idle-ttl", "1s"], &child).await;
    let (mut s, _) = Session::open(&gw.url).await;
    let _standalone = s.get_stream().await;
    let pid = children(&gw, 1).await[0];
    all_gone(&[pid], "the idle session's child to be stopped").await;
    let next = s.send_unchecked("tools/list", json!({})).await;
    assert_eq!(next.status(), 404);
    let body: Value = next.json().await.unwrap();
    assert_eq!(body["error"]["data"]["reason"], "idle_expired", "{body}");
}

#[tokio::test]
async fn shared_mode_keeps_sessions_apart_on_one_child() {
    let Some(child) = everything() else { return };
    let gw = Serve::gateway(&["--mode", "shared"], &child).await;
    let (mut a, _) = Session::open(&gw.url).await;
    let (mut b, _) = Session::open(&gw.url).await;
    // The same request id and progress token in both sessions, at once.
    let ((ida, ra), (idb, rb)) = tokio::join!(
        a.send("tools/call", long_call(5, 1, "same")),
        b.send("tools/call", long_call(5, 1, "same"))
    );
    assert_eq!(ida, idb);
    let read = |response| async move {
        let mut sse = SseReader::new(response);
        let mut progress = Vec::new();
        loop {
            let (_, message) = guard("the call", sse.next_message()).await.expect("the answer");
            if message.get("id").is_some() {
                return (progress, message);
            }
            assert_eq!(message["params"]["progressToken"], "same", "{message}");
            progress.push(message["params"]["progress"].as_u64().unwrap());
        }
    };
    let ((pa, answer_a), (pb, answer_b)) = tokio::join!(read(ra), read(rb));
    assert_eq!(pa, [1, 2, 3, 4, 5], "session a saw only its own progress");
    assert_eq!(pb, [1, 2, 3, 4, 5], "session b saw only its own progress");
    assert!(answer_a.get("result").is_some() && answer_b.get("result").is_some());
    assert_eq!(children(&gw, 1).await.len(), 1, "one child for both");
}

#[tokio::test]
async fn after_a_kill_9_and_restart_a_session_reads_what_it_was_sent_and_its_lost_answer_then_404() {
    let Some(child) = everything() else { return };
    let dir = fresh_data_dir();
    let data = ["--data-dir", dir.to_str().unwrap(), "--durability", "immediate"];
    let gw = Serve::gateway(&data, &child).await;
    let (mut s, _) = Session::open(&gw.url).await;
    let (id, response) = s.send("tools/call", long_call(20, 20, "r")).await;
    let stream =
        response.headers().get("mcp-stream-id").expect("a request stream").to_str().unwrap().to_owned();
    let mut sse = SseReader::new(response);
    let mut seen = Vec::new();
    let mut last = String::new();
    while seen.len() < 2 {
        let (event, message) = guard("progress", sse.next_message()).await.expect("progress before the kill");
        seen.push(message["params"]["progress"].as_u64().expect("a progress value"));
        last = event.id.expect("an event id");
    }
    let addr = gw.addr();
    gw.signal("KILL");
    let _ = gw.wait().await;
    drop(sse);
    let gw = Serve::gateway_at(&addr, &data, &child).await;
    // Its child died with the gateway: the session cannot go on, but its client reads every
    // event it was sent after its cursor, then the answer to the lost call, with its id.
    let mut resumed = SseReader::new(s.resume(&last, Some(&stream)).await);
    let answer = loop {
        let (_, message) = guard("the rest", resumed.next_message()).await.expect("the lost call's answer");
        match message.get("id") {
            Some(_) => break message,
            None => seen.push(message["params"]["progress"].as_u64().expect("a progress value")),
        }
    };
    let expected: Vec<u64> = (1..=seen.len() as u64).collect();
    assert_eq!(seen, expected, "each progress notification once, in order, none renumbered");
    assert_eq!(answer["id"], id, "{answer}");
    assert!(answer.get("error").is_some(), "{answer}");
    // Then the session is over: never re-created with a new child under the old id.
    let next = s.send_unchecked("tools/list", json!({})).await;
    assert_eq!(next.status(), 404);
    let body: Value = next.json().await.unwrap();
    assert_eq!(body["error"]["data"]["reason"], "owner_lost", "{body}");
    assert!(gw.children().iter().all(|p| !running(*p)), "no child started for the lost session");
}

/// `forkless check` says what it could not judge: through the gateway, server-everything's
/// long operation numbers its work only by progress, so without `--progress` the request
/// stream carries none of the numbered events: `churn` (like the scenarios that read to an
/// event) is UNSUPPORTED and suggests `--progress`, never a FAIL with every event "missing";
/// with `--progress` it passes.
#[tokio::test]
async fn check_says_unsupported_and_suggests_progress_when_no_numbered_event_arrives() {
    let Some(child) = everything() else { return };
    let gw = Serve::gateway(&[], &child).await;
    let tool =
        ["--tool", "trigger-long-running-operation", "--args", r#"{"duration": 3, "steps": "$count"}"#];
    let churn = |extra: &'static [&'static str]| {
        let url = gw.url.clone();
        async move {
            let args: Vec<&str> =
                [&["check", url.as_str(), "--json", "--only", "churn"][..], &tool[..], extra].concat();
            let (_, stdout) = support::forkless(&args).await;
            let report: Value =
                serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"));
            report["scenarios"][0].clone()
        }
    };
    let without = churn(&[]).await;
    assert_eq!(without["verdict"], "UNSUPPORTED", "{without}");
    let said = without.to_string();
    assert!(said.contains("none of its"), "nothing it counts arrived, and it says so: {without}");
    assert!(said.contains("--progress"), "the output suggests --progress: {without}");
    let with = churn(&["--progress"]).await;
    assert_eq!(with["verdict"], "PASS", "{with}");
}
