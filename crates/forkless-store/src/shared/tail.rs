//! The tail: what this node committed lately to the streams its own writers serve, so a writer
//! reads the events its node just stored without a round trip to the database.
//!
//! A tail read is fenced like a database read (promise 5), with one bound. Its events are
//! committed, so their ids and bytes are final; what needs care is who may still read them.
//! The read is checked against this node's cached record, and
//!
//! - a **refusal** from the cached record is always right: epochs only grow, fencing and
//!   eviction are final, and the database is at least as far on as anything this node cached;
//! - an **acceptance** is only as fresh as the cached record: the record was current in the
//!   database at some instant after the write or load that brought it was sent
//!   ([`Validated`]). Another node can take the stream over after that instant without this
//!   node hearing of it (a hint is only a hint). So a tail read is served only within
//!   [`TailConfig::lease`] of that instant, and a node that takes over a stream that had a
//!   live attachment lets its new writer start only once that lease has passed
//!   ([`crate::Ownership::handover`]): a displaced writer on another node stops reading its tail
//!   before the new one writes, so at most one writer delivers at any time. On the node that
//!   moved the epoch, the refusal is immediate (its cache moved with its own write).
//!
//! Only streams someone on this node watches get a tail; a tail holds a stream's contiguous
//! events from some seq on, drops what its reader has read, and is bounded per stream and per
//! node ([`TailConfig`]). A read it cannot answer whole from its start goes to the database.
//!
//! It owns the kept events and the freshness rule, not the cache (`cache`) or the checks a
//! read makes (`crate::check_read`).

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;
use forkless_core::{IdHashBuilder, Seq, SessionId, StreamId};

use super::Database;
use crate::{Error, Reader, Result, StoredEvent};

/// The instant a cached record was last known to be the database's current one: when the
/// write that stored it, or the load that read it, was sent (the record was current at some
/// instant after it).
pub(super) type Validated = Instant;

/// How a node keeps and serves its tails.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TailConfig {
    /// How long after its cached record was validated a tail read is served, and how long a
    /// writer that displaced a live attachment waits before it writes (default 250 ms).
    /// [`Duration::ZERO`] turns tails off: every read goes to the database.
    pub lease: Duration,
    /// The most bytes one stream's tail keeps (default 1 MiB): beyond it, its oldest events go.
    pub stream_bytes: usize,
    /// The most bytes all of this node's tails keep (default 64 MiB): beyond it, new events are
    /// not kept (their readers read them from the database).
    pub node_bytes: usize,
}

impl Default for TailConfig {
    fn default() -> Self {
        Self { lease: Duration::from_millis(250), stream_bytes: 1 << 20, node_bytes: 64 << 20 }
    }
}

impl TailConfig {
    /// No tails: every read goes to the database.
    pub const OFF: Self = Self { lease: Duration::ZERO, stream_bytes: 0, node_bytes: 0 };
}

/// This node's tails.
#[derive(Debug, Default)]
pub(super) struct Tails {
    config: TailConfig,
    inner: Mutex<Kept>,
}

#[derive(Debug, Default)]
struct Kept {
    streams: HashMap<(SessionId, StreamId), Tail, IdHashBuilder>,
    bytes: usize,
}

/// One stream's kept events: `events[i]` has seq `first + i`.
#[derive(Debug)]
struct Tail {
    first: Seq,
    events: VecDeque<Bytes>,
    bytes: usize,
}

impl Tail {
    fn next(&self) -> Seq {
        Seq::new(self.first.get() + self.events.len() as u64)
    }

    /// Drop the oldest event; its size.
    fn pop(&mut self) -> usize {
        let Some(e) = self.events.pop_front() else { return 0 };
        self.first = self.first.next();
        self.bytes -= e.len();
        e.len()
    }
}

