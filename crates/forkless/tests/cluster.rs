//! Three `forkless serve` nodes on one PostgreSQL database behind a real HAProxy
//! (round-robin, no stickiness, started by the test): every `forkless check` scenario it can
//! run passes through the load balancer, and `forkless chaos` (20 sessions, cuts every 2 s on
//! average) sees no duplicate, gap, reordering or fork, with every resume verified. Requests
//! of one session land on any node; the nodes share the log, fence each other through the
//! database, and wake each other by hints.

mod support;

use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use support::{Serve, forkless};

/// HAProxy in the foreground in front of `backends`, on a free port; killed when dropped.
struct Haproxy {
    _child: tokio::process::Child,
    url: String,
    _dir: std::path::PathBuf,
}

impl Haproxy {
    async fn start(backends: &[String]) -> Option<Self> {
        if std::process::Command::new("haproxy").arg("-v").output().is_err() {
            assert!(std::env::var("CI").as_deref() != Ok("true"), "CI=true and haproxy is not installed");
            eprintln!("skipped: haproxy is not installed");
            return None;
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let dir = support::fresh_data_dir();
        let servers: String =
            backends.iter().enumerate().map(|(i, addr)| format!("  server n{i} {addr}\n")).collect();
        let cfg = format!(
            "global\n  maxconn 2000\ndefaults\n  mode http\n  timeout connect 2s\n  timeout client 120s\n  \
             timeout server 120s\n  option http-server-close\nfrontend fe\n  bind 127.0.0.1:{port}\n  \
             default_backend nodes\nbackend nodes\n  balance roundrobin\n{servers}"
        );
        let path = dir.join("haproxy.cfg");
        std::fs::write(&path, cfg).unwrap();
        let child = tokio::process::Command::new("haproxy")
            .arg("-db")
            .arg("-f")
            .arg(&path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("start haproxy");
        // Ready once it accepts connections.
        support::guard("haproxy accepts", async {
            while tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
        Some(Self { _child: child, url: format!("http://127.0.0.1:{port}/mcp"), _dir: dir })
    }
}

#[tokio::test]
async fn three_nodes_behind_haproxy_pass_check_and_chaos() {
    let Some(db) = forkless_store_postgres::testing::fresh().await else { return };
    let mut nodes = Vec::new();
    for name in ["n1", "n2", "n3"] {
        nodes.push(Serve::start(&["--store", &db.url, "--node-id", name, "--lease-ttl", "2000"]).await);
    }
    let Some(lb) = Haproxy::start(&nodes.iter().map(Serve::addr).collect::<Vec<_>>()).await else { return };

    let (code, stdout) = forkless(&["check", &lb.url, "--json"]).await;
    let report: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"));
    for scenario in report["scenarios"].as_array().expect("scenarios") {
        let want = if scenario["name"] == "crash-restart" { "UNSUPPORTED" } else { "PASS" };
        assert_eq!(scenario["verdict"], want, "{scenario}");
    }
    assert_eq!(code, Some(0), "{stdout}");

    let args = ["chaos", &lb.url, "--sessions", "20", "--duration", "10s", "--drop-every", "2s", "--json"];
    let (code, stdout) = forkless(&args).await;
    let s: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"));
    for key in ["duplicates", "gaps", "forks", "reordered", "foreign"] {
        assert_eq!(s[key], 0, "{key}: {s}");
    }
    assert_eq!(s["sessions_completed"], 20, "{s}");
    assert!(s["resumes"].as_u64().is_some_and(|n| n > 0), "resumes happened: {s}");
    assert_eq!(s["resumes_verified"], s["resumes"], "every resume verified: {s}");
    assert_eq!(code, Some(0), "{s}");
}
