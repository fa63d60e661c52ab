//! The writer thread's inbox: the queue on which every mutation's writes travel to the writer
//! thread, in the order they were made.
//!
//! A ring buffer behind a mutex, not a channel: a message carries a mutation's writes inline
//! (a few hundred bytes), and `std::sync::mpsc` allocates and zeroes a block for every 31 of
//! them, which the writer thread then frees; the ring keeps its capacity, so a message costs a
//! copy in and a copy out. A sender wakes the writer only when it waits on the inbox (the
//! writer's sleep within a batch window is a timed sleep, so an append never wakes it). The
//! error types are `std::sync::mpsc`'s, with the same meaning: `Disconnected` once the inbox
//! is closed and everything sent before has been received.
//!
//! It owns the queue and its closing; what a message is and how the writer groups messages is
//! [`super::group`]'s.

use std::collections::VecDeque;
use std::sync::mpsc::{RecvTimeoutError, TryRecvError};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::group::Msg;

/// Capacity an empty inbox gives back, beyond which it shrinks: a burst may queue many
/// messages, and the ring should not keep that memory for the life of the store.
const KEEP: usize = 4096;

#[derive(Debug, Default)]
pub(crate) struct Inbox {
    state: Mutex<State>,
    arrived: Condvar,
}

/// The inbox no longer takes messages: the store is closing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Closed;

#[derive(Debug, Default)]
struct State {
    queue: VecDeque<Msg>,
    closed: bool,
    /// The writer waits on `arrived`: a sender must notify it.
    waiting: bool,
}

impl Inbox {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding this lock leaves the queue itself intact.
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Queue `msg`, unless the inbox is closed (then `msg` is dropped, and with it any waiter
    /// it carried: the waiting side sees its acknowledgement dropped unsent).
    pub(crate) fn send(&self, msg: Msg) -> Result<(), Closed> {
        let mut state = self.lock();
        if state.closed {
            return Err(Closed);
        }
        state.queue.push_back(msg);
        let wake = state.waiting;
        drop(state);
        if wake {
            self.arrived.notify_one();
        }
        Ok(())
    }

    /// Refuse further messages; the writer still receives those already queued.
    pub(crate) fn close(&self) {
        self.lock().closed = true;
        self.arrived.notify_all();
    }

    /// The next message, if one is queued.
    pub(crate) fn try_recv(&self) -> Result<Msg, TryRecvError> {
        let mut state = self.lock();
        Self::pop(&mut state).ok_or(if state.closed {
            TryRecvError::Disconnected
        } else {
            TryRecvError::Empty
        })
    }

    /// Move up to `max` queued messages to the end of `batch`, under one lock; returns how
    /// many moved. `Err` once the inbox is closed and empty.
    pub(crate) fn drain_into(&self, batch: &mut Vec<Msg>, max: usize) -> Result<usize, TryRecvError> {
        let mut state = self.lock();
        let n = state.queue.len().min(max);
        batch.extend(state.queue.drain(..n));
        Self::shrink(&mut state);
        if n == 0 && state.closed { Err(TryRecvError::Disconnected) } else { Ok(n) }
    }

    /// The next message, waiting for one as long as it takes.
    pub(crate) fn recv(&self) -> Result<Msg, RecvTimeoutError> {
        self.recv_until(None)
    }

    /// The next message, waiting for one at most `timeout`.
    pub(crate) fn recv_timeout(&self, timeout: Duration) -> Result<Msg, RecvTimeoutError> {
        self.recv_until(Some(Instant::now() + timeout))
    }

    fn recv_until(&self, deadline: Option<Instant>) -> Result<Msg, RecvTimeoutError> {
        let mut state = self.lock();
        loop {
            if let Some(msg) = Self::pop(&mut state) {
                return Ok(msg);
            }
            if state.closed {
                return Err(RecvTimeoutError::Disconnected);
            }
            state.waiting = true;
            state = match deadline {
                None => self.arrived.wait(state).unwrap_or_else(std::sync::PoisonError::into_inner),
                Some(deadline) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        state.waiting = false;
                        return Err(RecvTimeoutError::Timeout);
                    }
                    let (state, _) = self
                        .arrived
                        .wait_timeout(state, left)
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    state
                }
            };
            state.waiting = false;
        }
    }

    fn pop(state: &mut State) -> Option<Msg> {
        let msg = state.queue.pop_front();
        Self::shrink(state);
        msg
    }

    fn shrink(state: &mut State) {
        if state.queue.is_empty() && state.queue.capacity() > KEEP {
            state.queue.shrink_to(KEEP);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn barrier() -> (Msg, tokio::sync::oneshot::Receiver<Result<(), String>>) {
        let (ack, done) = tokio::sync::oneshot::channel();
        (Msg::Barrier(ack), done)
    }

    /// Tell messages apart by acknowledging them with their number.
    fn number(msg: Msg, n: usize) {
        let Msg::Barrier(ack) = msg else { panic!("not a barrier") };
        let _ = ack.send(Err(n.to_string()));
    }

    #[test]
    fn messages_arrive_in_order_and_closing_delivers_what_was_queued_first() {
        let inbox = Inbox::default();
        let mut done = Vec::new();
        for _ in 0..3 {
            let (msg, rx) = barrier();
            inbox.send(msg).unwrap();
            done.push(rx);
        }
        inbox.close();
        let (refused, mut dropped) = barrier();
        assert_eq!(inbox.send(refused), Err(Closed), "a closed inbox refuses");
        assert!(dropped.try_recv().is_err(), "and drops the waiter it carried");
        number(inbox.try_recv().unwrap(), 0);
        let mut batch = Vec::new();
        assert_eq!(inbox.drain_into(&mut batch, 1), Ok(1));
        number(batch.pop().unwrap(), 1);
        number(inbox.recv().unwrap(), 2);
        assert_eq!(inbox.try_recv().err(), Some(TryRecvError::Disconnected));
        assert_eq!(inbox.drain_into(&mut batch, 10), Err(TryRecvError::Disconnected));
        assert_eq!(inbox.recv().err(), Some(RecvTimeoutError::Disconnected));
        for (n, mut rx) in done.into_iter().enumerate() {
            assert_eq!(rx.try_recv().unwrap(), Err(n.to_string()));
        }
    }

    #[test]
    fn an_empty_inbox_times_out_and_a_waiting_writer_is_woken() {
        let inbox = Arc::new(Inbox::default());
        assert_eq!(inbox.try_recv().err(), Some(TryRecvError::Empty));
        assert_eq!(inbox.recv_timeout(Duration::from_millis(1)).err(), Some(RecvTimeoutError::Timeout));
        let writer = {
            let inbox = Arc::clone(&inbox);
            std::thread::spawn(move || inbox.recv().map(|msg| number(msg, 7)))
        };
        // Wait until the writer sleeps on the inbox, so the send must wake it.
        while !inbox.lock().waiting {
            std::thread::yield_now();
        }
        let (msg, mut rx) = barrier();
        inbox.send(msg).unwrap();
        writer.join().unwrap().unwrap();
        assert_eq!(rx.try_recv().unwrap(), Err("7".to_owned()));
        // Closing wakes a writer waiting on an empty inbox.
        let writer = {
            let inbox = Arc::clone(&inbox);
            std::thread::spawn(move || inbox.recv().err())
        };
        while !inbox.lock().waiting {
            std::thread::yield_now();
        }
        inbox.close();
        assert_eq!(writer.join().unwrap(), Some(RecvTimeoutError::Disconnected));
    }
}
