//! What a chaos run reports ([`Summary`]) and how it is printed ([`render`]).

use std::collections::BTreeMap;

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
    /// Wall-clock time of the whole run.
    pub elapsed_s: f64,
}

/// Live counters for the progress bar.
/// The human summary.
pub fn render(s: &Summary) -> String {
    let mut out = format!(
        "forkless chaos {}: {} sessions × {} events, {:.1} s\n\n",
        s.target, s.sessions, s.events_per_session, s.elapsed_s
    );
    let rows: Vec<(&str, String)> = vec![
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
    ];
    for (k, v) in rows {
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
