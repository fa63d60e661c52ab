//! `forkless serve` as a real process: start-up line, the demo tools over HTTP and SSE, bad
//! flags, and a clean stop on SIGTERM with a stream still open.

mod support;

use std::time::Duration;

use forkless::demo::Tool;
use serde_json::{Value, json};
use support::{Serve, Session, SseReader, guard, log_data};

/// The numbered log data `#1..#N` with the given prefix.
fn numbered(prefix: &str, n: u64) -> Vec<String> {
    (1..=n).map(|i| format!("{prefix}#{i}")).collect()
}

#[tokio::test]
async fn start_up_line_names_the_bound_address_and_revisions() {
    let serve = Serve::start(&[]).await;
    assert!(serve.url.starts_with("http://127.0.0.1:") && serve.url.ends_with("/mcp"), "{}", serve.url);
    assert!(!serve.url.contains(":0/"), "port 0 must be replaced by the bound port: {}", serve.url);
    assert!(
        serve
            .banner
            .contains("/forkless.redb (batched 5 ms), revisions: 2025-03-26, 2025-06-18, 2025-11-25)"),
        "the durable store and the session revisions are the default: {}",
        serve.banner
    );
    let memory = Serve::start(&["--store", "memory", "--revisions", "all"]).await;
    assert!(
        memory.banner.ends_with("(store: memory, revisions: 2025-03-26, 2025-06-18, 2025-11-25, 2026-07-28)")
    );
    let chosen = Serve::start(&["--store", "memory", "--revisions", "2025-11-25,2026-07-28"]).await;
    assert!(
        chosen.banner.ends_with("(store: memory, revisions: 2025-11-25, 2026-07-28)"),
        "{}",
        chosen.banner
    );
}

