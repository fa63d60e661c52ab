//! The client against a scripted fake server that speaks the forkless headers exactly:
//! continuation checks, new streams, duplicates, gaps, 404s, plain-spec servers, grace checks.

mod support;

use std::time::Duration;

use forkless_client::{
    Client, ClientBuilder, ClientEvent, Continuity, Error, RpcError, Seq, StreamOrigin, handler_fn,
};
use serde_json::{Value, json};
use support::fake::{Conn, Dialect, FakeConfig, FakeServer, Resume};
use support::{GUARD, events_until, messages};

async fn fake(config: FakeConfig) -> FakeServer {
    FakeServer::start(config).await
}

fn builder(server: &FakeServer) -> ClientBuilder {
    Client::builder(server.url())
        .retry_budget(Duration::from_secs(10))
        .backoff(Duration::from_millis(5), Duration::from_millis(50))
        .jitter_seed(7)
}

fn text(result: &Value) -> &str {
    result.pointer("/content/0/text").and_then(Value::as_str).unwrap_or_default()
}

async fn numbered(client: &Client, count: u64) -> Result<Value, Error> {
    tokio::time::timeout(GUARD, client.call_tool("numbered", json!({"count": count}))).await.expect("guard")
}

fn request_stats(client: &Client) -> forkless_client::StreamStats {
    let streams = client.streams();
    let s =
        streams.iter().find(|s| matches!(s.origin(), StreamOrigin::Request(_))).expect("a request stream");
    s.stats()
}

#[tokio::test]
async fn initialize_declares_the_contract_and_sends_session_headers() {
    let server = fake(FakeConfig::default()).await;
    let client = builder(&server).connect().await.unwrap();
    assert_eq!(client.session_id().as_deref(), Some("session-1"));
    let result = client.call_tool("json", json!({})).await.unwrap();
    assert_eq!(text(&result), "json");

    let rec = server.recorded();
    let init = rec[0].body.as_ref().unwrap();
    assert_eq!(init["method"], "initialize");
    assert_eq!(init["params"]["capabilities"]["experimental"]["forkless/resume"], json!({"version": 1}));
    assert_eq!(init["params"]["protocolVersion"], "2025-11-25");
    assert!(rec[0].header("mcp-session-id").is_none());
    let initialized = &rec[1];
    assert_eq!(initialized.body.as_ref().unwrap()["method"], "notifications/initialized");
    for r in &rec[1..] {
        assert_eq!(r.header("mcp-session-id"), Some("session-1"));
        assert_eq!(r.header("mcp-protocol-version"), Some("2025-11-25"));
        let accept = r.header("accept").unwrap();
        assert!(accept.contains("application/json") && accept.contains("text/event-stream"), "{accept}");
    }
}

#[tokio::test]
async fn an_sse_answer_without_drops_delivers_everything_once() {
    let server = fake(FakeConfig::default()).await;
    let client = builder(&server).connect().await.unwrap();
    let mut events = client.notifications().unwrap();
    let result = numbered(&client, 5).await.unwrap();
    assert_eq!(text(&result), "done");
    let seen = events_until(&mut events, |e| messages(std::slice::from_ref(e)) == ["#5"]).await;
    assert_eq!(messages(&seen), ["#1", "#2", "#3", "#4", "#5"]);
    assert!(server.resumes().is_empty());
    let stats = request_stats(&client);
    assert_eq!(stats.events_delivered, 6);
    assert_eq!(stats.disconnects, 0);
}

#[tokio::test]
async fn resume_is_accepted_with_resumed_true_and_the_same_identity() {
    let server = fake(FakeConfig::default()).await;
    // priming + #1 + #2, then the connection closes
    server.next_post_conn(Conn::CloseAfter(3));
    let client = builder(&server).connect().await.unwrap();
    let mut events = client.notifications().unwrap();
    let result = numbered(&client, 5).await.unwrap();
    assert_eq!(text(&result), "done");

    let seen = events_until(&mut events, |e| messages(std::slice::from_ref(e)) == ["#5"]).await;
    assert_eq!(messages(&seen), ["#1", "#2", "#3", "#4", "#5"]);
    let resumed = seen.iter().find_map(|e| match e {
        ClientEvent::Resumed { continuity, stream, .. } => Some((*continuity, *stream)),
        _ => None,
    });
    let (continuity, stream) = resumed.expect("a Resumed event");
    assert_eq!(continuity, Continuity::Verified);
    let stream = stream.unwrap().to_string();

    let resumes = server.resumes();
    assert_eq!(resumes.len(), 1);
    assert_eq!(resumes[0].header("last-event-id"), Some(format!("{stream}.2").as_str()));
    assert_eq!(resumes[0].header("mcp-stream-id"), Some(stream.as_str()));
    assert_eq!(resumes[0].header("mcp-session-id"), Some("session-1"));

    let stats = request_stats(&client);
    assert_eq!(stats.resumes_attempted, 1);
    assert_eq!(stats.resumes_verified, 1);
    assert_eq!(stats.disconnects, 1);
    assert_eq!(stats.duplicates_dropped, 0);
    assert_eq!(stats.resume_latency.count, 1);
}

