//! One stream's log in the engine: its retained events, newest in memory and (on a store with a
//! data file and a bounded cache) the oldest on disk only, its delivered mark and its signal.
//!
//! This module owns where each retained event is and keeps the run gap-free: the events on
//! disk only are known by their sizes (retention needs them), the ones in memory by their
//! payloads, and together they are the stream's events from its low-water mark on. Which
//! streams spill to disk and when is [`super::cache`]'s; who may read is [`crate::read`]'s.

use std::collections::VecDeque;

use forkless_core::Seq;
use tokio::sync::watch;

use crate::{StoredEvent, StreamSignal};

#[derive(Debug)]
pub(super) struct Log {
    /// The sizes of the oldest retained events, held on disk only, oldest first: the events
    /// `cold_end - cold.len()` up to `cold_end`.
    cold: VecDeque<u32>,
    /// The first event not on disk only (meaningful while `cold` is not empty).
    cold_end: Seq,
    /// The payload bytes of `cold`.
    cold_bytes: u64,
    /// Contiguous events in memory: from `cold_end` while events are on disk only, else
    /// from the stream's low-water mark.
    hot: VecDeque<StoredEvent>,
    /// The delivered mark: the highest seq readers may see.
    pub(super) delivered: Seq,
    /// The highest seq the store's data file holds (events up to it may leave memory).
    pub(super) stored: Seq,
    /// Whether the stream waits in the cache's spill queue.
    pub(super) queued: bool,
    /// Made by the first [`super::Engine::watch`]: a stream answered at once is never
    /// watched, and then costs no channel.
    pub(super) signal: Option<watch::Sender<StreamSignal>>,
}

impl Log {
    pub(super) fn new(delivered: Seq) -> Self {
        Self {
            cold: VecDeque::new(),
            cold_end: Seq::FIRST,
            cold_bytes: 0,
            hot: VecDeque::new(),
            delivered,
            stored: Seq::PRIMING,
            queued: false,
            signal: None,
        }
    }

    /// A recovered stream's events, all on disk only: their sizes from `first` on.
    pub(super) fn restore_cold(&mut self, first: Seq, sizes: impl IntoIterator<Item = u32>) {
        self.cold.extend(sizes);
        self.cold_end = Seq::new(first.get() + self.cold.len() as u64);
        self.cold_bytes = self.cold.iter().map(|&s| u64::from(s)).sum();
        self.stored = self.stored.max(Seq::new(self.cold_end.get().saturating_sub(1)));
    }

    pub(super) fn push(&mut self, event: StoredEvent) {
        self.hot.push_back(event);
    }

    /// The sizes of every retained event, oldest first (what retention decides on).
    pub(super) fn sizes(&self) -> impl Iterator<Item = u64> + '_ {
        self.cold.iter().map(|&s| u64::from(s)).chain(self.hot.iter().map(|e| e.payload.len() as u64))
    }

    /// Drop the `n` oldest events; the bytes that were on disk only.
    pub(super) fn drop_oldest(&mut self, n: usize) -> u64 {
        let cold = n.min(self.cold.len());
        let freed: u64 = self.cold.drain(..cold).map(u64::from).sum();
        self.cold_bytes -= freed;
        self.hot.drain(..(n - cold).min(self.hot.len()));
        freed
    }

    /// Drop the events below `low_water`; the bytes that were on disk only.
    ///
    /// Memory the remaining events no longer need goes back: a log keeps a buffer for the
    /// longest backlog it ever held, and an ended session's tombstone (all its events evicted)
    /// is kept for minutes. Before, a server churning through sessions of a thousand
    /// notifications each grew by 40 KiB per ended session, without bound while the churn
    /// lasted (33 MB/s under `notify-many`).
    pub(super) fn trim_below(&mut self, low_water: Seq) -> u64 {
        let first_cold = self.cold_end.get() - self.cold.len() as u64;
        let cold = usize::try_from(low_water.get().saturating_sub(first_cold)).unwrap_or(usize::MAX);
        let freed = self.drop_oldest(cold.min(self.cold.len()));
        while self.hot.front().is_some_and(|e| e.seq < low_water) {
            self.hot.pop_front();
        }
        // Shrinking costs a copy of what remains, so only once three quarters of the buffer
        // are unused: at most one copied event per three dropped.
        if self.hot.len() <= self.hot.capacity() / 4 {
            self.hot.shrink_to(self.hot.len() * 2);
        }
        if self.cold.len() <= self.cold.capacity() / 4 {
            self.cold.shrink_to(self.cold.len() * 2);
        }
        freed
    }

    /// How many events the memory held for this log has room for.
    #[cfg(test)]
    pub(super) fn capacity(&self) -> usize {
        self.hot.capacity() + self.cold.capacity()
    }

    /// The bytes of the events on disk only.
    pub(super) fn cold_bytes(&self) -> u64 {
        self.cold_bytes
    }

    /// Reads of events below this seq need the disk (`Seq::PRIMING` when none do).
    pub(super) fn on_disk_below(&self) -> Seq {
        if self.cold.is_empty() { Seq::PRIMING } else { self.cold_end }
    }

    /// Whether events in memory may leave it: the oldest is delivered and on disk.
    pub(super) fn spillable(&self) -> bool {
        self.hot.front().is_some_and(|e| e.seq <= self.stored.min(self.delivered))
    }

    /// Let the delivered events the data file holds leave memory; how many, and their bytes.
    pub(super) fn spill(&mut self) -> (u64, u64) {
        let up_to = self.stored.min(self.delivered);
        let (mut events, mut bytes) = (0, 0);
        while let Some(e) = self.hot.front().filter(|e| e.seq <= up_to) {
            let size = e.payload.len() as u64;
            self.cold.push_back(u32::try_from(size).unwrap_or(u32::MAX));
            self.cold_end = e.seq.next();
            bytes += size;
            events += 1;
            self.hot.pop_front();
        }
        self.cold_bytes += bytes;
        if self.hot.len() <= self.hot.capacity() / 4 {
            self.hot.shrink_to(self.hot.len() * 2);
        }
        (events, bytes)
    }

    /// Up to `max` delivered events in memory from `from` on: none unless the first of them
    /// is `from` (the caller checked the cursor, so a gap cannot be papered over).
    pub(super) fn read_hot(&self, from: Seq, max: usize) -> Vec<StoredEvent> {
        let Some(front) = self.hot.front() else { return Vec::new() };
        let Some(skip) = from.get().checked_sub(front.seq.get()) else { return Vec::new() };
        let skip = usize::try_from(skip).unwrap_or(usize::MAX);
        let delivered = self.delivered;
        self.hot.iter().skip(skip).take_while(|e| e.seq <= delivered).take(max).cloned().collect()
    }

    pub(super) fn announce(&self, meta: &forkless_core::Stream) {
        let Some(tx) = &self.signal else { return };
        let signal = StreamSignal::of(meta, self.delivered);
        tx.send_if_modified(|s| {
            let changed = *s != signal;
            *s = signal;
            changed
        });
    }
}