/// By default 2026-07-28 is not offered: a request of it is refused with 400 `-32022` naming
/// the session revisions (what an auto-mode client falls back to), and `initialize` asking
/// for a revision not offered is answered with the newest one offered.
#[tokio::test]
async fn revisions_not_offered_are_refused_by_name_and_initialize_falls_back() {
    let serve = Serve::start(&["--store", "memory", "--revisions", "2025-03-26,2025-06-18"]).await;
    let body = json!({ "jsonrpc": "2.0", "id": 3, "method": "server/discover", "params": {
        "_meta": { "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {} } } });
    let refused = reqwest::Client::new()
        .post(&serve.url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "server/discover")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 400);
    let v: Value = refused.json().await.unwrap();
    assert_eq!(v["error"]["code"], -32022, "{v}");
    assert_eq!(v["error"]["data"]["supported"], json!(["2025-06-18", "2025-03-26"]), "{v}");
    let init = json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": "t", "version": "1" } } });
    let answered = reqwest::Client::new()
        .post(&serve.url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(init.to_string())
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let last = answered.lines().filter_map(|l| l.strip_prefix("data:")).next_back().unwrap_or(&answered);
    let init: Value = serde_json::from_str(last.trim()).unwrap();
    assert_eq!(
        init["result"]["protocolVersion"], "2025-06-18",
        "asked for 2025-11-25, given the newest offered"
    );
    let bad = forkless_output_of(&["serve", "--store", "memory", "--revisions", "2024-11-05"]).await;
    assert!(!bad.status.success() && String::from_utf8_lossy(&bad.stderr).contains("--revisions"), "{bad:?}");
}

async fn forkless_output_of(args: &[&str]) -> std::process::Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_forkless"))
        .args(args)
        .output()
        .await
        .expect("run forkless")
}

#[tokio::test]
async fn initialize_and_list_every_demo_tool() {
    let serve = Serve::start(&[]).await;
    let (mut session, init) = Session::open(&serve.url).await;
    assert_eq!(init["serverInfo"]["name"], forkless::demo::SERVER_NAME);
    assert_eq!(init["protocolVersion"], support::REVISION);
    for capability in ["tools", "resources", "prompts", "logging", "completions"] {
        assert!(init["capabilities"][capability].is_object(), "capability {capability}: {init}");
    }

    let listed = session.request("tools/list", json!({})).await;
    let tools = listed.result()["tools"].as_array().expect("tools array").clone();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().expect("name")).collect();
    for tool in Tool::ALL {
        assert!(names.contains(&tool.name()), "{} missing from {names:?}", tool.name());
    }
    for tool in &tools {
        assert_eq!(tool["inputSchema"]["type"], "object", "{tool}");
        assert!(tool["description"].as_str().is_some_and(|d| !d.is_empty()), "{tool}");
    }
}

#[tokio::test]
async fn echo_round_trips() {
    let serve = Serve::start(&[]).await;
    let (mut session, _) = Session::open(&serve.url).await;
    let text = "héllo, forkless \u{1f980}";
    let answer = session.call_tool("echo", json!({ "text": text })).await;
    assert_eq!(answer.result()["content"], json!([{ "type": "text", "text": text }]));
}

#[tokio::test]
async fn bad_arguments_are_invalid_params() {
    let serve = Serve::start(&[]).await;
    let (mut session, _) = Session::open(&serve.url).await;
    let cases = [
        ("echo", json!({})),
        ("echo", json!({ "text": 1 })),
        ("start-notification-stream", json!({ "count": -1 })),
        ("start-notification-stream", json!({ "count": 1_000_000 })),
        ("start-background-stream", json!({ "interval": "fast" })),
        ("long-task", json!({ "steps": 0 })),
        ("no-such-tool", json!({})),
    ];
    for (tool, arguments) in cases {
        let answer = session.call_tool(tool, arguments.clone()).await;
        assert_eq!(answer.error()["code"], -32602, "{tool} {arguments}");
    }
    // The session is still fine afterwards.
    let answer = session.call_tool("echo", json!({ "text": "still here" })).await;
    assert_eq!(answer.result()["content"][0]["text"], "still here");
}

#[tokio::test]
async fn notification_stream_delivers_numbered_events_in_order_on_the_request_stream() {
    let serve = Serve::start(&[]).await;
    let (mut session, _) = Session::open(&serve.url).await;
    let (id, response) = session
        .send(
            "tools/call",
            json!({ "name": "start-notification-stream", "arguments": { "interval": 5, "count": 8 } }),
        )
        .await;
    assert_eq!(response.headers().get("mcp-stream-resumed").map(|v| v.as_bytes()), Some(&b"false"[..]));
    let stream_id =
        response.headers().get("mcp-stream-id").expect("Mcp-Stream-Id").to_str().expect("ascii").to_owned();

    let mut sse = SseReader::new(response);
    let priming = guard("priming event", sse.next_event()).await.expect("priming event");
    assert_eq!(priming.id.as_deref(), Some(format!("{stream_id}.0").as_str()), "priming event id");
    assert!(priming.data.is_empty(), "priming event has empty data");

    let mut messages = Vec::new();
    let mut seqs = Vec::new();
    let response = loop {
        let (event, message) = guard("SSE event", sse.next_message()).await.expect("stream ended early");
        let event_id = event.id.expect("every event has an id");
        let (stream, seq) = event_id.split_once('.').expect("<stream>.<seq>");
        assert_eq!(stream, stream_id);
        seqs.push(seq.parse::<u64>().expect("decimal seq"));
        if message.get("id") == Some(&id) {
            break message;
        }
        messages.push(message);
    };
    assert_eq!(log_data(&messages), numbered("notification ", 8));
    assert!(messages.iter().all(|m| m["params"]["level"] == "info"));
    assert_eq!(seqs, (1..=9).collect::<Vec<u64>>(), "content events are 1, 2, 3 … without gaps");
    assert_eq!(response["result"]["content"][0]["text"], "sent 8 notifications");
    assert!(guard("stream end", sse.next_event()).await.is_none(), "the stream completes after the response");
}

#[tokio::test]
async fn long_task_reports_progress_with_the_token() {
    let serve = Serve::start(&[]).await;
    let (mut session, _) = Session::open(&serve.url).await;
    let answer = session
        .request(
            "tools/call",
            json!({ "name": "long-task", "arguments": { "steps": 4, "interval": 5 }, "_meta": { "progressToken": "tok-1" } }),
        )
        .await;
    let progress: Vec<&Value> = answer
        .before
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .map(|m| &m["params"])
        .collect();
    assert_eq!(progress.len(), 4, "{:?}", answer.before);
    for (i, p) in progress.iter().enumerate() {
        assert_eq!(p["progressToken"], "tok-1");
        assert_eq!(p["progress"].as_f64(), Some((i + 1) as f64));
        assert_eq!(p["total"].as_f64(), Some(4.0));
    }
    assert!(answer.result()["content"][0]["text"].as_str().is_some_and(|t| t.contains("4 steps")));

    // Without a token: same result, no progress.
    let quiet = session.call_tool("long-task", json!({ "steps": 2, "interval": 1 })).await;
    assert!(quiet.before.iter().all(|m| m["method"] != "notifications/progress"), "{:?}", quiet.before);
    quiet.result();
}

#[tokio::test]
async fn background_stream_arrives_on_the_standalone_get_stream() {
    let serve = Serve::start(&[]).await;
    let (mut session, _) = Session::open(&serve.url).await;
    // Started before the GET stream exists: the server keeps the notifications (PROTOCOL
    // section 4, row 1) and delivers them from the first once the client opens it.
    let answer = session.call_tool("start-background-stream", json!({ "interval": 5, "count": 6 })).await;
    assert!(answer.before.is_empty(), "background notifications must not use the request stream");
    answer.result();

    let mut get = SseReader::new(session.get_stream().await);
    let mut data = Vec::new();
    while data.len() < 6 {
        let (_, message) =
            guard("background notification", get.next_message()).await.expect("GET stream ended");
        data.extend(log_data(std::slice::from_ref(&message)));
    }
    assert_eq!(data, numbered("background notification ", 6));
}

/// Stop with `signal` while a client holds the GET stream open: the process must end the
/// stream, exit 0 and say why, well within the server's drain timeout.
async fn stops_cleanly_on(signal: &str, why: &str) {
    let serve = Serve::start(&[]).await;
    let (session, _) = Session::open(&serve.url).await;
    let mut sse = SseReader::new(session.get_stream().await);

    let asked = std::time::Instant::now();
    serve.signal(signal);
    let (status, stdout) = serve.wait().await;
    assert_eq!(status.code(), Some(0), "exit status {status:?}");
    assert!(asked.elapsed() < Duration::from_secs(4), "stopping took {:?}", asked.elapsed());
    assert_eq!(stdout.last().map(String::as_str), Some(format!("forkless serve: stopped ({why})").as_str()));
    // The open stream was ended by the server, not left hanging.
    let mut events = 0;
    while guard("open stream ends", sse.next_event()).await.is_some() {
        events += 1;
        assert!(events < 100, "the open stream should end at shutdown");
    }
}

#[tokio::test]
async fn sigterm_stops_promptly_with_exit_code_zero_despite_an_open_stream() {
    stops_cleanly_on("TERM", "terminated").await;
}

#[tokio::test]
async fn ctrl_c_stops_the_same_way() {
    stops_cleanly_on("INT", "interrupted").await;
}

/// A database that cannot be reached is a failure to start (exit 1), named without its password.
#[tokio::test]
async fn an_unreachable_database_exits_1_naming_it() {
    let out = support::forkless_output(
        &["serve", "--listen", "127.0.0.1:0", "--store", "postgres://app:secret@127.0.0.1:1/db"],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("postgres://app:***@127.0.0.1:1/db"), "{stderr}");
    assert!(!stderr.contains("secret"), "{stderr}");
}

#[tokio::test]
async fn bad_flags_and_invalid_settings_exit_2_with_a_message() {
    let bin = env!("CARGO_BIN_EXE_forkless");
    let cases: [&[&str]; 6] = [
        &["serve", "--no-such-flag"],
        &["serve", "--listen", "not-an-address"],
        &["serve", "--store", "sqlite://x"],
        &["serve", "--grace", "60000"],
        &["serve", "--path", "mcp"],
        // A node id with a space would send hints no other node can read.
        &["serve", "--store", "redis://127.0.0.1:6379", "--node-id", "a b"],
    ];
    for args in cases {
        let out =
            std::process::Command::new(bin).args(args).env("RUST_LOG", "off").output().expect("run forkless");
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.trim().is_empty(), "{args:?} must explain itself");
        assert!(
            out.stdout.is_empty(),
            "{args:?} must not claim to listen: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
}

#[tokio::test]
async fn an_address_in_use_is_a_clear_error() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("addr").to_string();
    let out = support::forkless_output(&["serve", "--listen", &addr], &[]).await;
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("cannot listen on {addr}")), "{stderr}");
}

