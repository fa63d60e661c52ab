//! Computing a batch: each append on the record the appends before it left, with the core,
//! and the retention it makes due. It owns a batch as computed (its sessions, events and
//! appends), not when batches are taken or stored (the committer's, in the parent module).

use std::collections::HashMap;
use std::collections::HashSet;
use std::collections::hash_map::Entry;

use forkless_core::{
    EventId, EventKind, EvictedBy, IdHashBuilder, Limits, Seq, SessionId, SessionRecord, StreamId,
};

use super::{Job, MAX_BATCH, Pipeline};
use crate::codec::chunk_has_room;
use crate::shared::{Chunk, Database, Inner};
use crate::{Error, Result, Version};

/// An append in a batch.
pub(super) struct Slot {
    pub(super) job: Job,
    /// The id it was answered with, if that was before its batch was stored.
    pub(super) given: Option<EventId>,
    /// Whether it may be stored only under that id: after a write that reported an error,
    /// which may have stored it. Otherwise (its batch was refused whole) it is stored under
    /// the id computed again, which no client has seen: nothing is delivered unstored.
    pub(super) pinned: bool,
}

/// What became of an append in a computed batch.
pub(super) enum Outcome {
    /// Stored under this id once the batch is.
    Stored(EventId),
    /// Refused (the core's answer on the database's record, or the database's).
    Refused(Error),
    /// Answered, pinned to an id it can no longer be stored under: dropped (it may have been
    /// stored by the write that reported an error).
    Lost(String),
    /// Answered, but the database failed while it was computed (its session could not be
    /// read, or its retention sized): computed again while the committer has tries left, then
    /// dropped.
    Unreachable(Error),
    /// Answered, and found stored under its id already, byte for byte, by a write that
    /// reported an error: nothing more to store.
    Kept,
    /// Answered, then refused because its session ended or its stream ended or was fenced
    /// meanwhile: dropped with them (promise 7), as it would have been had it been stored.
    Moot,
}

/// One event of a batch.
#[derive(Debug)]
pub(super) struct BatchEvent {
    pub(super) session: SessionId,
    pub(super) stream: StreamId,
    pub(super) seq: Seq,
    pub(super) payload: bytes::Bytes,
}

/// A session as a batch advances it.
pub(super) struct Working {
    pub(super) version: Version,
    pub(super) start: SessionRecord,
    pub(super) end: SessionRecord,
    pub(super) appended: u64,
    pub(super) from_cache: bool,
    /// Events the batch's retention evicted, by count and by bytes.
    pub(super) evicted: [u64; 2],
}

impl Working {
    fn new(version: Version, record: SessionRecord, from_cache: bool) -> Self {
        let start = record.clone();
        Self { version, start, end: record, appended: 0, from_cache, evicted: [0; 2] }
    }

    /// The session as the batch `before`, not yet stored, will leave it.
    fn after(before: &Self) -> Self {
        let version = Version::new(before.version.get() + before.appended);
        Self::new(version, before.end.clone(), true)
    }
}

/// A batch as computed: every session it advances, its events, and its appends in order.
#[derive(Default)]
pub(super) struct Computed {
    pub(super) working: HashMap<SessionId, Working, IdHashBuilder>,
    pub(super) events: Vec<BatchEvent>,
    pub(super) slots: Vec<(Slot, Outcome)>,
    /// A cached record this batch was computed on proved stale: it must be computed afresh
    /// (its later appends wait unanswered in `waiting`).
    pub(super) stale: Option<SessionId>,
    pub(super) waiting: Vec<Slot>,
    /// Sessions the database failed to read for this batch, with the failure: their later
    /// appends are refused with it too, so none of them takes the place of one refused.
    pub(super) unreadable: HashMap<SessionId, Error, IdHashBuilder>,
}

impl Computed {
    /// Whether more appends may be computed into it.
    pub(super) fn open(&self) -> bool {
        self.stale.is_none() && self.slots.len() < MAX_BATCH
    }

    pub(super) fn is_empty(&self) -> bool {
        self.slots.is_empty() && self.waiting.is_empty()
    }

