//! How the writer thread forms a group of writes, and what a group's sync settles.
//!
//! Every mutation's effects join the inbox's queued [`Group`] in one step taken while the
//! session lock is held, so the queue is in mutation order and every log entry covers a
//! prefix of it. A write that somebody waits on (an answer sent at once, any write in
//! immediate mode) or a barrier commits its group at once, with everything queued by then;
//! otherwise a batched writer gathers for the batch window. After the sync, the group's events
//! are delivered (the engine makes them visible to readers and wakes their writers), and only
//! then are its waiters acknowledged: one [`Settled`], applied on a task of the async runtime
//! when there is one, so a group costs one wake-up across threads, not one per waiter.
//!
//! This module owns what a group is, how long a batched one gathers ([`WindowPlan`]) and the
//! settling; taking writes from the queue while gathering is [`super::gather`]'s, the queue
//! [`super::inbox`]'s, the writing [`super::journal`]'s, the storing [`super::checkpoint`]'s.

use std::time::{Duration, Instant};

use smallvec::SmallVec;

use super::op::{Op, StreamRow};
use forkless_store::engine::Origin;

/// One mutation's writes, as its journal collects them. An append to an existing stream, the
/// most frequent mutation, writes its event and its stream's row: those stay inline, without
/// an allocation per append.
pub(crate) type Writes = SmallVec<[Write; 2]>;

/// One write of a mutation on its way to the queue.
#[derive(Debug)]
pub(crate) enum Write {
    /// A write as the log holds it.
    Op(Op),
    /// A stream's row as the mutation left it (`prefix` = session + stream; `origin`: whether
    /// the mutation created the stream), written into the row the queued group already holds
    /// for that stream if it has one.
    Row { prefix: [u8; 28], stream: forkless_core::Stream, origin: Origin },
}

/// Where in a group's writes each stream's row is, by session + stream.
type Rows = std::collections::HashMap<[u8; 28], usize, forkless_core::IdHashBuilder>;

/// Acknowledges a write (or a barrier) once it is durable, or with the failure.
pub(crate) type Ack = tokio::sync::oneshot::Sender<Result<(), String>>;

/// Writes on their way to one log entry: those of every mutation queued or gathered so far,
/// in mutation order, the events they appended (delivered once durable) and the waiters to
/// acknowledge then. The inbox fills one while the writer thread writes another, and the two
/// trade places when the writer takes the queue, so neither allocates once warm.
#[derive(Debug, Default)]
pub(crate) struct Group {
    pub(crate) ops: Vec<Op>,
    /// The row in `ops` of each stream written since the last deletion of it (or of its
    /// session) in `ops`: a later row of the stream is written into that one.
    rows: Rows,
    pub(crate) deliver: Vec<EventId>,
    pub(crate) acks: Vec<Ack>,
    /// Mutations and barriers in the group.
    pub(crate) messages: usize,
    /// When its first mutation was queued: a batched group's window runs from then, so the
    /// time the writer thread took to wake for it counts against the window too.
    pub(crate) opened: Option<Instant>,
}

