//! `forkless check --client CMD`: check an MCP *client* for forks. The check serves a probing
//! MCP server (`server`) on a loopback port and runs `CMD URL` once per scenario: the command
//! is a driver that connects, calls the tool `numbers` once and prints what it received, one
//! JSON object per line (`{"notification": METHOD, "params": …}`, then `{"result": …}` or
//! `{"error": "…"}`). The probe cuts the call's stream after `#3` of 8 and answers the
//! client's reconnect as the scenario says; the verdict comes from what a server can see (was
//! `Last-Event-ID` sent, was the call POSTed again: a duplicate side effect) and what the
//! driver printed (duplicates, gaps, a fork taken for a continuation, a silent end).
//!
//! | scenario | the reconnect is answered with | PASS | FAIL | UNSUPPORTED |
//! |---|---|---|---|---|
//! | `client-resume` | the true continuation (`#4`…`#8`, the response; same `Mcp-Stream-Id`, resumed) | `#1`…`#8` once each, in order, and the result | a duplicate, a gap, the call POSTed again, or neither result nor error | the client reported the cut as an error without reconnecting |
//! | `client-new-stream` | a new stream, not marked resumed, from `#1` | the client refuses it: `#1`…`#3` once and an error | it takes the new stream for the continuation (`#1`… again), or any of the above | no reconnect, an error reported |
//! | `client-skipped-event` | the same stream marked resumed, from `#5` | the client refuses it: no gap, an error | it takes `#5` after `#3`, or any of the above | no reconnect, an error reported |
//! | `client-session-gone` | 404 | an error, the call not POSTed again | the call POSTed again (the tool would run twice), or a silent end | no reconnect, an error reported |
//!
//! It owns the scenarios and their verdicts; `server` the wire; `drive` the `forkless-client`
//! driver (`forkless drive URL`).

pub mod drive;
mod server;

use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::AsyncBufReadExt as _;

use super::report::{Report, ScenarioReport};
use super::{Outcome, Scenario, Verdict};
use crate::Error;
use server::{Answer, ProbeServer, Seen};

/// Events the call sends, and after which one its stream is cut.
const COUNT: u64 = 8;
const CUT: u64 = 3;
/// How long a driver may run before it counts as silent.
const DRIVER_LIMIT: Duration = Duration::from_secs(15);

/// One client scenario: what it is, and how the probe answers the reconnect.
#[derive(Clone, Copy, Debug)]
struct ClientScenario {
    scenario: Scenario,
    answer: Answer,
}

const CLIENT_SCENARIOS: [ClientScenario; 4] = [
    ClientScenario {
        scenario: Scenario {
            name: "client-resume",
            title: "cut the call's stream after #3 of 8; answer the reconnect with the true continuation",
            pass_if: "#1..#8 once each, in order, and the result; the call POSTed once",
        },
        answer: Answer::Continuation,
    },
    ClientScenario {
        scenario: Scenario {
            name: "client-new-stream",
            title: "cut after #3; answer the reconnect with a new stream (not marked resumed) from #1",
            pass_if: "the new stream refused: #1..#3 once and an error; never #1.. again",
        },
        answer: Answer::NewStream,
    },
    ClientScenario {
        scenario: Scenario {
            name: "client-skipped-event",
            title: "cut after #3; answer the reconnect with the stream marked resumed but from #5",
            pass_if: "the gap refused: no #5 after #3, an error",
        },
        answer: Answer::SkipOne,
    },
    ClientScenario {
        scenario: Scenario {
            name: "client-session-gone",
            title: "cut after #3; answer the reconnect with 404 (the session is gone)",
            pass_if: "an error, the call not POSTed again",
        },
        answer: Answer::Gone,
    },
];

/// What the driver printed.
#[derive(Debug, Default)]
struct Printed {
    numbers: Vec<u64>,
    result: bool,
    error: Option<String>,
    /// It did not end within [`DRIVER_LIMIT`].
    silent: bool,
    /// Lines that were not the driver protocol's.
    other: Vec<String>,
    /// How long the driver ran.
    took: Duration,
}

/// Check the client `command` (run as `command URL`) with every client scenario `only` allows.
pub(crate) async fn check(command: &str, only: &[String], json: bool) -> Result<Report, Error> {
    for name in only {
        if !CLIENT_SCENARIOS.iter().any(|s| s.scenario.name == name) {
            let known: Vec<_> = CLIENT_SCENARIOS.iter().map(|s| s.scenario.name).collect();
            return Err(Error::Config(format!(
                "unknown client scenario `{name}` (known: {})",
                known.join(", ")
            )));
        }
    }
    let mut scenarios = Vec::new();
    for scenario in CLIENT_SCENARIOS {
        if !only.is_empty() && !only.iter().any(|n| n == scenario.scenario.name) {
            continue;
        }
        let started = tokio::time::Instant::now();
        let probe = ProbeServer::new(scenario.answer, COUNT, CUT);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.map_err(Error::Startup)?;
        let url = format!("http://{}/mcp", listener.local_addr().map_err(Error::Startup)?);
        let serving = tokio::spawn(probe.clone().serve(listener));
        let printed = run_driver(command, &url).await?;
        serving.abort();
        let seen = probe.seen();
        if seen.requests.is_empty() {
            return Err(Error::Probe(format!(
                "`{command} {url}` never reached the probe: {:?}",
                printed.other
            )));
        }
        let outcome = judge(scenario.answer, &seen, &printed);
        if !json {
            eprintln!("{:<22} {}", scenario.scenario.name, outcome.verdict.as_str());
        }
        scenarios.push(ScenarioReport::new(&scenario.scenario, outcome, started, seen.lanes));
    }
    Ok(Report::new(format!("client: {command}"), None, Some("numbers".into()), None, scenarios))
}

