//! `forkless check URL`: probe any MCP Streamable HTTP server for session forks.
//!
//! Every scenario opens fresh sessions, drives a *numbered stream* (a tool whose log
//! notifications end in `#1` … `#N`) and judges the server only by what any client can
//! observe: HTTP statuses, SSE event ids, which numbers arrive after a reconnect, and the
//! JSON-RPC response. The forkless headers (`Mcp-Stream-Id`, `Mcp-Stream-Resumed`) are read
//! when present and never required, so a server that follows only the specification is judged
//! fairly: refusing a cursor it cannot continue (400, 404, 409, …) is not a fork; answering it
//! with a `200` event stream that a client reads as the continuation of its cursor, while it is
//! not, is (PROTOCOL section 1: "never answered with something the client would read as a
//! continuation").
//!
//! | scenario | PASS | FAIL | UNSUPPORTED |
//! |---|---|---|---|
//! | `resume-after-8` (the seed) | cut after `#8`, GET with its id: `200` stream with `#9`…`#N` (and the response) each exactly once, in order (PROTOCOL §4 row 11) | a `200` stream with a duplicate, a gap, a reordering (a notification after the response counts) or a missing end | the resume is refused, or the events carry no id |
//! | `cursor-lost` | cut the standalone stream after `#8`, stay away 300 ms while the background tool emits, GET without `Last-Event-ID`: any non-2xx (row 2/4), or a `200` flagged `Mcp-Stream-Resumed: false` with a new `Mcp-Stream-Id` (row 3, reset contract), or (unflagged) exactly `#9`…`#N` | an unflagged `200` that is not the exact continuation (lost or replayed events): the seed's silent fork | no background tool or no GET stream |
//! | `bare-numeric-cursor` | GET with only the sequence part of the last id (`41` for `<stream>.41`; the event's number `8` when the id has no such part): any non-2xx (row 5), or a `200` flagged new | an unflagged `200` stream | the server's own ids are bare numbers (then this is its normal format, judged by `resume-after-8`) |
//! | `foreign-cursor` | 300 ms after A's cut, session B sends session A's cursor: any non-2xx (row 6), or a `200` flagged new | an unflagged `200` stream (above all one carrying A's events) | — |
//! | `cursor-ahead` | a cursor 1,000,000 past the last event sent: any non-2xx (row 9), or a `200` flagged new | an unflagged `200` stream | the id does not end in a sequence number (after a separator) to advance |
//! | `racing-resumes` | two GETs with one cursor at once: every `200` delivers a clean prefix of `#9`…`#N`, exactly one carries it to the end (the other is fenced or refused; §6) | a connection delivers anything else, neither reaches the end, or both stay attached to the end | both refused |
//! | `two-plain-gets` | two cursor-less GETs at once on a new session: one is refused (row 2), or both attach and each message of the background tool arrives on exactly one (the specification allows several streams) | a message arrives on both, or on neither | both refused (no GET stream), or both attached and no background tool to tell |
//! | `idempotent-replay` | two resumes from one cursor, after the tool has finished (so this is also the resume of a completed stream), deliver the same events with the same ids, or the second is refused (the seed: "the same continuation or a clean, typed rejection") | they differ | the first resume is refused |
//! | `emit-while-detached` | a 60-event stream, cut after `#2`, stay away 500 ms (20 events) and resume while the tool is still emitting: exactly `#3`…`#60` and the response, so replay and live delivery join without a gap or a repeat (§5, §6: never dropped silently) | anything else | the resume is refused |
//! | `churn` | 150 events, cut after 1–12 events at random, resume each time: `#1`…`#150` exactly once, in order, with the response | any duplicate, gap, reordering, a refused resume after one succeeded, or no end | the first resume is refused, or none of its numbered events arrive (with `--progress` suggested when the calls did not ask for progress) |
//! | `crash-restart` | read a 40-event request stream to `#10`, run `--restart-cmd` (which should kill the server, for example with `kill -9`, and start it again), wait until it answers, resume: refused, or `#11`… without gap or duplicate ending with the response to the call (a result, or the error a restarted server owes a lost request); and a replay from the first id seen names exactly the events seen, byte for byte | a resumed stream that skips, repeats, or ends without the response (a client that trusts it waits for ever), or an id seen before the restart that names other data after it | no `--restart-cmd` given, or the resume is refused before the restart |
//!
//! After a resume, the check reads like a client: when the server closes the connection before
//! the stream's end (the 2025-11-25 polling model, or a server that answers a resume it cannot
//! attach yet with a short stream), it reconnects with the last id it saw and judges everything
//! delivered across those connections. After the response it reads on for 300 ms, so a
//! notification that arrives after its own request's response shows as the reordering it is.
//!
//! A resume answered `409` is retried for up to 5 s (a server may not have noticed the cut
//! yet; PROTOCOL §6 bounds this by its grace window); `racing-resumes` retries only when both
//! GETs got `409`, so a `409` answering the race itself stands. The check reconnects at once
//! rather than after the server's `retry:` delay: it probes, it does not pace.
//!
//! Which tools: `--tool` (numbered notifications on the request's own SSE stream, default
//! `start-notification-stream`) and `--background-tool` (on the standalone GET stream, default
//! `start-background-stream`), called with `{"interval": ms, "count": n}` merged with `--args`.
//! Scenarios that need a tool the server lacks are UNSUPPORTED.
//!
//! Five task scenarios (2026-07-28) follow, see `tasks`.
//!
//! With `--client CMD` the check probes a client instead (`clients`: a probing server, four
//! scenarios, the drivers' protocol).
//!
//! This module owns the command, its report and its exit status. `probe` owns the raw HTTP,
//! `tape` the reading and comparing of numbered events, `scenarios` the scripts.

