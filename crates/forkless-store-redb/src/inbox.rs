//! The writer thread's inbox: the queue on which every mutation's writes travel to the writer
//! thread, in the order they were made.
//!
//! A [`Group`] behind a mutex, not a channel of messages: a sender appends its writes to the
//! queued group, and the writer takes the whole queue at once by trading it for the group it
//! has just written (empty, its buffers kept), so once warm nothing is allocated and every
//! write is copied once on its way in. (`std::sync::mpsc` allocated and zeroed a block for
//! every 31 messages, which the writer thread then freed, and copied each message out again.)
//! A sender wakes the writer only when the writer waits for what it sends: any write while
//! idle, but within a batch window only a write somebody waits on (or one that fills the
//! group), so an append nobody waits on never wakes it.
//!
//! It owns the queue and its closing; what a group is and how the writer gathers one is
//! [`super::group`]'s.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Instant;

use super::group::{Ack, EventId, Group, Write};

#[derive(Debug, Default)]
pub(crate) struct Inbox {
    state: Mutex<State>,
    arrived: Condvar,
    /// Payload bytes of the events queued (read without the lock).
    backlog: AtomicU64,
}

/// The most payload bytes the inbox holds before appends wait for their sync: half the log
/// (one region), so an emitter faster than the disk is held to the disk's pace instead of
/// queueing in memory without bound (a gibibyte of notifications emitted in a loop was
/// queued whole before the first sync).
pub(crate) const BACKLOG_BYTES: u64 = crate::wal::LOG_SIZE / 2;

/// The inbox no longer takes writes: the store is closing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Closed;

/// What the inbox holds, as [`Inbox::queued`] sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Queued {
    Some,
    Empty,
    /// Empty and closed: nothing will come.
    Closed,
}

/// Whether a send woke the writer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Woke {
    Writer,
    No,
}

#[derive(Debug, Default)]
struct State {
    queued: Group,
    closed: bool,
    writer: Sleep,
}

/// What the writer waits on `arrived` for, which tells a sender whether to notify it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Sleep {
    /// It is not waiting.
    #[default]
    Awake,
    /// Idle: any write.
    ForAny,
    /// Within a batch window: a write somebody waits on, or a queue of `room` mutations.
    ForUrgent { room: usize },
}

impl State {
    /// Whether what is queued ends a wait of this kind.
    fn ends(&self, sleep: Sleep) -> bool {
        match sleep {
            Sleep::Awake => false,
            Sleep::ForAny => !self.queued.is_empty(),
            Sleep::ForUrgent { room } => self.queued.is_urgent() || self.queued.messages >= room,
        }
    }
}

impl Inbox {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding this lock leaves the queue itself intact.
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Queue one mutation's writes (see [`Group::add`]), unless the inbox is closed: then they
    /// are dropped, and with them the waiter, whose side sees its acknowledgement dropped
    /// unsent. Wakes the writer if it waits for these writes.
    pub(crate) fn send(
        &self,
        writes: impl IntoIterator<Item = Write>,
        deliver: impl IntoIterator<Item = EventId>,
        waiter: Option<Ack>,
    ) -> Result<Woke, Closed> {
        let mut state = self.lock();
        if state.closed {
            return Err(Closed);
        }
        let bytes = state.queued.add(writes, deliver, waiter);
        self.backlog.fetch_add(bytes, Ordering::Relaxed);
        let wake = state.ends(state.writer);
        if wake {
            // Only one notification per wait.
            state.writer = Sleep::Awake;
        }
        drop(state);
        if !wake {
            return Ok(Woke::No);
        }
        self.arrived.notify_one();
        Ok(Woke::Writer)
    }

    /// Refuse further writes; the writer still takes those already queued.
    pub(crate) fn close(&self) {
        self.lock().closed = true;
        self.arrived.notify_all();
    }

    /// Close, and drop whatever is still queued, waiters with it (their side sees the
    /// acknowledgement dropped unsent, an error, instead of waiting forever): what the writer
    /// thread does as it exits, also when it unwinds from a panic.
    pub(crate) fn shut(&self) {
        let queued = {
            let mut state = self.lock();
            state.closed = true;
            std::mem::take(&mut state.queued)
        };
        self.arrived.notify_all();
        drop(queued);
    }

    /// Whether anything is queued.
    pub(crate) fn queued(&self) -> Queued {
        let state = self.lock();
        match (state.queued.is_empty(), state.closed) {
            (false, _) => Queued::Some,
            (true, false) => Queued::Empty,
            (true, true) => Queued::Closed,
        }
    }