#[tokio::test]
async fn resumed_false_is_a_new_stream_that_resets_the_cursor() {
    let server = fake(FakeConfig::default()).await;
    server.next_post_conn(Conn::CloseAfter(3));
    server.next_resume(Resume::ResumedFalse);
    let client = builder(&server).connect().await.unwrap();
    let mut events = client.notifications().unwrap();
    let result = numbered(&client, 4).await.unwrap();
    assert_eq!(text(&result), "done");
    let seen = events_until(&mut events, |e| messages(std::slice::from_ref(e)) == ["#4"]).await;
    // The application is told, and the "new" stream is read from its beginning.
    let new = seen.iter().find_map(|e| match e {
        ClientEvent::NewStream { previous, current, .. } => Some((*previous, *current)),
        _ => None,
    });
    let (previous, current) = new.expect("a NewStream event");
    assert!(previous.is_some() && previous == current);
    assert!(!seen.iter().any(|e| matches!(e, ClientEvent::Resumed { .. })));
    assert_eq!(messages(&seen), ["#1", "#2", "#1", "#2", "#3", "#4"]);
    let stats = request_stats(&client);
    assert_eq!(stats.new_stream_resets, 1);
    assert_eq!(stats.resumes_verified, 0);
    assert_eq!(stats.resumes_rejected.get("new_stream"), Some(&1));
}

#[tokio::test]
async fn another_stream_id_is_never_a_continuation_even_with_resumed_true() {
    let server = fake(FakeConfig::default()).await;
    server.next_post_conn(Conn::CloseAfter(3));
    server.next_resume(Resume::OtherStream);
    let client = builder(&server).connect().await.unwrap();
    let mut events = client.notifications().unwrap();
    // The other stream starts at seq 1 without priming: accepted as a fresh stream.
    let result = numbered(&client, 3).await.unwrap();
    assert_eq!(text(&result), "done");
    let seen = events_until(&mut events, |e| matches!(e, ClientEvent::NewStream { .. })).await;
    let Some(ClientEvent::NewStream { previous, current, origin }) = seen.last() else { unreachable!() };
    assert!(matches!(origin, StreamOrigin::Request(_)));
    assert_ne!(previous, current);
    assert_eq!(request_stats(&client).resumes_verified, 0);
}

#[tokio::test]
async fn duplicates_are_dropped_and_counted() {
    let server = fake(FakeConfig::default()).await;
    server.next_post_conn(Conn::CloseAfter(4)); // priming, #1, #2, #3
    server.next_resume(Resume::ReplayFrom(1)); // replays #1..#3 again
    let client = builder(&server).connect().await.unwrap();
    let mut events = client.notifications().unwrap();
    let result = numbered(&client, 5).await.unwrap();
    assert_eq!(text(&result), "done");
    let seen = events_until(&mut events, |e| messages(std::slice::from_ref(e)) == ["#5"]).await;
    assert_eq!(messages(&seen), ["#1", "#2", "#3", "#4", "#5"]);
    let stats = request_stats(&client);
    assert_eq!(stats.duplicates_dropped, 3);
    assert_eq!(stats.events_delivered, 6);
    assert_eq!(stats.resumes_verified, 1);
}