/// Run `command url` to its end (or [`DRIVER_LIMIT`]) and read what it printed.
async fn run_driver(command: &str, url: &str) -> Result<Printed, Error> {
    let mut child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{command} {url}"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| Error::Probe(format!("cannot run `{command}`: {e}")))?;
    let stdout = child.stdout.take().ok_or_else(|| Error::Probe("no stdout".into()))?;
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let mut printed = Printed::default();
    let started = tokio::time::Instant::now();
    let read = async {
        while let Ok(Some(line)) = lines.next_line().await {
            printed.take(&line);
        }
    };
    printed.silent = tokio::time::timeout(DRIVER_LIMIT, read).await.is_err();
    printed.took = started.elapsed();
    let _ = child.start_kill();
    let _ = child.wait().await;
    Ok(printed)
}

impl Printed {
    fn take(&mut self, line: &str) {
        let Ok(message) = serde_json::from_str::<Value>(line) else {
            self.other.push(line.to_owned());
            return;
        };
        if let Some(result) = message.get("result") {
            self.result = result.get("isError") != Some(&Value::Bool(true));
            if !self.result {
                self.error = Some(format!("an error result: {result}"));
            }
        } else if let Some(error) = message.get("error") {
            self.error = Some(error.as_str().map_or_else(|| error.to_string(), str::to_owned));
        } else if message["notification"] == "notifications/message"
            && let Some(n) = message.pointer("/params/data").and_then(Value::as_str).and_then(number)
        {
            self.numbers.push(n);
        } else {
            self.other.push(line.to_owned());
        }
    }

    /// What the host saw, for the evidence.
    fn describe(&self) -> String {
        let numbers: Vec<String> = self.numbers.iter().map(|n| format!("#{n}")).collect();
        let end = match (&self.error, self.result, self.silent) {
            (_, true, _) => "then the result".to_owned(),
            (Some(e), _, _) => format!("then an error: {}", e.chars().take(160).collect::<String>()),
            (None, false, true) => {
                format!("then nothing for {} s (neither result nor error)", DRIVER_LIMIT.as_secs())
            }
            (None, false, false) => "then it exited without result or error".to_owned(),
        };
        format!(
            "the driver printed [{}] {end} ({} ms after it started)",
            numbers.join(" "),
            self.took.as_millis()
        )
    }
}

/// `#n` at the end of a notification's text.
fn number(text: &str) -> Option<u64> {
    text.rsplit_once('#')?.1.trim().parse().ok()
}

/// The verdict of one scenario from what the probe saw and the driver printed.
fn judge(answer: Answer, seen: &Seen, printed: &Printed) -> Outcome {
    let mut evidence = vec![format!("the probe saw: {}", seen.requests.join(", "))];
    evidence.push(printed.describe());
    if seen.bare_gets_after_call > 0 {
        evidence
            .push("the client reconnected without Last-Event-ID: the events between cannot be named".into());
    }
    let verdict = |v: Verdict, why: &str, mut evidence: Vec<String>| {
        evidence.push(why.to_owned());
        Outcome { verdict: v, evidence }
    };
    let once_in_order = printed.numbers.iter().enumerate().all(|(i, &n)| n == i as u64 + 1);
    if seen.calls > 1 {
        return verdict(
            Verdict::Fail,
            &format!(
                "the call was POSTed {} times: the tool would run again (a duplicate side effect)",
                seen.calls
            ),
            evidence,
        );
    }
    if !once_in_order {
        let why = match answer {
            Answer::NewStream => "a new stream was taken for the continuation: events handed on twice",
            Answer::SkipOne => "a continuation that skipped an event was taken: a gap handed on",
            _ => "events were not handed on once each, in order",
        };
        return verdict(Verdict::Fail, why, evidence);
    }
    if printed.result && printed.numbers.len() as u64 != COUNT {
        return verdict(Verdict::Fail, "the result came without every event before it", evidence);
    }
    if printed.silent || (!printed.result && printed.error.is_none()) {
        return verdict(Verdict::Fail, "the call neither completed nor failed: a silent end", evidence);
    }
    if seen.cursors.is_empty() {
        return verdict(
            Verdict::Unsupported,
            "the client did not resume the cut stream (no GET with Last-Event-ID); it reported the cut",
            evidence,
        );
    }
    match (answer, printed.result) {
        (Answer::Continuation, true) => {
            verdict(Verdict::Pass, "every event once, in order, and the result", evidence)
        }
        (Answer::Continuation, false) => {
            verdict(Verdict::Fail, "the true continuation was offered and not taken", evidence)
        }
        (_, false) => {
            verdict(Verdict::Pass, "refused with an error; nothing handed on twice or skipped", evidence)
        }
        (_, true) => {
            verdict(Verdict::Fail, "a result from a stream that does not continue the call's", evidence)
        }
    }
}

#[cfg(test)]
mod tests;
