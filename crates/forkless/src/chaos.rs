//! `forkless chaos URL`: many sessions with continuous notifications, random connection cuts
//! and resumes, and a count of everything that went wrong.
//!
//! Each session is a [`forkless_client::Client`] that calls a numbered-stream tool
//! (`start-notification-stream {interval, count}`, numbered notifications on the request's own
//! SSE stream) for the whole run, while a cutter drops that stream's connection at random
//! moments (uniform in `0..2×--drop-every`), so the client resumes it. Two independent
//! judges count:
//!
//! - the client's own resumption state machine (event ids): duplicates it dropped, gaps that
//!   ended the session, reconnects answered by another stream identity (forks), rejected
//!   resumes by reason;
//! - the payload numbers the application receives: every `#k` must arrive exactly once, in
//!   order, `#1` … `#N`; a number seen again is a duplicate, a number that never arrives is a
//!   gap, a new number below the highest seen is a reordering, a number outside `1..=N` is
//!   foreign (another stream's).
//!
//! Resume latency is measured from the cut to the client's `Resumed` event, so it includes the
//! client's backoff and the server's `retry:` floor. The exit status is non-zero when any
//! duplicate, gap, fork, reordering or foreign event was seen. This module owns the run and its summary; resumption
//! itself is the client's.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use forkless_client::{Client, ClientEvent, StreamOrigin};
use futures::FutureExt as _;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;
use tokio::time::Instant;

use crate::Error;
use crate::check::payload_number;

/// The most notifications one tool call may ask for (the demo server's limit).
const MAX_COUNT: u64 = 10_000;

/// Flags of `forkless chaos`.
#[derive(Clone, Debug, clap::Args)]
#[command(after_help = "Exit status: 0 no duplicate, gap, fork, reordering or foreign event, \
    1 one was seen, 2 bad flags, 3 no session could run.")]
pub struct ChaosArgs {
    /// The MCP endpoint, e.g. `http://127.0.0.1:8080/mcp`.
    #[arg(value_name = "URL")]
    pub url: String,
    /// Concurrent sessions.
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub sessions: u64,
    /// How long each session streams (`60s`, `500ms`, `2m`; a bare number is seconds).
    #[arg(long, default_value = "30s", value_parser = parse_duration, value_name = "D")]
    pub duration: Duration,
    /// Mean time between two cuts of a session's connection.
    #[arg(long, default_value = "3s", value_parser = parse_duration, value_name = "T")]
    pub drop_every: Duration,
    /// Milliseconds between two notifications of a session.
    #[arg(long, default_value_t = 20, value_name = "MS")]
    pub interval: u64,
    /// The numbered-stream tool to call.
    #[arg(long, default_value = "start-notification-stream", value_name = "NAME")]
    pub tool: String,
    /// Seed for the cut times.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub seed: u64,
    /// Print one JSON object instead of the summary table.
    #[arg(long)]
    pub json: bool,
    /// Also write a self-contained HTML page of the run (figures, a histogram of resume
    /// latencies, rejections by reason) to this file.
    #[arg(long, value_name = "FILE.html")]
    pub report: Option<std::path::PathBuf>,
    /// For `https://`: also trust the certificates of this PEM file (beside the system's roots
    /// and `SSL_CERT_FILE`'s).
    #[arg(long, value_name = "FILE")]
    pub ca_file: Option<std::path::PathBuf>,
}

/// `60s`, `1500ms`, `2m`, or a bare number of seconds.
pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (number, unit) = match s.find(|c: char| !c.is_ascii_digit() && c != '.') {
        Some(i) => s.split_at(i),
        None => (s, "s"),
    };
    let n: f64 = number.parse().map_err(|_| format!("not a duration: `{s}` (try 60s, 500ms, 2m)"))?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" => n,
        "m" => n * 60.0,
        _ => return Err(format!("unknown unit in `{s}` (ms, s, m)")),
    };
    if !secs.is_finite() || secs <= 0.0 {
        return Err(format!("`{s}` must be positive"));
    }
    Ok(Duration::from_secs_f64(secs))
}

