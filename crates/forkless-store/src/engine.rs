//! The engine every in-process store serves from: session records, event logs, delivered
//! marks and wake-ups. A store built on it only stores (see [`Effect`]): the decisions are the
//! core's, the promises the [`crate::Store`] trait's.
//!
//! [`MemoryStore`](crate::MemoryStore) is this engine alone. Durable stores put a journal
//! behind it: every mutation hands a description of its effect to a `persist` callback while
//! the session's lock is still held (so the journal sees mutations in the order they
//! happened), and appended events stay invisible to readers until the store
//! [delivers](Engine::deliver) them, which a durable store does only once they are on disk
//! (durable before delivery: the crate's promise 3).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use bytes::Bytes;
use forkless_core::{
    AppendTarget, EventId, EvictedBy, IdHashBuilder, Schedule, Seq, SessionId, SessionRecord, StreamChange,
    StreamId, Timestamp, Wake,
};
use tokio::sync::watch;

use crate::due::{WakeIndex, merged};
use crate::read::check_read;
use crate::{
    Append, Error, Reader, Result, StoredEvent, StreamSignal, StreamWatch, Usage, Version, Versioned,
};

mod accounting;
mod cache;
mod log;
#[cfg(test)]
mod tests;

pub use cache::{Disk, OnDisk};
use log::Log;

/// Whether a stream a mutation wrote existed before it: a journal that sees a new stream
/// deleted again before it ever stored it can skip both.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// The stream was created by this mutation (its id was never used before).
    New,
    /// The stream existed before.
    Existing,
}

/// What a mutation changed, for a journal to persist.
#[derive(Debug)]
pub enum Effect<'a> {
    /// The record was created or recovered: its header and every stream.
    Record(&'a SessionRecord),
    /// The session's header (everything but its streams) changed.
    Header(&'a SessionRecord),
    /// One stream's metadata was added (`Origin::New`) or changed.
    Stream {
        /// The session.
        session: SessionId,
        /// The stream's metadata as it is now.
        meta: &'a forkless_core::Stream,
        /// Whether this mutation created it.
        origin: Origin,
    },
    /// An event was appended (the record changed too); `origin` is its stream's (`New` for an
    /// answer, which opens its stream).
    Event {
        /// The record after the append.
        record: &'a SessionRecord,
        /// The event's id.
        id: EventId,
        /// The event's payload.
        payload: &'a Bytes,
        /// Whether the append created the event's stream.
        origin: Origin,
    },
    /// Events of `stream` below `low_water` are gone.
    Trim {
        /// The session.
        session: SessionId,
        /// The stream.
        stream: StreamId,
        /// Its new low-water mark.
        low_water: Seq,
    },
    /// All events of `stream` are gone, and so is the stream.
    DropStream {
        /// The session.
        session: SessionId,
        /// The stream.
        stream: StreamId,
    },
    /// The session and everything it held are gone.
    DropSession(SessionId),
    /// The mutation is complete: a journal may now hand its effects on as one unit.
    End,
}

/// The in-process state a store serves from: session records by id, each stream's log, its
/// delivered mark and its watchers. Every mutation takes a `persist` callback that is handed
/// the mutation's [`Effect`]s while the session's lock is held, then [`Effect::End`].
#[derive(Debug, Default)]
pub struct Engine {
    sessions: RwLock<HashMap<SessionId, Arc<Mutex<Slot>>, IdHashBuilder>>,
    /// When each session is next due for a sweep. Locked only while a session's lock is held
    /// (or alone), never the other way round.
    wakes: Mutex<WakeIndex>,
    /// Payload bytes retained across every session.
    retained: AtomicU64,
    /// Events evicted by `stream_max_events` and by `stream_max_bytes`.
    evicted: [AtomicU64; 2],
    /// Which events stay in memory (all of them, unless the store has a data file to read the
    /// others from).
    cache: cache::Cache,
}

#[derive(Debug)]
struct Slot {
    version: Version,
    record: SessionRecord,
    logs: HashMap<StreamId, Log, IdHashBuilder>,
    /// What the wake index holds for this session (never later than the record's anchors).
    wake: Wake,
}

fn poisoned() -> Error {
    Error::Poisoned("a thread panicked while holding a store lock".into())
}

fn lock(slot: &Mutex<Slot>) -> Result<MutexGuard<'_, Slot>> {
    slot.lock().map_err(|_| poisoned())
}