pub mod clients;
mod probe;
mod record;
mod report;
mod scenarios;
mod steps;
mod tape;
mod tasks;

use std::io::Write as _;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use crate::Error;
use probe::Target;
pub use record::{Carried, Ending, How, Lane, Mark};
pub use report::{Report, ScenarioReport, render};
use steps::{Ctx, Progress, ToolSpec};
pub(crate) use tape::payload_number;

/// Flags of `forkless check`.
#[derive(Clone, Debug, clap::Args)]
#[command(
    after_help = "Scenarios and their PASS criteria: see docs/peers.md and `forkless check URL` output.\n\
    Exit status: 0 no scenario failed, 1 a scenario failed, 2 bad flags, 3 the target cannot be probed."
)]
pub struct CheckArgs {
    /// The MCP endpoint, e.g. `http://127.0.0.1:8080/mcp` (not with `--client`).
    #[arg(value_name = "URL", required_unless_present = "client", default_value = "")]
    pub url: String,
    /// Check a client instead: serve a probing server and run `CMD URL` once per client
    /// scenario (the command calls the tool `numbers` and prints what it received, one JSON
    /// object per line; drivers for the official SDKs are in `tests/interop/drivers/`, and
    /// `forkless drive` is forkless-client's).
    #[arg(long, value_name = "CMD", conflicts_with_all = ["restart_cmd", "kill_cmd", "also_urls"])]
    pub client: Option<String>,
    /// Tool that sends numbered log notifications (`... #1` .. `#N`) on its request's SSE stream.
    #[arg(long, value_name = "NAME")]
    pub tool: Option<String>,
    /// Tool that sends numbered notifications on the standalone GET stream.
    #[arg(long, value_name = "NAME")]
    pub background_tool: Option<String>,
    /// JSON object merged over the tools' `{"interval": ms, "count": n}` arguments; a string
    /// value `"$count"`, `"$interval"` (ms) or `"$seconds"` (the whole run) stands for that
    /// number, for tools whose inputs are named otherwise.
    #[arg(long, value_name = "JSON")]
    pub args: Option<String>,
    /// Ask the tools for progress (each call carries a `progressToken`) and count their
    /// `notifications/progress` as the numbered events: for servers that number their work
    /// by progress, such as stdio servers behind a gateway, whose log messages name no request.
    #[arg(long)]
    pub progress: bool,
    /// Run only these scenarios (comma-separated names).
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    pub only: Vec<String>,
    /// Seed for the churn scenario's cut points.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub seed: u64,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Also write a self-contained HTML page of the run (each scenario's timeline, a lane
    /// per connection, and its evidence) to this file.
    #[arg(long, value_name = "FILE.html")]
    pub report: Option<std::path::PathBuf>,
    /// A shell command that restarts the target server (for example one that kills it with
    /// `kill -9` and starts it again on the same address and data): enables `crash-restart`,
    /// `task-crash-working` and `task-crash-input`.
    #[arg(long, value_name = "CMD")]
    pub restart_cmd: Option<String>,
    /// Another node of the same deployment (repeatable): `task-every-node` reads every task
    /// there too, and `task-read-twice` reads from each.
    #[arg(long = "also-url", value_name = "URL")]
    pub also_urls: Vec<String>,
    /// Tool that runs as a task when the client declares the tasks extension (2026-07-28),
    /// called with `{"seconds": N}`.
    #[arg(long, default_value = "slow_compute", value_name = "NAME")]
    pub task_tool: String,
    /// Tool that runs as a task asking the client for input.
    #[arg(long, default_value = "confirm_delete", value_name = "NAME")]
    pub input_tool: String,
    /// A shell command that kills the node at URL for good (the others, `--also-url`, live
    /// on): enables `task-node-loss`.
    #[arg(long, value_name = "CMD")]
    pub kill_cmd: Option<String>,
    /// For `https://`: also trust the certificates of this PEM file (beside the system's roots
    /// and `SSL_CERT_FILE`'s).
    #[arg(long, value_name = "FILE")]
    pub ca_file: Option<std::path::PathBuf>,
    /// Speak HTTP/1.1 only (by default HTTP/2 is taken where a TLS server offers it).
    #[arg(long)]
    pub http1: bool,
}

