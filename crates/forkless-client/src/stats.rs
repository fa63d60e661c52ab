//! Per-stream counters for the check and chaos tools.
//!
//! Plain data: the resumption state machine and the stream driver bump the counters, the
//! application reads snapshots through [`crate::StreamControl::stats`] or
//! [`crate::Client::stats`]. Nothing here decides anything.

use std::collections::BTreeMap;
use std::time::Duration;

/// What happened on one stream (or, summed, on every stream of a client).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct StreamStats {
    /// Content events handed on (to the request's caller, the notification stream or the
    /// server-request handler).
    pub events_delivered: u64,
    /// Events at or below the cursor that were dropped as duplicates.
    pub duplicates_dropped: u64,
    /// Events above `cursor + 1`: each one broke the session.
    pub gaps: u64,
    /// Reconnects answered with another stream identity: the cursor was reset.
    pub new_stream_resets: u64,
    /// GETs sent with a `Last-Event-ID`.
    pub resumes_attempted: u64,
    /// Resumes accepted as proven continuations (`Mcp-Stream-Resumed: true`, same id).
    pub resumes_verified: u64,
    /// Resumes accepted on a plain-specification server, whose continuity cannot be checked.
    pub resumes_unverified: u64,
    /// Resume attempts that failed, by reason: the server's 404 reason code, `new_stream`,
    /// `status_<code>`, `transport`, `protocol`.
    pub resumes_rejected: BTreeMap<String, u64>,
    /// Connections this stream lost (cut, dropped, idle, or closed by the server before the
    /// stream was complete).
    pub disconnects: u64,
    /// Time from losing a connection to the first accepted reconnect.
    pub resume_latency: Latency,
}

impl StreamStats {
    /// Resumes that ended with a connection the client accepted.
    pub fn resumes_succeeded(&self) -> u64 {
        self.resumes_verified + self.resumes_unverified
    }

    /// Count one rejected resume attempt under `reason`.
    pub(crate) fn reject(&mut self, reason: &str) {
        *self.resumes_rejected.entry(reason.to_owned()).or_default() += 1;
    }

    /// Add `other`'s counts to these (for client-wide totals).
    pub fn add(&mut self, other: &Self) {
        self.events_delivered += other.events_delivered;
        self.duplicates_dropped += other.duplicates_dropped;
        self.gaps += other.gaps;
        self.new_stream_resets += other.new_stream_resets;
        self.resumes_attempted += other.resumes_attempted;
        self.resumes_verified += other.resumes_verified;
        self.resumes_unverified += other.resumes_unverified;
        for (reason, n) in &other.resumes_rejected {
            *self.resumes_rejected.entry(reason.clone()).or_default() += n;
        }
        self.disconnects += other.disconnects;
        self.resume_latency.add(&other.resume_latency);
    }
}

/// A running summary of durations.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Latency {
    /// Samples recorded.
    pub count: u64,
    /// Their sum.
    pub total: Duration,
    /// The largest.
    pub max: Duration,
    /// The most recent.
    pub last: Duration,
}

impl Latency {
    /// Record one sample.
    pub fn record(&mut self, d: Duration) {
        self.count += 1;
        self.total = self.total.saturating_add(d);
        self.max = self.max.max(d);
        self.last = d;
    }

    /// The mean, if any sample was recorded.
    pub fn mean(&self) -> Option<Duration> {
        u32::try_from(self.count).ok().filter(|n| *n > 0).map(|n| self.total / n)
    }

    fn add(&mut self, other: &Self) {
        self.count += other.count;
        self.total = self.total.saturating_add(other.total);
        self.max = self.max.max(other.max);
        if other.count > 0 {
            self.last = other.last;
        }
    }
}
