//! `forkless chaos` as a real process against `forkless serve`: a short run with frequent
//! cuts sees no duplicate, gap or fork, on the memory and on the durable store.

mod forking;
mod support;

use serde_json::Value;
use support::Serve;

async fn chaos(url: &str) -> (Option<i32>, Value) {
    run(&["chaos", url, "--sessions", "5", "--duration", "4s", "--drop-every", "500ms", "--json"]).await
}

async fn run(args: &[&str]) -> (Option<i32>, Value) {
    let (code, stdout) = support::forkless(args).await;
    let summary = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"));
    (code, summary)
}

fn assert_clean(code: Option<i32>, s: &Value) {
    for key in
        ["events_delivered", "duplicates", "gaps", "forks", "resumes", "rejections", "resume_latency_ms"]
    {
        assert!(s.get(key).is_some(), "missing key {key}: {s}");
    }
    assert!(s["resume_latency_ms"]["p50"].is_number() && s["resume_latency_ms"]["p99"].is_number(), "{s}");
    assert!(s["rejections"].is_object(), "{s}");
    assert_eq!(s["duplicates"], 0, "{s}");
    assert_eq!(s["gaps"], 0, "{s}");
    assert_eq!(s["forks"], 0, "{s}");
    assert!(s["resumes"].as_u64().is_some_and(|n| n > 0), "no resume happened: {s}");
    assert_eq!(s["sessions_completed"], 5, "{s}");
    assert_eq!(
        s["events_delivered"],
        5 * s["events_per_session"].as_u64().expect("events_per_session"),
        "{s}"
    );
    assert_eq!(code, Some(0), "{s}");
}

#[tokio::test]
async fn five_sessions_with_cuts_every_half_second_see_no_duplicate_gap_or_fork_on_the_memory_store() {
    let serve = Serve::start(&["--store", "memory"]).await;
    let (code, summary) = chaos(&serve.url).await;
    assert_clean(code, &summary);
}

#[tokio::test]
async fn five_sessions_with_cuts_every_half_second_see_no_duplicate_gap_or_fork_on_the_durable_store() {
    let serve = Serve::start(&[]).await;
    let (code, summary) = chaos(&serve.url).await;
    assert_clean(code, &summary);
}

#[tokio::test]
async fn a_server_that_forks_on_resume_fails_the_run() {
    let url = forking::server().await;
    let args = ["chaos", &url, "--sessions", "2", "--duration", "1s", "--drop-every", "300ms", "--json"];
    let (code, s) = run(&args).await;
    let broken = s["duplicates"].as_u64().unwrap_or(0)
        + s["gaps"].as_u64().unwrap_or(0)
        + s["forks"].as_u64().unwrap_or(0);
    assert!(broken > 0, "the forks went unnoticed: {s}");
    assert_eq!(code, Some(1), "{s}");
}