impl Tails {
    pub(super) fn new(config: TailConfig) -> Self {
        Self { config, inner: Mutex::default() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether a record validated at `at` is fresh enough to serve a tail read now.
    pub(super) fn fresh(&self, at: Validated) -> bool {
        !self.config.lease.is_zero() && at.elapsed() < self.config.lease
    }

    /// The lease (see [`TailConfig::lease`]).
    pub(super) fn lease(&self) -> Duration {
        self.config.lease
    }

    /// `seq` of `stream` was stored by this node with `payload`: keep it. `watched` says
    /// whether someone here serves the stream (only those streams get a tail).
    pub(super) fn stored(
        &self,
        session: SessionId,
        stream: StreamId,
        seq: Seq,
        payload: &Bytes,
        watched: bool,
    ) {
        if self.config.lease.is_zero() {
            return;
        }
        let mut inner = self.lock();
        let inner = &mut *inner;
        let key = (session, stream);
        if !watched {
            if let Some(gone) = inner.streams.remove(&key) {
                inner.bytes -= gone.bytes;
            }
            return;
        }
        let size = payload.len();
        if size > self.config.stream_bytes || inner.bytes + size > self.config.node_bytes {
            // Not kept: the tail would no longer be contiguous, so it starts again later.
            if let Some(gone) = inner.streams.remove(&key) {
                inner.bytes -= gone.bytes;
            }
            return;
        }
        let tail = inner.streams.entry(key).or_insert_with(|| Tail {
            first: seq,
            events: VecDeque::new(),
            bytes: 0,
        });
        if tail.next() != seq {
            // Another node stored events in between (or this one was not kept): start afresh.
            inner.bytes -= tail.bytes;
            *tail = Tail { first: seq, events: VecDeque::new(), bytes: 0 };
        }
        tail.events.push_back(payload.clone());
        tail.bytes += size;
        inner.bytes += size;
        while tail.bytes > self.config.stream_bytes {
            inner.bytes -= tail.pop();
        }
    }

    /// Up to `max` kept events of `stream` after `after`, if the tail holds the one right
    /// after it; what precedes `after` is dropped (its reader has it). The caller has checked
    /// the reader against a fresh cached record.
    pub(super) fn read(
        &self,
        session: SessionId,
        stream: StreamId,
        after: Seq,
        max: usize,
    ) -> Option<Vec<StoredEvent>> {
        let mut inner = self.lock();
        let inner = &mut *inner;
        let tail = inner.streams.get_mut(&(session, stream))?;
        if tail.first > after.next() || tail.next() <= after.next() {
            return None;
        }
        while tail.first <= after {
            inner.bytes -= tail.pop();
        }
        let events = tail
            .events
            .iter()
            .take(max)
            .enumerate()
            .map(|(i, payload)| StoredEvent {
                seq: Seq::new(tail.first.get() + i as u64),
                payload: payload.clone(),
            })
            .collect();
        Some(events)
    }

    /// Forget `session`'s tails (`stream`'s alone, if named): dropped, or the session ended.
    pub(super) fn forget(&self, session: SessionId, stream: Option<StreamId>) {
        let mut inner = self.lock();
        let inner = &mut *inner;
        inner.streams.retain(|(s, t), tail| {
            let gone = *s == session && stream.is_none_or(|id| id == *t);
            if gone {
                inner.bytes -= tail.bytes;
            }
            !gone
        });
    }

    /// Bytes kept across every tail.
    #[cfg(test)]
    fn bytes(&self) -> usize {
        self.lock().bytes
    }
}

impl<D: Database> super::Inner<D> {
    /// A read by `reader` answered from this node's tail, if it can be (see [`tail`]): `None`
    /// sends it to the database. A refusal read off the cached record is final.
    pub(super) fn tail_read(
        &self,
        session: SessionId,
        stream: StreamId,
        after: Seq,
        max: usize,
        reader: Reader,
    ) -> Result<Option<Vec<StoredEvent>>> {
        let Reader::Attached(held) = reader else { return Ok(None) };
        let checked = self.cache.with(session, |record, validated| {
            let meta = record.stream(stream)?;
            match crate::check_read(meta, after, reader) {
                // This node's record is behind the grant the reader holds: ask the database.
                Err(Error::Core(forkless_core::Error::StaleEpoch { current, .. })) if current < held => None,
                Err(e) => Some(Err(e)),
                Ok(()) => Some(Ok(self.tails.fresh(validated))),
            }
        });
        match checked.flatten() {
            None | Some(Ok(false)) => Ok(None),
            Some(Err(e)) => Err(e),
            Some(Ok(true)) => Ok(self.tails.read(session, stream, after, max)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids() -> (SessionId, StreamId) {
        (SessionId::from_bytes([1; 16]), StreamId::from_bytes([2; 12]))
    }

    fn tails(stream_bytes: usize, node_bytes: usize) -> Tails {
        Tails::new(TailConfig { lease: Duration::from_secs(1), stream_bytes, node_bytes })
    }

    fn seqs(events: &[StoredEvent]) -> Vec<u64> {
        events.iter().map(|e| e.seq.get()).collect()
    }

    #[test]
    fn a_read_gets_what_follows_its_cursor_and_drops_what_it_had() {
        let (s, t) = ids();
        let tails = tails(1 << 20, 1 << 20);
        for seq in 1..=5 {
            tails.stored(s, t, Seq::new(seq), &Bytes::from(vec![b'x'; seq as usize]), true);
        }
        assert_eq!(seqs(&tails.read(s, t, Seq::new(1), 2).unwrap()), [2, 3]);
        assert_eq!(tails.bytes(), 2 + 3 + 4 + 5, "event 1 went: its reader has it");
        assert_eq!(seqs(&tails.read(s, t, Seq::new(3), 10).unwrap()), [4, 5]);
        assert!(tails.read(s, t, Seq::new(5), 10).is_none(), "nothing after the last");
        assert!(tails.read(s, t, Seq::new(1), 10).is_none(), "a cursor before the tail goes to the database");
    }

    #[test]
    fn a_gap_starts_the_tail_again_and_only_watched_streams_are_kept() {
        let (s, t) = ids();
        let tails = tails(1 << 20, 1 << 20);
        tails.stored(s, t, Seq::new(1), &Bytes::from_static(b"a"), true);
        tails.stored(s, t, Seq::new(4), &Bytes::from_static(b"d"), true);
        assert!(tails.read(s, t, Seq::PRIMING, 10).is_none(), "2 and 3 were stored elsewhere");
        assert_eq!(seqs(&tails.read(s, t, Seq::new(3), 10).unwrap()), [4]);
        tails.stored(s, t, Seq::new(5), &Bytes::from_static(b"e"), false);
        assert!(tails.read(s, t, Seq::new(4), 10).is_none(), "nobody here watches it any more");
        assert_eq!(tails.bytes(), 0);
    }

    #[test]
    fn tails_are_bounded_per_stream_and_per_node() {
        let (s, t) = ids();
        let tails = tails(10, 15);
        for seq in 1..=4 {
            tails.stored(s, t, Seq::new(seq), &Bytes::from(vec![b'x'; 4]), true);
        }
        assert!(tails.read(s, t, Seq::PRIMING, 10).is_none(), "the oldest went to stay within 10 bytes");
        assert_eq!(seqs(&tails.read(s, t, Seq::new(2), 10).unwrap()), [3, 4]);
        let other = StreamId::from_bytes([3; 12]);
        tails.stored(s, other, Seq::new(1), &Bytes::from(vec![b'y'; 8]), true);
        assert!(tails.read(s, other, Seq::PRIMING, 10).is_none(), "the node's 15 bytes are taken");
        tails.forget(s, Some(t));
        assert_eq!(tails.bytes(), 0);
        tails.stored(s, other, Seq::new(2), &Bytes::from(vec![b'y'; 8]), true);
        assert_eq!(seqs(&tails.read(s, other, Seq::new(1), 10).unwrap()), [2]);
        tails.forget(s, None);
        assert_eq!(tails.bytes(), 0);
    }

    #[test]
    fn off_keeps_nothing_and_nothing_is_fresh() {
        let (s, t) = ids();
        let tails = Tails::new(TailConfig::OFF);
        tails.stored(s, t, Seq::new(1), &Bytes::from_static(b"a"), true);
        assert!(tails.read(s, t, Seq::PRIMING, 10).is_none());
        assert!(!tails.fresh(Instant::now()));
    }
}