impl Group {
    /// One mutation's writes and appended events; `waiter`: somebody waits for exactly these
    /// writes (an answer sent at once, or any write in immediate mode; with no writes, a
    /// barrier), so the group commits now rather than at the window's end.
    ///
    /// A stream's row is written into the row the group holds for that stream, if no deletion
    /// of the stream or its session came after it: every append rewrites its stream's row, and
    /// carrying one row per append through the queue, the log's encoder and the checkpoint
    /// (to be skipped there as superseded) was a third of the bytes an append moved. Moving a
    /// row's write earlier changes nothing: within a group only a deletion of the stream acts
    /// on its row, the group is one log entry applied whole, and no deletion is crossed.
    pub(crate) fn add(
        &mut self,
        writes: impl IntoIterator<Item = Write>,
        deliver: impl IntoIterator<Item = EventId>,
        waiter: Option<Ack>,
    ) -> u64 {
        if self.messages == 0 {
            self.opened = Some(Instant::now());
        }
        let mut payload = 0;
        for write in writes {
            match write {
                Write::Op(op) => {
                    match &op {
                        Op::PutEvent { payload: bytes, .. } => payload += bytes.len() as u64,
                        Op::DropStream { prefix } => {
                            self.rows.remove(prefix);
                        }
                        Op::DropSession { session } => self.rows.retain(|p, _| !p.starts_with(session)),
                        _ => {}
                    }
                    self.ops.push(op);
                }
                Write::Row { prefix, stream, origin } => self.put_row(prefix, stream, origin),
            }
        }
        self.deliver.extend(deliver);
        self.acks.extend(waiter);
        self.messages += 1;
        payload
    }

    /// Write a stream's row: into the one the group holds for it, or as a new write.
    fn put_row(&mut self, prefix: [u8; 28], stream: forkless_core::Stream, origin: Origin) {
        // A stream the mutation created has no row before it (it was deleted, or never was).
        if origin == Origin::Existing
            && let Some(&at) = self.rows.get(&prefix)
            && let Some(Op::PutStream { prefix: held, stream: StreamRow::Seen(row), .. }) =
                self.ops.get_mut(at)
            && *held == prefix
        {
            // The held write keeps its origin: if it created the stream, the group still does.
            **row = stream;
            return;
        }
        self.rows.insert(prefix, self.ops.len());
        self.ops.push(Op::PutStream { prefix, stream: StreamRow::Seen(Box::new(stream)), origin });
    }

    /// Move everything in `other` to the end of this group, leaving `other` empty. Rows that
    /// `other` held are not written into this group's from then on (the writer only takes
    /// queued groups, it adds nothing).
    pub(crate) fn take_from(&mut self, other: &mut Self) {
        if self.messages == 0 {
            self.ops.clear();
            self.rows.clear();
            self.deliver.clear();
            self.acks.clear();
            self.opened = None;
            std::mem::swap(self, other);
            return;
        }
        self.ops.append(&mut other.ops);
        self.rows.clear();
        other.rows.clear();
        self.deliver.append(&mut other.deliver);
        self.acks.append(&mut other.acks);
        self.messages += std::mem::take(&mut other.messages);
    }

    /// Whether nothing joined the group.
    pub(crate) fn is_empty(&self) -> bool {
        self.messages == 0
    }

    /// When the group stops gathering if batched: `window` after its first write was queued
    /// (from now if it has none), less what `plan` keeps free for its sync and delivery.
    pub(crate) fn closes(&self, window: Duration, plan: &WindowPlan) -> Instant {
        self.opened.unwrap_or_else(Instant::now) + (window - plan.early(window))
    }

    /// Whether somebody waits on the group: it commits at once.
    pub(crate) fn is_urgent(&self) -> bool {
        !self.acks.is_empty()
    }

    /// Empty the group for the next one. Its buffers keep their capacity, up to what a busy
    /// store's groups use: a burst should not keep its memory for the life of the store.
    pub(crate) fn clear(&mut self) {
        const KEEP: usize = 16 << 10;
        self.ops.clear();
        self.ops.shrink_to(KEEP);
        self.rows.clear();
        self.rows.shrink_to(KEEP);
        self.deliver.clear();
        self.deliver.shrink_to(KEEP);
        self.acks.clear();
        self.messages = 0;
        self.opened = None;
    }
}

/// An appended event, by session and id: what the writer delivers once it is durable.
#[derive(Clone, Copy, Debug)]
pub(crate) struct EventId {
    pub(crate) session: forkless_core::SessionId,
    pub(crate) event: forkless_core::EventId,
}