#[derive(Debug, Default)]
struct Live {
    delivered: AtomicU64,
    duplicates: AtomicU64,
    gaps: AtomicU64,
    forks: AtomicU64,
    resumes: AtomicU64,
}

/// What one session saw.
#[derive(Debug, Default)]
struct SessionResult {
    completed: bool,
    delivered: u64,
    duplicates: u64,
    gaps: u64,
    reordered: u64,
    foreign: u64,
    forks: u64,
    cuts: u64,
    resumes: u64,
    resumes_verified: u64,
    rejections: BTreeMap<String, u64>,
    latencies: Vec<Duration>,
}

/// Run `forkless chaos`.
pub fn run(args: &ChaosArgs) -> Result<(), Error> {
    if args.sessions == 0 || args.interval == 0 {
        return Err(Error::Config("--sessions and --interval must be at least 1".into()));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(Error::Startup)?;
    let summary = runtime.block_on(chaos(args))?;
    let mut out = std::io::stdout().lock();
    let written = if args.json {
        serde_json::to_writer_pretty(&mut out, &summary)
            .map_err(std::io::Error::other)
            .and_then(|()| writeln!(out))
    } else {
        write!(out, "{}", render(&summary))
    };
    written.map_err(Error::Startup)?;
    if let Some(path) = &args.report {
        crate::report::write(path, &crate::report::chaos_page(&summary))?;
    }
    if summary.duplicates + summary.gaps + summary.forks + summary.reordered + summary.foreign > 0 {
        return Err(Error::Verdict(format!(
            "{} duplicates, {} gaps, {} forks, {} reordered, {} foreign",
            summary.duplicates, summary.gaps, summary.forks, summary.reordered, summary.foreign
        )));
    }
    Ok(())
}

/// Run the sessions and sum up what they saw.
pub async fn chaos(args: &ChaosArgs) -> Result<Summary, Error> {
    let duration_ms = u64::try_from(args.duration.as_millis()).unwrap_or(u64::MAX);
    let count = duration_ms.div_ceil(args.interval).clamp(1, MAX_COUNT);
    let live = Arc::new(Live::default());
    let bar = ProgressBar::new(count * args.sessions);
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} events {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    let ticker = {
        let (live, bar) = (live.clone(), bar.clone());
        tokio::spawn(async move {
            loop {
                bar.set_position(live.delivered.load(Ordering::Relaxed));
                bar.set_message(format!(
                    "| {} resumes | {} dup {} gap {} fork",
                    live.resumes.load(Ordering::Relaxed),
                    live.duplicates.load(Ordering::Relaxed),
                    live.gaps.load(Ordering::Relaxed),
                    live.forks.load(Ordering::Relaxed)
                ));
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
    };
    let started = Instant::now();
    let tasks: Vec<_> =
        (0..args.sessions).map(|i| tokio::spawn(session(args.clone(), i, count, live.clone()))).collect();
    let mut results = Vec::new();
    for task in tasks {
        match task.await {
            Ok(r) => results.push(r),
            Err(e) => return Err(Error::Probe(format!("a session task failed: {e}"))),
        }
    }
    ticker.abort();
    bar.finish_and_clear();
    let mut summary = Summary {
        target: args.url.clone(),
        sessions: args.sessions,
        events_per_session: count,
        elapsed_s: started.elapsed().as_secs_f64(),
        ..Summary::default()
    };
    let mut latencies = Vec::new();
    for r in results {
        summary.sessions_completed += u64::from(r.completed);
        summary.events_delivered += r.delivered;
        summary.duplicates += r.duplicates;
        summary.gaps += r.gaps;
        summary.reordered += r.reordered;
        summary.foreign += r.foreign;
        summary.forks += r.forks;
        summary.cuts += r.cuts;
        summary.resumes += r.resumes;
        summary.resumes_verified += r.resumes_verified;
        for (reason, n) in r.rejections {
            *summary.rejections.entry(reason).or_default() += n;
        }
        latencies.extend(r.latencies);
    }
    if summary.events_delivered == 0 && summary.sessions_completed == 0 {
        let why: Vec<_> = summary.rejections.keys().cloned().collect();
        return Err(Error::Probe(format!("no session delivered anything ({})", why.join(", "))));
    }
    summary.resume_latency_histogram = histogram(&latencies);
    summary.resume_latency_ms = percentiles(&mut latencies);
    Ok(summary)
}

/// One session: call the tool, cut its stream at random, judge what arrives.
async fn session(args: ChaosArgs, index: u64, count: u64, live: Arc<Live>) -> SessionResult {
    let mut result = SessionResult::default();
    let seed = args.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(index);
    let mut builder = Client::builder(&args.url).jitter_seed(seed);
    if let Some(ca) = &args.ca_file {
        builder = builder.ca_file(ca);
    }
    let client = match builder.connect().await {
        Ok(client) => client,
        Err(e) => {
            result.rejections.insert(format!("connect: {}", error_kind(&e)), 1);
            return result;
        }
    };
    let Ok(mut events) = client.notifications() else { return result };
    let pending_cut: Arc<Mutex<Option<Instant>>> = Arc::default();
    let call = {
        let client = client.clone();
        let (tool, interval) = (args.tool.clone(), args.interval);
        tokio::spawn(
            async move { client.call_tool(&tool, json!({ "interval": interval, "count": count })).await },
        )
    };
    let cuts = Arc::new(AtomicU64::new(0));
    let cutter = {
        let (client, pending_cut, cuts) = (client.clone(), pending_cut.clone(), cuts.clone());
        let mean = args.drop_every;
        tokio::spawn(async move {
            let mut rng = seed | 1;
            loop {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let wait = mean * 2 / 10_000 * u32::try_from(rng % 10_000).unwrap_or(0);
                tokio::time::sleep(wait).await;
                let stream = client
                    .streams()
                    .into_iter()
                    .find(|s| matches!(s.origin(), StreamOrigin::Request(_)) && !s.is_finished());
                // Cut only a connected stream: a cut while the client is still reconnecting
                // would kill the next connection at birth, again and again.
                let mut pending = lock(&pending_cut);
                if let Some(stream) = stream.filter(|_| pending.is_none()) {
                    *pending = Some(Instant::now());
                    drop(pending);
                    stream.cut();
                    cuts.fetch_add(1, Ordering::Relaxed);
                }
            }
        })
    };
    let mut numbering = Numbering::new(count);
    let mut call = call;
    // A server that never answers (or keeps forking the stream) must not hang the run.
    let give_up = Instant::now() + args.duration + args.duration.max(Duration::from_secs(10));
    let outcome = loop {
        tokio::select! {
            outcome = &mut call => break Some(outcome),
            event = events.recv() => match event {
                Some(event) => judge(event, &mut numbering, &mut result, &live, &pending_cut),
                None => break Some(Ok(Ok(json!(null)))),
            },
            () = tokio::time::sleep_until(give_up) => break None,
        }
    };
    // The response came after every notification of its stream: take what is queued.
    while let Some(Some(event)) = events.recv().now_or_never() {
        judge(event, &mut numbering, &mut result, &live, &pending_cut);
    }
    cutter.abort();
    result.cuts = cuts.load(Ordering::Relaxed);
    match outcome {
        None => {
            call.abort();
            *result.rejections.entry("call: no response in time".into()).or_default() += 1;
        }
        Some(Ok(Ok(_))) => result.completed = true,
        Some(Ok(Err(e))) => *result.rejections.entry(format!("call: {}", error_kind(&e))).or_default() += 1,
        Some(Err(_)) => *result.rejections.entry("call: task failed".into()).or_default() += 1,
    }
    // A call that answered owes every number; one that ended early owes those it skipped.
    let missing = numbering.missing(result.completed);
    result.gaps += missing;
    live.gaps.fetch_add(missing, Ordering::Relaxed);
    let stats = client.stats();
    result.duplicates += stats.duplicates_dropped;
    result.gaps += stats.gaps;
    result.forks += stats.new_stream_resets;
    result.resumes_verified = stats.resumes_verified;
    for (reason, n) in &stats.resumes_rejected {
        *result.rejections.entry(reason.clone()).or_default() += n;
    }
    live.duplicates.fetch_add(stats.duplicates_dropped, Ordering::Relaxed);
    live.gaps.fetch_add(stats.gaps, Ordering::Relaxed);
    live.forks.fetch_add(stats.new_stream_resets, Ordering::Relaxed);
    let _ = client.close().await;
    result
}

/// Which payload numbers `#1..#count` a session has seen.
#[derive(Debug)]
struct Numbering {
    seen: Vec<bool>,
    highest: u64,
}

impl Numbering {
    fn new(count: u64) -> Self {
        Self { seen: vec![false; usize::try_from(count).unwrap_or(0) + 1], highest: 0 }
    }

    /// Numbers below the highest seen that never arrived: skipped (lost). With `to_end`, also
    /// the ones after it (the call answered, so they should all have come).
    fn missing(&self, to_end: bool) -> u64 {
        let upto = if to_end { self.seen.len() } else { usize::try_from(self.highest).unwrap_or(0) + 1 };
        self.seen.iter().take(upto).skip(1).filter(|s| !**s).count() as u64
    }
}

/// Judge one client event against the payload numbering: a number seen before is a
/// duplicate; a new number below the highest seen is a reordering; missing numbers are
/// counted as gaps at the end.
fn judge(
    event: ClientEvent,
    numbering: &mut Numbering,
    result: &mut SessionResult,
    live: &Live,
    pending_cut: &Mutex<Option<Instant>>,
) {
    match event {
        ClientEvent::Notification(n) => {
            let message = json!({ "method": n.method, "params": n.params });
            let Some(k) = payload_number(&message) else { return };
            let Some(slot) =
                usize::try_from(k).ok().and_then(|i| numbering.seen.get_mut(i)).filter(|_| k > 0)
            else {
                result.foreign += 1;
                return;
            };
            if *slot {
                result.duplicates += 1;
                live.duplicates.fetch_add(1, Ordering::Relaxed);
                return;
            }
            *slot = true;
            if k < numbering.highest {
                result.reordered += 1;
            }
            numbering.highest = numbering.highest.max(k);
            result.delivered += 1;
            live.delivered.fetch_add(1, Ordering::Relaxed);
        }
        ClientEvent::Resumed { .. } => {
            result.resumes += 1;
            live.resumes.fetch_add(1, Ordering::Relaxed);
            if let Some(cut) = lock(pending_cut).take() {
                result.latencies.push(cut.elapsed());
            }
        }
        ClientEvent::NewStream { .. } => {
            // Counted from the client's statistics (`new_stream_resets`) at the end.
            lock(pending_cut).take();
        }
        ClientEvent::StreamFailed { error, .. } => {
            *result.rejections.entry(format!("stream: {}", error_kind(&error))).or_default() += 1;
        }
        ClientEvent::SessionEnded { error } => {
            *result.rejections.entry(format!("session: {}", error_kind(&error))).or_default() += 1;
        }
        _ => {}
    }
}

/// A short, stable name for an error, for the rejection counts.
fn error_kind(e: &forkless_client::Error) -> String {
    match e {
        forkless_client::Error::SessionEnded { reason, .. } => format!("session_ended({reason:?})"),
        other => {
            let text = other.to_string();
            text.split(':').next().unwrap_or(&text).chars().take(60).collect()
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

mod summary;
use summary::percentiles;
pub use summary::{Bucket, LatencyMs, Summary, histogram, render, rows};

#[cfg(test)]
mod tests;
