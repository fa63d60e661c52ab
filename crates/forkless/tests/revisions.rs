//! The operator's choice of revisions (PROTOCOL section 9), as a user of the official Python
//! SDK v2 meets it: its client in the default mode (`auto`) calls a 20-step tool, and every
//! connection is cut after the fifth progress notification (a proxy between them drops them;
//! the server runs on).
//!
//! On `forkless serve`'s default (the session revisions) the client falls back to
//! `initialize`, resumes the cut stream, and gets every step once and the result. With
//! 2026-07-28 offered (`--revisions all`) the same client takes it, and the cut loses the call,
//! by that revision's design: the control that shows the default is what keeps the promise.

mod support;

use std::process::Stdio;

use support::{Serve, guard, peer, root};
use tokio::io::AsyncBufReadExt as _;

/// A TCP proxy in front of the server whose open connections the test can drop at once; new
/// connections go through as before (a client reconnecting gets the same server).
struct Cutter {
    url: String,
    generation: tokio::sync::watch::Sender<u64>,
}

impl Cutter {
    async fn start(server: &Serve) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let upstream = server.addr();
        let (generation, _) = tokio::sync::watch::channel(0u64);
        let watch = generation.clone();
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let mut cut = watch.subscribe();
                let born = *cut.borrow();
                let upstream = upstream.clone();
                tokio::spawn(async move {
                    let Ok(mut outbound) = tokio::net::TcpStream::connect(&upstream).await else { return };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = cut.wait_for(|g| *g != born) => {}
                    }
                });
            }
        });
        Self { url: server.url.replacen(&server.addr(), &format!("127.0.0.1:{port}"), 1), generation }
    }

    /// Drop every connection open now.
    fn cut(&self) {
        self.generation.send_modify(|g| *g += 1);
    }
}

/// Run the auto-mode script through a cutter in front of `serve`: the revision it negotiated
/// and its verdict line.
async fn auto_mode_cut(serve_args: &[&str]) -> Option<(String, String)> {
    let py = peer(".peers/py2/bin/python")?;
    let server = Serve::start(serve_args).await;
    let outcome = auto_mode_cut_on(&py, &server).await;
    server.terminate();
    Some(outcome)
}

/// Run the auto-mode script through a cutter in front of `server`.
async fn auto_mode_cut_on(py: &std::path::Path, server: &Serve) -> (String, String) {
    let cutter = Cutter::start(server).await;
    let mut child = tokio::process::Command::new(py)
        .arg(root().join("tests/interop/python2/client_auto_cut.py"))
        .arg(&cutter.url)
        .current_dir(root())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("run the peer");
    let mut lines = tokio::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    let (mut revision, mut verdict) = (String::new(), String::new());
    while let Some(line) = guard("the peer's output", lines.next_line()).await.expect("read") {
        if let Some(r) = line.strip_prefix("REVISION ") {
            revision = r.to_owned();
        } else if line == "CUT" {
            cutter.cut();
        } else if line.starts_with("PASS") || line.starts_with("FAIL") {
            verdict = line;
        }
    }
    let _ = guard("the peer's exit", child.wait()).await;
    (revision, verdict)
}

/// The same client through a gateway in front of an HTTP MCP server (`forkless serve`), the
/// cut between the client and the gateway: the SDK v2 client resumes the call's stream with
/// its own API and gets every progress once, then the result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_auto_mode_client_keeps_a_cut_call_through_a_gateway_with_an_http_upstream() {
    let Some(py) = peer(".peers/py2/bin/python") else { return };
    let upstream = Serve::start(&["--store", "memory"]).await;
    let gateway = Serve::gateway_upstream(&upstream.url, &["--store", "memory"]).await;
    let (revision, verdict) = auto_mode_cut_on(&py, &gateway).await;
    assert_eq!(revision, "2025-11-25", "a gateway serves sessions by default");
    assert!(verdict.starts_with("PASS"), "{verdict}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_auto_mode_client_keeps_a_cut_call_on_the_default_revisions() {
    let Some((revision, verdict)) = auto_mode_cut(&["--store", "memory"]).await else { return };
    assert_eq!(revision, "2025-11-25", "auto mode falls back to the session revisions");
    assert!(verdict.starts_with("PASS"), "{verdict}");
}

/// The control: with 2026-07-28 offered, the same client and the same cut lose the call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_2026_07_28_offered_the_same_cut_loses_the_auto_mode_call() {
    let Some((revision, verdict)) = auto_mode_cut(&["--store", "memory", "--revisions", "all"]).await else {
        return;
    };
    assert_eq!(revision, "2026-07-28", "auto mode takes the current revision when offered");
    assert!(verdict.starts_with("FAIL"), "a cut in 2026-07-28 loses the call: {verdict}");
}
