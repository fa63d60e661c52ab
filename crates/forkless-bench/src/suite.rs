//! The whole run: which servers face which loads, each server a fresh pinned process, and
//! the rows of the result.
//!
//! This module owns the plan (servers × loads, durations for full and quick runs) and turning
//! [`crate::load`] measurements into [`Row`]s; the server processes are `procs`'. It does
//! not generate load itself and does not format reports ([`crate::report`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use crate::Error;
use crate::load::{self, Measured};

mod procs;
pub use procs::ServerSpec;
use procs::start;

/// How a run is set up.
#[derive(Clone, Debug)]
pub struct Options {
    /// The CI smoke: short loads, few connections, small counts.
    pub quick: bool,
    /// The `forkless-bench` binary (it serves forkless and the hyper echo).
    pub exe: PathBuf,
    /// The rmcp reference server binary, if built.
    pub rmcp: Option<PathBuf>,
    /// The repository root, to find the TS/Python SDK servers and `.peers/`; `None` skips them.
    pub peers: Option<PathBuf>,
    /// Pin servers to CPU 0 with `taskset -c 0` (the load generator pins itself to CPU 1).
    pub pin: bool,
    /// Scratch directory for durable stores.
    pub scratch: PathBuf,
    /// Only the loads whose name starts with one of these (empty: all).
    pub only: Vec<String>,
    /// A PostgreSQL database to run forkless on as well, for the stream loads.
    pub postgres: Option<String>,
    /// A Redis (URL, `#PREFIX`) to run forkless on as well, for the stream loads.
    pub redis: Option<String>,
}

/// One line of the result.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// The load, e.g. `echo-json`, `notify-1`, `resume-replay`, `idle`.
    pub load: String,
    /// The server.
    pub server: String,
    /// Concurrent clients (connections) or streams.
    pub clients: usize,
    /// What `throughput` counts per second (`req`, `events`), or `streams` for idle rows.
    pub unit: &'static str,
    /// The client-side measurement.
    #[serde(flatten)]
    pub measured: Measured,
    /// The server's peak resident memory over its lifetime (one process per row), KiB.
    pub peak_rss_kib: Option<u64>,
    /// Idle-sessions rows only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle: Option<load::IdleMeasured>,
}

/// The durations and sizes of a run.
#[derive(Clone, Copy, Debug)]
struct Plan {
    warmup: Duration,
    duration: Duration,
    clients: &'static [usize],
    notify_one: u64,
    notify_many: (usize, u64),
    resume_events: u64,
    resume_rounds: u32,
    idle_sessions: usize,
    idle_hold: Duration,
    /// Notifications of the delivery-latency load, 1 ms apart.
    latency_events: u64,
}

const FULL: Plan = Plan {
    warmup: Duration::from_secs(1),
    duration: Duration::from_secs(5),
    clients: &[1, 16, 64],
    notify_one: 10_000,
    notify_many: (100, 1_000),
    resume_events: 10_000,
    resume_rounds: 5,
    idle_sessions: 10_000,
    idle_hold: Duration::from_secs(2),
    latency_events: 2_000,
};

const QUICK: Plan = Plan {
    warmup: Duration::from_millis(50),
    duration: Duration::from_millis(150),
    clients: &[1, 4],
    notify_one: 500,
    notify_many: (4, 100),
    resume_events: 500,
    resume_rounds: 1,
    idle_sessions: 100,
    idle_hold: Duration::from_millis(100),
    latency_events: 20,
};

impl Options {
    fn wants(&self, load: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|o| load.starts_with(o.as_str()))
    }
}

