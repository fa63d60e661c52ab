//! Counters and histograms, rendered as Prometheus text on `GET /metrics`.
//!
//! Hand-rolled atomics: this module owns the metric names and their rendering, nothing else.
//! Labels are static wire codes, so labelled counters are small maps.

use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// The kind of SSE stream `forkless_streams_opened_total` counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Opened {
    /// A request's stream (a POST answered over SSE).
    Request = 0,
    /// A session's standalone stream (opened by `initialize`, read by GET).
    Standalone = 1,
}

impl Opened {
    const fn as_str(self) -> &'static str {
        match self {
            Self::Request => "request",
            Self::Standalone => "standalone",
        }
    }
}

/// A counter per label set. Few label sets ever exist, so they are found by a scan that
/// allocates nothing; only a new label set is copied.
#[derive(Debug, Default)]
struct Labelled(Mutex<Vec<(LabelSet, u64)>>);

/// Label names and values, in the order given.
type LabelSet = Vec<(&'static str, String)>;

impl Labelled {
    fn inc(&self, labels: &[(&'static str, &str)]) {
        let mut m = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let same = |k: &[(&'static str, String)]| {
            k.len() == labels.len() && k.iter().zip(labels).all(|((a, b), (c, d))| a == c && b == d)
        };
        match m.iter_mut().find(|(k, _)| same(k)) {
            Some((_, n)) => *n += 1,
            None => m.push((labels.iter().map(|(k, v)| (*k, (*v).to_owned())).collect(), 1)),
        }
    }

    fn render(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
        let mut m = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        m.sort();
        for (labels, v) in &m {
            let rendered: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
            let _ = writeln!(out, "{name}{{{}}} {v}", rendered.join(","));
        }
    }
}

/// A histogram with fixed upper bounds.
#[derive(Debug)]
struct Histogram {
    bounds: &'static [f64],
    buckets: Vec<AtomicU64>,
    count: AtomicU64,
    /// Sum in millionths, to stay in integers.
    sum_micro: AtomicU64,
}

impl Histogram {
    fn new(bounds: &'static [f64]) -> Self {
        Self {
            bounds,
            buckets: bounds.iter().map(|_| AtomicU64::new(0)).collect(),
            count: AtomicU64::new(0),
            sum_micro: AtomicU64::new(0),
        }
    }

    fn observe(&self, v: f64) {
        for (b, bucket) in self.bounds.iter().zip(&self.buckets) {
            if v <= *b {
                bucket.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        self.sum_micro.fetch_add((v.max(0.0) * 1e6) as u64, Ordering::Relaxed);
    }

    fn render(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        for (b, bucket) in self.bounds.iter().zip(&self.buckets) {
            let _ = writeln!(out, "{name}_bucket{{le=\"{b}\"}} {}", bucket.load(Ordering::Relaxed));
        }
        let count = self.count.load(Ordering::Relaxed);
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {count}");
        #[allow(clippy::cast_precision_loss)]
        let sum = self.sum_micro.load(Ordering::Relaxed) as f64 / 1e6;
        let _ = writeln!(out, "{name}_sum {sum}\n{name}_count {count}");
    }
}

fn counter(out: &mut String, name: &str, help: &str, v: &AtomicU64) {
    let _ =
        writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}", v.load(Ordering::Relaxed));
}

/// Every metric the server keeps.
#[derive(Debug)]
pub(crate) struct Metrics {
    pub(crate) sessions_created: AtomicU64,
    sessions_ended: Labelled,
    /// By [`Opened`]: counted on every request answered over SSE, so plain atomics.
    streams_opened: [AtomicU64; 2],
    pub(crate) events_appended: AtomicU64,
    get_outcomes: Labelled,
    pub(crate) fences: AtomicU64,
    pub(crate) displacements: AtomicU64,
    /// Events evicted by their stream's time to live (the store counts the others).
    pub(crate) evictions: AtomicU64,
    pub(crate) liveness_expired: AtomicU64,
    pub(crate) connections_refused: AtomicU64,
    pub(crate) connections_dropped_idle: AtomicU64,
    pub(crate) accept_errors: AtomicU64,
    pub(crate) header_timeouts: AtomicU64,
    /// TLS handshakes that failed (plaintext on the TLS port, a client refusing the
    /// certificate, no protocol in common).
    pub(crate) tls_handshake_failures: AtomicU64,
    /// TLS connections by the protocol ALPN chose: HTTP/1.1, HTTP/2.
    pub(crate) tls_connections: [AtomicU64; 2],
    pub(crate) body_timeouts: AtomicU64,
    pub(crate) idle_timeouts: AtomicU64,
    /// Chunks of events SSE writers handed to their connections, and the events in them.
    pub(crate) sse_writes: AtomicU64,
    pub(crate) sse_events: AtomicU64,
    capacity_refusals: Labelled,
    forwarded: Labelled,
    errors: Labelled,
    replay_events: Histogram,
    request_seconds: Histogram,
    pub(crate) tasks_created: AtomicU64,
    /// Passes that looked for lost owners' tasks (a restart's, a takeover loop's).
    pub(crate) task_settle_passes: AtomicU64,
    tasks_settled: Labelled,
    keyed_requests: Labelled,
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            sessions_created: AtomicU64::new(0),
            sessions_ended: Labelled::default(),
            streams_opened: [AtomicU64::new(0), AtomicU64::new(0)],
            events_appended: AtomicU64::new(0),
            get_outcomes: Labelled::default(),
            fences: AtomicU64::new(0),
            displacements: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
            liveness_expired: AtomicU64::new(0),
            connections_refused: AtomicU64::new(0),
            connections_dropped_idle: AtomicU64::new(0),
            accept_errors: AtomicU64::new(0),
            header_timeouts: AtomicU64::new(0),
            tls_handshake_failures: AtomicU64::new(0),
            tls_connections: [AtomicU64::new(0), AtomicU64::new(0)],
            body_timeouts: AtomicU64::new(0),
            idle_timeouts: AtomicU64::new(0),
            sse_writes: AtomicU64::new(0),
            sse_events: AtomicU64::new(0),
            capacity_refusals: Labelled::default(),
            forwarded: Labelled::default(),
            errors: Labelled::default(),
            replay_events: Histogram::new(&[0.0, 1.0, 10.0, 100.0, 1000.0, 10000.0]),
            request_seconds: Histogram::new(&[0.001, 0.005, 0.025, 0.1, 0.5, 2.5, 10.0, 60.0]),
            tasks_created: AtomicU64::new(0),
            task_settle_passes: AtomicU64::new(0),
            tasks_settled: Labelled::default(),
            keyed_requests: Labelled::default(),
        }
    }
}

impl Metrics {
    pub(crate) fn inc(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn session_ended(&self, reason: &'static str) {
        self.sessions_ended.inc(&[("reason", reason)]);
    }

    pub(crate) fn stream_opened(&self, kind: Opened) {
        self.streams_opened[kind as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn get_outcome(&self, outcome: &'static str, reason: &'static str) {
        self.get_outcomes.inc(&[("outcome", outcome), ("reason", reason)]);
    }

    /// `forkless_evictions_total` by the limit that evicted: the store's counts and the
    /// sweeper's time-to-live evictions.
    pub(crate) fn render_evictions(&self, out: &mut String, usage: &forkless_store::Usage) {
        let name = "forkless_evictions_total";
        let _ = writeln!(out, "# HELP {name} Events evicted by retention, by limit.\n# TYPE {name} counter");
        let rows = [
            ("stream_max_events", usage.evicted_by_events),
            ("stream_max_bytes", usage.evicted_by_bytes),
            ("stream_ttl", self.evictions.load(Ordering::Relaxed)),
        ];
        for (reason, v) in rows {
            let _ = writeln!(out, "{name}{{reason=\"{reason}\"}} {v}");
        }
    }

    pub(crate) fn capacity_refused(&self, limit: &str) {
        self.capacity_refusals.inc(&[("limit", limit)]);
    }

    /// A request sent to its session's owner node, by outcome (`answered`, or why not).
    pub(crate) fn forwarded(&self, outcome: &'static str) {
        self.forwarded.inc(&[("outcome", outcome)]);
    }

    pub(crate) fn error(&self, status: &str, reason: &str) {
        self.errors.inc(&[("status", status), ("reason", reason)]);
    }

    #[allow(clippy::cast_precision_loss)]
    pub(crate) fn replayed(&self, events: u64) {
        self.replay_events.observe(events as f64);
    }

    /// A lost owner's task settled here: `failed`, `restarted` or `awaits_input`.
    pub(crate) fn task_settled(&self, outcome: &'static str) {
        self.tasks_settled.inc(&[("outcome", outcome)]);
    }

    /// A keyed request: `ran` (its first execution), `answered` (a re-issue given that
    /// execution's answer) or `refused` (other parameters under its key).
    pub(crate) fn keyed_request(&self, outcome: &'static str) {
        self.keyed_requests.inc(&[("outcome", outcome)]);
    }

    pub(crate) fn request_took(&self, seconds: f64) {
        self.request_seconds.observe(seconds);
    }

    /// The Prometheus text exposition.
    pub(crate) fn render(&self) -> String {
        let mut out = String::new();
        counter(&mut out, "forkless_sessions_created_total", "Sessions created.", &self.sessions_created);
        self.sessions_ended.render(&mut out, "forkless_sessions_ended_total", "Sessions ended, by reason.");
        let name = "forkless_streams_opened_total";
        let _ = writeln!(out, "# HELP {name} SSE streams opened, by kind.\n# TYPE {name} counter");
        for kind in [Opened::Request, Opened::Standalone] {
            let n = self.streams_opened[kind as usize].load(Ordering::Relaxed);
            let _ = writeln!(out, "{name}{{kind=\"{}\"}} {n}", kind.as_str());
        }
        counter(
            &mut out,
            "forkless_events_appended_total",
            "Events appended to streams.",
            &self.events_appended,
        );
        self.get_outcomes.render(
            &mut out,
            "forkless_get_outcomes_total",
            "GET decisions, by outcome and reason.",
        );
        counter(&mut out, "forkless_streams_fenced_total", "Streams fenced by a reset.", &self.fences);
        counter(
            &mut out,
            "forkless_liveness_expired_total",
            "Attachments detached because writes stopped completing.",
            &self.liveness_expired,
        );
        self.errors.render(&mut out, "forkless_http_errors_total", "Refused requests, by status and reason.");
        self.forwarded.render(
            &mut out,
            "forkless_forwarded_requests_total",
            "Requests sent to their session's owner node, by outcome.",
        );
        counter(&mut out, "forkless_tasks_created_total", "Tasks created on this node.", &self.tasks_created);
        counter(
            &mut out,
            "forkless_task_settle_passes_total",
            "Passes that looked for the tasks of lost owners (a restart, a takeover loop).",
            &self.task_settle_passes,
        );
        self.tasks_settled.render(
            &mut out,
            "forkless_tasks_settled_total",
            "Tasks of lost owners settled on this node, by outcome.",
        );
        self.keyed_requests.render(
            &mut out,
            "forkless_keyed_requests_total",
            "Requests carrying an idempotency key, by outcome.",
        );
        for (name, help, v) in [
            (
                "forkless_connections_refused_total",
                "Connections refused at max_connections (all busy).",
                &self.connections_refused,
            ),
            (
                "forkless_connections_dropped_idle_total",
                "Idle connections closed to make room at max_connections.",
                &self.connections_dropped_idle,
            ),
            (
                "forkless_accept_errors_total",
                "Failed accepts (for example out of file descriptors).",
                &self.accept_errors,
            ),
            (
                "forkless_header_timeouts_total",
                "Connections closed by header_read_timeout.",
                &self.header_timeouts,
            ),
            (
                "forkless_tls_handshake_failures_total",
                "TLS handshakes that failed (plaintext on the TLS port, a certificate refused).",
                &self.tls_handshake_failures,
            ),
            ("forkless_body_timeouts_total", "Requests refused by body_read_timeout.", &self.body_timeouts),
            ("forkless_idle_timeouts_total", "Connections closed by idle_timeout.", &self.idle_timeouts),
            (
                "forkless_sse_writes_total",
                "Chunks of events SSE writers handed to their connections (one write each).",
                &self.sse_writes,
            ),
            ("forkless_sse_events_written_total", "Events in those chunks.", &self.sse_events),
        ] {
            counter(&mut out, name, help, v);
        }
        let name = "forkless_tls_connections_total";
        let _ =
            writeln!(out, "# HELP {name} TLS connections by the protocol ALPN chose.\n# TYPE {name} counter");
        for (protocol, v) in ["http/1.1", "h2"].iter().zip(&self.tls_connections) {
            let _ = writeln!(out, "{name}{{protocol=\"{protocol}\"}} {}", v.load(Ordering::Relaxed));
        }
        self.capacity_refusals.render(
            &mut out,
            "forkless_capacity_refusals_total",
            "Requests refused at a server-wide limit, by limit.",
        );
        self.replay_events.render(&mut out, "forkless_replay_events", "Events replayed on a resume.");
        self.request_seconds.render(
            &mut out,
            "forkless_request_duration_seconds",
            "Handler latency per request.",
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_labels_and_histograms() {
        let m = Metrics::default();
        Metrics::inc(&m.sessions_created);
        m.get_outcome("rejected", "cursor_malformed");
        m.replayed(5);
        m.stream_opened(Opened::Request);
        m.stream_opened(Opened::Request);
        m.stream_opened(Opened::Standalone);
        let text = m.render();
        assert!(text.contains("forkless_streams_opened_total{kind=\"request\"} 2\n"), "{text}");
        assert!(text.contains("forkless_streams_opened_total{kind=\"standalone\"} 1\n"));
        assert!(text.contains("forkless_sessions_created_total 1\n"));
        assert!(
            text.contains(
                "forkless_get_outcomes_total{outcome=\"rejected\",reason=\"cursor_malformed\"} 1\n"
            )
        );
        assert!(text.contains("forkless_replay_events_bucket{le=\"10\"} 1\n"));
        assert!(text.contains("forkless_replay_events_bucket{le=\"1\"} 0\n"));
        assert!(text.contains("forkless_replay_events_count 1\n"));
    }
}
