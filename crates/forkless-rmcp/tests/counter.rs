//! The example's rmcp service (`examples/counter/service.rs`, the same file) served by
//! forkless in this process: `forkless check` finds no fork, the official Python and
//! TypeScript SDK clients call its tools and the Python one resumes a cut stream with its
//! own resumption token, and a session's service instance lives and dies with the session.

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
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "{} is missing: run scripts/peers/install.sh",
        path.display()
    );
    eprintln!("skipping: {} is missing (run scripts/peers/install.sh)", path.display());
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
    let args = CheckArgs {
        url,
        tool: None,
        background_tool: None,
        args: None,
        progress: true,
        only: Vec::new(),
        seed: 1,
        json: true,
        restart_cmd: None,
    };
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
async fn the_typescript_sdk_calls_the_rmcp_service() {
    let Some(_sdk) = peer(".peers/node/node_modules/@modelcontextprotocol/sdk") else { return };
    let url = serve().await;
    passes(Path::new("node"), "tests/interop/ts/client_basic.mjs", &url, &[]).await;
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
