//! The 2026-07-28 client ([`CurrentClient`]) against the real server in process, through the
//! fault-injecting proxy: a lost answer is re-issued under its idempotency key and the call
//! runs once (counted by the handler), a task is driven to its end (input answered by the
//! client's handler), and a task a crashed client was waiting for is polled on by its next
//! run from the task log.

mod support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use forkless::demo::DemoHandler;
use forkless_client::{
    CurrentClient, CurrentSettings, Error, FileTaskLog, Reissue, TaskLog as _, handler_fn,
};
use forkless_server::{Handler, RequestContext, RpcError, Server, ServerConfig, ServerInfo};
use forkless_store::MemoryStore;
use serde_json::{Value, json};
use support::GUARD;
use support::proxy::{Action, Match, Proxy};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// A handler whose one tool counts its executions, then answers after 300 ms.
#[derive(Clone, Default)]
struct Counting {
    runs: Arc<AtomicUsize>,
}

impl Handler for Counting {
    fn info(&self) -> ServerInfo {
        ServerInfo {
            name: "counting".into(),
            version: "1".into(),
            capabilities: json!({ "tools": {} }),
            instructions: None,
        }
    }

    async fn handle_request(
        &self,
        method: &str,
        _params: Option<Value>,
        ctx: RequestContext,
    ) -> Result<Value, RpcError> {
        if method != "tools/call" {
            return Err(RpcError::method_not_found(method));
        }
        let run = self.runs.fetch_add(1, Ordering::SeqCst) + 1;
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(300)) => {}
            () = ctx.cancellation().cancelled() => return Err(RpcError::new(-32800, "cancelled")),
        }
        Ok(json!({ "content": [{ "type": "text", "text": format!("run {run}") }] }))
    }
}

/// A server for `handler` on a fresh port; stops when the token is dropped.
async fn serve<H: Handler>(handler: H) -> (SocketAddr, tokio_util::sync::DropGuard) {
    let server = Server::new(MemoryStore::new(), handler, ServerConfig::default()).expect("config");
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let stop = CancellationToken::new();
    tokio::spawn(server.serve(listener, stop.clone().cancelled_owned()));
    (addr, stop.drop_guard())
}

/// Cut the next POST's response right after its head: the server has the request, the
/// client never gets its answer.
fn cut_next_answer(proxy: &Proxy) {
    proxy.fault(Match::Post, Action::CutAfter { marker: b"\r\n\r\n".to_vec(), count: 1, extra: 0 });
}

fn text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_answer_is_reissued_under_its_key_and_the_call_runs_once() {
    let handler = Counting::default();
    let runs = handler.runs.clone();
    let (addr, _server) = serve(handler).await;
    let proxy = Proxy::start(addr).await;
    let url = format!("http://{}/mcp", proxy.addr);
    let client = CurrentClient::connect(&url, CurrentSettings::default()).await.expect("connect");
    assert_eq!(client.reissue(), Reissue::Keyed, "the server advertises idempotency keys");
    cut_next_answer(&proxy);
    let result = tokio::time::timeout(GUARD, client.call_tool("count", json!({}))).await.expect("guard");
    let result = result.expect("the re-issue reads the first execution's answer");
    assert_eq!(proxy.counters.cuts.load(Ordering::SeqCst), 1, "the first answer was cut");
    assert_eq!(text(&result), "run 1");
    assert_eq!(runs.load(Ordering::SeqCst), 1, "one execution for two requests");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_is_driven_to_its_end_with_its_input_answered() {
    let (addr, _server) = serve(DemoHandler::new()).await;
    let url = format!("http://{addr}/mcp");
    let asked = Arc::new(AtomicUsize::new(0));
    let seen = asked.clone();
    let input = handler_fn(move |method: String, _params: Option<Value>| {
        seen.fetch_add(1, Ordering::SeqCst);
        async move {
            assert_eq!(method, "elicitation/create");
            Ok(json!({ "action": "accept", "content": { "confirm": true } }))
        }
    });
    let settings = CurrentSettings { input: Arc::new(input), ..CurrentSettings::default() };
    let client = CurrentClient::connect(&url, settings).await.expect("connect");
    let job = client.call_tool("restartable_job", json!({ "seconds": 1, "label": "client-job" })).await;
    assert_eq!(text(&job.expect("completed")), "job client-job done (attempt 1)");
    let confirmed = client.call_tool("restartable_confirm", json!({ "filename": "a.txt" })).await;
    assert_eq!(text(&confirmed.expect("completed")), "deleted a.txt (attempt 1)");
    assert_eq!(asked.load(Ordering::SeqCst), 1, "the input request was answered once");
    let failed = client.call_tool("protocol_error_job", json!({})).await;
    assert!(matches!(failed, Err(Error::Rpc { code: -32603, .. })), "{failed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_client_polls_on_the_tasks_its_log_holds() {
    let (addr, _server) = serve(DemoHandler::new()).await;
    let url = format!("http://{addr}/mcp");
    let dir = std::env::temp_dir().join(format!("forkless-client-tasks-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let path = dir.join("tasks.log");
    let settings =
        || CurrentSettings { task_log: Arc::new(FileTaskLog::new(&path)), ..CurrentSettings::default() };
    let first = CurrentClient::connect(&url, settings()).await.expect("connect");
    let call = tokio::spawn(async move {
        first.call_tool("restartable_job", json!({ "seconds": 1, "label": "crash" })).await
    });
    // The client "crashes" once it has the task's id in its log.
    tokio::time::timeout(GUARD, async {
        while FileTaskLog::new(&path).pending().map_or(true, |p| p.is_empty()) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the task id is logged");
    call.abort();
    let next = CurrentClient::connect(&url, settings()).await.expect("connect");
    let resumed =
        tokio::time::timeout(GUARD, next.resume_tasks()).await.expect("guard").expect("log readable");
    assert_eq!(resumed.len(), 1, "{resumed:?}");
    assert_eq!(text(resumed[0].1.as_ref().expect("completed")), "job crash done (attempt 1)");
    assert!(FileTaskLog::new(&path).pending().expect("read").is_empty(), "forgotten once delivered");
    let _ = std::fs::remove_dir_all(&dir);
}