#[tokio::test]
async fn a_gap_ends_the_session() {
    let server = fake(FakeConfig::default()).await;
    server.next_post_conn(Conn::CloseAfter(3)); // cursor at 2
    server.next_resume(Resume::ReplayFrom(4)); // skips 3
    let client = builder(&server).connect().await.unwrap();
    let mut events = client.notifications().unwrap();
    let err = numbered(&client, 5).await.unwrap_err();
    let Error::Gap { expected, got, .. } = err else { panic!("expected a gap, got {err:?}") };
    assert_eq!((expected, got), (Seq::new(3), Seq::new(4)));
    let seen = events_until(&mut events, |e| matches!(e, ClientEvent::SessionEnded { .. })).await;
    assert_eq!(messages(&seen), ["#1", "#2"]);
    assert!(matches!(client.session_error(), Some(Error::Gap { .. })));
    // Ended at the server too, and no silent re-initialization.
    let deleted = server.wait_for_request(|r| r.method == "DELETE");
    let deleted = tokio::time::timeout(GUARD, deleted).await.expect("DELETE sent");
    assert_eq!(deleted.header("mcp-session-id"), Some("session-1"));
    assert!(matches!(client.call_tool("json", json!({})).await, Err(Error::Gap { .. })));
    assert_eq!(server.sessions_created(), 1);
    assert_eq!(client.stats().gaps, 1);
}

#[tokio::test]
async fn a_rejected_resume_surfaces_session_ended_with_the_reason() {
    let server = fake(FakeConfig::default()).await;
    server.next_post_conn(Conn::CloseAfter(2));
    server.next_resume(Resume::NotFound("cursor_evicted"));
    let client = builder(&server).connect().await.unwrap();
    let err = numbered(&client, 3).await.unwrap_err();
    assert!(matches!(&err, Error::SessionEnded { reason: Some(r) } if r == "cursor_evicted"), "{err:?}");
    let stats = request_stats(&client);
    assert_eq!(stats.resumes_rejected.get("cursor_evicted"), Some(&1));
    assert_eq!(server.sessions_created(), 1);
}

#[tokio::test]
async fn post_404_ends_the_session_and_reinitializes_only_when_configured() {
    let server = fake(FakeConfig::default()).await;
    let client = builder(&server).connect().await.unwrap();
    server.end_session("idle_expired");
    let err = client.call_tool("json", json!({})).await.unwrap_err();
    assert!(matches!(&err, Error::SessionEnded { reason: Some(r) } if r == "idle_expired"), "{err:?}");
    assert!(client.session_id().is_none());
    assert!(matches!(client.call_tool("json", json!({})).await, Err(Error::SessionEnded { .. })));
    assert_eq!(server.sessions_created(), 1);

    let server = fake(FakeConfig::default()).await;
    let client = builder(&server).reinit_on_404(true).connect().await.unwrap();
    let mut events = client.notifications().unwrap();
    server.end_session("idle_expired");
    let result = client.call_tool("json", json!({})).await.unwrap();
    assert_eq!(text(&result), "json");
    assert_eq!(server.sessions_created(), 2);
    assert_eq!(client.session_id().as_deref(), Some("session-2"));
    let seen = events_until(&mut events, |e| matches!(e, ClientEvent::SessionStarted { .. })).await;
    assert!(matches!(&seen[0], ClientEvent::SessionEnded { error: Error::SessionEnded { .. } }));
}

#[tokio::test]
async fn a_plain_spec_server_is_resumed_unverified() {
    let server = fake(FakeConfig { dialect: Dialect::Plain, ..FakeConfig::default() }).await;
    server.next_post_conn(Conn::CloseAfter(3));
    let client = builder(&server).connect().await.unwrap();
    let mut events = client.notifications().unwrap();
    let result = numbered(&client, 4).await.unwrap();
    assert_eq!(text(&result), "done");
    let seen = events_until(&mut events, |e| messages(std::slice::from_ref(e)) == ["#4"]).await;
    assert_eq!(messages(&seen), ["#1", "#2", "#3", "#4"]);
    let continuity = seen.iter().find_map(|e| match e {
        ClientEvent::Resumed { continuity, stream, .. } => {
            assert!(stream.is_none());
            Some(*continuity)
        }
        _ => None,
    });
    assert_eq!(continuity, Some(Continuity::Unverified));
    let resumes = server.resumes();
    assert_eq!(resumes.len(), 1);
    assert!(resumes[0].header("last-event-id").unwrap().starts_with("ev-"));
    assert!(resumes[0].header("mcp-stream-id").is_none(), "no token for a server that named no stream");
    let stats = request_stats(&client);
    assert_eq!((stats.resumes_verified, stats.resumes_unverified), (0, 1));
}