    /// Move everything queued to the end of `group`; returns how many mutations moved.
    /// `Err(Closed)` once the inbox is closed and empty.
    pub(crate) fn take_into(&self, group: &mut Group) -> Result<usize, Closed> {
        let mut state = self.lock();
        let n = state.queued.messages;
        if n == 0 && state.closed {
            return Err(Closed);
        }
        group.take_from(&mut state.queued);
        self.backlog.store(0, Ordering::Relaxed);
        Ok(n)
    }

    /// Whether more is queued than [`BACKLOG_BYTES`]: then an append waits for its sync.
    pub(crate) fn backlogged(&self) -> bool {
        self.backlog.load(Ordering::Relaxed) > BACKLOG_BYTES
    }

    /// Wait until something is queued (`Ok`), at most until `deadline` if one is given.
    pub(crate) fn wait(&self, deadline: Option<Instant>) -> Result<(), RecvTimeoutError> {
        let mut state = self.lock();
        loop {
            if !state.queued.is_empty() {
                return Ok(());
            }
            if state.closed {
                return Err(RecvTimeoutError::Disconnected);
            }
            state = match deadline {
                None => {
                    state.writer = Sleep::ForAny;
                    self.arrived.wait(state).unwrap_or_else(std::sync::PoisonError::into_inner)
                }
                Some(deadline) => match self.sleep(state, Sleep::ForAny, deadline) {
                    Ok(state) => state,
                    Err(()) => return Err(RecvTimeoutError::Timeout),
                },
            };
            state.writer = Sleep::Awake;
        }
    }

    /// Within a batch window: wait until somebody waits on a queued write, `room` mutations
    /// are queued, the inbox closes, or `deadline` passes. Writes nobody waits on join the
    /// queue meanwhile without waking this thread (which takes them all at the end).
    pub(crate) fn wait_urgent(&self, deadline: Instant, room: usize) {
        let mut state = self.lock();
        let sleep = Sleep::ForUrgent { room };
        loop {
            if state.closed || state.ends(sleep) {
                return;
            }
            state = match self.sleep(state, sleep, deadline) {
                Ok(state) => state,
                Err(()) => return,
            };
            state.writer = Sleep::Awake;
        }
    }