    /// Whether it holds an append answered before it was stored (one whose loss no error
    /// could report).
    pub(super) fn answered(&self) -> bool {
        let answered = |s: &Slot| s.given.is_some();
        self.slots.iter().any(|(s, _)| answered(s)) || self.waiting.iter().any(answered)
    }

    /// Whether the database failed while an answered append was computed.
    pub(super) fn unreachable(&self) -> bool {
        self.slots.iter().any(|(_, o)| matches!(o, Outcome::Unreachable(_)))
    }

    /// The batch's events as the chunks a database stores: a stream's consecutive events in
    /// one chunk while it has room, chunks in the order their first events were appended.
    pub(super) fn chunks(&self) -> Vec<Chunk> {
        let mut chunks: Vec<Chunk> = Vec::new();
        // The open chunk of each stream: its index and its encoded size.
        let mut open: HashMap<(SessionId, StreamId), (usize, usize), IdHashBuilder> = HashMap::default();
        for e in &self.events {
            let key = (e.session, e.stream);
            if let Some(&(at, bytes)) = open.get(&key) {
                let c = &mut chunks[at];
                if c.last.next() == e.seq && chunk_has_room(c.payloads.len(), bytes, e.payload.len()) {
                    c.payloads.push(e.payload.clone());
                    c.last = e.seq;
                    open.insert(key, (at, bytes + 4 + e.payload.len()));
                    continue;
                }
            }
            open.insert(key, (chunks.len(), 4 + e.payload.len()));
            let payloads = vec![e.payload.clone()];
            chunks.push(Chunk { session: e.session, stream: e.stream, first: e.seq, last: e.seq, payloads });
        }
        chunks
    }

    /// Every append, in order, for computing again.
    pub(super) fn into_slots(self) -> impl Iterator<Item = Slot> {
        self.slots.into_iter().map(|(slot, _)| slot).chain(self.waiting)
    }
}

impl<D: Database> Inner<D> {
    /// Compute `job` into `batch` (computed on top of `base`, the batch being stored, if any).
    pub(super) async fn take(&self, batch: &mut Computed, job: Job, base: Option<&Computed>) {
        self.compute(batch, Slot { job, given: None, pinned: false }, base, &HashSet::new()).await;
    }

