//! The client through the fault-injecting proxy, against the scripted fake server: real TCP
//! cuts in the middle of an SSE event, half-open connections, and a token stripped on retry.

mod support;

use std::sync::atomic::Ordering;
use std::time::Duration;

use forkless_client::{Client, ClientBuilder, ClientEvent, Continuity, StreamOrigin};
use serde_json::{Value, json};
use support::fake::{FakeConfig, FakeServer};
use support::proxy::{Action, Match, Proxy};
use support::{GUARD, events_until, messages};

async fn setup() -> (FakeServer, Proxy) {
    let server = FakeServer::start(FakeConfig::default()).await;
    let proxy = Proxy::start(server.addr).await;
    (server, proxy)
}

fn builder(proxy: &Proxy) -> ClientBuilder {
    Client::builder(proxy.url("/mcp"))
        .retry_budget(Duration::from_secs(10))
        .backoff(Duration::from_millis(5), Duration::from_millis(50))
        .jitter_seed(11)
}

fn numbers(upto: u64) -> Vec<String> {
    (1..=upto).map(|n| format!("#{n}")).collect()
}

fn is_last(upto: u64) -> impl FnMut(&ClientEvent) -> bool {
    let last = format!("#{upto}");
    move |e| messages(std::slice::from_ref(e)) == [last.clone()]
}

fn text(result: &Value) -> &str {
    result.pointer("/content/0/text").and_then(Value::as_str).unwrap_or_default()
}

fn request_stats(client: &Client) -> forkless_client::StreamStats {
    let streams = client.streams();
    streams.iter().find(|s| matches!(s.origin(), StreamOrigin::Request(_))).expect("request stream").stats()
}

#[tokio::test]
async fn a_stream_cut_mid_event_is_resumed_and_delivers_every_event_once() {
    let (server, proxy) = setup().await;
    // Inside the 4th event (priming, #1, #2 arrive whole; #3 is torn after 9 bytes of its id).
    proxy.fault(Match::Post, Action::cut_in_event(4, 9));
    let client = builder(&proxy).connect().await.unwrap();
    let mut events = client.notifications().unwrap();
    let result =
        tokio::time::timeout(GUARD, client.call_tool("numbered", json!({"count": 6}))).await.unwrap();
    assert_eq!(text(&result.unwrap()), "done");
    let seen = events_until(&mut events, is_last(6)).await;
    assert_eq!(messages(&seen), numbers(6));
    assert_eq!(proxy.counters.cuts.load(Ordering::Relaxed), 1);
    let stream = seen.iter().find_map(|e| match e {
        ClientEvent::Resumed { continuity: Continuity::Verified, stream, .. } => *stream,
        _ => None,
    });
    let stream = stream.expect("a verified resume").to_string();
    assert_eq!(server.resumes()[0].header("last-event-id"), Some(format!("{stream}.2").as_str()));
    let stats = request_stats(&client);
    assert_eq!((stats.disconnects, stats.resumes_verified, stats.duplicates_dropped), (1, 1, 0));
}

#[tokio::test]
async fn repeated_cuts_including_the_resume_itself() {
    let (_server, proxy) = setup().await;
    proxy.fault(Match::Post, Action::cut_in_event(3, 2));
    proxy.fault(Match::Resume, Action::cut_in_event(2, 5));
    proxy.fault(Match::Resume, Action::cut_in_event(1, 0));
    let client = builder(&proxy).connect().await.unwrap();
    let mut events = client.notifications().unwrap();
    let result =
        tokio::time::timeout(GUARD, client.call_tool("numbered", json!({"count": 8}))).await.unwrap();
    assert_eq!(text(&result.unwrap()), "done");
    let seen = events_until(&mut events, is_last(8)).await;
    assert_eq!(messages(&seen), numbers(8));
    assert_eq!(proxy.counters.cuts.load(Ordering::Relaxed), 3);
    let stats = request_stats(&client);
    assert_eq!(stats.disconnects, 3);
    assert_eq!(stats.resumes_verified, 3);
}

#[tokio::test]
async fn a_half_open_connection_is_detected_by_the_idle_timeout_and_resumed() {
    let (_server, proxy) = setup().await;
    proxy.fault(Match::Post, Action::hold_in_event(3, 4));
    let client = builder(&proxy).idle_timeout(Some(Duration::from_millis(300))).connect().await.unwrap();
    let mut events = client.notifications().unwrap();
    let result =
        tokio::time::timeout(GUARD, client.call_tool("numbered", json!({"count": 4}))).await.unwrap();
    assert_eq!(text(&result.unwrap()), "done");
    let seen = events_until(&mut events, is_last(4)).await;
    assert_eq!(messages(&seen), numbers(4));
    assert_eq!(proxy.counters.holds.load(Ordering::Relaxed), 1);
    assert_eq!(request_stats(&client).resumes_verified, 1);
    proxy.release_held();
}

#[tokio::test]
async fn a_token_stripped_on_retry_does_not_split_cursor_and_identity() {
    let (server, proxy) = setup().await;
    proxy.strip_on_resume("Mcp-Stream-Id");
    proxy.fault(Match::Post, Action::cut_in_event(3, 1));
    let client = builder(&proxy).connect().await.unwrap();
    let mut events = client.notifications().unwrap();
    let result =
        tokio::time::timeout(GUARD, client.call_tool("numbered", json!({"count": 3}))).await.unwrap();
    assert_eq!(text(&result.unwrap()), "done");
    let seen = events_until(&mut events, is_last(3)).await;
    assert_eq!(messages(&seen), numbers(3));
    // The server saw the cursor (which names the stream) without the token.
    let resume = &server.resumes()[0];
    assert!(resume.header("mcp-stream-id").is_none());
    assert!(resume.header("last-event-id").unwrap().ends_with(".1"));
    assert_eq!(proxy.counters.headers_stripped.load(Ordering::Relaxed), 1);
}

#[tokio::test]
async fn the_standalone_stream_survives_a_proxy_cut() {
    let (server, proxy) = setup().await;
    let client = builder(&proxy).connect().await.unwrap();
    let mut events = client.notifications().unwrap();
    let control = client.open_standalone().await.unwrap();
    server.push_standalone("a");
    events_until(&mut events, |e| messages(std::slice::from_ref(e)) == ["a"]).await;
    proxy.cut_all();
    let seen = events_until(&mut events, |e| matches!(e, ClientEvent::Resumed { .. })).await;
    assert!(matches!(seen.last(), Some(ClientEvent::Resumed { continuity: Continuity::Verified, .. })));
    server.push_standalone("b");
    let seen = events_until(&mut events, |e| messages(std::slice::from_ref(e)) == ["b"]).await;
    assert_eq!(messages(&seen), ["b"]);
    assert_eq!(control.stats().resumes_verified, 1);
}
