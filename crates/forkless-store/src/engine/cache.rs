//! The engine's event cache: on a store with a data file, memory holds the newest events up
//! to a budget and the rest is read from disk.
//!
//! This module owns which events leave memory and when, and reading through to the disk.
//! An event may leave memory only once the data file holds it (the store says so with
//! [`Engine::stored`]) and readers may see it (delivered): until then memory is its only
//! readable copy. Streams wait to spill in the order their events reached the data file, so
//! the events that stay are the newest, which a reconnecting client asks for. It does not
//! decide what is retained (the core's retention does) nor read the disk (the store's
//! [`Disk`] does).

use std::collections::VecDeque;

use super::*;

/// A store's data file, as the engine reads it for events that left memory.
pub trait Disk {
    /// Up to `max` events of `stream` in `session` from `from` on, in order, as the data file
    /// holds them (fewer, or none, if it holds fewer).
    fn events(&self, session: SessionId, stream: StreamId, from: Seq, max: usize)
    -> Result<Vec<StoredEvent>>;
}

/// A recovered stream's retained events as they are on disk: from `first` on, one size per
/// event.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OnDisk {
    /// The seq of the first.
    pub first: Seq,
    /// Their payload sizes, oldest first.
    pub sizes: Vec<u32>,
}

#[derive(Debug, Default)]
pub(super) struct Cache {
    /// The most payload bytes held in memory; `None`: every event stays.
    budget: Option<u64>,
    /// Payload bytes retained on disk only, across every session.
    cold: AtomicU64,
    /// Events that left memory since the store opened.
    spilled: AtomicU64,
    /// Streams holding events in memory that the data file holds too, in the order they
    /// reached it; each at most once. Locked alone or under a session's lock, never the
    /// other way round.
    queue: Mutex<VecDeque<(SessionId, StreamId)>>,
}

/// How many tries a read through to the disk makes before it calls the log damaged: a retry
/// is needed only when retention moved on between reading the cursor and reading the disk,
/// and then the second check refuses the cursor.
const TRIES: usize = 3;

impl Engine {
    /// An engine holding at most `budget` payload bytes of events in memory, beyond those its
    /// data file does not hold yet.
    pub fn with_cache(budget: u64) -> Self {
        Self { cache: Cache { budget: Some(budget), ..Cache::default() }, ..Self::default() }
    }

    /// Account for a session's bytes on disk only going from `before` to `after`.
    pub(super) fn cool(&self, before: u64, after: u64) {
        let cold = &self.cache.cold;
        if after >= before {
            cold.fetch_add(after - before, Ordering::Relaxed);
        } else {
            cold.fetch_sub(before - after, Ordering::Relaxed);
        }
    }

    /// Payload bytes of the retained events held in memory.
    pub fn cached_bytes(&self) -> u64 {
        self.retained.load(Ordering::Relaxed).saturating_sub(self.cache.cold.load(Ordering::Relaxed))
    }

    /// Events that left memory for the disk since the store opened.
    pub fn spilled_events(&self) -> u64 {
        self.cache.spilled.load(Ordering::Relaxed)
    }

    /// The data file now holds the events of each stream up to its seq: they may leave memory,
    /// and they do while the cache is over its budget, oldest first.
    pub fn stored(&self, marks: impl IntoIterator<Item = (SessionId, StreamId, Seq)>) {
        if self.cache.budget.is_none() {
            return;
        }
        for (session, stream, seq) in marks {
            let Ok(slot) = self.slot(session) else { continue };
            let Ok(mut slot) = lock(&slot) else { continue };
            let Some(log) = slot.logs.get_mut(&stream) else { continue };
            log.stored = log.stored.max(seq);
            self.queue_if_spillable(session, stream, log);
        }
        self.shed();
    }

    /// Queue the stream to spill if events of it in memory may leave.
    pub(super) fn queue_if_spillable(&self, session: SessionId, stream: StreamId, log: &mut Log) {
        if self.cache.budget.is_some() && !log.queued && log.spillable() {
            log.queued = true;
            if let Ok(mut queue) = self.cache.queue.lock() {
                queue.push_back((session, stream));
            }
        }
    }

    /// Let the oldest stored events leave memory until the cache is within its budget.
    fn shed(&self) {
        let Some(budget) = self.cache.budget else { return };
        while self.cached_bytes() > budget {
            let Some((session, stream)) = self.cache.queue.lock().ok().and_then(|mut q| q.pop_front()) else {
                return;
            };
            let Ok(slot) = self.slot(session) else { continue };
            let Ok(mut slot) = lock(&slot) else { continue };
            let Some(log) = slot.logs.get_mut(&stream) else { continue };
            log.queued = false;
            let (events, bytes) = log.spill();
            self.cool(0, bytes);
            self.cache.spilled.fetch_add(events, Ordering::Relaxed);
        }
    }

    /// [`Self::read`] where every event it needs is in memory; `None` when some are on disk
    /// only (then [`Self::read_through`]).
    pub fn try_read(
        &self,
        session: SessionId,
        stream: StreamId,
        after: Seq,
        max: usize,
        reader: Reader,
    ) -> Result<Option<Vec<StoredEvent>>> {
        let slot = self.slot(session)?;
        let mut slot = lock(&slot)?;
        let (meta, log) = slot.log(stream)?;
        check_read(meta, after, reader)?;
        if after.next() < log.on_disk_below() {
            return Ok(None);
        }
        Ok(Some(log.read_hot(after.next(), max)))
    }

    /// [`Self::read`], reading the events that left memory from `disk` (blocking on it).
    ///
    /// Each run of events is read where it is, the cursor checked under the session's lock
    /// before each, the disk read without it: a read never has a gap (if retention passes it
    /// midway, it is refused like its cursor), and an event is the same bytes wherever it is
    /// read from.
    pub fn read_through(
        &self,
        disk: &dyn Disk,
        session: SessionId,
        stream: StreamId,
        after: Seq,
        max: usize,
        reader: Reader,
    ) -> Result<Vec<StoredEvent>> {
        let mut events = Vec::new();
        let mut from = after.next();
        let mut tries = 0;
        while events.len() < max {
            let below = {
                let slot = self.slot(session)?;
                let mut slot = lock(&slot)?;
                let (meta, log) = slot.log(stream)?;
                check_read(meta, Seq::new(from.get() - 1), reader)?;
                let below = log.on_disk_below();
                if from >= below {
                    events.extend(log.read_hot(from, max - events.len()));
                    return Ok(events);
                }
                below
            };
            let want =
                usize::try_from(below.get() - from.get()).unwrap_or(usize::MAX).min(max - events.len());
            let run = disk.events(session, stream, from, want)?;
            let gap_free =
                run.len() == want && run.iter().zip(from.get()..).all(|(e, seq)| e.seq.get() == seq);
            if !gap_free {
                // Retention (or the session's end) moved on since the check: check again.
                tries += 1;
                if tries == TRIES {
                    return Err(Error::Corrupt(format!(
                        "events of stream {stream} from seq {from} are retained but neither in memory nor in the data file"
                    )));
                }
                continue;
            }
            from = Seq::new(from.get() + want as u64);
            events.extend(run);
        }
        Ok(events)
    }
}
