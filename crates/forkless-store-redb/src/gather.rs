//! How the writer thread takes writes from the inbox while a group gathers: polling briefly
//! in immediate mode, gathering concurrent waiters into one sync, and waiting out a batch
//! window for only what must not wait.
//!
//! This module owns the taking; what a group is and how long it may gather is
//! [`super::group`]'s, the queue [`super::inbox`]'s.

use std::time::{Duration, Instant};

use super::group::Group;
use super::inbox::{Inbox, Queued};

/// A batched group stops gathering once it holds this many mutations; bounds commit latency
/// under a flood.
pub(crate) const MAX_BATCH: usize = 8192;

/// How long the writer polls for the next message before it sleeps, in immediate mode.
pub(crate) const IMMEDIATE_POLL: Duration = Duration::from_micros(200);

/// Whether a message arrives within `within`. Polls, yielding the CPU between polls, so
/// another thread that wants the core gets it.
pub(crate) fn poll_briefly(rx: &Inbox, within: Duration) -> bool {
    let until = Instant::now() + within;
    loop {
        match rx.queued() {
            Queued::Some => return true,
            Queued::Empty if Instant::now() < until => std::thread::yield_now(),
            Queued::Empty | Queued::Closed => return false,
        }
    }
}

/// The longest a sync somebody waits for is held back for more writes to join it.
pub(crate) const GROUP_GATHER: Duration = Duration::from_micros(400);

/// A group stops gathering once no write arrived for this long. Under SSE echo at 16
/// connections the runtime is mostly waiting for the clients' next requests while a group
/// gathers (the yields return without a switch), so a longer pause only delays the sync that
/// all of them wait for: 120 µs, 60 µs and 20 µs measured 24.0-25.0k, 24.7-27.1k and
/// 26.6-29.8k requests/s (no gain below 20 µs).
pub(crate) const GROUP_QUIET: Duration = Duration::from_micros(20);

/// Group commit for writes somebody waits on, when several waited on the last sync: take what
/// is queued, then keep taking writes while they arrive within [`GROUP_QUIET`] of each other
/// (at most [`GROUP_GATHER`] in all), yielding the CPU between polls so the threads producing
/// them can run. Concurrent requests then share one sync instead of paying one each (a sync
/// costs the kernel tens of microseconds of CPU). A lone waiter does not wait for company.
pub(crate) fn gather_waiters(rx: &Inbox, group: &mut Group) {
    let start = Instant::now();
    let mut last = start;
    loop {
        match rx.take_into(group) {
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

/// Gather into `group` until `window` has passed since now, somebody waits (a barrier, or
/// writes with a waiter) or the group holds [`MAX_BATCH`] mutations. The thread waits on the
/// inbox for just those, so an append nobody waits on never wakes it: on a core shared with
/// the server, waking per append cost two context switches per event, and taking the queue
/// every millisecond of the window (as this did before) preempted the server a thousand times
/// a second under a flood of notifications (6 involuntary context switches of its runtime
/// thread per thousand events) and cut each stream's rows into one per take. A waiter is
/// written at once, with whatever is queued with it (concurrent waiters share one sync).
pub(crate) fn gather_window(rx: &Inbox, group: &mut Group, window: Duration) {
    if group.messages < MAX_BATCH && !group.is_urgent() {
        rx.wait_urgent(Instant::now() + window, MAX_BATCH - group.messages);
    }
    let _ = rx.take_into(group);
}
