//! What a shared store reports for `/metrics` and benchmarks: its group commits, hints,
//! takeovers, listener connections and the node lease.

use std::sync::atomic::{AtomicU64, Ordering};

use super::{Database, Inner};
use crate::{MetricKind, StoreMetric};

/// What a node's shared store did, for `/metrics` and benchmarks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SharedStats {
    /// Group commits (batches of appends stored).
    pub batches: u64,
    /// Events those batches stored.
    pub batched_events: u64,
}

/// What `inner`'s store reports for `/metrics`.
pub(super) fn of<D: Database>(i: &Inner<D>) -> Vec<StoreMetric> {
    let n = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let counter = |name, help, value| StoreMetric { name, help, kind: MetricKind::Counter, value };
    let mut out = vec![
        counter("forkless_store_batches_total", "Group commits of appends stored.", n(&i.batches)),
        counter(
            "forkless_store_batched_events_total",
            "Events those group commits stored.",
            n(&i.batched_events),
        ),
        counter(
            "forkless_store_reads_total",
            "Stream reads sent to the database (writers' wake-ups, replays, inspections).",
            n(&i.reads),
        ),
        counter(
            "forkless_store_tail_reads_total",
            "Stream reads served from what this node just committed, without a round trip.",
            n(&i.tail_reads),
        ),
        counter(
            "forkless_store_hints_sent_total",
            "Hints sent to other nodes (on a database keeping tail interest, only for sessions another node tails).",
            n(&i.hints_sent),
        ),
        counter(
            "forkless_store_hints_received_total",
            "Hints received from other nodes.",
            n(&i.hints_received),
        ),
        counter(
            "forkless_store_listener_connects_total",
            "Times the hint listener (re)connected and re-read every watched stream.",
            n(&i.listener_connects),
        ),
        counter(
            "forkless_store_events_lost_total",
            "Events answered before their batch was stored that a later write could not store under their ids (lost as in a crash, or stored by a write that reported an error).",
            n(&i.events_lost),
        ),
        counter(
            "forkless_takeovers_total",
            "Sessions taken over from nodes whose lease lapsed.",
            n(&i.takeovers),
        ),
    ];
    if let Some(lease) = i.lease.get() {
        let held = u64::from(lease.check().is_ok());
        out.push(StoreMetric {
            name: "forkless_node_lease_held",
            help: "Whether this node holds its lease (1) or lost it (0).",
            kind: MetricKind::Gauge,
            value: held,
        });
    }
    out
}
