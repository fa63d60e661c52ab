//! What `forkless check` reports: each scenario's verdict, evidence and timeline
//! ([`ScenarioReport`]), the whole run ([`Report`], what `--json` prints), and the human text
//! ([`render`]). The HTML page is [`crate::report`]'s.

use serde::Serialize;
use serde_json::Value;

use super::Verdict;
use super::record::Lane;

/// One scenario's result in the report.
#[derive(Clone, Debug, Serialize)]
pub struct ScenarioReport {
    /// Its name.
    pub name: &'static str,
    /// What it does.
    pub title: &'static str,
    /// PASS, FAIL or UNSUPPORTED.
    pub verdict: Verdict,
    /// When it passes.
    pub pass_if: &'static str,
    /// What was sent and observed, step by step.
    pub evidence: Vec<String>,
    /// How long it took.
    pub millis: u64,
    /// One lane per connection it opened: what each delivered, when, and how it ended.
    pub lanes: Vec<Lane>,
}

/// The whole report (`--json` prints it as is).
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// The endpoint probed.
    pub target: String,
    /// The server's `serverInfo`, if it sent one.
    pub server: Option<Value>,
    /// The tool emitting on request streams, if any.
    pub tool: Option<String>,
    /// The tool emitting on the standalone stream, if any.
    pub background_tool: Option<String>,
    /// Each scenario, in order.
    pub scenarios: Vec<ScenarioReport>,
    /// How many passed.
    pub passed: usize,
    /// How many failed.
    pub failed: usize,
    /// How many could not run against this server.
    pub unsupported: usize,
}

impl ScenarioReport {
    /// What `scenario`, begun at `started`, came to.
    pub(crate) fn new(
        scenario: &super::Scenario,
        outcome: super::Outcome,
        started: tokio::time::Instant,
        lanes: Vec<Lane>,
    ) -> Self {
        Self {
            name: scenario.name,
            title: scenario.title,
            verdict: outcome.verdict,
            pass_if: scenario.pass_if,
            evidence: outcome.evidence,
            millis: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            lanes,
        }
    }
}

impl Report {
    /// The report of `scenarios`, their verdicts counted.
    pub(crate) fn new(
        target: String,
        server: Option<Value>,
        tool: Option<String>,
        background_tool: Option<String>,
        scenarios: Vec<ScenarioReport>,
    ) -> Self {
        let count = |v: Verdict| scenarios.iter().filter(|s| s.verdict == v).count();
        Self {
            target,
            server,
            tool,
            background_tool,
            passed: count(Verdict::Pass),
            failed: count(Verdict::Fail),
            unsupported: count(Verdict::Unsupported),
            scenarios,
        }
    }
}

/// The human report: one row per scenario, its criterion and evidence indented below.
pub fn render(report: &Report) -> String {
    let mut s = format!("forkless check {}\n", report.target);
    if let Some(info) = &report.server {
        s.push_str(&format!(
            "server: {} {}\n",
            info["name"].as_str().unwrap_or("?"),
            info["version"].as_str().unwrap_or("")
        ));
    }
    let tool = |t: &Option<String>| t.clone().unwrap_or_else(|| "(none)".to_owned());
    s.push_str(&format!(
        "tools: {} (request stream), {} (standalone stream)\n\n",
        tool(&report.tool),
        tool(&report.background_tool)
    ));
    s.push_str(&format!("{:<20} {:<12} {}\n", "SCENARIO", "RESULT", "WHAT"));
    for r in &report.scenarios {
        s.push_str(&format!("{:<20} {:<12} {}\n", r.name, r.verdict.as_str(), r.title));
        s.push_str(&format!("{:<33} pass if: {}\n", "", r.pass_if));
        for line in &r.evidence {
            s.push_str(&format!("{:<33} - {line}\n", ""));
        }
    }
    s.push_str(&format!(
        "\n{} scenarios: {} PASS, {} FAIL, {} UNSUPPORTED\n",
        report.scenarios.len(),
        report.passed,
        report.failed,
        report.unsupported
    ));
    s
}
