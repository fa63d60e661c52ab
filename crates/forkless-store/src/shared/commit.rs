//! Group commit: every append of a node goes through one committer task, which computes the
//! appends waiting in order with the core, each on the record the append before it left, and
//! stores them as one batch ([`Database::write_batch`]).
//!
//! - **Pipelined.** While one batch is being stored, the committer computes the next on top of
//!   it from what arrives meanwhile, so a stream's emitter does not wait a round trip per
//!   event: an intermediate event's append (a notification, a progress report) is answered as
//!   soon as it is computed, its id fixed then; its event is delivered once its batch is
//!   stored (promise 3). A final event (a response, an answer) is answered once stored.
//! - **Nothing delivered unstored, nothing stored twice.** A batch is computed on this node's
//!   cached records. If one moved (another node wrote it), the database refuses the whole
//!   batch, and it is computed again, with the one computed on top of it, on the database's
//!   records: an intermediate event already answered may get another id then, which is why
//!   the id such an append returns is provisional until its batch is stored. No client can
//!   have seen it: events are delivered only once stored. If a write reports an error it may
//!   still have stored the batch, so an event already answered is stored again only under the
//!   id it was given (or found stored under it already); the batch is tried again after a
//!   database failure ([`SETTLE_RETRIES`]), and an answered event that still cannot be stored
//!   is dropped and counted (`forkless_store_events_lost_total`), as a crash drops what it
//!   had not stored.
//! - A core refusal on a cached record is re-checked on the database's own, so an append is
//!   only ever refused on the database's version.
//!
//! It owns batching and the order of appends, not what an append does (the core's) or how a
//! batch is stored (the [`Database`]'s).

use std::collections::{HashMap, HashSet};
use std::sync::Weak;
use std::sync::atomic::Ordering;

use super::hint::Said;
use super::{Batch, Committed, Database, Hint, HintFilter, Hints, Inner, SessionWrite, Validated};
use crate::{Error, MAX_CAS_ATTEMPTS, NodeName, Result, Version};
use bytes::Bytes;
use forkless_core::{
    AppendTarget, EventId, EventKind, IdHashBuilder, Limits, SessionId, StreamId, Timestamp,
};
use tokio::sync::{mpsc, oneshot};

mod compute;
use compute::{Computed, Outcome, Slot, Working};

/// When a notification's append returns on a shared store.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Pipeline {
    /// Once its batch is computed, its id fixed then (provisionally: see the module docs);
    /// it is delivered once stored. A stream's emitter does not wait a round trip per event.
    /// The default.
    #[default]
    On,
    /// Once its batch is stored, as an answer's: one round trip per event and emitter, and
    /// the id returned is the one it is stored under.
    Off,
}

/// At most this many appends go in one transaction (one `APPLY` call on Redis). A batch
/// that reaches it holds back every emitter whose append waits behind it for a whole round
/// trip; 1,024 did so under 100 busy streams (notify-many: Redis 0.43x-0.47x of redb batched
/// with it, 0.52x-0.68x with this). A batch this large stays a few hundred kilobytes and a
/// few milliseconds of Redis's time.
const MAX_BATCH: usize = 4096;

/// One append waiting for its batch.
#[derive(Debug)]
pub(super) struct Job {
    pub(super) session: SessionId,
    pub(super) target: AppendTarget,
    pub(super) payload: Bytes,
    pub(super) kind: EventKind,
    pub(super) now: Timestamp,
    pub(super) limits: Limits,
    /// Taken when the append is answered (before its batch is stored, for an intermediate
    /// event).
    pub(super) reply: Option<oneshot::Sender<Result<EventId>>>,
}

/// How often a batch holding appends answered before it was stored is computed and written
/// again after the database failed, before those appends are dropped: the first retry after
/// [`RETRY_FIRST`], each later one after twice the wait before it (about 1.3 s in all), so a
/// dropped connection, a deadlock victim or a restarted primary costs no event.
pub const SETTLE_RETRIES: u32 = 8;

/// The wait before the first retry of [`SETTLE_RETRIES`].
pub const RETRY_FIRST: std::time::Duration = std::time::Duration::from_millis(5);

/// The same failure, for every append of a batch.
fn again(e: &Error) -> Error {
    match e {
        Error::Backend(m) => Error::Backend(m.clone()),
        Error::LeaseLost(m) => Error::LeaseLost(m.clone()),
        other => Error::Backend(other.to_string()),
    }
}

/// Run the committer until the store is dropped.
pub(super) async fn run<D: Database>(inner: Weak<Inner<D>>, mut rx: mpsc::UnboundedReceiver<Job>) {
    while let Some(first) = rx.recv().await {
        let Some(store) = inner.upgrade() else { return };
        let mut batch = Computed::default();
        store.take(&mut batch, first, None).await;
        while batch.open() {
            match rx.try_recv() {
                Ok(job) => store.take(&mut batch, job, None).await,
                Err(_) => break,
            }
        }
        store.pipeline(batch, &mut rx).await;
    }
}