/// What a batch window keeps free beside a slow sync ([`WindowPlan`]): the writer thread's
/// sleep overshooting its deadline, and handing the group to the runtime and on to the
/// connections' writers.
pub(crate) const DELIVERY_ALLOWANCE: Duration = Duration::from_micros(500);

/// A group of at least this many mutations is a flood: the next window gathers for as long
/// as a slow sync allows rather than for half the window.
pub(crate) const FLOOD: usize = 256;

/// How long a batched group gathers: an event is to be delivered within the window of its
/// append, so the window closes early enough for a slow sync and the delivery.
///
/// Without a flood a group gathers for half the window and leaves the other half to its
/// sync and delivery: under a light load an extra sync costs a core that has time to spare,
/// and the tail of a virtual machine's delivery latency (a sync of 1 to 3 ms now and then, a
/// descheduled thread) is more than an estimate foresees. Against the memory store, one event
/// a millisecond, a 5 ms window: planning for the mean sync (as this did before) put the
/// 99th percentile of delivery latency up to 2.8 ms beyond the window; planning for the
/// slowest recent sync, up to 1.7 ms beyond it; this, 0.8 to 1.8 ms inside it.
///
/// Under a flood syncs are what batching saves, so a group gathers for as long as the
/// slowest recent sync allows, plus [`DELIVERY_ALLOWANCE`] (at most half the window): that
/// estimate is a decaying maximum, raised at once by a slower sync and forgetting a
/// thirty-second of itself per sync (half of it in about 22).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct WindowPlan {
    slow: Duration,
    load: Load,
}

/// What the last group written said of the load.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Load {
    #[default]
    Light,
    /// It held [`FLOOD`] mutations or more.
    Flood,
}

impl WindowPlan {
    /// A log write and its sync took `took`.
    pub(crate) fn synced(&mut self, took: Duration) {
        self.slow = took.max(self.slow - self.slow / 32);
    }

    /// The group just written held `messages` mutations.
    pub(crate) fn gathered(&mut self, messages: usize) {
        self.load = if messages >= FLOOD { Load::Flood } else { Load::Light };
    }

    /// How long before the end of `window` a group stops gathering: half of it, or less
    /// under a flood.
    pub(crate) fn early(&self, window: Duration) -> Duration {
        let half = window / 2;
        match self.load {
            Load::Light => half,
            Load::Flood => (self.slow + DELIVERY_ALLOWANCE).min(half),
        }
    }
}

/// What a group's sync settled: the events to deliver (empty if it failed) and the waiters to
/// acknowledge, with the outcome. The events are delivered before the waiters hear.
#[derive(Debug)]
pub(crate) struct Settled {
    pub(crate) events: Vec<EventId>,
    pub(crate) acks: Vec<Ack>,
    pub(crate) result: Result<(), String>,
}

impl Settled {
    /// Deliver the events through `deliver`, then acknowledge every waiter.
    pub(crate) fn apply(self, deliver: impl Fn(EventId)) {
        self.events.into_iter().for_each(deliver);
        for ack in self.acks {
            let _ = ack.send(self.result.clone());
        }
    }
}

/// A durable group's events to deliver: each stream up to its last event in the group, once
/// (a window of appends to one stream wakes its writer once, not once per event).
pub(crate) fn coalesce(events: &[EventId]) -> Vec<EventId> {
    type Index = std::collections::HashMap<
        (forkless_core::SessionId, forkless_core::StreamId),
        usize,
        forkless_core::IdHashBuilder,
    >;
    let mut last: Vec<EventId> = Vec::new();
    let mut index = Index::default();
    for e in events {
        match index.entry((e.session, e.event.stream)) {
            std::collections::hash_map::Entry::Occupied(at) => {
                let l = &mut last[*at.get()];
                l.event = l.event.max(e.event);
            }
            std::collections::hash_map::Entry::Vacant(slot) => {
                slot.insert(last.len());
                last.push(*e);
            }
        }
    }
    last
}

#[cfg(test)]
mod tests;