    /// Compute `slot` into `batch`, on the record the batch (or `base`) left, else the cached
    /// one, else (for the `fresh` sessions) the database's. An intermediate event is answered
    /// at once; one answered before must keep its id.
    pub(super) async fn compute(
        &self,
        batch: &mut Computed,
        mut slot: Slot,
        base: Option<&Computed>,
        fresh: &HashSet<SessionId>,
    ) {
        if batch.stale.is_some() {
            return batch.waiting.push(slot);
        }
        let job = &slot.job;
        if !batch.unreadable.is_empty()
            && let Some(e) = batch.unreadable.get(&job.session)
        {
            let e = super::again(e);
            return batch.refuse(slot, e);
        }
        let w = match batch.working.entry(job.session) {
            Entry::Occupied(o) => o.into_mut(),
            Entry::Vacant(v) => match base.and_then(|b| b.working.get(&job.session)) {
                Some(before) => v.insert(Working::after(before)),
                None => {
                    let from_cache = !fresh.contains(&job.session);
                    match self.current(job.session, from_cache).await {
                        Ok((version, record)) => v.insert(Working::new(version, record, from_cache)),
                        Err(e) => return batch.unreadable(slot, e),
                    }
                }
            },
        };
        let size = job.payload.len() as u64;
        // The core leaves a record as it was when it refuses an append, so an append is
        // computed on the batch's record itself; only one that may yet be dropped after its
        // id is known (a pinned one) is computed on a copy.
        let from_cache = w.from_cache;
        let mut copy = slot.pinned.then(|| w.end.clone());
        let record = copy.as_mut().unwrap_or(&mut w.end);
        let id = match record.append(job.target, size, job.kind, job.now, &job.limits) {
            Ok(id) => id,
            Err(_) if from_cache => {
                batch.stale = Some(job.session);
                return batch.waiting.push(slot);
            }
            Err(e) => return batch.refuse(slot, e.into()),
        };
        if slot.pinned
            && let Some(given) = slot.given
            && given != id
        {
            let outcome = match self.stored_as(job.session, given, &job.payload).await {
                Ok(true) => Outcome::Kept,
                Ok(false) => Outcome::Lost("its id was taken by another event meanwhile".to_owned()),
                Err(e) => return batch.unreadable(slot, e),
            };
            return batch.slots.push((slot, outcome));
        }
        // Retention needs the sizes of the stream's events not yet stored: this batch's and
        // those of the batch it was computed on (looked up only when retention is due).
        let pending: Vec<(Seq, u64)> = if record.retention_due(id.stream, &job.limits).is_some() {
            let earlier = base.map_or(&[][..], |b| b.events.as_slice());
            earlier
                .iter()
                .chain(&batch.events)
                .filter(|e| e.session == job.session && e.stream == id.stream)
                .map(|e| (e.seq, e.payload.len() as u64))
                .collect()
        } else {
            Vec::new()
        };
        match self.evict(record, id, size, &job.limits, &pending).await {
            Ok(Some((by, n))) => w.evicted[usize::from(by == EvictedBy::StreamMaxBytes)] += n,
            Ok(None) => {}
            Err(e) if slot.pinned => return batch.unreadable(slot, e),
            // The append is in the batch's record already: the batch is computed again, on the
            // database's record, where retention is asked for again.
            Err(_) => {
                batch.stale = Some(job.session);
                return batch.waiting.push(slot);
            }
        }
        if let Some(copy) = copy {
            w.end = copy;
        }
        w.appended += 1;
        batch.events.push(BatchEvent {
            session: job.session,
            stream: id.stream,
            seq: id.seq,
            payload: job.payload.clone(),
        });
        if job.kind == EventKind::Intermediate
            && self.pipeline == Pipeline::On
            && let Some(reply) = slot.job.reply.take()
        {
            self.unstored.answered(slot.job.session);
            let _ = reply.send(Ok(id));
        }
        if slot.job.reply.is_none() {
            slot.given = Some(id);
        }
        batch.slots.push((slot, Outcome::Stored(id)));
    }

    /// Whether the database holds `payload` under `id` (an answered append a write that
    /// reported an error stored after all).
    async fn stored_as(&self, session: SessionId, id: EventId, payload: &[u8]) -> Result<bool> {
        let before = Seq::new(id.seq.get().saturating_sub(1));
        let found = self.db.read(session, id.stream, before, 1).await.and_then(|read| {
            crate::check_read(&read.meta, before, crate::Reader::Inspector)?;
            crate::check_continuation(&read.meta, before, &read.events)?;
            Ok(read.events)
        });
        match found {
            Ok(events) => Ok(events.first().is_some_and(|e| e.seq == id.seq && e.payload == payload)),
            Err(Error::Backend(m)) => Err(Error::Backend(m)),
            // Ended, dropped or evicted meanwhile: not stored under it (any more).
            Err(_) => Ok(false),
        }
    }

    /// Retention after appending `id` (of `size` bytes) to `new`, with `pending` the earlier,
    /// not yet stored events of its stream: the core's plan, given the sizes of the oldest
    /// retained events, fetched only when it is due and only as many as it may take.
    async fn evict(
        &self,
        new: &mut SessionRecord,
        id: EventId,
        size: u64,
        limits: &Limits,
        pending: &[(Seq, u64)],
    ) -> Result<Option<(EvictedBy, u64)>> {
        let Some(by) = new.retention_due(id.stream, limits) else { return Ok(None) };
        let (low, retained) =
            new.stream(id.stream).map_or((Seq::FIRST, 0), |s| (s.low_water(), s.retained_events()));
        let unstored: Vec<u64> =
            pending.iter().filter(|(seq, _)| *seq >= low).map(|(_, size)| *size).chain([size]).collect();
        let stored = retained.saturating_sub(unstored.len() as u64);
        let mut want = retained.saturating_sub(limits.stream_max_events).max(1).min(stored);
        loop {
            let mut sizes = self.db.oldest_sizes(new.id(), id.stream, low, want).await?;
            if want >= stored {
                sizes.extend(&unstored);
            }
            let mut trial = new.clone();
            let plan = trial.on_retention(id.stream, sizes, limits)?;
            if trial.retention_due(id.stream, limits).is_none() || want >= stored {
                *new = trial;
                return Ok((plan.events > 0).then_some((plan.by.unwrap_or(by), plan.events as u64)));
            }
            want = (want * 2).min(stored);
        }
    }
}

