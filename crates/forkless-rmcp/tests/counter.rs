//! The example's rmcp service (`examples/counter/service.rs`, the same file) served by
//! forkless in this process: `forkless check` finds no fork, the official Python and
//! TypeScript SDK clients call its tools and resume a cut stream with their own resumption
//! tokens, rmcp's own client calls it and reconnects streams the server cuts (with
//! `Last-Event-ID`, every event once), and a session's service instance lives and dies with
//! the session.

#[path = "../examples/counter/service.rs"]
mod service;

use std::path::{Path, PathBuf};
use std::time::Duration;

use forkless::check::{CheckArgs, probe};
use forkless_server::ServerConfig;
use forkless_store::MemoryStore;

/// Serve the counter on a fresh in-memory store; its endpoint.
async fn serve() -> String {
    let server =
        forkless_rmcp::server(MemoryStore::new(), || Ok(service::Counter::new()), ServerConfig::default())
            .expect("valid config");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(server.serve(listener, std::future::pending()));
    url
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("workspace root")
}

/// The peer at `rel`, or `None` to skip outside CI (under `CI=true` a missing peer fails).
fn peer(rel: &str) -> Option<PathBuf> {
    let path = root().join(rel);
    if path.exists() {
        return Some(path);
    }
    forkless_store::skip::skip(
        &format!("no {rel}"),
        &"run scripts/peers/install.sh (CI must install the peers)",
    );
    None
}

/// Run `program script url args…`; it must end with a `PASS` line.
async fn passes(program: &Path, script: &str, url: &str, args: &[&str]) {
    let run = tokio::process::Command::new(program)
        .arg(root().join(script))
        .arg(url)
        .args(args)
        .current_dir(root())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(90), run)
        .await
        .expect("the peer finishes")
        .expect("run peer");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.lines().last().is_some_and(|l| l.starts_with("PASS")),
        "{script}: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forkless_check_finds_no_fork_in_the_rmcp_service() {
    let url = serve().await;
    let args = CheckArgs { progress: true, json: true, ..CheckArgs::new(url) };
    let report = probe(&args).await.expect("the service can be probed");
    let verdicts: Vec<_> = report.scenarios.iter().map(|s| (s.name, s.verdict)).collect();
    assert_eq!(report.failed, 0, "{verdicts:?}");
    // Everything but the restart (it needs a process to restart) runs, and passes.
    assert_eq!(report.passed, 10, "{verdicts:?}");
}

#[tokio::test]
async fn the_python_sdk_calls_the_rmcp_service_and_resumes_a_cut_stream() {
    let Some(py) = peer(".peers/py/bin/python") else { return };
    let url = serve().await;
    passes(&py, "tests/interop/python/client_basic.py", &url, &[]).await;
    passes(&py, "tests/interop/python/client_resume.py", &url, &["--progress"]).await;
}

#[tokio::test]
async fn the_typescript_sdk_calls_the_rmcp_service_and_resumes_a_cut_stream() {
    let Some(_sdk) = peer(".peers/node/node_modules/@modelcontextprotocol/sdk") else { return };
    let url = serve().await;
    passes(Path::new("node"), "tests/interop/ts/client_basic.mjs", &url, &[]).await;
    passes(Path::new("node"), "tests/interop/ts/client_resume.mjs", &url, &["--progress"]).await;
}

#[tokio::test]
async fn rmcps_own_client_calls_the_service_through_forkless() {
    use rmcp::ServiceExt as _;
    use rmcp::model::CallToolRequestParams;
    use rmcp::transport::StreamableHttpClientTransport;
    let url = serve().await;
    let client =
        ().serve(StreamableHttpClientTransport::from_uri(url)).await.expect("rmcp's client connects");
    let tools = client.list_all_tools().await.expect("tools/list");
    assert!(tools.iter().any(|t| t.name == "increment"), "{tools:?}");
    let mut arguments = serde_json::Map::new();
    arguments.insert("text".into(), serde_json::json!("through forkless"));
    let echoed =
        client.call_tool(CallToolRequestParams::new("echo").with_arguments(arguments)).await.expect("echo");
    let text = serde_json::to_string(&echoed.content).unwrap();
    assert!(text.contains("through forkless"), "{text}");
    let _ = client.cancel().await;
}

