//! The in-memory store: one mutex per session, logs as ring buffers, wake-ups through
//! `tokio::sync::watch`. Nothing survives the process.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use bytes::Bytes;
use forkless_core::{AppendTarget, EventId, Limits, Seq, SessionId, SessionRecord, StreamId, Timestamp};
use tokio::sync::watch;

use crate::{Error, Result, Store, StoredEvent, StreamSignal, StreamWatch, Version, Versioned};

/// A [`Store`] in process memory. Cheap to clone (shared state).
#[derive(Clone, Debug, Default)]
pub struct MemoryStore {
    sessions: Arc<RwLock<HashMap<SessionId, Arc<Mutex<Slot>>>>>,
}

#[derive(Debug)]
struct Slot {
    version: Version,
    record: SessionRecord,
    logs: HashMap<StreamId, Log>,
}

#[derive(Debug)]
struct Log {
    /// Contiguous events from the stream's low-water mark.
    events: VecDeque<StoredEvent>,
    signal: watch::Sender<StreamSignal>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn slot(&self, id: SessionId) -> Result<Arc<Mutex<Slot>>> {
        let map = self.sessions.read().map_err(|_| poisoned())?;
        map.get(&id).cloned().ok_or(Error::SessionUnknown)
    }
}

fn poisoned() -> Error {
    Error::Poisoned("a thread panicked while holding the memory store's lock".into())
}

fn lock(slot: &Mutex<Slot>) -> Result<MutexGuard<'_, Slot>> {
    slot.lock().map_err(|_| poisoned())
}

impl Slot {
    fn new(record: SessionRecord) -> Self {
        let mut slot = Self { version: Version::INITIAL, record, logs: HashMap::new() };
        slot.sync_logs();
        slot
    }

    fn log(&mut self, stream: StreamId) -> Result<&mut Log> {
        let meta = self.record.stream(stream).ok_or(Error::StreamUnknown)?;
        let signal = StreamSignal::of(meta);
        Ok(self
            .logs
            .entry(stream)
            .or_insert_with(|| Log { events: VecDeque::new(), signal: watch::Sender::new(signal) }))
    }

    /// Bring logs in line with the record: drop logs of removed streams, drop evicted
    /// events, publish changed signals.
    fn sync_logs(&mut self) {
        let record = &self.record;
        self.logs.retain(|id, _| record.stream(*id).is_some());
        for meta in record.streams() {
            let Some(log) = self.logs.get_mut(&meta.id()) else { continue };
            while log.events.front().is_some_and(|e| e.seq < meta.low_water()) {
                log.events.pop_front();
            }
            let signal = StreamSignal::of(meta);
            log.signal.send_if_modified(|s| {
                let changed = *s != signal;
                *s = signal;
                changed
            });
        }
    }
}

impl Store for MemoryStore {
    async fn create(&self, record: SessionRecord) -> Result<Version> {
        let mut map = self.sessions.write().map_err(|_| poisoned())?;
        if map.contains_key(&record.id()) {
            return Err(Error::SessionExists);
        }
        map.insert(record.id(), Arc::new(Mutex::new(Slot::new(record))));
        Ok(Version::INITIAL)
    }

    async fn load(&self, id: SessionId) -> Result<Option<Versioned<SessionRecord>>> {
        let slot = match self.slot(id) {
            Ok(slot) => slot,
            Err(Error::SessionUnknown) => return Ok(None),
            Err(e) => return Err(e),
        };
        let slot = lock(&slot)?;
        Ok(Some(Versioned { version: slot.version, value: slot.record.clone() }))
    }

    async fn compare_and_set(&self, expected: Version, record: SessionRecord) -> Result<Option<Version>> {
        let slot = self.slot(record.id())?;
        let mut slot = lock(&slot)?;
        if slot.version != expected {
            return Ok(None);
        }
        slot.record = record;
        slot.version = slot.version.next();
        slot.sync_logs();
        Ok(Some(slot.version))
    }

    async fn append(
        &self,
        session: SessionId,
        target: AppendTarget,
        payload: Bytes,
        complete: bool,
        now: Timestamp,
        limits: &Limits,
    ) -> Result<EventId> {
        let slot = self.slot(session)?;
        let mut slot = lock(&slot)?;
        let id = slot.record.append(target, payload.len() as u64, complete, now, limits)?;
        let slot = &mut *slot;
        let log = match slot.logs.entry(id.stream) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                // The stream exists: the record just appended to it.
                let meta = slot.record.stream(id.stream).ok_or(Error::StreamUnknown)?;
                e.insert(Log { events: VecDeque::new(), signal: watch::Sender::new(StreamSignal::of(meta)) })
            }
        };
        log.events.push_back(StoredEvent { seq: id.seq, payload });
        while slot.record.must_evict(id.stream, limits) {
            let Some(oldest) = log.events.pop_front() else { break };
            slot.record.on_evict_oldest(id.stream, oldest.payload.len() as u64)?;
        }
        slot.version = slot.version.next();
        if let Some(meta) = slot.record.stream(id.stream) {
            let signal = StreamSignal::of(meta);
            log.signal.send_replace(signal);
        }
        Ok(id)
    }

    async fn read(
        &self,
        session: SessionId,
        stream: StreamId,
        after: Seq,
        max: usize,
    ) -> Result<Vec<StoredEvent>> {
        let slot = self.slot(session)?;
        let mut slot = lock(&slot)?;
        let meta = slot.record.stream(stream).ok_or(Error::StreamUnknown)?;
        let low_water = meta.low_water();
        if after.next() < low_water {
            return Err(Error::Evicted { low_water });
        }
        let skip = usize::try_from(after.next().get() - low_water.get()).unwrap_or(usize::MAX);
        let log = slot.log(stream)?;
        Ok(log.events.iter().skip(skip).take(max).cloned().collect())
    }

    async fn watch(&self, session: SessionId, stream: StreamId) -> Result<StreamWatch> {
        let slot = self.slot(session)?;
        let mut slot = lock(&slot)?;
        Ok(StreamWatch::new(slot.log(stream)?.signal.subscribe()))
    }

    async fn remove(&self, id: SessionId) -> Result<()> {
        self.sessions.write().map_err(|_| poisoned())?.remove(&id);
        Ok(())
    }

    async fn sessions(&self) -> Result<Vec<SessionId>> {
        Ok(self.sessions.read().map_err(|_| poisoned())?.keys().copied().collect())
    }
}