impl<D: Database> Inner<D> {
    /// Store `batch`, computing the next one on top of it from what arrives meanwhile, and
    /// so on until nothing waits.
    async fn pipeline(&self, mut batch: Computed, rx: &mut mpsc::UnboundedReceiver<Job>) {
        loop {
            if let Some(stale) = batch.stale {
                return self.settle(batch.into_slots().collect(), HashSet::from([stale])).await;
            }
            let mut next = Computed::default();
            let sent = Validated::now();
            let written = {
                let write = self.write(&batch);
                tokio::pin!(write);
                loop {
                    tokio::select! {
                        biased;
                        written = &mut write => break written,
                        Some(job) = rx.recv(), if next.open() => self.take(&mut next, job, Some(&batch)).await,
                    }
                }
            };
            match written {
                Ok(Committed::All { .. }) => {
                    self.stored(&batch, sent);
                    self.answer(batch.slots);
                    if next.is_empty() {
                        return;
                    }
                    batch = next;
                }
                Ok(Committed::Moved(id)) => {
                    let slots = batch.into_slots().chain(next.into_slots()).collect();
                    return self.settle(slots, HashSet::from([id])).await;
                }
                Err(e) => {
                    for id in batch.working.keys() {
                        self.forget(*id);
                    }
                    // The write may have stored the batch. An append not yet answered is told
                    // the error; one answered is stored again only under its id, so it is
                    // never stored twice.
                    let mut slots = Vec::new();
                    for (mut slot, outcome) in batch.slots {
                        match (slot.job.reply.take(), outcome) {
                            (Some(reply), Outcome::Refused(own)) => drop(reply.send(Err(own))),
                            (Some(reply), _) => drop(reply.send(Err(again(&e)))),
                            (None, _) => slots.push(Slot { pinned: true, ..slot }),
                        }
                    }
                    slots.extend(batch.waiting.into_iter().chain(next.into_slots()));
                    return self.settle(slots, HashSet::new()).await;
                }
            }
        }
    }

    /// Compute and store `slots` without pipelining, loading the `fresh` sessions from the
    /// database, until they are stored or refused. While it holds appends answered before
    /// they were stored, a database failure (reading a session, or writing the batch) is
    /// tried again, up to [`SETTLE_RETRIES`] times, before they are dropped.
    async fn settle(&self, mut slots: Vec<Slot>, mut fresh: HashSet<SessionId>) {
        let mut retries = Retries::default();
        for _ in 0..MAX_CAS_ATTEMPTS {
            let mut batch = Computed::default();
            for slot in slots {
                self.compute(&mut batch, slot, None, &fresh).await;
            }
            if let Some(stale) = batch.stale {
                self.forget(stale);
                fresh.insert(stale);
                slots = batch.into_slots().collect();
                continue;
            }
            if batch.unreachable() && retries.wait().await {
                slots = self.again(batch);
                continue;
            }
            let sent = Validated::now();
            match self.write(&batch).await {
                Ok(Committed::All { .. }) => {
                    self.stored(&batch, sent);
                    self.kept(&batch);
                    return self.answer(batch.slots);
                }
                Ok(Committed::Moved(id)) => {
                    self.forget(id);
                    fresh.insert(id);
                    slots = batch.into_slots().collect();
                }
                Err(e) if batch.answered() && !matches!(e, Error::LeaseLost(_)) && retries.wait().await => {
                    tracing::debug!(error = %e, "a batch holding answered appends failed; trying again");
                    slots = self.again(batch);
                }
                Err(e) => {
                    for id in batch.working.keys() {
                        self.forget(*id);
                    }
                    let failed = batch.slots.into_iter().map(|(slot, outcome)| match outcome {
                        Outcome::Stored(_) => (slot, Outcome::Refused(again(&e))),
                        other => (slot, other),
                    });
                    return self.answer(failed.collect());
                }
            }
        }
        let contended =
            slots.into_iter().map(|s| (s, Outcome::Refused(Error::Contended { attempts: MAX_CAS_ATTEMPTS })));
        self.answer(contended.collect());
    }

    /// `batch`'s appends, to be computed again on the database's records after a failure
    /// (a failed write may have stored it, so each answered append is pinned to its id).
    fn again(&self, batch: Computed) -> Vec<Slot> {
        for id in batch.working.keys().chain(batch.unreadable.keys()) {
            self.forget(*id);
        }
        batch.into_slots().map(|slot| Slot { pinned: slot.pinned || slot.given.is_some(), ..slot }).collect()
    }