#[tokio::test]
async fn a_grace_window_not_shorter_than_the_budget_is_refused() {
    let server = fake(FakeConfig { init_grace_ms: Some(10_000), ..FakeConfig::default() }).await;
    let err = builder(&server).connect().await.unwrap_err();
    assert!(matches!(err, Error::GraceTooLong { grace, budget } if grace == budget), "{err:?}");

    let server = fake(FakeConfig { init_grace_ms: Some(2_000), ..FakeConfig::default() }).await;
    let client = builder(&server).connect().await.unwrap();
    assert_eq!(client.server_grace(), Some(Duration::from_secs(2)));

    // The header on an SSE response is checked too.
    let server = fake(FakeConfig { grace_ms: 30_000, ..FakeConfig::default() }).await;
    let client = builder(&server).connect().await.unwrap();
    assert!(matches!(numbered(&client, 1).await, Err(Error::GraceTooLong { .. })));
}

#[tokio::test]
async fn transient_failures_are_retried_within_the_budget() {
    let server = fake(FakeConfig { grace_ms: 100, ..FakeConfig::default() }).await;
    server.next_post_conn(Conn::CloseAfter(2));
    server.next_resume(Resume::Status(409));
    server.next_resume(Resume::Status(503));
    let client = builder(&server).connect().await.unwrap();
    let result = numbered(&client, 2).await.unwrap();
    assert_eq!(text(&result), "done");
    let stats = request_stats(&client);
    assert_eq!(stats.resumes_attempted, 3);
    assert_eq!(stats.resumes_rejected.get("status_409"), Some(&1));
    assert_eq!(stats.resumes_rejected.get("status_503"), Some(&1));
    assert_eq!(stats.resumes_verified, 1);
}

#[tokio::test]
async fn the_retry_budget_is_final() {
    let server = fake(FakeConfig { grace_ms: 50, ..FakeConfig::default() }).await;
    server.next_post_conn(Conn::CloseAfter(2));
    for _ in 0..100 {
        server.next_resume(Resume::Status(503));
    }
    let client = builder(&server).retry_budget(Duration::from_millis(300)).connect().await.unwrap();
    let err = numbered(&client, 2).await.unwrap_err();
    assert!(matches!(err, Error::RetryBudgetExhausted { attempts, .. } if attempts >= 2), "{err:?}");
}

#[tokio::test]
async fn a_stream_lost_before_any_event_id_is_not_resumable() {
    let server = fake(FakeConfig::default()).await;
    server.next_post_conn(Conn::CloseAfter(0));
    let client = builder(&server).connect().await.unwrap();
    assert!(matches!(numbered(&client, 2).await, Err(Error::NotResumable)));
    assert!(server.resumes().is_empty());
}

#[tokio::test]
async fn server_requests_are_answered_by_the_handler() {
    let server = fake(FakeConfig::default()).await;
    let handler = handler_fn(|method: String, _params| async move {
        match method.as_str() {
            "roots/list" => Ok(json!({"roots": [{"uri": "file:///work", "name": "work"}]})),
            other => Err(RpcError::method_not_found(other)),
        }
    });
    let client = builder(&server).handler(handler).capability("roots", json!({})).connect().await.unwrap();
    let result = tokio::time::timeout(GUARD, client.call_tool("ask", json!({}))).await.unwrap().unwrap();
    assert!(text(&result).contains("file:///work"), "{result}");
    let answer = server
        .recorded()
        .into_iter()
        .filter_map(|r| r.body)
        .find(|b| b.get("result").is_some() && b["id"].as_str().is_some_and(|i| i.starts_with("srv-")))
        .expect("the client POSTed its answer");
    assert_eq!(answer["result"]["roots"][0]["name"], "work");
}

