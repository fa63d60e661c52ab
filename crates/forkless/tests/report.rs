//! `forkless check --report` and `forkless chaos --report` pages, rendered by a real browser:
//! Debian's `chromium`, headless (installed by `scripts/system-packages.sh`). The page must
//! render with no console message, show one lane per connection each scenario opened (as the
//! JSON report lists them), and one bar per latency bucket.

mod support;

use std::path::Path;

use serde_json::Value;
use support::{Serve, forkless};

/// The headless browser, or `None` to skip outside CI.
fn chromium() -> Option<&'static str> {
    let found =
        std::process::Command::new("chromium").arg("--version").output().is_ok_and(|o| o.status.success());
    if found {
        return Some("chromium");
    }
    forkless_store::skip::skip("no chromium", &"run scripts/system-packages.sh (CI must install it)");
    None
}

/// The DOM `chromium` built from `page`, and what it logged (console messages included).
async fn render(browser: &str, page: &Path) -> (String, String) {
    let profile = support::fresh_data_dir();
    let out = tokio::process::Command::new(browser)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(["--enable-logging=stderr", "--v=0", "--dump-dom"])
        .arg(format!("file://{}", page.display()))
        .kill_on_drop(true)
        .output();
    let out = support::guard("chromium renders the page", out).await.expect("run chromium");
    assert!(out.status.success(), "chromium failed: {}", String::from_utf8_lossy(&out.stderr));
    (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn no_console_message(log: &str) {
    let console: Vec<&str> =
        log.lines().filter(|l| l.contains(":CONSOLE(") || l.contains("Uncaught")).collect();
    assert!(console.is_empty(), "the page logged to the console: {console:?}");
}

#[tokio::test]
async fn a_check_report_renders_with_one_lane_per_connection_each_scenario_opened() {
    let Some(browser) = chromium() else { return };
    let serve = Serve::start(&["--store", "memory"]).await;
    let page = support::fresh_data_dir().join("check.html");
    let only = "resume-after-8,cursor-ahead,racing-resumes,churn";
    let page_arg = page.display().to_string();
    let (_, stdout) = forkless(&["check", &serve.url, "--json", "--only", only, "--report", &page_arg]).await;
    let report: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"));
    let (dom, log) = render(browser, &page).await;
    no_console_message(&log);
    let sections: Vec<&str> = dom.split("<section class=\"scenario\"").skip(1).collect();
    let scenarios = report["scenarios"].as_array().expect("scenarios");
    assert_eq!(sections.len(), scenarios.len(), "a section per scenario");
    for (section, scenario) in sections.iter().zip(scenarios) {
        let name = scenario["name"].as_str().expect("a name");
        let lanes = scenario["lanes"].as_array().expect("lanes").len();
        assert!(section.contains(&format!("id=\"{name}\"")), "{name}: sections in order");
        assert_eq!(section.matches("<g class=\"lane\"").count(), lanes, "{name}: one lane per connection");
        // Every scenario here cuts and resumes or is refused: more than one connection.
        assert!(lanes >= 2, "{name}: {lanes} lanes");
    }
    // The resumed stream's numbers continue the cut one: green marks, no red ones.
    let resumed = sections[0];
    assert!(resumed.contains("class=\"ok\""), "numbered marks drawn");
    assert!(!resumed.contains("class=\"gap\""), "no gap in a passing resume");
}

#[tokio::test]
async fn a_chaos_report_renders_its_latency_histogram_and_rejections() {
    let Some(browser) = chromium() else { return };
    let serve = Serve::start(&["--store", "memory"]).await;
    let page = support::fresh_data_dir().join("chaos.html");
    let page_arg = page.display().to_string();
    let args =
        ["chaos", &serve.url, "--json", "--sessions", "3", "--duration", "2s", "--drop-every", "300ms"];
    let (_, stdout) = forkless(&[&args[..], &["--report", &page_arg]].concat()).await;
    let summary: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"));
    let (dom, log) = render(browser, &page).await;
    no_console_message(&log);
    let buckets = summary["resume_latency_histogram"].as_array().expect("buckets");
    assert_eq!(dom.matches("<g class=\"bucket\"").count(), buckets.len(), "a bar per bucket");
    let counted: u64 = buckets.iter().map(|b| b["count"].as_u64().unwrap_or(0)).sum();
    assert_eq!(counted, summary["resume_latency_ms"]["count"].as_u64().unwrap_or(0));
    assert!(counted > 0, "cuts were resumed: {summary}");
    assert!(dom.contains("Rejections by reason"));
}
