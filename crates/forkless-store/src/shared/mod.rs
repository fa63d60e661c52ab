//! What every store shared by many nodes has in common, written once: a [`Database`] says
//! how to load, write and read records where the nodes share them; [`SharedStore`] makes a
//! [`Store`] of it with the same promises the in-process stores keep.
//!
//! - **Compare-and-set in the database.** Every write is computed by the core on a record at
//!   a known version and stored only if the database still holds that version
//!   ([`Database::write`], [`Database::write_batch`]). Each node caches the records it wrote
//!   or loaded, so appends on the node that serves a session read nothing; a stale entry costs
//!   one refused write and a reload, never a wrong write, and a core refusal on a cached
//!   record is re-checked on the database's own.
//! - **Group commit, pipelined.** One committer per node (per shard of a database that can
//!   write only a shard's sessions at once: [`Database::shards`]) stores every append waiting,
//!   across sessions and streams, as one batch (`commit`), computing the next while one is written;
//!   an event is delivered once its batch is stored (promise 3), and the database's commit is
//!   what a crash cannot take back. A final event's append returns then; a notification's
//!   once computed (with [`Pipeline::On`]), and a load or compare-and-set on this node waits
//!   for the session's appends that returned before it.
//! - **Wake-ups.** Watchers on the writing node are woken after its write; watchers on other
//!   nodes by a hint the database carries (`hub`), which makes them re-read: a hint may be
//!   lost, so a backend's listener re-reads everything watched whenever it (re)connects.
//!
//! It owns the cache, the committer, the watchers, the read fence and the hints' format, not
//! the data's layout, the queries or the hint channel (a backend's), nor any decision (the
//! core's).

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use forkless_core::{EventId, Schedule, Seq, SessionId, SessionRecord, StreamChange, StreamId, Timestamp};
use tokio::sync::mpsc;

use crate::{
    Append, Error, Reader, Result, Store, StoreMetric, StoredEvent, StreamWatch, Usage, Version, Versioned,
};

mod cache;
mod commit;
mod database;
mod faulty;
mod hint;
mod hub;
mod interest;
mod lease;
mod listen;
mod metrics;
mod owners;
mod tail;
mod tasks;
mod unstored;

pub use crate::Takeover;
pub use crate::{Advertised, InvalidAdvertised, InvalidNodeName, NodeName};
use cache::Cache;
pub use commit::{Pipeline, RETRY_FIRST, SETTLE_RETRIES};
pub use database::{
    Batch, Chunk, Committed, Database, Declared, Hint, HintFilter, Loaded, OwnerFacts, Read, SessionWrite,
    TaskRow, Write, Written,
};
pub use faulty::{DbFault, DbFaults, FaultyDatabase};
use hint::Said;
pub use hint::unhex;
use hub::Hub;
pub use hub::{HintSink, Hints};
pub use interest::INTEREST_SWEEP;
pub use lease::{LeaseOp, NodeLease};
pub use listen::{FIRST_BACKOFF, HintSource, MAX_BACKOFF, listen};
pub use metrics::SharedStats;
pub use tail::TailConfig;
use tail::{Tails, Validated};

/// A [`Store`] on a [`Database`] shared by many nodes. Cheap to clone; clones share the
/// cache, the committer and the watchers.
#[derive(Debug)]
pub struct SharedStore<D> {
    inner: Arc<Inner<D>>,
}

impl<D> Clone for SharedStore<D> {
    fn clone(&self) -> Self {
        Self { inner: Arc::clone(&self.inner) }
    }
}

