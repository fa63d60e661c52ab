//! What a chaos run reports ([`Summary`]) and how it is printed ([`render`]).

use std::collections::BTreeMap;

use std::time::Duration;

use serde::Serialize;

/// Resume latency percentiles in milliseconds.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct LatencyMs {
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// The largest.
    pub max: f64,
    /// Samples.
    pub count: usize,
}

/// Resume latencies up to `le_ms` (and above the bucket before); `None`: above the last bound.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Bucket {
    /// The bucket's upper bound in milliseconds, inclusive.
    pub le_ms: Option<u64>,
    /// Samples in it.
    pub count: u64,
}

/// The histogram's bucket bounds, in milliseconds.
const BOUNDS: [u64; 10] = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000];

/// `samples` in `BOUNDS` buckets and one above them.
pub fn histogram(samples: &[Duration]) -> Vec<Bucket> {
    let mut buckets: Vec<Bucket> = BOUNDS.iter().map(|&b| Bucket { le_ms: Some(b), count: 0 }).collect();
    buckets.push(Bucket { le_ms: None, count: 0 });
    for s in samples {
        let ms = s.as_secs_f64() * 1000.0;
        #[allow(clippy::cast_precision_loss)]
        let i = BOUNDS.iter().position(|&b| ms <= b as f64).unwrap_or(BOUNDS.len());
        buckets[i].count += 1;
    }
    buckets
}

/// Nearest-rank percentiles.
pub(crate) fn percentiles(samples: &mut [Duration]) -> LatencyMs {
    if samples.is_empty() {
        return LatencyMs::default();
    }
    samples.sort_unstable();
    let at = |p: f64| {
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss, clippy::cast_precision_loss)]
        let rank = ((p * samples.len() as f64).ceil() as usize).clamp(1, samples.len());
        samples[rank - 1].as_secs_f64() * 1000.0
    };
    LatencyMs { p50: at(0.50), p99: at(0.99), max: at(1.0), count: samples.len() }
}

/// The summary of a run (`--json` prints it as is).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Summary {
    /// The endpoint.
    pub target: String,
    /// Sessions started.
    pub sessions: u64,
    /// Sessions whose tool call completed.
    pub sessions_completed: u64,
    /// Numbered notifications each session asked for.
    pub events_per_session: u64,
    /// Numbered notifications delivered to the application, each once and in order.
    pub events_delivered: u64,
    /// Events received again (dropped by the client by event id, or repeated payload numbers).
    pub duplicates: u64,
    /// Events skipped (detected by the client by event id, or payload numbers that never
    /// arrived: all of `#1..#N` once the call answered, those below the highest otherwise).
    pub gaps: u64,
    /// Numbers that arrived after a higher number (not monotonic).
    pub reordered: u64,
    /// Numbered notifications outside `#1..#N` (someone else's stream).
    pub foreign: u64,
    /// Reconnects answered with another stream identity than the one being resumed.
    pub forks: u64,
    /// Connection cuts injected.
    pub cuts: u64,
    /// Resumes the client accepted.
    pub resumes: u64,
    /// Of those, proven continuations (`Mcp-Stream-Resumed: true`, same stream id).
    pub resumes_verified: u64,
    /// Resume attempts refused, by reason (the server's 404 reason, `status_409`, …), and
    /// sessions or calls that ended with an error, by error.
    pub rejections: BTreeMap<String, u64>,
    /// From a cut to the client's accepted reconnect.
    pub resume_latency_ms: LatencyMs,
    /// The same, counted in buckets (for the report's histogram).
    pub resume_latency_histogram: Vec<Bucket>,
    /// Wall-clock time of the whole run.
    pub elapsed_s: f64,
}

/// The run's figures, one labelled row each (the text summary's and the report page's).
pub fn rows(s: &Summary) -> Vec<(&'static str, String)> {
    vec![
        ("sessions completed", format!("{} of {}", s.sessions_completed, s.sessions)),
        ("events delivered", s.events_delivered.to_string()),
        ("duplicates", s.duplicates.to_string()),
        ("gaps", s.gaps.to_string()),
        ("forks", s.forks.to_string()),
        ("reordered", s.reordered.to_string()),
        ("foreign", s.foreign.to_string()),
        ("cuts", s.cuts.to_string()),
        ("resumes", format!("{} ({} verified)", s.resumes, s.resumes_verified)),
        (
            "resume latency",
            format!(
                "p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms ({} samples)",
                s.resume_latency_ms.p50,
                s.resume_latency_ms.p99,
                s.resume_latency_ms.max,
                s.resume_latency_ms.count
            ),
        ),
    ]
}

/// The human summary.
pub fn render(s: &Summary) -> String {
    let mut out = format!(
        "forkless chaos {}: {} sessions × {} events, {:.1} s\n\n",
        s.target, s.sessions, s.events_per_session, s.elapsed_s
    );
    for (k, v) in rows(s) {
        out.push_str(&format!("{k:<20} {v}\n"));
    }
    if s.rejections.is_empty() {
        out.push_str(&format!("{:<20} none\n", "rejections"));
    }
    for (reason, n) in &s.rejections {
        out.push_str(&format!("{:<20} {reason}: {n}\n", "rejections"));
    }
    out
}