    /// Wait on `arrived` as `sleep` says, until `deadline` at the latest (`Err` once it has
    /// passed, the writer marked awake).
    fn sleep<'a>(
        &self,
        mut state: MutexGuard<'a, State>,
        sleep: Sleep,
        deadline: Instant,
    ) -> Result<MutexGuard<'a, State>, ()> {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            state.writer = Sleep::Awake;
            return Err(());
        }
        state.writer = sleep;
        let (state, _) =
            self.arrived.wait_timeout(state, left).unwrap_or_else(std::sync::PoisonError::into_inner);
        Ok(state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op::Op;
    use std::sync::Arc;
    use std::time::Duration;

    type Done = tokio::sync::oneshot::Receiver<Result<(), String>>;

    fn barrier(inbox: &Inbox) -> Result<Done, Closed> {
        let (ack, done) = tokio::sync::oneshot::channel();
        inbox.send([], [], Some(ack)).map(|_| done)
    }

    fn trim(low_water: u64) -> Write {
        Write::Op(Op::Trim { prefix: [1; 28], low_water })
    }

    fn low_waters(group: &Group) -> Vec<u64> {
        group.ops.iter().map(|op| if let Op::Trim { low_water, .. } = op { *low_water } else { 0 }).collect()
    }

    #[test]
    fn writes_arrive_in_order_and_closing_leaves_what_was_queued_to_take() {
        let inbox = Inbox::default();
        let mut group = Group::default();
        inbox.send([trim(1), trim(2)], [], None).unwrap();
        assert_eq!(inbox.take_into(&mut group), Ok(1));
        inbox.send([trim(3)], [], None).unwrap();
        let mut done = barrier(&inbox).unwrap();
        assert_eq!(inbox.queued(), Queued::Some);
        inbox.close();
        assert_eq!(inbox.send([trim(4)], [], None), Err(Closed), "a closed inbox refuses");
        assert!(barrier(&inbox).is_err());
        assert_eq!(inbox.take_into(&mut group), Ok(2), "what was queued before closing");
        assert_eq!(low_waters(&group), vec![1, 2, 3]);
        assert_eq!((group.messages, group.is_urgent()), (3, true));
        for ack in group.acks.drain(..) {
            let _ = ack.send(Ok(()));
        }
        assert_eq!(done.try_recv().unwrap(), Ok(()));
        assert_eq!(inbox.queued(), Queued::Closed);
        assert_eq!(inbox.take_into(&mut group), Err(Closed));
        assert_eq!(inbox.wait(None), Err(RecvTimeoutError::Disconnected));
    }

    #[test]
    fn shutting_drops_the_queued_waiters_so_none_waits_forever() {
        let inbox = Inbox::default();
        let mut done = barrier(&inbox).unwrap();
        inbox.shut();
        assert!(matches!(done.try_recv(), Err(tokio::sync::oneshot::error::TryRecvError::Closed)));
        assert_eq!(inbox.queued(), Queued::Closed);
        assert!(barrier(&inbox).is_err(), "a shut inbox refuses");
    }

    #[test]
    fn a_taken_group_trades_places_with_the_empty_one() {
        let inbox = Inbox::default();
        let mut group = Group::default();
        group.ops.reserve(64);
        let spare = group.ops.as_ptr();
        inbox.send([trim(1)], [], None).unwrap();
        inbox.take_into(&mut group).unwrap();
        group.clear();
        // The writer's emptied buffer went to the inbox, and comes back with the next writes.
        inbox.send([trim(2)], [], None).unwrap();
        inbox.take_into(&mut group).unwrap();
        assert_eq!(group.ops.as_ptr(), spare);
        assert_eq!(low_waters(&group), vec![2]);
    }

    #[test]
    fn an_empty_inbox_times_out_and_a_waiting_writer_is_woken() {
        let inbox = Arc::new(Inbox::default());
        assert_eq!(inbox.queued(), Queued::Empty);
        let soon = Instant::now() + Duration::from_millis(1);
        assert_eq!(inbox.wait(Some(soon)), Err(RecvTimeoutError::Timeout));
        let writer = {
            let inbox = Arc::clone(&inbox);
            std::thread::spawn(move || inbox.wait(None))
        };
        // Wait until the writer sleeps on the inbox, so the send must wake it.
        while inbox.lock().writer != Sleep::ForAny {
            std::thread::yield_now();
        }
        assert_eq!(inbox.send([trim(1)], [], None), Ok(Woke::Writer));
        assert_eq!(writer.join().unwrap(), Ok(()));
        inbox.take_into(&mut Group::default()).unwrap();
        // Closing wakes a writer waiting on an empty inbox.
        let writer = {
            let inbox = Arc::clone(&inbox);
            std::thread::spawn(move || inbox.wait(None))
        };
        while inbox.lock().writer != Sleep::ForAny {
            std::thread::yield_now();
        }
        inbox.close();
        assert_eq!(writer.join().unwrap(), Err(RecvTimeoutError::Disconnected));
    }

    /// Within a batch window appends nobody waits on join the queue without waking the
    /// writer (on a core shared with the server every wake-up preempts it); a write somebody
    /// waits on, a full group or closing ends the wait at once, and the deadline ends it too.
    #[test]
    fn within_a_window_only_a_write_somebody_waits_on_or_a_full_group_wakes_the_writer() {
        let inbox = Arc::new(Inbox::default());
        let far = Instant::now() + Duration::from_secs(600);
        let waiting = |inbox: &Inbox, room| {
            while inbox.lock().writer != (Sleep::ForUrgent { room }) {
                std::thread::yield_now();
            }
        };
        let writer = {
            let inbox = Arc::clone(&inbox);
            std::thread::spawn(move || inbox.wait_urgent(far, 3))
        };
        waiting(&inbox, 3);
        assert_eq!(inbox.send([trim(1)], [], None), Ok(Woke::No));
        assert_eq!(inbox.send([trim(2)], [], None), Ok(Woke::No));
        assert_eq!(inbox.send([trim(3)], [], None), Ok(Woke::Writer), "the third fills the group");
        writer.join().unwrap();
        let mut group = Group::default();
        assert_eq!(inbox.take_into(&mut group), Ok(3), "every write waited in the queue");

        let writer = {
            let inbox = Arc::clone(&inbox);
            std::thread::spawn(move || inbox.wait_urgent(far, 100))
        };
        waiting(&inbox, 100);
        assert_eq!(inbox.send([trim(4)], [], None), Ok(Woke::No));
        let _done = barrier(&inbox).unwrap();
        assert_eq!(inbox.lock().writer, Sleep::Awake, "one notification per wait");
        writer.join().unwrap();
        // Already urgent: no wait at all.
        inbox.wait_urgent(far, 100);
        inbox.take_into(&mut group).unwrap();

        let writer = {
            let inbox = Arc::clone(&inbox);
            std::thread::spawn(move || inbox.wait_urgent(far, 100))
        };
        waiting(&inbox, 100);
        inbox.close();
        writer.join().unwrap();
        // The deadline ends a wait nothing else ends.
        let open = Inbox::default();
        open.wait_urgent(Instant::now() + Duration::from_millis(1), 100);
        assert_eq!(open.lock().writer, Sleep::Awake);
    }
}