#[tokio::test]
async fn progress_reaches_the_callback_in_order() {
    let server = fake(FakeConfig::default()).await;
    let client = builder(&server).connect().await.unwrap();
    let mut seen = Vec::new();
    let result = tokio::time::timeout(
        GUARD,
        client.call_tool_with_progress("progress", json!({}), |p| seen.push((p.progress, p.total))),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(text(&result), "done");
    assert_eq!(seen, [(1.0, Some(3.0)), (2.0, Some(3.0)), (3.0, Some(3.0))]);
    let call =
        server.recorded().into_iter().filter_map(|r| r.body).find(|b| b["method"] == "tools/call").unwrap();
    assert!(call["params"]["_meta"]["progressToken"].is_string());
}

#[tokio::test]
async fn the_standalone_stream_resumes_after_a_cut() {
    let server = fake(FakeConfig::default()).await;
    let client = builder(&server).connect().await.unwrap();
    let mut events = client.notifications().unwrap();
    let control = client.open_standalone().await.unwrap();
    assert_eq!(control.origin(), StreamOrigin::Standalone);
    server.push_standalone("a");
    server.push_standalone("b");
    let seen = events_until(&mut events, |e| messages(std::slice::from_ref(e)) == ["b"]).await;
    assert_eq!(messages(&seen), ["a", "b"]);

    control.cut();
    let seen = events_until(&mut events, |e| matches!(e, ClientEvent::Resumed { .. })).await;
    assert!(matches!(seen.last(), Some(ClientEvent::Resumed { continuity: Continuity::Verified, .. })));
    server.push_standalone("c");
    let seen = events_until(&mut events, |e| messages(std::slice::from_ref(e)) == ["c"]).await;
    assert_eq!(messages(&seen), ["c"]);

    let stream = control.stream_id().unwrap().to_string();
    let resumes = server.resumes();
    assert_eq!(resumes[0].header("last-event-id"), Some(format!("{stream}.2").as_str()));
    assert_eq!(resumes[0].header("mcp-stream-id"), Some(stream.as_str()));
    let stats = control.stats();
    assert_eq!((stats.events_delivered, stats.resumes_verified, stats.disconnects), (3, 1, 1));

    client.close().await.unwrap();
    assert!(server.recorded().iter().any(|r| r.method == "DELETE"));
    assert!(matches!(client.call_tool("json", json!({})).await, Err(Error::Closed)));
}

#[tokio::test]
async fn the_notification_stream_is_taken_once() {
    let server = fake(FakeConfig::default()).await;
    let client = builder(&server).build().unwrap();
    let _events = client.notifications().unwrap();
    assert!(matches!(client.notifications(), Err(Error::NotificationsTaken)));
}

#[tokio::test]
async fn a_timed_out_request_is_cancelled_at_the_server() {
    let server = fake(FakeConfig::default()).await;
    let client = builder(&server).request_timeout(Duration::from_millis(200)).connect().await.unwrap();
    let err = client.call_tool("hang", json!({})).await.unwrap_err();
    assert!(matches!(err, Error::Timeout(_)), "{err:?}");
    let cancelled = server
        .wait_for_request(|r| r.body.as_ref().is_some_and(|b| b["method"] == "notifications/cancelled"));
    let cancelled = tokio::time::timeout(GUARD, cancelled).await.expect("notifications/cancelled sent");
    let call =
        server.recorded().into_iter().filter_map(|r| r.body).find(|b| b["method"] == "tools/call").unwrap();
    assert_eq!(cancelled.body.unwrap()["params"]["requestId"], call["id"]);
}

#[tokio::test]
async fn revision_2025_03_26_sends_no_protocol_version_header() {
    let server = fake(FakeConfig::default()).await;
    let client =
        builder(&server).protocol_revision(forkless_client::Revision::V2025_03_26).connect().await.unwrap();
    assert_eq!(client.revision(), Some(forkless_client::Revision::V2025_03_26));
    client.call_tool("json", json!({})).await.unwrap();
    assert!(server.recorded().iter().all(|r| r.header("mcp-protocol-version").is_none()));
}

#[tokio::test]
async fn open_standalone_twice_hands_out_the_live_stream() {
    let server = fake(FakeConfig::default()).await;
    let client = builder(&server).connect().await.unwrap();
    let first = client.open_standalone().await.unwrap();
    let second = client.open_standalone().await.unwrap();
    assert_eq!(first.stream_id(), second.stream_id());
    let gets = server.recorded().into_iter().filter(|r| r.method == "GET").count();
    assert_eq!(gets, 1);
    first.close();
    assert!(
        tokio::time::timeout(GUARD, async {
            while !second.is_finished() {
                tokio::task::yield_now().await;
            }
        })
        .await
        .is_ok()
    );
}

#[tokio::test]
async fn notify_posts_a_notification() {
    let server = fake(FakeConfig::default()).await;
    let client = builder(&server).connect().await.unwrap();
    client.notify("notifications/roots/list_changed", None).await.unwrap();
    let rec = server.recorded();
    let last = rec.last().unwrap().body.as_ref().unwrap();
    assert_eq!(last["method"], "notifications/roots/list_changed");
    assert!(last.get("id").is_none());
}