impl Computed {
    /// `slot` is refused with `e` (an append answered before is dropped: its stream was
    /// fenced or its session ended meanwhile).
    pub(super) fn refuse(&mut self, slot: Slot, e: Error) {
        let moot = e.ended().is_some()
            || matches!(
                e,
                Error::SessionUnknown
                    | Error::StreamUnknown
                    | Error::Core(forkless_core::Error::StreamFenced | forkless_core::Error::StreamCompleted)
            );
        let outcome = match slot.job.reply {
            Some(_) => Outcome::Refused(e),
            None if moot => Outcome::Moot,
            None if matches!(e, Error::Backend(_)) => Outcome::Unreachable(e),
            None => Outcome::Lost(e.to_string()),
        };
        self.slots.push((slot, outcome));
    }

    /// `slot` is refused with `e`, a failure to read its session; the session's later appends
    /// in this batch are refused with it too (a backend failure), so none of them is numbered
    /// on a record that lacks `slot`.
    fn unreadable(&mut self, slot: Slot, e: Error) {
        if matches!(e, Error::Backend(_)) {
            self.unreadable.insert(slot.job.session, super::again(&e));
        }
        self.refuse(slot, e);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{MAX_CHUNK_EVENTS, chunk_events};

    fn event(session: u8, stream: u8, seq: u64, payload: &'static [u8]) -> BatchEvent {
        BatchEvent {
            session: SessionId::from_bytes([session; 16]),
            stream: StreamId::from_bytes([stream; 12]),
            seq: Seq::new(seq),
            payload: bytes::Bytes::from_static(payload),
        }
    }

    #[test]
    fn a_batch_stores_each_streams_consecutive_events_in_one_chunk() {
        let mut batch = Computed::default();
        batch.events.extend([
            event(1, 1, 1, b"a"),
            event(1, 2, 5, b"x"),
            event(1, 1, 2, b"b"),
            event(2, 1, 9, b"other session"),
            event(1, 1, 3, b"c"),
            // Not the next seq of its stream (never made by one batch): a chunk of its own.
            event(1, 1, 7, b"g"),
        ]);
        for seq in 1..=(MAX_CHUNK_EVENTS as u64 + 10) {
            batch.events.push(event(3, 3, seq, b"n"));
        }
        let chunks = batch.chunks();
        let shape: Vec<(u8, u8, u64, u64)> = chunks
            .iter()
            .map(|c| (c.session.as_bytes()[0], c.stream.as_bytes()[0], c.first.get(), c.last.get()))
            .collect();
        let big = MAX_CHUNK_EVENTS as u64;
        assert_eq!(
            shape,
            [
                (1, 1, 1, 3),
                (1, 2, 5, 5),
                (2, 1, 9, 9),
                (1, 1, 7, 7),
                (3, 3, 1, big),
                (3, 3, big + 1, big + 10)
            ]
        );
        let encoded = |c: &Chunk| {
            let mut row = Vec::new();
            c.encode(|b| row.extend_from_slice(b));
            assert_eq!(row.len(), c.encoded_len());
            row
        };
        let row = encoded(&chunks[0]);
        let first = chunk_events(chunks[0].first, &row).unwrap();
        assert_eq!(first, [(Seq::new(1), &b"a"[..]), (Seq::new(2), &b"b"[..]), (Seq::new(3), &b"c"[..])]);
        for c in &chunks {
            let n = chunk_events(c.first, &encoded(c)).unwrap().len() as u64;
            assert_eq!(c.last.get() - c.first.get() + 1, n, "a chunk's bounds name exactly its events");
        }
    }
}