impl CheckArgs {
    /// `forkless check URL` with every other flag at its default (for [`probe`] from code).
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            client: None,
            tool: None,
            background_tool: None,
            args: None,
            progress: false,
            only: Vec::new(),
            seed: 1,
            json: false,
            report: None,
            restart_cmd: None,
            also_urls: Vec::new(),
            task_tool: "slow_compute".into(),
            input_tool: "confirm_delete".into(),
            kill_cmd: None,
            ca_file: None,
            http1: false,
        }
    }
}

/// A scenario's result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Verdict {
    /// The server behaved as the contract requires.
    Pass,
    /// A client could have been handed a fork, a duplicate or a gap.
    Fail,
    /// The server lacks what the scenario needs (a tool, resumption at all).
    Unsupported,
}

impl Verdict {
    /// `PASS`, `FAIL` or `UNSUPPORTED`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Pass => "PASS",
            Self::Fail => "FAIL",
            Self::Unsupported => "UNSUPPORTED",
        }
    }
}

/// A verdict and the observations behind it.
#[derive(Clone, Debug)]
pub(crate) struct Outcome {
    pub(crate) verdict: Verdict,
    pub(crate) evidence: Vec<String>,
}

/// One scenario: its name, what it does, and when it passes.
#[derive(Clone, Copy, Debug)]
pub struct Scenario {
    /// The name used by `--only` and in the report.
    pub name: &'static str,
    /// What it does.
    pub title: &'static str,
    /// When it passes (the full criteria are in the module docs).
    pub pass_if: &'static str,
}