#[tokio::test]
async fn protocol_errors_are_typed() {
    let serve = Serve::start(&[]).await;
    let (mut session, _) = Session::open(&serve.url).await;
    let cases = [
        ("resources/read", json!({ "uri": "test://nope" }), -32002),
        ("resources/read", json!({}), -32602),
        ("resources/subscribe", json!({ "uri": 7 }), -32602),
        (
            "prompts/get",
            json!({ "name": "test_prompt_with_arguments", "arguments": { "arg1": "x" } }),
            -32602,
        ),
        ("prompts/get", json!({ "name": "no_such_prompt" }), -32602),
        ("completion/complete", json!({ "ref": { "type": "ref/nothing" } }), -32602),
        ("logging/setLevel", json!({ "level": "loud" }), -32602),
        ("tools/call", json!({ "arguments": {} }), -32602),
        ("no/such/method", json!({}), -32601),
    ];
    for (method, params, code) in cases {
        let answer = session.request(method, params.clone()).await;
        assert_eq!(answer.error()["code"], code, "{method} {params}");
    }
}

#[tokio::test]
async fn log_level_filters_the_demo_notifications_per_session() {
    let serve = Serve::start(&[]).await;
    let (mut quiet, _) = Session::open(&serve.url).await;
    let (mut chatty, _) = Session::open(&serve.url).await;
    assert_eq!(quiet.request("logging/setLevel", json!({ "level": "warning" })).await.result(), &json!({}));

    let filtered = quiet.call_tool("start-notification-stream", json!({ "interval": 1, "count": 3 })).await;
    assert!(filtered.log_data().is_empty(), "info is below warning: {:?}", filtered.before);
    assert_eq!(filtered.result()["content"][0]["text"], "sent 3 notifications");

    let other = chatty.call_tool("start-notification-stream", json!({ "interval": 1, "count": 3 })).await;
    assert_eq!(other.log_data(), numbered("notification ", 3), "another session keeps its own level");
}

