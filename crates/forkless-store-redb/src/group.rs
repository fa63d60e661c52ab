//! How the writer thread forms a group of writes, and what a group's sync settles.
//!
//! Every mutation's effects arrive as one [`Msg::Ops`] sent while the session lock is held,
//! so the queue is in mutation order and every log entry covers a prefix of it. A write that
//! somebody waits on (an answer sent at once, any write in immediate mode) or a
//! [`Msg::Barrier`] commits its group at once, with everything queued by then; otherwise a
//! batched writer gathers for the batch window. After the sync, the group's events are
//! delivered (the engine makes them visible to readers and wakes their writers), and only
//! then are its waiters acknowledged: one [`Settled`], applied on a task of the async runtime
//! when there is one, so a group costs one wake-up across threads, not one per waiter.
//!
//! This module owns the gathering policy and the settling; the writing is
//! [`super::journal`]'s, the storing [`super::checkpoint`]'s.

use std::sync::mpsc::TryRecvError;
use std::time::{Duration, Instant};

use smallvec::SmallVec;

use super::inbox::Inbox;
use super::op::Op;

/// One mutation's writes. An append to an existing stream, the most frequent mutation, writes
/// its event and its stream's row: those travel inline, without an allocation that the
/// writer thread would then free (a free across threads costs the allocator more).
pub(crate) type Ops = SmallVec<[Op; 2]>;

/// Acknowledges a write (or a barrier) once it is durable, or with the failure.
pub(crate) type Ack = tokio::sync::oneshot::Sender<Result<(), String>>;

#[derive(Debug)]
#[expect(
    clippy::large_enum_variant,
    reason = "nearly every message is `Ops`; boxing it would bring back an allocation per append"
)]
pub(crate) enum Msg {
    /// One mutation's writes, and the events it appended, delivered once they are durable.
    /// `waiter`: somebody waits for exactly these writes (an answer sent at once, or any
    /// write in immediate mode), so the group commits now rather than at the window's end.
    Ops {
        ops: Ops,
        deliver: SmallVec<[EventId; 1]>,
        waiter: Option<Ack>,
    },
    Barrier(Ack),
}

impl Msg {
    /// Whether somebody waits on this message: its group commits at once.
    pub(crate) fn is_urgent(&self) -> bool {
        matches!(self, Self::Barrier(_) | Self::Ops { waiter: Some(_), .. })
    }
}

/// An appended event, by session and id: what the writer delivers once it is durable.
#[derive(Clone, Copy, Debug)]
pub(crate) struct EventId {
    pub(crate) session: forkless_core::SessionId,
    pub(crate) event: forkless_core::EventId,
}

/// Most messages folded into one log entry; bounds commit latency under a flood.
pub(crate) const MAX_BATCH: usize = 8192;

/// How long the writer polls for the next message before it sleeps, in immediate mode.
pub(crate) const IMMEDIATE_POLL: Duration = Duration::from_micros(200);

/// The next message if one arrives within `within`. Polls, yielding the CPU between polls,
/// so another thread that wants the core gets it.
pub(crate) fn poll_briefly(rx: &Inbox, within: Duration) -> Option<Msg> {
    let until = Instant::now() + within;
    loop {
        match rx.try_recv() {
            Ok(msg) => return Some(msg),
            Err(TryRecvError::Empty) if Instant::now() < until => std::thread::yield_now(),
            Err(_) => return None,
        }
    }
}

/// What a batch window keeps free beside the usual sync time: a slow sync (the tail of its
/// latency), the writer thread's sleep overshooting its deadline, and handing the group to
/// the runtime and on to the connections' writers.
pub(crate) const DELIVERY_ALLOWANCE: Duration = Duration::from_micros(800);

/// How often a batched writer drains its queue while a window is open.
pub(crate) const BATCH_POLL: Duration = Duration::from_millis(1);

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
pub(crate) fn coalesce(batch: &[Msg]) -> Vec<EventId> {
    let mut last: Vec<EventId> = Vec::new();
    for msg in batch {
        let Msg::Ops { deliver: events, .. } = msg else { continue };
        for e in events {
            let same = |l: &EventId| l.session == e.session && l.event.stream == e.event.stream;
            match last.iter_mut().rev().find(|l| same(l)) {
                Some(l) => l.event = l.event.max(e.event),
                None => last.push(*e),
            }
        }
    }
    last
}

/// The longest a sync somebody waits for is held back for more writes to join it.
pub(crate) const GROUP_GATHER: Duration = Duration::from_micros(400);

/// A group stops gathering once no write arrived for this long.
pub(crate) const GROUP_QUIET: Duration = Duration::from_micros(60);

/// Group commit for writes somebody waits on, when several waited on the last sync: take what
/// is queued, then keep taking writes while they arrive within [`GROUP_QUIET`] of each other
/// (at most [`GROUP_GATHER`] in all), yielding the CPU between polls so the threads producing
/// them can run. Concurrent requests then share one sync instead of paying one each (a sync
/// costs the kernel tens of microseconds of CPU). A lone waiter does not wait for company.
pub(crate) fn gather_waiters(rx: &Inbox, batch: &mut Vec<Msg>) {
    drain_queued(rx, batch);
    let start = Instant::now();
    let mut last = start;
    while batch.len() < MAX_BATCH {
        match rx.drain_into(batch, MAX_BATCH - batch.len()) {
            Ok(0) => {
                let now = Instant::now();
                if now - last >= GROUP_QUIET || now - start >= GROUP_GATHER {
                    return;
                }
                std::thread::yield_now();
            }
            Ok(_) => last = Instant::now(),
            Err(_) => return,
        }
    }
}

/// Move whatever is queued now into `batch` (up to [`MAX_BATCH`]), without waiting.
pub(crate) fn drain_queued(rx: &Inbox, batch: &mut Vec<Msg>) {
    let _ = rx.drain_into(batch, MAX_BATCH.saturating_sub(batch.len()));
}

/// Gather messages into `batch` until `window` has passed since now, somebody waits (a
/// barrier, or writes with a waiter) or the batch is full. The thread sleeps between drains
/// instead of waiting on the queue, so an append never wakes it: on a core shared with the
/// server, waking per append cost two context switches per event. A waiter that arrives
/// during a window waits at most [`BATCH_POLL`], and whatever is queued behind it joins the
/// group (concurrent waiters share one sync).
pub(crate) fn gather_window(rx: &Inbox, batch: &mut Vec<Msg>, window: Duration) {
    let deadline = Instant::now() + window;
    loop {
        let from = batch.len();
        if rx.drain_into(batch, MAX_BATCH.saturating_sub(from)).is_err()
            || batch.len() >= MAX_BATCH
            || batch[from..].iter().any(Msg::is_urgent)
        {
            return;
        }
        let now = Instant::now();
        if now >= deadline {
            return;
        }
        std::thread::sleep((deadline - now).min(BATCH_POLL));
    }
}
