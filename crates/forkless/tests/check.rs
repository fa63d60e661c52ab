//! `forkless check` as a real process: every scenario passes against `forkless serve` (memory
//! and durable store), and the check does fail a server that forks a stream on resume.

mod forking;
mod support;

use std::process::Stdio;

use serde_json::Value;
use support::restartable::Restartable;
use support::{GUARD, Serve};

/// Run `forkless check <args>`; its exit code and stdout.
async fn check(args: &[&str]) -> (Option<i32>, String) {
    support::forkless(&[&["check"], args].concat()).await
}

fn verdicts(report: &Value) -> Vec<(String, String)> {
    report["scenarios"]
        .as_array()
        .expect("scenarios")
        .iter()
        .map(|s| {
            (s["name"].as_str().unwrap_or("?").to_owned(), s["verdict"].as_str().unwrap_or("?").to_owned())
        })
        .collect()
}

#[tokio::test]
async fn every_scenario_passes_against_forkless_serve_with_the_memory_store() {
    let serve = Serve::start(&["--store", "memory"]).await;
    let (code, stdout) = check(&[&serve.url, "--json"]).await;
    let report: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"));
    let verdicts = verdicts(&report);
    assert_eq!(verdicts.len(), 16, "{stdout}");
    // Without --restart-cmd the crash scenario cannot run, and without 2026-07-28 (not offered
    // by default) no task scenario can; every other one passes.
    for (name, verdict) in &verdicts {
        let want = if name == "crash-restart" || name.starts_with("task-") { "UNSUPPORTED" } else { "PASS" };
        assert_eq!(verdict, want, "{name}: {verdicts:?}\n{stdout}");
    }
    assert_eq!(report["failed"], 0);
    assert_eq!(code, Some(0), "{stdout}");
    for scenario in report["scenarios"].as_array().expect("scenarios") {
        assert!(scenario["evidence"].as_array().is_some_and(|e| !e.is_empty()), "no evidence: {scenario}");
        assert!(scenario["pass_if"].as_str().is_some_and(|p| !p.is_empty()));
    }
}

#[tokio::test]
async fn every_scenario_passes_against_forkless_serve_with_the_durable_store_as_a_table() {
    // Batched, the default: the mode in which an earlier release renamed an event after a crash.
    let serve = Restartable::start("batched").await;
    let (code, stdout) = check(&[&serve.url, "--restart-cmd", &serve.command]).await;
    // Every scenario but task-every-node and task-node-loss, which need a second node's URL.
    assert!(stdout.contains("16 scenarios: 14 PASS, 0 FAIL, 2 UNSUPPORTED"), "{stdout}");
    assert!(stdout.contains("resume-after-8       PASS"), "{stdout}");
    assert!(stdout.contains("task-crash-working   PASS"), "{stdout}");
    assert!(stdout.contains("task-crash-input     PASS"), "{stdout}");
    assert!(stdout.contains("crash-restart        PASS"), "{stdout}");
    assert_eq!(code, Some(0), "{stdout}");
}

/// Every scenario, `kill -9` and restart included, against `forkless serve` on PostgreSQL (a
/// database of its own): what the database committed is what clients received.
#[tokio::test]
async fn every_scenario_passes_against_forkless_serve_on_postgres() {
    let Some(db) = forkless_store_postgres::testing::fresh().await else { return };
    let serve = Restartable::start_on(support::fresh_data_dir(), &format!("--store '{}'", db.url)).await;
    let (code, stdout) = check(&[&serve.url, "--restart-cmd", &serve.command]).await;
    assert!(stdout.contains("16 scenarios: 14 PASS, 0 FAIL, 2 UNSUPPORTED"), "{stdout}");
    assert!(stdout.contains("crash-restart        PASS"), "{stdout}");
    assert_eq!(code, Some(0), "{stdout}");
    drop(serve);
}

/// The same against `forkless serve` on Redis (a key prefix of its own; the machine's Redis
/// keeps what it stored across the server's `kill -9`).
#[tokio::test]
async fn every_scenario_passes_against_forkless_serve_on_redis() {
    let Some(prefix) = forkless_store_redis::testing::fresh().await else { return };
    let url = format!("{}#{}", prefix.url, prefix.prefix);
    let serve = Restartable::start_on(support::fresh_data_dir(), &format!("--store '{url}'")).await;
    let (code, stdout) = check(&[&serve.url, "--restart-cmd", &serve.command]).await;
    assert!(stdout.contains("16 scenarios: 14 PASS, 0 FAIL, 2 UNSUPPORTED"), "{stdout}");
    assert!(stdout.contains("crash-restart        PASS"), "{stdout}");
    assert_eq!(code, Some(0), "{stdout}");
    drop(serve);
}