/// The scenarios, in the order they run.
pub const SCENARIOS: [Scenario; 11] = [
    Scenario {
        name: "resume-after-8",
        title: "cut a numbered stream after #8, resume with its id",
        pass_if: "200 stream with #9..#N (and the response) exactly once, in order",
    },
    Scenario {
        name: "cursor-lost",
        title: "cut the standalone stream after #8, stay away 300 ms, reconnect without Last-Event-ID",
        pass_if: "refused (non-2xx), or a new stream flagged Mcp-Stream-Resumed: false, or exactly #9..#N",
    },
    Scenario {
        name: "bare-numeric-cursor",
        title: "resume with only the numeric part of the last id",
        pass_if: "refused (non-2xx) or flagged new; never an unflagged 200 stream",
    },
    Scenario {
        name: "foreign-cursor",
        title: "resume with another session's cursor",
        pass_if: "refused (non-2xx) or flagged new; never an unflagged 200 stream",
    },
    Scenario {
        name: "cursor-ahead",
        title: "resume with a cursor past the last event sent",
        pass_if: "refused (non-2xx) or flagged new; never an unflagged 200 stream",
    },
    Scenario {
        name: "racing-resumes",
        title: "two connections resume one stream at once",
        pass_if: "each 200 delivers a clean prefix of #9..#N; exactly one reaches the end",
    },
    Scenario {
        name: "two-plain-gets",
        title: "two GETs without a cursor at once",
        pass_if: "one refused, or both attached with each message on exactly one",
    },
    Scenario {
        name: "idempotent-replay",
        title: "two resumes from one cursor",
        pass_if: "the same events with the same ids, or the second refused",
    },
    Scenario {
        name: "emit-while-detached",
        title: "cut after #2 of 60, stay away 500 ms while the tool emits, resume mid-stream",
        pass_if: "#3..#60 and the response exactly once, in order",
    },
    Scenario {
        name: "churn",
        title: "150 events, random cuts, resume each time",
        pass_if: "#1..#150 exactly once, in order, with the response",
    },
    Scenario {
        name: "crash-restart",
        title: "read to #10, restart the server (--restart-cmd), resume",
        pass_if: "refused, or #11.. ending with the response; every id seen still names the same data",
    },
];

/// Run `forkless check`. Exit status: 0 when no scenario failed, 1 when one did, 3 when the
/// target cannot be probed at all.
pub fn run(args: &CheckArgs) -> Result<(), Error> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(Error::Startup)?;
    let report = match &args.client {
        Some(command) => runtime.block_on(clients::check(command, &args.only, args.json))?,
        None => runtime.block_on(probe(args))?,
    };
    let mut out = std::io::stdout().lock();
    let written = if args.json {
        serde_json::to_writer_pretty(&mut out, &report)
            .map_err(std::io::Error::other)
            .and_then(|()| writeln!(out))
    } else {
        write!(out, "{}", render(&report))
    };
    written.map_err(Error::Startup)?;
    if let Some(path) = &args.report {
        crate::report::write(path, &crate::report::check_page(&report))?;
    }
    if report.failed > 0 {
        return Err(Error::Verdict(format!(
            "{} of {} scenarios failed",
            report.failed,
            report.scenarios.len()
        )));
    }
    Ok(())
}

