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