/// The same against `forkless serve` on a Redis Cluster of three primaries of the test's own:
/// the store finds the cluster through the one node the URL names.
#[tokio::test]
async fn every_scenario_passes_against_forkless_serve_on_a_redis_cluster() {
    let start = forkless_store_redis::testing::PrivateRedisCluster::start;
    let Some(cluster) = tokio::task::spawn_blocking(start).await.expect("start a cluster") else { return };
    let url = format!("{}#check", cluster.url());
    let serve = Restartable::start_on(support::fresh_data_dir(), &format!("--store '{url}'")).await;
    let (code, stdout) = check(&[&serve.url, "--restart-cmd", &serve.command]).await;
    assert!(stdout.contains("16 scenarios: 14 PASS, 0 FAIL, 2 UNSUPPORTED"), "{stdout}");
    assert!(stdout.contains("crash-restart        PASS"), "{stdout}");
    assert_eq!(code, Some(0), "{stdout}");
    drop(serve);
    assert!((0..3).all(|i| cluster.keys_on(i) > 0), "every primary holds some of the sessions");
}

#[tokio::test]
async fn crash_restart_passes_in_immediate_mode_and_names_every_seen_event() {
    let serve = Restartable::start("immediate").await;
    let (code, stdout) =
        check(&[&serve.url, "--json", "--only", "crash-restart", "--restart-cmd", &serve.command]).await;
    let report: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"));
    assert_eq!(verdicts(&report), [("crash-restart".to_owned(), "PASS".to_owned())], "{stdout}");
    let evidence = report["scenarios"][0]["evidence"].to_string();
    assert!(evidence.contains("byte for byte"), "the whole view was compared: {evidence}");
    assert_eq!(code, Some(0));
}

#[tokio::test]
async fn only_and_bad_flags() {
    let serve = Serve::start(&["--store", "memory"]).await;
    let (code, stdout) = check(&[&serve.url, "--json", "--only", "foreign-cursor,cursor-ahead"]).await;
    let report: Value = serde_json::from_str(&stdout).expect("JSON report");
    let names: Vec<_> = verdicts(&report).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["foreign-cursor", "cursor-ahead"]);
    assert_eq!(code, Some(0));
    assert_eq!(check(&[&serve.url, "--only", "no-such"]).await.0, Some(2));
    assert_eq!(check(&[&serve.url, "--args", "[1]"]).await.0, Some(2));
}

#[tokio::test]
async fn an_unreachable_target_cannot_be_probed() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/mcp", listener.local_addr().expect("addr"));
    drop(listener);
    assert_eq!(check(&[&url]).await.0, Some(3));
}

#[tokio::test]
async fn the_seed_scenario_fails_against_a_server_that_forks_on_resume() {
    let url = forking::server().await;
    let (code, stdout) = check(&[&url, "--json"]).await;
    let report: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"));
    let verdicts = verdicts(&report);
    let verdict = |name: &str| verdicts.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str());
    assert_eq!(verdict("resume-after-8"), Some("FAIL"), "{stdout}");
    let seed = &report["scenarios"][0]["evidence"];
    assert!(seed.to_string().contains("duplicates #1-#8"), "{seed}");
    for forked in ["churn", "emit-while-detached", "cursor-ahead", "foreign-cursor"] {
        assert_eq!(verdict(forked), Some("FAIL"), "{forked}: {stdout}");
    }
    assert_ne!(code, Some(0), "a failed scenario must fail the exit status");
    assert_eq!(code, Some(1));
}

/// `scripts/peers/check-peers.sh` against the official SDK servers: it must start each peer,
/// probe it and report (the peers are expected to fail some scenarios; that is what it
/// records). Skipped locally without the peers, a failure under `CI=true`.
#[tokio::test]
async fn check_peers_probes_every_sdk_server_and_reports() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    for peer in [".peers/py/bin/python", ".peers/node/node_modules/@modelcontextprotocol/sdk"] {
        if !root.join(peer).exists() {
            forkless_store::skip::skip(
                &format!("no {peer}"),
                &"run scripts/peers/install.sh (CI must install the peers)",
            );
            return;
        }
    }
    let out_dir = support::fresh_data_dir();
    let out = tokio::time::timeout(
        GUARD * 8,
        tokio::process::Command::new("bash")
            .arg(root.join("scripts/peers/check-peers.sh"))
            .arg("--no-install")
            .current_dir(&root)
            .env("FORKLESS_BIN", env!("CARGO_BIN_EXE_forkless"))
            .env("CHECK_PEERS_OUT", &out_dir)
            .stdin(Stdio::null())
            .output(),
    )
    .await
    .expect("check-peers.sh did not finish")
    .expect("run check-peers.sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "check-peers.sh failed ({})\n{stdout}\n{stderr}", out.status);
    for peer in ["python-sdk", "ts-sdk", "ts-sdk-example"] {
        assert!(
            stdout.lines().any(|l| l.starts_with(&format!("check-peers: {peer} (")) && l.contains(" PASS, ")),
            "no summary for {peer}:\n{stdout}\n{stderr}"
        );
        let report: Value = serde_json::from_str(
            &std::fs::read_to_string(out_dir.join(format!("{peer}.json"))).expect("report"),
        )
        .expect("JSON report");
        assert_eq!(verdicts(&report).len(), 16, "{report}");
    }
}