/// rmcp's client transport, recording the progress values of every message it hands the
/// client, in the order it receives them (rmcp's handlers run in tasks of their own, in any
/// order, possibly after the result; the transport is sequential).
struct Recording<T> {
    inner: T,
    progress: std::sync::Arc<std::sync::Mutex<Vec<f64>>>,
}

impl<T: rmcp::transport::Transport<rmcp::RoleClient>> rmcp::transport::Transport<rmcp::RoleClient>
    for Recording<T>
{
    type Error = T::Error;

    fn send(
        &mut self,
        item: rmcp::service::TxJsonRpcMessage<rmcp::RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<rmcp::service::RxJsonRpcMessage<rmcp::RoleClient>> {
        let message = self.inner.receive().await?;
        let json = serde_json::to_value(&message).expect("a received message serializes");
        if json["method"] == "notifications/progress" {
            let progress = json["params"]["progress"].as_f64().expect("a progress value");
            self.progress.lock().unwrap().push(progress);
        }
        Some(message)
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcps_own_client_reconnects_cut_streams_and_sees_every_event_once() {
    use rmcp::ServiceExt as _;
    use rmcp::model::{CallToolRequestParams, NumberOrString, ProgressToken, RequestMetaObject};
    use rmcp::transport::StreamableHttpClientTransport;
    // The server ends every SSE connection after 150 ms (2025-11-25 polling) and tells the
    // client to come back after 20 ms (`retry:`; rmcp waits what the server says): the call
    // runs 1.2 s, so its stream is cut about seven times, and rmcp's client must resume it
    // with Last-Event-ID. (With the default 1 s `retry:` the stream was cut only once on a
    // slow machine: the client came back after the call had ended.)
    let core = forkless_core::Config { retry_interval: Duration::from_millis(20), ..Default::default() };
    let config =
        ServerConfig { poll_after: Some(Duration::from_millis(150)), core, ..ServerConfig::default() };
    let server = forkless_rmcp::server(MemoryStore::new(), || Ok(service::Counter::new()), config)
        .expect("valid config");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(server.clone().serve(listener, std::future::pending()));

    let progress = std::sync::Arc::default();
    let transport = Recording {
        inner: StreamableHttpClientTransport::from_uri(url),
        progress: std::sync::Arc::clone(&progress),
    };
    let client = ().serve(transport).await.expect("rmcp's client connects");
    let mut arguments = serde_json::Map::new();
    arguments.insert("count".into(), serde_json::json!(20));
    arguments.insert("interval".into(), serde_json::json!(60));
    let mut call = CallToolRequestParams::new("start-notification-stream").with_arguments(arguments);
    call.meta =
        Some(RequestMetaObject::with_progress_token(ProgressToken(NumberOrString::String("cut".into()))));
    let result = tokio::time::timeout(Duration::from_secs(30), client.call_tool(call))
        .await
        .expect("the call finishes across the cuts")
        .expect("the call's result");
    assert_ne!(result.is_error, Some(true), "{result:?}");
    // Everything the call's stream carried came through the transport before its result; and
    // once the client has stopped, nothing more can arrive: judge the whole record then. A
    // duplicate would make a twenty-first; a gap would leave one missing.
    client.cancel().await.expect("the client stops");
    let got = progress.lock().unwrap().clone();
    let expected: Vec<f64> = (1..=20).map(f64::from).collect();
    assert_eq!(got, expected, "every progress notification exactly once, in order");
    let metrics = server.metrics_text();
    let resumed = metrics
        .lines()
        .filter(|l| l.starts_with("forkless_get_outcomes_total{outcome=\"resume"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum::<u64>();
    assert!(resumed >= 2, "the client resumed the cut stream: {metrics}");
}