/// Run every load against every server that takes it; `progress` gets each row as it is
/// measured.
pub async fn run(opts: &Options, mut progress: impl FnMut(&Row)) -> Result<Vec<Row>, Error> {
    let plan = if opts.quick { QUICK } else { FULL };
    let mut rows = Vec::new();
    let mut push = |row: Row, rows: &mut Vec<Row>| {
        progress(&row);
        rows.push(row);
    };

    // Loads 1 and 2: tools/call echo, JSON and SSE answers.
    for sse in [false, true] {
        let load = if sse { "echo-sse" } else { "echo-json" };
        if !opts.wants(load) {
            continue;
        }
        let mode = if sse { "sse" } else { "json" };
        let mut servers = vec![
            opts.bench(&format!("hyper/{mode}"), &["--target", "hyper", "--answer", mode], sse),
            opts.bench(&format!("forkless/memory/{mode}"), &["--target", "forkless", "--answer", mode], sse),
        ];
        if !opts.quick && sse {
            servers.push(opts.forkless_redb("batched"));
            if cfg!(feature = "early-delivery") {
                servers.push(opts.forkless_redb("batched-early"));
            }
        }
        servers.extend(opts.rmcp("stateful", true).filter(|_| sse));
        servers.extend(opts.rmcp("stateless", false).filter(|_| !sse));
        servers.extend(opts.peer("ts", !sse));
        servers.extend(opts.peer("python", !sse));
        // Every server at one client count before the next count: a row and its reference
        // are measured seconds apart, not a minute, on a machine whose speed drifts.
        let first = rows.len();
        for &clients in plan.clients {
            for spec in &servers {
                let server = start(spec, opts.pin).await?;
                let probe = server.probe();
                let measured = load::echo(
                    &server.endpoint,
                    clients,
                    plan.warmup,
                    plan.duration,
                    load::EchoCall::ours(spec.sse),
                    &probe,
                )
                .await;
                let peak = server.stop().await;
                let measured = failed_as_row(measured, load, &spec.name);
                let row = Row {
                    load: load.into(),
                    server: spec.name.clone(),
                    clients,
                    unit: "req",
                    measured,
                    peak_rss_kib: peak,
                    idle: None,
                };
                push(row, &mut rows);
            }
        }
        // Reported server by server, as they were listed.
        let listed = |name: &str| servers.iter().position(|spec| spec.name == name);
        rows[first..].sort_by_key(|r| listed(&r.server));
    }

    // The stream loads: forkless with each store, and the SSE-answering peers.
    let mut streaming =
        vec![opts.bench("forkless/memory/sse", &["--target", "forkless", "--answer", "sse"], true)];
    // The durable default in a quick run too: its targets (`crate::targets`) are read off it.
    if opts.quick {
        streaming.push(opts.forkless_redb("batched"));
    } else {
        streaming.push(opts.forkless_redb("immediate"));
        streaming.push(opts.forkless_redb("batched"));
        if cfg!(feature = "early-delivery") {
            streaming.push(opts.forkless_redb("batched-early"));
        }
    }
    if let Some(url) = &opts.redis {
        streaming.push(opts.bench(
            "forkless/redis/sse",
            &["--target", "forkless", "--answer", "sse", "--store", url],
            true,
        ));
    }
    if let Some(url) = &opts.postgres {
        streaming.push(opts.bench(
            "forkless/postgres/sse",
            &["--target", "forkless", "--answer", "sse", "--store", url],
            true,
        ));
    }
    let peers: Vec<ServerSpec> =
        [opts.rmcp("stateful", true), opts.peer("ts", false), opts.peer("python", false)]
            .into_iter()
            .flatten()
            .collect();

    // Load 3: notifications per second on one stream and across many.
    for (load, streams, count) in
        [("notify-1", 1, plan.notify_one), ("notify-many", plan.notify_many.0, plan.notify_many.1)]
    {
        if !opts.wants(load) {
            continue;
        }
        for spec in streaming.iter().chain(&peers) {
            // The Python and TS SDKs are two to three orders of magnitude slower: a smaller
            // count keeps the run short without changing the rate much.
            let count = if spec.name.starts_with("python") || spec.name.starts_with("ts") {
                (count / 10).max(10)
            } else {
                count
            };
            let server = start(spec, opts.pin).await?;
            let probe = server.probe();
            let measured = load::notifications(&server.endpoint, streams, count, plan.duration, &probe).await;
            let peak = server.stop().await;
            let measured = failed_as_row(measured, load, &spec.name);
            let row = Row {
                load: load.into(),
                server: spec.name.clone(),
                clients: streams,
                unit: "events",
                measured,
                peak_rss_kib: peak,
                idle: None,
            };
            push(row, &mut rows);
        }
    }

    // Load 6: delivery latency under a light load (what durable-before-delivery costs).
    if opts.wants("notify-latency") {
        for spec in &streaming {
            let server = start(spec, opts.pin).await?;
            let probe = server.probe();
            let measured = load::delivery_latency(&server.endpoint, plan.latency_events, 1, &probe).await;
            let peak = server.stop().await;
            let measured = failed_as_row(measured, "notify-latency", &spec.name);
            let row = Row {
                load: "notify-latency".into(),
                server: spec.name.clone(),
                clients: 1,
                unit: "events",
                measured,
                peak_rss_kib: peak,
                idle: None,
            };
            push(row, &mut rows);
        }
    }

    // Load 4: resume (live delivery vs replay of the same buffered stream).
    if opts.wants("resume") {
        for spec in &streaming {
            let server = start(spec, opts.pin).await?;
            let probe = server.probe();
            let measured =
                load::resume(&server.endpoint, plan.resume_events, plan.resume_rounds, &probe).await;
            let peak = server.stop().await;
            let measured = measured.map_err(|e| Error::Load(format!("resume on {}: {e}", spec.name)))?;
            for (load, m) in [("resume-live", measured.live), ("resume-replay", measured.replay)] {
                let row = Row {
                    load: load.into(),
                    server: spec.name.clone(),
                    clients: 1,
                    unit: "events",
                    measured: m,
                    peak_rss_kib: peak,
                    idle: None,
                };
                push(row, &mut rows);
            }
        }
    }

    // Load 5: idle sessions and open GET streams.
    if opts.wants("idle") {
        let mut idle_servers =
            vec![opts.bench("forkless/memory/sse", &["--target", "forkless", "--answer", "sse"], true)];
        idle_servers.extend(opts.rmcp("stateful", true));
        for spec in &idle_servers {
            let server = start(spec, opts.pin).await?;
            let probe = server.probe();
            let idle = load::idle(&server.endpoint, plan.idle_sessions, plan.idle_hold, &probe).await;
            let peak = server.stop().await;
            let idle = idle.map_err(|e| Error::Load(format!("idle on {}: {e}", spec.name)))?;
            let measured = Measured {
                ops: idle.streams_held,
                errors: idle.session_errors + idle.stream_errors,
                ..Measured::default()
            };
            let row = Row {
                load: "idle".into(),
                server: spec.name.clone(),
                clients: plan.idle_sessions,
                unit: "streams",
                measured,
                peak_rss_kib: peak,
                idle: Some(idle),
            };
            push(row, &mut rows);
        }
    }
    Ok(rows)
}

/// A load that could not run at all becomes a row with one error (and a line on stderr), so
/// one misbehaving peer does not end the whole run.
fn failed_as_row(measured: Result<Measured, Error>, load: &str, server: &str) -> Measured {
    measured.unwrap_or_else(|e| {
        eprintln!("{load} on {server} failed: {e}");
        Measured { errors: 1, ..Measured::default() }
    })
}

/// The scratch directory under `out` (created).
pub fn scratch_dir(out: &Path) -> Result<PathBuf, Error> {
    let dir = out.join("scratch");
    std::fs::create_dir_all(&dir).map_err(Error::Io)?;
    Ok(dir)
}