impl Slot {
    /// The stream's metadata and its log (made empty, everything visible, if it had none).
    fn log(&mut self, stream: StreamId) -> Result<(&forkless_core::Stream, &mut Log)> {
        let meta = self.record.stream(stream).ok_or(Error::StreamUnknown)?;
        Ok((meta, self.logs.entry(stream).or_insert_with(|| Log::new(meta.high_water()))))
    }

    /// Bring logs in line with the record and tell the journal which streams were added,
    /// changed, trimmed or dropped.
    ///
    /// Only streams whose metadata changed are visited: a session answering over SSE retains
    /// up to `session_max_streams` completed streams, and the record's change walk skips the
    /// ones the two versions still share.
    ///
    /// Returns the bytes of dropped events that were on disk only.
    #[must_use]
    fn sync_logs(&mut self, old: &SessionRecord, persist: &mut impl FnMut(Effect<'_>)) -> u64 {
        let record = &self.record;
        let session = record.id();
        let mut freed = 0;
        for change in record.changes_since(old) {
            let (low_before, meta) = match change {
                StreamChange::Removed(_) => {
                    persist(Effect::DropStream { session, stream: change.id() });
                    freed += self.logs.remove(&change.id()).map_or(0, |log| log.cold_bytes());
                    continue;
                }
                StreamChange::Added(meta) => (Seq::FIRST, meta),
                StreamChange::Changed { before, after } => (before.low_water(), after),
            };
            let origin =
                if matches!(change, StreamChange::Added(_)) { Origin::New } else { Origin::Existing };
            persist(Effect::Stream { session, meta, origin });
            if meta.low_water() > low_before {
                persist(Effect::Trim { session, stream: meta.id(), low_water: meta.low_water() });
            }
            if let Some(log) = self.logs.get_mut(&meta.id()) {
                freed += log.trim_below(meta.low_water());
                log.announce(meta);
            }
        }
        freed
    }
}

impl Engine {
    fn slot(&self, id: SessionId) -> Result<Arc<Mutex<Slot>>> {
        let map = self.sessions.read().map_err(|_| poisoned())?;
        map.get(&id).cloned().ok_or(Error::SessionUnknown)
    }

