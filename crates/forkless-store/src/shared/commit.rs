//! Group commit: every append of a node goes through one committer task, which takes every
//! append waiting, computes them in order with the core on the records they advance (each
//! on the one the append before it left), and stores them as one batch
//! ([`Database::write_batch`]). An append returns once its batch is stored, so it is
//! delivered then.
//!
//! A batch is computed on this node's cached records; if one moved (another node wrote it),
//! the database refuses the whole batch naming it, and the batch is computed again with that
//! session loaded fresh. A core refusal on a cached record is re-checked the same way, so an
//! append is only ever refused on the database's own version.
//!
//! It owns batching and the order of appends, not what an append does (the core's) or how a
//! batch is stored (the [`Database`]'s).

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::sync::Weak;
use std::sync::atomic::Ordering;

use super::{Batch, BatchEvent, Committed, Database, Hints, Inner, SessionWrite, hint};
use crate::{Error, MAX_CAS_ATTEMPTS, Result, Version};
use bytes::Bytes;
use forkless_core::{
    AppendTarget, EventId, EventKind, EvictedBy, IdHashBuilder, Limits, Seq, SessionId, SessionRecord,
    StreamId, Timestamp,
};
use tokio::sync::{mpsc, oneshot};

/// At most this many appends go in one transaction.
const MAX_BATCH: usize = 1024;

/// One append waiting for its batch.
#[derive(Debug)]
pub(super) struct Job {
    pub(super) session: SessionId,
    pub(super) target: AppendTarget,
    pub(super) payload: Bytes,
    pub(super) kind: EventKind,
    pub(super) now: Timestamp,
    pub(super) limits: Limits,
    pub(super) reply: oneshot::Sender<Result<EventId>>,
}

/// Run the committer until the store is dropped.
pub(super) async fn run<D: Database>(inner: Weak<Inner<D>>, mut rx: mpsc::UnboundedReceiver<Job>) {
    while let Some(first) = rx.recv().await {
        let mut jobs = vec![first];
        while jobs.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(job) => jobs.push(job),
                Err(_) => break,
            }
        }
        let Some(store) = inner.upgrade() else { return };
        let results = store.commit(&jobs).await;
        drop(store);
        for (job, result) in jobs.into_iter().zip(results) {
            let _ = job.reply.send(result);
        }
    }
}

/// A session as a batch advances it.
struct Working {
    version: Version,
    start: SessionRecord,
    end: SessionRecord,
    appended: u64,
    from_cache: bool,
    /// Events of this batch not yet stored, by stream: (seq, size), oldest first.
    pending: HashMap<StreamId, Vec<(Seq, u64)>, IdHashBuilder>,
    /// Events the batch's retention evicted, by count and by bytes.
    evicted: [u64; 2],
}

/// How one computation of a batch ended.
enum Attempt {
    /// Every append has its answer.
    Done(Vec<Result<EventId>>),
    /// This session's record must be loaded fresh and the batch computed again.
    Again(SessionId),
}

/// The same failure, for every append of a batch.
fn again(e: &Error) -> Error {
    match e {
        Error::Backend(m) => Error::Backend(m.clone()),
        Error::LeaseLost(m) => Error::LeaseLost(m.clone()),
        other => Error::Backend(other.to_string()),
    }
}

impl<D: Database> Inner<D> {
    async fn commit(&self, jobs: &[Job]) -> Vec<Result<EventId>> {
        let mut fresh = HashSet::new();
        for _ in 0..MAX_CAS_ATTEMPTS {
            match self.attempt(jobs, &fresh).await {
                Attempt::Done(results) => return results,
                Attempt::Again(id) => {
                    self.forget(id);
                    fresh.insert(id);
                }
            }
        }
        jobs.iter().map(|_| Err(Error::Contended { attempts: MAX_CAS_ATTEMPTS })).collect()
    }