/// The task scenarios' negative control: on the memory store a restart forgets every task, and
/// `task-crash-working` and `task-crash-input` say so (the id no longer resolves).
#[tokio::test]
async fn the_task_scenarios_catch_a_server_that_forgets_tasks_in_a_restart() {
    let serve = Restartable::start_on(support::fresh_data_dir(), "--store memory").await;
    let only = "task-read-twice,task-crash-working,task-crash-input";
    let (code, stdout) = check(&[&serve.url, "--restart-cmd", &serve.command, "--only", only]).await;
    assert!(stdout.contains("task-read-twice      PASS"), "{stdout}");
    assert!(stdout.contains("task-crash-working   FAIL"), "{stdout}");
    assert!(stdout.contains("task-crash-input     FAIL"), "{stdout}");
    assert!(stdout.contains("Task not found"), "the evidence names the refusal: {stdout}");
    assert_eq!(code, Some(1), "{stdout}");
}

/// Two nodes on PostgreSQL: every task resolves on both the moment it is created, reads the
/// same from both once ended, and when the first node is killed its task resolves on the
/// second throughout and ends (settled `owner_lost` once the dead node's lease lapsed).
#[tokio::test]
async fn every_task_resolves_on_every_node_and_outlives_its_node_on_postgres() {
    let Some(db) = forkless_store_postgres::testing::fresh().await else { return };
    let node = |name: &'static str| {
        let store = db.url.clone();
        async move {
            Serve::start(&["--store", &store, "--node-id", name, "--lease-ttl", "1000", "--revisions", "all"])
                .await
        }
    };
    let (a, b) = (node("a").await, node("b").await);
    let kill = format!("kill -9 {}", a.pid());
    let only = "task-read-twice,task-every-node,task-node-loss";
    let (code, stdout) = check(&[&a.url, "--also-url", &b.url, "--kill-cmd", &kill, "--only", only]).await;
    assert!(stdout.contains("task-read-twice      PASS"), "{stdout}");
    assert!(stdout.contains("task-every-node      PASS"), "{stdout}");
    assert!(stdout.contains("task-node-loss       PASS"), "{stdout}");
    assert!(stdout.contains("owner_lost"), "the evidence names the settlement: {stdout}");
    assert_eq!(code, Some(0), "{stdout}");
}

/// `forkless serve` over TLS with a certificate this test makes for 127.0.0.1: `forkless
/// check https://…` trusting it (`--ca-file`) passes every scenario it can run, over HTTP/2
/// (what ALPN chooses) and over HTTP/1.1 (`--http1`), as the server's counts show. Without
/// the CA file the check cannot connect: verification is never skipped.
#[tokio::test]
async fn every_scenario_passes_over_tls_on_http2_and_http11() {
    let dir = tempfile::tempdir().unwrap();
    let made =
        rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned(), "localhost".to_owned()]).unwrap();
    let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    std::fs::write(&cert, made.cert.pem()).unwrap();
    std::fs::write(&key, made.signing_key.serialize_pem()).unwrap();
    let (cert, key) = (cert.to_str().unwrap(), key.to_str().unwrap());
    let serve = Serve::start(&["--store", "memory", "--tls-cert", cert, "--tls-key", key]).await;
    assert!(serve.url.starts_with("https://127.0.0.1:"), "{}", serve.url);
    for http1 in [false, true] {
        let mut args = vec![serve.url.as_str(), "--json", "--ca-file", cert];
        if http1 {
            args.push("--http1");
        }
        let (code, stdout) = check(&args).await;
        let report: Value =
            serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"));
        for (name, verdict) in verdicts(&report) {
            let want =
                if name == "crash-restart" || name.starts_with("task-") { "UNSUPPORTED" } else { "PASS" };
            assert_eq!(verdict, want, "{name} (http1: {http1})\n{stdout}");
        }
        assert_eq!(code, Some(0), "{stdout}");
    }
    let http = reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(made.cert.pem().as_bytes()).unwrap()])
        .build()
        .unwrap();
    let metrics_url = serve.url.replace("/mcp", "/metrics");
    let metrics = http.get(&metrics_url).send().await.unwrap().text().await.unwrap();
    for protocol in ["h2", "http/1.1"] {
        let line = format!("forkless_tls_connections_total{{protocol=\"{protocol}\"}} ");
        let count: u64 = metrics
            .lines()
            .find_map(|l| l.strip_prefix(&line))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {line}in {metrics}"));
        assert!(count > 0, "{protocol} was used: {metrics}");
    }
    let (code, stdout) = check(&[&serve.url, "--json", "--only", "resume-after-8"]).await;
    assert_ne!(code, Some(0), "an untrusted certificate is refused: {stdout}");
}