#[derive(Debug)]
struct Inner<D> {
    db: D,
    /// The records this node last wrote or loaded, with their versions.
    cache: Cache,
    /// Appends answered before their batch was stored, by session.
    unstored: unstored::Unstored,
    /// When a notification's append returns.
    pipeline: Pipeline,
    hub: Hub,
    hints: Hints,
    node: String,
    /// The sessions this node declared its interest in (see [`interest`]).
    interest: interest::Interest,
    /// Payload bytes retained, as this node applied them.
    retained: AtomicI64,
    evicted: [AtomicU64; 2],
    batches: AtomicU64,
    batched_events: AtomicU64,
    /// Stream reads sent to the database.
    reads: AtomicU64,
    /// What this node committed lately to the streams it serves.
    tails: Tails,
    /// Stream reads served from [`Self::tails`].
    tail_reads: AtomicU64,
    /// Sessions claimed from lost nodes, hints sent and hints received.
    takeovers: AtomicU64,
    /// Events whose appends were answered but that were never stored (see [`commit`]).
    events_lost: AtomicU64,
    hints_sent: AtomicU64,
    hints_received: AtomicU64,
    /// Times the hint listener (re)connected and re-read what this node watches.
    listener_connects: AtomicU64,
    /// Listen notifications, handed to this node's subscribers.
    bulletin: crate::Bulletin,
    /// One committer per shard of the database ([`Database::shards`]).
    commits: Vec<mpsc::UnboundedSender<commit::Job>>,
    /// Tasks that live as long as the store (a backend's hint listener).
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// This node's lease, once it holds one: every operation checks it first.
    lease: std::sync::OnceLock<Arc<lease::LeaseState>>,
    /// The node id of that lease: the owner of the sessions this store creates.
    node_id: std::sync::OnceLock<NodeName>,
}

impl<D> Drop for Inner<D> {
    fn drop(&mut self) {
        for task in self.tasks.get_mut().map(std::mem::take).unwrap_or_default() {
            task.abort();
        }
    }
}

impl<D: Database> SharedStore<D> {
    /// A store on `db`, this node named `node` in its hints, its notifications' appends
    /// returning as `pipeline` says, its own writers reading what it just committed from its
    /// tails as `tail` says. Spawns a committer per shard of the database.
    pub fn new(db: D, hints: Hints, node: NodeName, pipeline: Pipeline, tail: TailConfig) -> Self {
        let (commits, queues): (Vec<_>, Vec<_>) =
            (0..db.shards().max(1)).map(|_| mpsc::unbounded_channel()).unzip();
        let inner = Arc::new(Inner {
            db,
            cache: Cache::default(),
            unstored: unstored::Unstored::default(),
            pipeline,
            hub: Hub::default(),
            hints,
            node: node.as_str().to_owned(),
            interest: interest::Interest::default(),
            retained: AtomicI64::new(0),
            evicted: Default::default(),
            batches: AtomicU64::new(0),
            batched_events: AtomicU64::new(0),
            reads: AtomicU64::new(0),
            tails: Tails::new(tail),
            tail_reads: AtomicU64::new(0),
            takeovers: AtomicU64::new(0),
            events_lost: AtomicU64::new(0),
            hints_sent: AtomicU64::new(0),
            hints_received: AtomicU64::new(0),
            listener_connects: AtomicU64::new(0),
            bulletin: crate::Bulletin::default(),
            commits,
            tasks: Mutex::default(),
            lease: std::sync::OnceLock::new(),
            node_id: std::sync::OnceLock::new(),
        });
        for queue in queues {
            tokio::spawn(commit::run(Arc::downgrade(&inner), queue));
        }
        if inner.keeps_interest() {
            tokio::spawn(interest::sweep_every(Arc::downgrade(&inner), INTEREST_SWEEP));
        }
        Self { inner }
    }

    /// The database.
    pub fn database(&self) -> &D {
        &self.inner.db
    }

    /// Whether this node sends and receives hints.
    pub fn hints(&self) -> Hints {
        self.inner.hints
    }

    /// Where a backend's listener hands the hints it receives (see [`HintSink`]).
    pub fn hint_sink(&self) -> HintSink<D> {
        HintSink::new(Arc::downgrade(&self.inner), self.inner.node.clone())
    }

    /// Keep `task` running as long as the store, and abort it when the store is dropped.
    pub fn own_task(&self, task: tokio::task::JoinHandle<()>) {
        self.inner.tasks.lock().unwrap_or_else(|p| p.into_inner()).push(task);
    }

    /// This node's counters.
    pub fn stats(&self) -> SharedStats {
        SharedStats {
            batches: self.inner.batches.load(Ordering::Relaxed),
            batched_events: self.inner.batched_events.load(Ordering::Relaxed),
        }
    }
}