    async fn attempt(&self, jobs: &[Job], fresh: &HashSet<SessionId>) -> Attempt {
        let mut working: HashMap<SessionId, Working, IdHashBuilder> = HashMap::default();
        let mut results: Vec<Result<EventId>> = Vec::with_capacity(jobs.len());
        let mut events = Vec::with_capacity(jobs.len());
        for job in jobs {
            let w = match working.entry(job.session) {
                Entry::Occupied(o) => o.into_mut(),
                Entry::Vacant(v) => {
                    let from_cache = !fresh.contains(&job.session);
                    match self.current(job.session, from_cache).await {
                        Ok((version, record)) => v.insert(Working {
                            version,
                            start: record.clone(),
                            end: record,
                            appended: 0,
                            from_cache,
                            pending: HashMap::default(),
                            evicted: [0; 2],
                        }),
                        Err(e) => {
                            results.push(Err(e));
                            continue;
                        }
                    }
                }
            };
            let size = job.payload.len() as u64;
            let mut next = w.end.clone();
            let id = match next.append(job.target, size, job.kind, job.now, &job.limits) {
                Ok(id) => id,
                Err(_) if w.from_cache => return Attempt::Again(job.session),
                Err(e) => {
                    results.push(Err(e.into()));
                    continue;
                }
            };
            let pending = w.pending.get(&id.stream).map_or(&[][..], Vec::as_slice);
            match self.evict(&mut next, id, size, &job.limits, pending).await {
                Ok(Some((by, n))) => w.evicted[usize::from(by == EvictedBy::StreamMaxBytes)] += n,
                Ok(None) => {}
                Err(e) => {
                    results.push(Err(e));
                    continue;
                }
            }
            w.end = next;
            w.appended += 1;
            w.pending.entry(id.stream).or_default().push((id.seq, size));
            events.push(BatchEvent {
                session: job.session,
                stream: id.stream,
                seq: id.seq,
                payload: job.payload.clone(),
            });
            results.push(Ok(id));
        }
        if events.is_empty() {
            return Attempt::Done(results);
        }
        let mut writes: Vec<(&SessionId, &Working)> =
            working.iter().filter(|(_, w)| w.appended > 0).collect();
        // One lock order for every node: no two batches can deadlock on their sessions.
        writes.sort_by_key(|(id, _)| id.as_bytes());
        let hints: Vec<String> = match self.hints {
            Hints::Off => Vec::new(),
            Hints::Notify => writes
                .iter()
                .map(|(id, w)| {
                    let streams: Vec<StreamId> = w.end.changes_since(&w.start).map(|c| c.id()).collect();
                    hint(&self.node, **id, &streams)
                })
                .collect(),
        };
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
        if let Err(e) = self.fence() {
            return Attempt::Done(results.into_iter().map(|r| r.and(Err(again(&e)))).collect());
        }
        match self.db.write_batch(Batch { sessions: &rows, events: &events, hints: &hints }).await {
            Ok(Committed::All) => {
                self.batches.fetch_add(1, Ordering::Relaxed);
                self.hints_sent.fetch_add(hints.len() as u64, Ordering::Relaxed);
                self.batched_events.fetch_add(events.len() as u64, Ordering::Relaxed);
                for (_, w) in &writes {
                    for (counter, n) in self.evicted.iter().zip(w.evicted) {
                        counter.fetch_add(n, Ordering::Relaxed);
                    }
                    self.committed(Version::new(w.version.get() + w.appended), &w.start, &w.end);
                }
                Attempt::Done(results)
            }
            Ok(Committed::Moved(id)) => Attempt::Again(id),
            Err(e) => {
                for id in working.keys() {
                    self.forget(*id);
                }
                Attempt::Done(results.into_iter().map(|r| r.and(Err(again(&e)))).collect())
            }
        }
    }

    /// Retention after appending `id` (of `size` bytes) to `new`, with `pending` this batch's
    /// earlier, not yet stored events of its stream: the core's plan, given the sizes of the
    /// oldest retained events, fetched only when it is due and only as many as it may take.
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