#[tokio::test]
async fn test_reconnection_answers_only_after_a_resume_when_polling() {
    let serve = Serve::start(&["--poll-after", "200"]).await;
    let (mut session, _) = Session::open(&serve.url).await;
    let (id, response) =
        session.send("tools/call", json!({ "name": "test_reconnection", "arguments": {} })).await;
    let stream_id = response.headers()["mcp-stream-id"].to_str().expect("ascii").to_owned();

    // The server ends the connection (not the stream) before the answer exists.
    let mut sse = SseReader::new(response);
    let mut last_id = None;
    let mut saw_retry = false;
    while let Some(event) = guard("POST stream", sse.next_event()).await {
        saw_retry |= event.retry.is_some();
        if let Some(message) = event.json() {
            assert_ne!(message.get("id"), Some(&id), "the answer must not come before the cut");
        }
        last_id = event.id.or(last_id);
    }
    assert!(saw_retry, "a polled stream tells the client when to come back");
    let last_id = last_id.expect("at least the priming event");

    // Poll as a client does: every resumed connection may be closed again before the answer
    // exists; come back with the last id seen until the answer arrives.
    let mut cursor = last_id;
    let mut polls = 0;
    let message = loop {
        let resumed = session.resume(&cursor, Some(&stream_id)).await;
        assert_eq!(resumed.headers()["mcp-stream-resumed"], "true");
        assert_eq!(resumed.headers()["mcp-stream-id"].to_str().expect("ascii"), stream_id);
        let mut sse = SseReader::new(resumed);
        let mut answer = None;
        while let Some(event) = guard("resumed stream", sse.next_event()).await {
            cursor = event.id.clone().unwrap_or(cursor);
            if let Some(message) = event.json() {
                answer = Some(message);
                break;
            }
        }
        if let Some(message) = answer {
            break message;
        }
        polls += 1;
        assert!(polls < 50, "no answer after {polls} polls");
    };
    assert_eq!(message["id"], id);
    assert_eq!(message["result"]["content"][0]["text"], "Reconnection test completed successfully");
}