impl<D: Database> Inner<D> {
    /// Refuse to serve once this node's lease may have lapsed.
    fn fence(&self) -> Result<()> {
        self.lease.get().map_or(Ok(()), |l| l.check())
    }

    fn forget(&self, id: SessionId) {
        self.cache.forget(id);
    }

    fn retain(&self, before: u64, after: u64) {
        self.retained.fetch_add(after as i64 - before as i64, Ordering::Relaxed);
    }

    /// After a write from `old` to `new`, sent at `sent`, is stored: cache it and wake this
    /// node's watchers.
    fn committed(&self, version: Version, old: &SessionRecord, new: &SessionRecord, sent: Validated) {
        self.retain(old.retained_bytes(), new.retained_bytes());
        // Cached first, so a watcher woken below checks its reads against this write.
        self.cache.put(version, new, sent);
        if new.session().ended().is_some() {
            self.tails.forget(new.id(), None);
        }
        for change in new.changes_since(old) {
            match change {
                StreamChange::Removed(s) => {
                    self.tails.forget(new.id(), Some(s.id()));
                    self.hub.dropped(new.id(), s.id())
                }
                StreamChange::Added(s) | StreamChange::Changed { after: s, .. } => {
                    self.hub.announce(new.id(), s)
                }
            }
        }
    }

    /// Re-read `keys` and wake their watchers (after a hint, or a listener's reconnect).
    async fn refresh(&self, keys: Vec<(SessionId, StreamId)>) {
        for (session, stream) in keys {
            match self.db.stream(session, stream).await {
                Ok(meta) => self.hub.announce(session, &meta),
                Err(Error::StreamUnknown | Error::SessionUnknown) => self.hub.dropped(session, stream),
                Err(e) => tracing::warn!(error = %e, "re-read after a hint failed"),
            }
        }
    }
}

fn stopped() -> Error {
    Error::Poisoned("the store's committer stopped".into())
}

impl<D: Database> Store for SharedStore<D> {
    async fn create(&self, record: SessionRecord) -> Result<Version> {
        self.inner.fence()?;
        let sent = Validated::now();
        self.inner.db.insert(&record, self.inner.node_id.get().map(NodeName::as_str)).await?;
        self.inner.retain(0, record.retained_bytes());
        self.inner.cache.put(Version::INITIAL, &record, sent);
        Ok(Version::INITIAL)
    }

