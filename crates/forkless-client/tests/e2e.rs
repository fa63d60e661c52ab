//! End to end: the client against the real server (`forkless_server::Server` with the demo
//! handler of `forkless serve`, in process) through the fault-injecting proxy.

mod support;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use forkless::demo::DemoHandler;
use forkless_client::{Client, ClientBuilder, ClientEvent, Continuity, Error, StreamOrigin};
use forkless_core::ResumeMode;
use forkless_server::{AnswerMode, Server, ServerConfig};
use forkless_store::MemoryStore;
use serde_json::{Value, json};
use support::proxy::{Action, Match, Proxy};
use support::{GUARD, events_until, next_event};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// A running server; dropping it shuts the server down.
struct RealServer {
    addr: SocketAddr,
    stop: CancellationToken,
}

impl Drop for RealServer {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn serve(tune: impl FnOnce(&mut ServerConfig)) -> RealServer {
    let mut config = ServerConfig::default();
    config.core.retry_interval = Duration::from_millis(20);
    config.core.grace = Duration::from_secs(2);
    config.core.keep_alive = Duration::from_millis(500);
    tune(&mut config);
    let poll_after = config.poll_after;
    let server = Server::new(MemoryStore::new(), DemoHandler::new().with_poll_after(poll_after), config)
        .expect("valid server config");
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let stop = CancellationToken::new();
    tokio::spawn(server.serve(listener, stop.clone().cancelled_owned()));
    RealServer { addr, stop }
}

fn builder(url: String) -> ClientBuilder {
    Client::builder(url)
        .retry_budget(Duration::from_secs(15))
        .backoff(Duration::from_millis(5), Duration::from_millis(100))
        .jitter_seed(3)
}

/// The numbers N of "notification #N" log messages, in arrival order.
fn numbered(events: &[ClientEvent]) -> Vec<u64> {
    events
        .iter()
        .filter_map(|e| match e {
            ClientEvent::Notification(n) if n.method == "notifications/message" => {
                let data = n.params.as_ref()?.get("data")?.as_str()?;
                data.rsplit_once('#')?.1.parse().ok()
            }
            _ => None,
        })
        .collect()
}

fn reached(count: u64) -> impl FnMut(&ClientEvent) -> bool {
    move |e| numbered(std::slice::from_ref(e)) == [count]
}

fn text(result: &Value) -> &str {
    result.pointer("/content/0/text").and_then(Value::as_str).unwrap_or_default()
}

async fn call(client: &Client, tool: &str, args: Value) -> Result<Value, Error> {
    tokio::time::timeout(GUARD, client.call_tool(tool, args)).await.expect("call within the guard")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handshake_declares_resume_and_reads_the_servers_grace() {
    let server = serve(|_| {}).await;
    let client = builder(format!("http://{}/mcp", server.addr)).connect().await.unwrap();
    assert!(client.session_id().is_some());
    assert_eq!(client.server_grace(), Some(Duration::from_secs(2)));
    let result = call(&client, "echo", json!({"text": "hi"})).await.unwrap();
    assert_eq!(text(&result), "hi");
    client.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_numbered_stream_cut_mid_event_and_resumed_delivers_every_event_once_in_order() {
    let server = serve(|_| {}).await;
    let proxy = Proxy::start(server.addr).await;
    // priming, #1, #2 arrive whole; #3 is torn 9 bytes into its id line.
    proxy.fault(Match::Post, Action::cut_in_event(4, 9));
    let client = builder(proxy.url("/mcp")).connect().await.unwrap();
    let mut events = client.notifications().unwrap();
    let result =
        call(&client, "start-notification-stream", json!({"interval": 10, "count": 12})).await.unwrap();
    assert!(text(&result).contains("12"), "{result}");
    let seen = events_until(&mut events, reached(12)).await;
    assert_eq!(numbered(&seen), (1..=12).collect::<Vec<_>>());
    assert!(seen.iter().any(|e| matches!(e, ClientEvent::Resumed { continuity: Continuity::Verified, .. })));
    let stats = client.stats();
    assert_eq!(stats.disconnects, 1);
    assert_eq!(stats.resumes_verified, 1);
    assert_eq!(stats.gaps, 0);
    assert_eq!(stats.new_stream_resets, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_cut_positions_never_lose_or_repeat_an_event() {
    let server = serve(|_| {}).await;
    let proxy = Proxy::start(server.addr).await;
    let client = builder(proxy.url("/mcp")).connect().await.unwrap();
    let mut events = client.notifications().unwrap();
    // Cuts at the start, inside and at the end of id lines, in data, and on the resumes too.
    let cuts = [(2, 0), (3, 17), (5, 40), (4, 1000), (6, 3)];
    for (round, &(event, extra)) in cuts.iter().enumerate() {
        proxy.fault(Match::Post, Action::cut_in_event(event, extra));
        proxy.fault(Match::Resume, Action::cut_in_event(2, extra / 2));
        let result = call(&client, "start-notification-stream", json!({"interval": 5, "count": 8})).await;
        assert!(result.is_ok(), "round {round}: {result:?}");
        let seen = events_until(&mut events, reached(8)).await;
        assert_eq!(numbered(&seen), (1..=8).collect::<Vec<_>>(), "round {round} (cut {event}/{extra})");
    }
    let stats = client.stats();
    assert_eq!((stats.gaps, stats.new_stream_resets), (0, 0));
    assert!(stats.resumes_verified >= cuts.len() as u64, "{stats:?}");
    let rejected: u64 = stats.resumes_rejected.values().sum();
    assert_eq!(rejected, 0, "{:?}", stats.resumes_rejected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_standalone_stream_resumes_after_a_proxy_cut() {
    let server = serve(|_| {}).await;
    let proxy = Proxy::start(server.addr).await;
    let client = builder(proxy.url("/mcp")).connect().await.unwrap();
    let mut events = client.notifications().unwrap();
    let standalone = client.open_standalone().await.unwrap();
    assert_eq!(standalone.origin(), StreamOrigin::Standalone);
    call(&client, "start-background-stream", json!({"interval": 30, "count": 10})).await.unwrap();
    let seen = events_until(&mut events, reached(3)).await;
    assert_eq!(numbered(&seen), [1, 2, 3]);
    proxy.cut_all();
    let rest = events_until(&mut events, reached(10)).await;
    assert_eq!(numbered(&rest), (4..=10).collect::<Vec<_>>());
    let stats = standalone.stats();
    assert_eq!(stats.resumes_verified, 1, "{stats:?}");
    assert_eq!(stats.events_delivered, 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_polling_is_followed_without_loss() {
    let server = serve(|c| c.poll_after = Some(Duration::from_millis(60))).await;
    let client = builder(format!("http://{}/mcp", server.addr)).connect().await.unwrap();
    let mut events = client.notifications().unwrap();
    let result =
        call(&client, "start-notification-stream", json!({"interval": 25, "count": 10})).await.unwrap();
    assert!(text(&result).contains("10"));
    let seen = events_until(&mut events, reached(10)).await;
    assert_eq!(numbered(&seen), (1..=10).collect::<Vec<_>>());
    let stats = client.stats();
    assert!(stats.resumes_verified >= 1, "{stats:?}");
    assert_eq!(stats.duplicates_dropped, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_strict_server_ends_the_session_when_a_proxy_strips_the_token() {
    let server = serve(|c| c.core.mode = ResumeMode::Strict).await;
    let proxy = Proxy::start(server.addr).await;
    proxy.strip_on_resume("mcp-stream-id");
    proxy.fault(Match::Post, Action::cut_in_event(3, 2));
    let client = builder(proxy.url("/mcp")).connect().await.unwrap();
    let mut events = client.notifications().unwrap();
    let err =
        call(&client, "start-notification-stream", json!({"interval": 10, "count": 5})).await.unwrap_err();
    assert!(matches!(&err, Error::SessionEnded { reason: Some(r) } if r == "token_missing"), "{err:?}");
    loop {
        if let ClientEvent::SessionEnded { error } = next_event(&mut events).await {
            assert!(matches!(error, Error::SessionEnded { .. }));
            break;
        }
    }
    let rejected: BTreeMap<String, u64> = client.stats().resumes_rejected;
    assert_eq!(rejected.get("token_missing"), Some(&1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_whose_budget_is_not_above_the_servers_grace_refuses_it() {
    let server = serve(|_| {}).await;
    let err = builder(format!("http://{}/mcp", server.addr))
        .retry_budget(Duration::from_secs(2))
        .connect()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::GraceTooLong { .. }), "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_answers_with_notifications_on_the_resumed_standalone_stream() {
    let server = serve(|c| c.answer = AnswerMode::Json).await;
    let proxy = Proxy::start(server.addr).await;
    let client = builder(proxy.url("/mcp")).connect().await.unwrap();
    let mut events = client.notifications().unwrap();
    // Cut the standalone connection inside its 4th event (#3 after priming), then the resume
    // inside its 3rd.
    proxy.fault(Match::Open, Action::cut_in_event(4, 6));
    proxy.fault(Match::Resume, Action::cut_in_event(3, 2));
    let standalone = client.open_standalone().await.unwrap();
    let result =
        call(&client, "start-notification-stream", json!({"interval": 5, "count": 9})).await.unwrap();
    assert!(text(&result).contains('9'), "{result}");
    let seen = events_until(&mut events, reached(9)).await;
    assert_eq!(numbered(&seen), (1..=9).collect::<Vec<_>>());
    assert_eq!(proxy.counters.cuts.load(std::sync::atomic::Ordering::Relaxed), 2);
    let stats = standalone.stats();
    assert_eq!((stats.gaps, stats.disconnects, stats.resumes_verified), (0, 2, 2), "{stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_evicted_cursor_ends_the_session_with_its_reason() {
    let server = serve(|c| c.core.limits.stream_max_events = 3).await;
    let proxy = Proxy::start(server.addr).await;
    // priming and #1 arrive; the connection then goes silent inside #2 while the tool runs on.
    proxy.fault(Match::Post, Action::hold_in_event(3, 0));
    let client =
        builder(proxy.url("/mcp")).idle_timeout(Some(Duration::from_millis(800))).connect().await.unwrap();
    let err =
        call(&client, "start-notification-stream", json!({"interval": 0, "count": 10})).await.unwrap_err();
    assert!(matches!(&err, Error::SessionEnded { reason: Some(r) } if r == "cursor_evicted"), "{err:?}");
    assert_eq!(client.stats().resumes_rejected.get("cursor_evicted"), Some(&1));
    proxy.release_held();
}
