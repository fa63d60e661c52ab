//! `forkless check --client CMD`: the probe server against real clients, run as their drivers
//! (`tests/interop/drivers/`): forkless-client (`forkless drive`) passes every scenario; the
//! official Python and TypeScript SDK clients, v1 and v2, resume a true continuation and take
//! a new stream and a skipped event for one (the failures `docs/peers.md` records), which is
//! also the check's negative control: it fails clients that fork.
//!
//! The SDKs are installed project-locally by `scripts/peers/install.sh`; without them these
//! tests say so and pass locally, but fail under `CI=true`.

mod support;

use std::collections::BTreeMap;

use serde_json::Value;
use support::{forkless_output, peer, root};

/// `forkless check --client CMD --json`: each scenario's verdict, and the report.
async fn verdicts(command: &str) -> (BTreeMap<String, String>, Value) {
    let out = forkless_output(&["check", "--client", command, "--json"], &[]).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {stdout} {}", String::from_utf8_lossy(&out.stderr)));
    let verdicts = report["scenarios"]
        .as_array()
        .expect("scenarios")
        .iter()
        .map(|s| (s["name"].as_str().unwrap().to_owned(), s["verdict"].as_str().unwrap().to_owned()))
        .collect();
    (verdicts, report)
}

#[tokio::test]
async fn forkless_client_passes_every_client_scenario() {
    let command = format!("{} drive", env!("CARGO_BIN_EXE_forkless"));
    let (verdicts, report) = verdicts(&command).await;
    assert_eq!(verdicts.len(), 4, "{report:#}");
    for (name, verdict) in &verdicts {
        assert_eq!(verdict, "PASS", "{name}: {report:#}");
    }
    // The HTML report draws the probe's connections: the call's POST and the reconnect.
    let lanes = report["scenarios"][0]["lanes"].as_array().expect("lanes");
    assert!(lanes.len() >= 2, "{lanes:?}");
}

#[tokio::test]
async fn the_official_sdk_clients_resume_and_take_forks_for_continuations() {
    let mut drivers = Vec::new();
    if let Some(py) = peer(".peers/py/bin/python") {
        drivers.push(format!(
            "{} {}",
            py.display(),
            root().join("tests/interop/drivers/python_v1.py").display()
        ));
    }
    if let Some(py) = peer(".peers/py2/bin/python") {
        drivers.push(format!(
            "{} {}",
            py.display(),
            root().join("tests/interop/drivers/python_v2.py").display()
        ));
    }
    if peer(".peers/node/node_modules/@modelcontextprotocol/sdk").is_some() {
        drivers.push(format!("node {}", root().join("tests/interop/drivers/ts_v1.mjs").display()));
    }
    if peer(".peers/node2/node_modules/@modelcontextprotocol/client").is_some() {
        drivers.push(format!("node {}", root().join("tests/interop/drivers/ts_v2.mjs").display()));
    }
    for command in drivers {
        let (verdicts, report) = verdicts(&command).await;
        let expected = [
            ("client-new-stream", "FAIL"),
            ("client-resume", "PASS"),
            ("client-session-gone", "PASS"),
            ("client-skipped-event", "FAIL"),
        ];
        let got: Vec<(&str, &str)> = verdicts.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(got, expected, "{command}: {report:#}");
        // The evidence of a fork taken: the driver printed #1.. again.
        let new_stream = &report["scenarios"][1];
        let evidence = new_stream["evidence"].to_string();
        assert!(evidence.contains("#1 #2 #3 #1 #2 #3"), "{command}: {evidence}");
    }
}