    async fn load(&self, id: SessionId) -> Result<Option<Versioned<SessionRecord>>> {
        self.inner.fence()?;
        // This node's own appends first: a load reads every append that returned.
        self.inner.unstored.settled(id).await;
        match self.inner.current(id, false).await {
            Ok((version, value)) => Ok(Some(Versioned { version, value })),
            Err(Error::SessionUnknown) => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn compare_and_set(&self, expected: Version, record: SessionRecord) -> Result<Option<Version>> {
        self.inner.fence()?;
        // After this node's own appends: an append that returned bumped the version.
        self.inner.unstored.settled(record.id()).await;
        let inner = &self.inner;
        let id = record.id();
        let old = match inner.cache.get(id) {
            Some((version, old)) if version == expected => old,
            _ => {
                let (version, old) = inner.current(id, false).await?;
                if version != expected {
                    return Ok(None);
                }
                old
            }
        };
        let hint = inner.hint(&old, &record);
        let sent = Validated::now();
        match inner.db.write(Write { expected, old: &old, new: &record, hint }).await {
            Ok(Written::Committed) => {
                inner.committed(expected.next(), &old, &record, sent);
                Ok(Some(expected.next()))
            }
            Ok(Written::Moved) => {
                inner.forget(id);
                Ok(None)
            }
            Err(e) => {
                inner.forget(id);
                Err(e)
            }
        }
    }

    async fn append(&self, event: Append<'_>) -> Result<EventId> {
        self.inner.fence()?;
        let Append { session, target, payload, kind, now, limits } = event;
        let (reply, answer) = tokio::sync::oneshot::channel();
        let job = commit::Job { session, target, payload, kind, now, limits: *limits, reply: Some(reply) };
        let shard = self.inner.db.shard(session) % self.inner.commits.len();
        self.inner.commits[shard].send(job).map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }

    async fn read(
        &self,
        session: SessionId,
        stream: StreamId,
        after: Seq,
        max: usize,
        reader: Reader,
    ) -> Result<Vec<StoredEvent>> {
        self.inner.fence()?;
        if let Some(events) = self.inner.tail_read(session, stream, after, max, reader)? {
            self.inner.tail_reads.fetch_add(1, Ordering::Relaxed);
            return Ok(events);
        }
        self.inner.reads.fetch_add(1, Ordering::Relaxed);
        // The read fence, here for every database: a backend only reads.
        let Read { meta, events } = self.inner.db.read(session, stream, after, max).await?;
        crate::check_read(&meta, after, reader)?;
        crate::check_continuation(&meta, after, &events)?;
        Ok(events)
    }

    async fn watch(&self, session: SessionId, stream: StreamId) -> Result<StreamWatch> {
        self.inner.fence()?;
        // Registered before the read: a commit between the two still wakes it, here at once,
        // from another node by a hint once interest is declared (also before the read).
        let pending = self.inner.hub.register(session, stream);
        self.inner.declare(session).await?;
        let meta = self.inner.db.stream(session, stream).await?;
        Ok(self.inner.hub.settle(session, &meta, pending))
    }

    async fn remove(&self, id: SessionId) -> Result<()> {
        self.inner.fence()?;
        let inner = &self.inner;
        let hint = (inner.hints == Hints::Notify)
            .then(|| Said::Changed { session: id, streams: None }.encode(&inner.node));
        inner.db.remove(id, hint).await?;
        if let Some((_, record)) = inner.cache.get(id) {
            inner.retain(record.retained_bytes(), 0);
        }
        inner.forget(id);
        inner.tails.forget(id, None);
        inner.hub.session_dropped(id);
        Ok(())
    }

    async fn sessions(&self) -> Result<Vec<SessionId>> {
        self.inner.db.sessions().await
    }

    fn retained_by(&self, session: SessionId) -> Option<u64> {
        self.inner.cache.with(session, |record, _| record.retained_bytes())
    }

    fn usage(&self) -> Usage {
        Usage {
            retained_bytes: self.inner.retained.load(Ordering::Relaxed).max(0) as u64,
            evicted_by_events: self.inner.evicted[0].load(Ordering::Relaxed),
            evicted_by_bytes: self.inner.evicted[1].load(Ordering::Relaxed),
        }
    }

    async fn due(&self, now: Timestamp, schedule: &Schedule) -> Result<Vec<SessionId>> {
        self.inner.fence()?;
        self.inner.db.due(now, schedule).await
    }

    async fn health(&self) -> Result<()> {
        // A node that no longer trusts its lease serves nothing, whatever the database says.
        self.inner.fence()?;
        self.inner.db.health().await
    }

    fn metrics(&self) -> Vec<StoreMetric> {
        metrics::of(&self.inner)
    }

    fn tasks(&self) -> Option<&impl crate::TaskStore> {
        Some(self)
    }

    fn spending(&self) -> Option<&impl crate::Spending> {
        Some(self)
    }

    fn publishing(&self) -> Option<&impl crate::Publishing> {
        Some(self)
    }

    fn ownership(&self) -> Option<&impl crate::Ownership> {
        Some(self)
    }
}

impl<D: Database> crate::Spending for SharedStore<D> {
    async fn spend(
        &self,
        key: crate::SpendKey,
        issued: Timestamp,
        until: Timestamp,
        now: Timestamp,
    ) -> Result<crate::Spent> {
        self.inner.db.spend(key, issued, until, now).await
    }
}

impl<D: Database> crate::Publishing for SharedStore<D> {
    /// This node's subscribers at once; the other nodes' through a hint (with hints on).
    async fn publish(&self, message: bytes::Bytes) -> Result<()> {
        self.inner.bulletin.publish(message.clone());
        if self.inner.hints == Hints::Off {
            return Ok(());
        }
        let hint = Said::notice(&message)?.encode(&self.inner.node);
        self.inner.db.publish(&hint).await
    }

    fn subscribe(&self) -> tokio::sync::broadcast::Receiver<bytes::Bytes> {
        self.inner.bulletin.subscribe()
    }
}
