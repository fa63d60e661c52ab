//! The harness in smoke mode (`--quick`) against the servers of this crate (forkless and the
//! bare hyper echo), so it cannot rot. This asserts that every load ran and produced sane
//! numbers; it asserts nothing about speed.

use std::path::PathBuf;

use forkless_bench::suite::{self, Options};

#[tokio::test(flavor = "current_thread")]
async fn quick_run_measures_every_load_without_errors() {
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("bench-smoke");
    // forkless on PostgreSQL too, when the machine has it (always in CI).
    let db = forkless_store_postgres::testing::fresh().await;
    let redis = forkless_store_redis::testing::fresh().await;
    let opts = Options {
        quick: true,
        exe: PathBuf::from(env!("CARGO_BIN_EXE_forkless-bench")),
        rmcp: None,
        peers: None,
        pin: false,
        scratch: suite::scratch_dir(&out).expect("scratch dir"),
        only: Vec::new(),
        postgres: db.as_ref().map(|db| db.url.clone()),
        redis: redis.as_ref().map(|r| format!("{}#{}", r.url, r.prefix)),
    };
    let rows = suite::run(&opts, |_| {}).await.expect("the quick run completes");
    for load in [
        "echo-json",
        "echo-sse",
        "notify-1",
        "notify-many",
        "notify-latency",
        "resume-live",
        "resume-replay",
        "idle",
    ] {
        assert!(rows.iter().any(|r| r.load == load), "no {load} row");
    }
    for row in &rows {
        assert_eq!(row.measured.errors, 0, "{} on {}: errors", row.load, row.server);
        assert!(row.measured.ops > 0, "{} on {}: nothing measured", row.load, row.server);
        if let Some(idle) = &row.idle {
            assert_eq!(idle.sessions, row.clients as u64, "every idle session created");
            assert_eq!(idle.streams_held, idle.sessions, "every GET stream held");
        } else {
            assert!(row.measured.throughput > 0.0, "{} on {}: zero throughput", row.load, row.server);
        }
        if row.load.starts_with("echo") {
            assert!(row.measured.p50_us.is_some_and(|p| p > 0.0), "{}: latency measured", row.server);
        }
    }
    if db.is_some() {
        let on_postgres =
            |load: &str| rows.iter().any(|r| r.load == load && r.server == "forkless/postgres/sse");
        assert!(on_postgres("notify-1") && on_postgres("notify-many"), "the stream loads ran on postgres");
    }
    let ratios = forkless_bench::report::ratios(&rows);
    assert!(ratios.iter().any(|q| q.reference == "hyper/json" && q.throughput > 0.0));
    // A quick run has no 16-connection echo: the notification and latency targets only.
    let targets = forkless_bench::targets::targets(&rows);
    assert_eq!(targets.len(), 2, "{targets:?}");
    assert!(targets.iter().all(|t| t.measured.is_finite()), "{targets:?}");
}

/// The TLS rows of `scripts/bench-tls.sh` in miniature, so they cannot rot: both servers
/// serve TLS, and the SSE echo runs without errors over HTTP/2 (what ALPN chooses) and over
/// HTTP/1.1, against a certificate the load trusts through its CA file only.
#[tokio::test(flavor = "current_thread")]
async fn the_tls_echo_runs_over_http2_and_http11_against_both_servers() {
    use forkless_bench::load::{self, Alpn, Conn, EchoCall, Endpoint};
    let dir = tempfile::tempdir().unwrap();
    let ca = forkless_tls::testing::TestCa::new(dir.path());
    let (cert, key) = ca.server(&["127.0.0.1"], "bench");
    for target in ["hyper", "forkless"] {
        let mut server = tokio::process::Command::new(env!("CARGO_BIN_EXE_forkless-bench"))
            .args(["serve", "--target", target, "--answer", "sse", "--tls-cert"])
            .arg(&cert)
            .arg("--tls-key")
            .arg(&key)
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start the server");
        let mut lines =
            tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(server.stdout.take().unwrap()));
        let line = lines.next_line().await.unwrap().expect("the listening line");
        let url = line.strip_prefix("listening on ").expect("listening on URL").to_owned();
        assert!(url.starts_with("https://127.0.0.1:"), "{url}");
        for (alpn, protocol) in [(Alpn::H2, "h2"), (Alpn::Http1, "http/1.1")] {
            let ep = Endpoint::from_https_url(&url, Some(&ca.ca_file), alpn).expect("endpoint");
            assert_eq!(Conn::open(&ep).await.expect("connect").protocol(), protocol, "{target}");
            let probe: load::Probe = std::sync::Arc::new(|| None);
            let d = std::time::Duration::from_millis(300);
            let m = load::echo(&ep, 4, std::time::Duration::ZERO, d, EchoCall::ours(true), &probe)
                .await
                .expect("the echo load");
            assert_eq!(m.errors, 0, "{target} over {protocol}");
            assert!(m.ops > 0, "{target} over {protocol}: nothing measured");
        }
        // Without the CA, the load cannot connect: the bench verifies too.
        let untrusting = Endpoint::from_https_url(&url, None, Alpn::H2).expect("endpoint");
        assert!(Conn::open(&untrusting).await.is_err(), "{target}: connected without trusting its CA");
    }
}