#[tokio::test]
async fn json_answers_send_request_notifications_to_the_get_stream() {
    let serve = Serve::start(&["--answer", "json"]).await;
    let (mut session, _) = Session::open(&serve.url).await;
    let mut get = SseReader::new(session.get_stream().await);
    let answer = session.call_tool("start-notification-stream", json!({ "interval": 1, "count": 4 })).await;
    assert!(answer.before.is_empty(), "a JSON answer carries only the response");
    assert_eq!(answer.result()["content"][0]["text"], "sent 4 notifications");
    let mut data = Vec::new();
    while data.len() < 4 {
        let (_, message) = guard("notification on GET", get.next_message()).await.expect("GET stream ended");
        data.extend(log_data(std::slice::from_ref(&message)));
    }
    assert_eq!(data, numbered("notification ", 4));
}

/// With the open-file limit at 128, a flood of silent connections cannot lock a real client
/// out: the server caps `max_connections` below the limit and closes the longest-idle
/// connection to make room for each new one.
#[tokio::test]
async fn a_real_client_initializes_while_silent_connections_hold_a_low_file_limit() {
    let server = Serve::start_with_file_limit(128, &["--store", "memory"]).await;
    let mut silent = Vec::new();
    for _ in 0..200 {
        match tokio::net::TcpStream::connect(server.addr()).await {
            Ok(tcp) => silent.push(tcp),
            Err(e) => panic!("connect failed: {e}"),
        }
    }
    let (mut session, init) = Session::open(&server.url).await;
    assert!(init["serverInfo"].is_object(), "{init}");
    let echo = session.call_tool("echo", serde_json::json!({ "text": "still served" })).await;
    assert!(echo.result().to_string().contains("still served"), "{:?}", echo.result());
    let metrics = reqwest::get(server.url.replace("/mcp", "/metrics")).await.unwrap().text().await.unwrap();
    let dropped = metrics
        .lines()
        .find_map(|l| l.strip_prefix("forkless_connections_dropped_idle_total "))
        .and_then(|v| v.parse::<u64>().ok())
        .expect("the counter is exported");
    assert!(dropped >= 100, "idle connections made room: {dropped}");
    drop(silent);
}

/// A durable store whose write-ahead log was deleted is not served silently empty:
/// `forkless serve` stops with a message naming the file and the flag that accepts the loss,
/// and starts with that flag.
#[tokio::test]
async fn a_lost_write_ahead_log_stops_serve_with_a_message_naming_it() {
    let dir = support::fresh_data_dir();
    let dir_arg = dir.to_str().unwrap().to_owned();
    {
        let server = Serve::start(&["--data-dir", &dir_arg]).await;
        let (mut session, _) = Session::open(&server.url).await;
        session.call_tool("echo", json!({ "text": "kept" })).await;
        server.terminate();
        let (status, _) = server.wait().await;
        assert!(status.success());
    }
    let wal = dir.join("forkless.redb.wal");
    std::fs::remove_file(&wal).unwrap();
    let out = support::forkless_output(
        &["serve", "--listen", "127.0.0.1:0", "--data-dir", &dir_arg],
        &[("RUST_LOG", "warn")],
    )
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "refused to start: {stderr}");
    assert!(
        stderr.contains(&wal.display().to_string()) && stderr.contains("--accept-lost-files"),
        "{stderr}"
    );
    let server = Serve::start(&["--data-dir", &dir_arg, "--accept-lost-files"]).await;
    server.terminate();
}

/// 2026-07-28: a tool that needs a client capability the request's `_meta` did not declare
/// is refused with 400 and `-32021` naming it; declared, it runs.
#[tokio::test]
async fn a_2026_request_missing_a_required_capability_gets_32021() {
    let server = Serve::start(&["--store", "memory", "--revisions", "all"]).await;
    let call = |caps: Value| {
        let body = json!({ "jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
            "name": "test_missing_capability", "arguments": {},
            "_meta": { "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": caps } } });
        reqwest::Client::new()
            .post(&server.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/call")
            .header("mcp-name", "test_missing_capability")
            .body(body.to_string())
            .send()
    };
    let refused = call(json!({})).await.unwrap();
    assert_eq!(refused.status(), 400);
    let v: Value = refused.json().await.unwrap();
    assert_eq!((v["id"].clone(), v["error"]["code"].clone()), (json!(7), json!(-32021)), "{v}");
    assert!(v["error"]["data"]["requiredCapabilities"]["sampling"].is_object(), "{v}");
    let served = call(json!({ "sampling": {} })).await.unwrap();
    assert_eq!(served.status(), 200);
    let v: Value = served.json().await.unwrap();
    assert_eq!(v["result"]["resultType"], "complete", "{v}");
}