    /// Insert a new record (version [`Version::INITIAL`]); [`Error::SessionExists`] if taken.
    pub fn create(&self, record: SessionRecord, mut persist: impl FnMut(Effect<'_>)) -> Result<Version> {
        let mut map = self.sessions.write().map_err(|_| poisoned())?;
        if map.contains_key(&record.id()) {
            return Err(Error::SessionExists);
        }
        persist(Effect::Record(&record));
        persist(Effect::End);
        let mut record = record;
        record.mark_clean();
        let mut slot =
            Slot { version: Version::INITIAL, record, logs: HashMap::default(), wake: Wake::default() };
        self.index_exact(&mut slot);
        map.insert(slot.record.id(), Arc::new(Mutex::new(slot)));
        Ok(Version::INITIAL)
    }

    /// Insert a recovered session; its retained events stay on disk (all delivered), read
    /// through the store's [`Disk`] until they are evicted.
    pub fn restore(&self, record: SessionRecord, events: HashMap<StreamId, OnDisk>) -> Result<()> {
        let mut record = record;
        record.mark_clean();
        let mut slot =
            Slot { version: Version::INITIAL, record, logs: HashMap::default(), wake: Wake::default() };
        let mut cold = 0;
        for (stream, on_disk) in events {
            let (_, log) = slot.log(stream)?;
            log.restore_cold(on_disk.first, on_disk.sizes);
            cold += log.cold_bytes();
        }
        self.index_exact(&mut slot);
        let mut map = self.sessions.write().map_err(|_| poisoned())?;
        self.retain(0, slot.record.retained_bytes());
        self.cool(0, cold);
        if let Some(old) = map.insert(slot.record.id(), Arc::new(Mutex::new(slot)))
            && let Ok(old) = old.lock()
        {
            self.retain(old.record.retained_bytes(), 0);
            self.cool(old.logs.values().map(Log::cold_bytes).sum(), 0);
        }
        Ok(())
    }

    /// The record and its version; `None` if unknown.
    pub fn load(&self, id: SessionId) -> Result<Option<Versioned<SessionRecord>>> {
        let slot = match self.slot(id) {
            Ok(slot) => slot,
            Err(Error::SessionUnknown) => return Ok(None),
            Err(e) => return Err(e),
        };
        let slot = lock(&slot)?;
        Ok(Some(Versioned { version: slot.version, value: slot.record.clone() }))
    }

    /// Replace the record if its version is still `expected` (the store promise of the same
    /// name); logs of streams it no longer holds are dropped.
    pub fn compare_and_set(
        &self,
        expected: Version,
        record: SessionRecord,
        mut persist: impl FnMut(Effect<'_>),
    ) -> Result<Option<Version>> {
        let slot = self.slot(record.id())?;
        let mut slot = lock(&slot)?;
        if slot.version != expected {
            return Ok(None);
        }
        let old = std::mem::replace(&mut slot.record, record);
        self.retain(old.retained_bytes(), slot.record.retained_bytes());
        slot.version = slot.version.next();
        persist(Effect::Header(&slot.record));
        let freed = slot.sync_logs(&old, &mut persist);
        self.cool(freed, 0);
        // What changed can only make the session due sooner than it was indexed for `old`
        // (the index is a lower bound, checked against the record when due): the changed
        // streams' anchors, not a pass over all of them.
        let fresh = slot.record.wake_since(&old);
        slot.record.mark_clean();
        persist(Effect::End);
        self.index_sooner(&mut slot, fresh);
        Ok(Some(slot.version))
    }

    /// Append; the event is delivered at once if `visible`, else after [`Self::deliver`].
    pub fn append(
        &self,
        event: Append<'_>,
        visible: bool,
        mut persist: impl FnMut(Effect<'_>),
    ) -> Result<EventId> {
        let Append { session, target, payload, kind, now, limits } = event;
        let slot = self.slot(session)?;
        let mut guard = lock(&slot)?;
        let slot = &mut *guard;
        let size = payload.len() as u64;
        let retained_before = slot.record.retained_bytes();
        let id = if let AppendTarget::Answer(stream) = target
            && slot.record.opening_drops_streams(limits)
        {
            // An answer that makes room drops other streams first: the core names them (or
            // refuses the answer, changing nothing), and their logs go with them. (Otherwise
            // it changes only its own new stream, which the event's effect carries.)
            let mut freed = 0;
            for gone in slot.record.make_room_for_answer(stream, size, kind, limits)? {
                persist(Effect::DropStream { session, stream: gone.id() });
                freed += slot.logs.remove(&gone.id()).map_or(0, |log| log.cold_bytes());
            }
            self.cool(freed, 0);
            // The core refused nothing above, so the answer's append is not refused; if it
            // were, the streams dropped are dropped where they are kept too.
            match slot.record.append(target, size, kind, now, limits) {
                Ok(id) => id,
                Err(e) => {
                    persist(Effect::End);
                    self.retain(retained_before, slot.record.retained_bytes());
                    slot.record.mark_clean();
                    slot.version = slot.version.next();
                    return Err(e.into());
                }
            }
        } else {
            slot.record.append(target, size, kind, now, limits)?
        };
        let origin = if matches!(target, AppendTarget::Answer(_)) { Origin::New } else { Origin::Existing };
        persist(Effect::Event { record: &slot.record, id, payload: &payload, origin });
        // Everything before this event is already visible.
        let log = slot.logs.entry(id.stream).or_insert_with(|| Log::new(Seq::new(id.seq.get() - 1)));
        log.push(StoredEvent { seq: id.seq, payload });
        // Retention: the core says how many of the oldest go; the log drops exactly those.
        let plan = slot.record.on_retention(id.stream, log.sizes(), limits)?;
        self.cool(log.drop_oldest(plan.events), 0);
        match plan.by {
            Some(EvictedBy::StreamMaxEvents) => {
                self.evicted[0].fetch_add(plan.events as u64, Ordering::Relaxed)
            }
            Some(EvictedBy::StreamMaxBytes) => {
                self.evicted[1].fetch_add(plan.events as u64, Ordering::Relaxed)
            }
            Some(EvictedBy::StreamTtl) | None => 0,
        };
        let meta = slot.record.stream(id.stream).ok_or(Error::StreamUnknown)?;
        // Each event evicted raised the stream's low-water mark by one.
        if plan.events > 0 {
            persist(Effect::Trim { session, stream: id.stream, low_water: meta.low_water() });
            persist(Effect::Header(&slot.record));
            persist(Effect::Stream { session, meta, origin });
        }
        persist(Effect::End);
        if visible {
            log.delivered = id.seq;
        }
        log.announce(meta);
        self.retain(retained_before, slot.record.retained_bytes());
        // Only the event's stream changed in a way that can make the session due sooner.
        let fresh = Wake::of_stream(meta);
        slot.record.mark_clean();
        slot.version = slot.version.next();
        self.index_sooner(slot, fresh);
        Ok(id)
    }

    /// Deliver events of `stream` up to `seq` (the store vouches they survive): make them
    /// visible to readers and wake them.
    pub fn deliver(&self, session: SessionId, stream: StreamId, seq: Seq) {
        let Ok(slot) = self.slot(session) else { return };
        let Ok(mut guard) = lock(&slot) else { return };
        let slot = &mut *guard;
        let (Some(meta), Some(log)) = (slot.record.stream(stream), slot.logs.get_mut(&stream)) else {
            return;
        };
        log.delivered = log.delivered.max(seq);
        log.announce(meta);
        // A checkpoint may have stored these events before they were delivered here.
        self.queue_if_spillable(session, stream, log);
    }

    /// Up to `max` delivered events after `after`, as `reader` (the store promises 3 and 5),
    /// in a store that keeps every event in memory (see [`Self::read_through`] otherwise).
    pub fn read(
        &self,
        session: SessionId,
        stream: StreamId,
        after: Seq,
        max: usize,
        reader: Reader,
    ) -> Result<Vec<StoredEvent>> {
        self.try_read(session, stream, after, max, reader)?.ok_or_else(|| {
            Error::Corrupt("events left memory in a store without a data file to read them from".into())
        })
    }

    /// A subscription to the stream's signal.
    pub fn watch(&self, session: SessionId, stream: StreamId) -> Result<StreamWatch> {
        let slot = self.slot(session)?;
        let mut slot = lock(&slot)?;
        let (meta, log) = slot.log(stream)?;
        let tx = log.signal.get_or_insert_with(|| watch::Sender::new(StreamSignal::of(meta, log.delivered)));
        Ok(StreamWatch::new(tx.subscribe()))
    }

    /// Forget a session and everything it holds.
    pub fn remove(&self, id: SessionId, mut persist: impl FnMut(Effect<'_>)) -> Result<()> {
        let mut map = self.sessions.write().map_err(|_| poisoned())?;
        if let Some(slot) = map.remove(&id) {
            if let Ok(slot) = slot.lock() {
                self.retain(slot.record.retained_bytes(), 0);
                self.cool(slot.logs.values().map(Log::cold_bytes).sum(), 0);
            }
            persist(Effect::DropSession(id));
            persist(Effect::End);
        }
        if let Ok(mut index) = self.wakes.lock() {
            index.remove(id);
        }
        Ok(())
    }

    /// Every session id held.
    pub fn sessions(&self) -> Result<Vec<SessionId>> {
        Ok(self.sessions.read().map_err(|_| poisoned())?.keys().copied().collect())
    }
}