async fn probe_all(args: &CheckArgs, extra: serde_json::Map<String, Value>) -> Result<Report, Error> {
    let http = probe::http_client(args.ca_file.as_deref(), args.http1).map_err(|e| Error::Probe(e.0))?;
    let target = Target::new(&args.url, http.clone());
    let mut session = target.open().await.map_err(|e| Error::Probe(e.0))?;
    let tools = session.tool_names().await.map_err(|e| Error::Probe(e.0))?;
    let server = session.server_info.clone();
    session.close().await;
    let progress = if args.progress { Progress::Ask } else { Progress::Omit };
    let pick = |flag: &Option<String>, default: &str| {
        flag.clone()
            .or_else(|| tools.iter().any(|t| t == default).then(|| default.to_owned()))
            .map(|name| ToolSpec { name, args: extra.clone(), progress })
    };
    let mut ctx = Ctx {
        target,
        request: pick(&args.tool, "start-notification-stream"),
        background: pick(&args.background_tool, "start-background-stream"),
        rng: args.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
        restart: args.restart_cmd.clone(),
    };
    let tasks = tasks::TaskTarget {
        http,
        urls: std::iter::once(args.url.clone()).chain(args.also_urls.iter().cloned()).collect(),
        tool: args.task_tool.clone(),
        input_tool: (args.input_tool.clone(), Value::Object(serde_json::Map::new())),
        kill: args.kill_cmd.clone(),
    };
    let mut scenarios = Vec::new();
    for scenario in SCENARIOS.into_iter().chain(tasks::TASK_SCENARIOS) {
        if !args.only.is_empty() && !args.only.iter().any(|n| n == scenario.name) {
            continue;
        }
        let started = tokio::time::Instant::now();
        let (outcome, lanes) = record::recording(async {
            match scenario.name {
                "resume-after-8" => scenarios::resume_after_8(&mut ctx).await,
                "cursor-lost" => scenarios::cursor_lost(&mut ctx).await,
                "bare-numeric-cursor" => scenarios::bare_numeric_cursor(&mut ctx).await,
                "foreign-cursor" => scenarios::foreign_cursor(&mut ctx).await,
                "cursor-ahead" => scenarios::cursor_ahead(&mut ctx).await,
                "racing-resumes" => scenarios::racing_resumes(&mut ctx).await,
                "two-plain-gets" => scenarios::two_plain_gets(&mut ctx).await,
                "idempotent-replay" => scenarios::idempotent_replay(&mut ctx).await,
                "emit-while-detached" => scenarios::emit_while_detached(&mut ctx).await,
                "crash-restart" => scenarios::crash_restart(&mut ctx).await,
                "task-read-twice" => tasks::read_twice(&tasks).await,
                "task-every-node" => tasks::every_node(&tasks).await,
                "task-crash-working" => tasks::crash_working(&mut ctx, &tasks).await,
                "task-crash-input" => tasks::crash_input(&mut ctx, &tasks).await,
                "task-node-loss" => tasks::node_loss(&tasks).await,
                _ => scenarios::churn(&mut ctx).await,
            }
        })
        .await;
        if !args.json {
            eprintln!("{:<20} {}", scenario.name, outcome.verdict.as_str());
        }
        scenarios.push(ScenarioReport::new(&scenario, outcome, started, lanes));
        // Let the server notice the connections this scenario dropped before the next starts.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(Report::new(
        args.url.clone(),
        server,
        ctx.request.map(|t| t.name),
        ctx.background.map(|t| t.name),
        scenarios,
    ))
}

/// Probe `args.url` with the scenarios `args` selects (in a runtime of the caller's) and
/// report, whatever the verdicts; an error only when the flags are invalid or the target
/// cannot be probed at all.
pub async fn probe(args: &CheckArgs) -> Result<Report, Error> {
    let extra = match &args.args {
        None => serde_json::Map::new(),
        Some(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(map)) => map,
            _ => return Err(Error::Config(format!("--args must be a JSON object, got {text}"))),
        },
    };
    let all = || SCENARIOS.iter().chain(tasks::TASK_SCENARIOS.iter());
    for name in &args.only {
        if !all().any(|s| s.name == name) {
            let known: Vec<_> = all().map(|s| s.name).collect();
            return Err(Error::Config(format!("unknown scenario `{name}` (known: {})", known.join(", "))));
        }
    }
    probe_all(args, extra).await
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::CheckArgs;

    #[derive(Debug, clap::Parser)]
    struct Harness {
        #[command(flatten)]
        check: CheckArgs,
    }

    #[test]
    fn new_has_the_flags_defaults() {
        let parsed = Harness::try_parse_from(["check", "http://127.0.0.1:1/mcp"]).expect("parsed").check;
        assert_eq!(format!("{parsed:?}"), format!("{:?}", CheckArgs::new("http://127.0.0.1:1/mcp")));
    }
}
