//! The bars issue 11 sets for the durable default (`redb`, `batched`) against the memory
//! store, checked on every run's rows so that a run says whether it met them.
//!
//! This module owns the list of targets and how each is read off the rows; the rows come
//! from [`crate::suite`], the printing from [`crate::report`].

use std::time::Duration;

use serde::Serialize;

use crate::suite::Row;

/// The durable default the targets are about, and the reference it is held against.
const DURABLE: &str = "forkless/redb-batched/sse";
const MEMORY: &str = "forkless/memory/sse";

/// One target, as one run measured it.
#[derive(Clone, Debug, Serialize)]
pub struct Target {
    /// What is compared, in words.
    pub what: String,
    /// The measured value, in the bar's unit.
    pub measured: f64,
    /// What the measured value must be.
    pub bar: Bar,
}

/// A target's bar.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub enum Bar {
    /// A throughput ratio of at least this.
    RatioAtLeast(f64),
    /// Milliseconds, at most this many.
    MillisAtMost(f64),
}

impl Target {
    /// Whether the run met the bar.
    pub fn met(&self) -> bool {
        match self.bar {
            Bar::RatioAtLeast(bar) => self.measured >= bar,
            Bar::MillisAtMost(bar) => self.measured <= bar,
        }
    }
}

/// The targets the rows hold both servers of; none for a load the run left out.
pub fn targets(rows: &[Row]) -> Vec<Target> {
    let find = |load: &str, server: &str, clients: Option<usize>| {
        rows.iter().find(|r| r.load == load && r.server == server && clients.is_none_or(|c| r.clients == c))
    };
    let mut out = Vec::new();
    // Throughput of the durable default at half the memory store's or better.
    for (load, clients, what) in [
        ("echo-sse", Some(16), "SSE-answered echo at 16 connections, batched ÷ memory"),
        ("notify-many", None, "notifications on 100 streams, batched ÷ memory"),
    ] {
        let (Some(durable), Some(memory)) = (find(load, DURABLE, clients), find(load, MEMORY, clients))
        else {
            continue;
        };
        if memory.measured.throughput <= 0.0 {
            continue;
        }
        let ratio = durable.measured.throughput / memory.measured.throughput;
        out.push(Target { what: what.into(), measured: ratio, bar: Bar::RatioAtLeast(0.5) });
    }
    // Delivery latency: no more than the batch window added at the 99th percentile.
    let window = match forkless_store_redb::Durability::default() {
        forkless_store_redb::Durability::Batched { window } => window,
        forkless_store_redb::Durability::Immediate => Duration::ZERO,
    };
    let p99 = |server| find("notify-latency", server, None).and_then(|r| r.measured.p99_us);
    if let (Some(durable), Some(memory)) = (p99(DURABLE), p99(MEMORY)) {
        out.push(Target {
            what: "p99 delivery latency added, batched - memory".into(),
            measured: (durable - memory) / 1000.0,
            bar: Bar::MillisAtMost(window.as_secs_f64() * 1000.0),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::Measured;

    fn row(load: &str, server: &str, clients: usize, throughput: f64, p99_us: Option<f64>) -> Row {
        Row {
            load: load.into(),
            server: server.into(),
            clients,
            unit: "req",
            measured: Measured { throughput, p99_us, ops: 1, ..Measured::default() },
            peak_rss_kib: None,
            idle: None,
        }
    }

    #[test]
    fn each_target_is_read_off_its_own_rows() {
        let rows = [
            row("echo-sse", MEMORY, 1, 10_000.0, None),
            row("echo-sse", MEMORY, 16, 60_000.0, None),
            row("echo-sse", DURABLE, 1, 1_000.0, None),
            row("echo-sse", DURABLE, 16, 33_000.0, None),
            row("notify-many", MEMORY, 100, 800_000.0, None),
            row("notify-many", DURABLE, 100, 320_000.0, None),
            row("notify-latency", MEMORY, 1, 500.0, Some(300.0)),
            row("notify-latency", DURABLE, 1, 500.0, Some(5_100.0)),
        ];
        let t = targets(&rows);
        assert_eq!(t.len(), 3);
        assert!((t[0].measured - 0.55).abs() < 1e-9 && t[0].met(), "16 connections, not 1: {:?}", t[0]);
        assert!((t[1].measured - 0.4).abs() < 1e-9 && !t[1].met(), "{:?}", t[1]);
        assert!((t[2].measured - 4.8).abs() < 1e-9 && t[2].met(), "{:?}", t[2]);
        assert_eq!(t[2].bar, Bar::MillisAtMost(5.0), "the default batch window");
        let slower = Target { measured: 5.2, ..t[2].clone() };
        assert!(!slower.met());
    }

    #[test]
    fn a_load_left_out_has_no_target() {
        let rows = [row("echo-sse", MEMORY, 16, 60_000.0, None)];
        assert!(targets(&rows).is_empty());
    }
}