    /// Store `batch` as one write, unless this node's lease may have lapsed.
    async fn write(&self, batch: &Computed) -> Result<Committed> {
        if batch.events.is_empty() {
            return Ok(Committed::All { hints: 0 });
        }
        let mut writes: Vec<(&SessionId, &Working)> =
            batch.working.iter().filter(|(_, w)| w.appended > 0).collect();
        // One lock order for every node: no two batches can deadlock on their sessions.
        writes.sort_by_key(|(id, _)| id.as_bytes());
        let hints: Vec<Hint> = match self.hints {
            Hints::Off => Vec::new(),
            Hints::Notify => writes
                .iter()
                .map(|(id, w)| {
                    let streams: Vec<StreamId> = w.end.changes_since(&w.start).map(|c| c.id()).collect();
                    Hint {
                        session: **id,
                        text: Said::Changed { session: **id, streams: Some(streams) }.encode(&self.node),
                    }
                })
                .collect(),
        };
        // Only the sessions another node tails or owns are hinted (see `interest`).
        let filter = self
            .keeps_interest()
            .then(|| HintFilter { node: &self.node, owner: self.node_id.get().map(NodeName::as_str) });
        let rows: Vec<SessionWrite<'_>> = writes
            .iter()
            .map(|(_, w)| SessionWrite {
                version: w.version,
                appended: w.appended,
                start: &w.start,
                end: &w.end,
            })
            .collect();
        // The check closest to the write: a node whose lease may have lapsed writes nothing.
        self.fence()?;
        let chunks = batch.chunks();
        let written =
            self.db.write_batch(Batch { sessions: &rows, chunks: &chunks, hints: &hints, filter }).await?;
        if let Committed::All { hints } = written {
            self.hints_sent.fetch_add(hints, Ordering::Relaxed);
        }
        Ok(written)
    }

    /// After `batch`, sent at `sent`, is stored: count it, keep its events for this node's
    /// writers, cache its records and wake their watchers.
    fn stored(&self, batch: &Computed, sent: Validated) {
        if batch.events.is_empty() {
            return;
        }
        let mut watched: HashMap<(SessionId, StreamId), bool, IdHashBuilder> = HashMap::default();
        for e in &batch.events {
            let here = *watched
                .entry((e.session, e.stream))
                .or_insert_with(|| self.hub.is_watched(e.session, e.stream));
            self.tails.stored(e.session, e.stream, e.seq, &e.payload, here);
        }
        self.batches.fetch_add(1, Ordering::Relaxed);
        self.batched_events.fetch_add(batch.events.len() as u64, Ordering::Relaxed);
        for w in batch.working.values().filter(|w| w.appended > 0) {
            for (counter, n) in self.evicted.iter().zip(w.evicted) {
                counter.fetch_add(n, Ordering::Relaxed);
            }
            self.committed(Version::new(w.version.get() + w.appended), &w.start, &w.end, sent);
        }
    }

    /// Wake the watchers of the streams whose answered events `batch` found stored already
    /// (by a write that reported an error, so nothing woke them then).
    fn kept(&self, batch: &Computed) {
        for (slot, _) in batch.slots.iter().filter(|(_, o)| matches!(o, Outcome::Kept)) {
            let (session, Some(id)) = (slot.job.session, slot.given) else { continue };
            if let Some(stream) = batch.working.get(&session).and_then(|w| w.end.stream(id.stream)) {
                self.hub.announce(session, stream);
            }
        }
    }

    /// Answer every append not answered yet; count the answered ones that were dropped.
    fn answer(&self, slots: Vec<(Slot, Outcome)>) {
        let (mut lost, mut why) = (0, None);
        let mut settled: HashMap<SessionId, u64, IdHashBuilder> = HashMap::default();
        for (slot, _) in slots.iter().filter(|(s, _)| s.given.is_some()) {
            *settled.entry(slot.job.session).or_default() += 1;
        }
        for (mut slot, outcome) in slots {
            let result = match outcome {
                Outcome::Stored(id) => Ok(id),
                Outcome::Refused(e) => Err(e),
                Outcome::Lost(reason) => {
                    lost += 1;
                    why.get_or_insert(reason);
                    continue;
                }
                Outcome::Unreachable(e) => Err(e),
                Outcome::Kept => continue,
                Outcome::Moot => continue,
            };
            match (slot.job.reply.take(), result) {
                (Some(reply), result) => drop(reply.send(result)),
                (None, Err(e)) => {
                    lost += 1;
                    why.get_or_insert(e.to_string());
                }
                (None, Ok(_)) => {}
            }
        }
        if lost > 0 {
            self.events_lost.fetch_add(lost, Ordering::Relaxed);
            tracing::warn!(
                events = lost,
                why = why.unwrap_or_default(),
                "events whose appends were answered before their batch was stored were not stored"
            );
        }
        for (session, n) in settled {
            self.unstored.settle(session, n);
        }
    }
}

/// The database failures a settling batch has met, and the wait before its next try.
#[derive(Default)]
struct Retries {
    failed: u32,
}

impl Retries {
    /// Wait before the next try; `false` (at once) when the tries are spent.
    async fn wait(&mut self) -> bool {
        if self.failed == SETTLE_RETRIES {
            return false;
        }
        tokio::time::sleep(RETRY_FIRST * 2u32.pow(self.failed)).await;
        self.failed += 1;
        true
    }
}
