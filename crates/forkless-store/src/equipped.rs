//! A store with every capability a server uses: its own where it has one, this process's
//! otherwise ([`Equipped`]).
//!
//! A store of one process has nothing to share its spent keys, listen notifications or tasks
//! with: a [`Ledger`], a [`Bulletin`] and a [`TaskMap`] in the process keep the promises for it
//! (9, 10 and 11 hold within one process, which is all there is). So a backend implements
//! only what it really has, and this is the one place the stand-ins are chosen. Without
//! [`Ownership`] every session is served here ([`Owner::Here`]), no writer waits for a
//! handover, and nothing is adopted.
//!
//! It owns that choice, not the capabilities (each store's) nor their contracts
//! ([`crate::capability`]).

use core::time::Duration;

use bytes::Bytes;
use forkless_core::{
    EventId, Orphan, Schedule, Seq, SessionId, SessionRecord, StreamId, TaskId, TaskRecord, Timestamp,
};

use crate::{
    Append, Bulletin, Ledger, NodeName, Owner, Ownership, Publishing, Reader, Result, SpendKey, Spending,
    Spent, Store, StoreMetric, StoredEvent, StreamWatch, Takeover, TaskMap, TaskStore, Usage, Version,
    Versioned,
};

/// `S`, with a [`Ledger`], a [`Bulletin`] and a [`TaskMap`] for the capabilities it lacks.
/// It is itself a [`Store`] that has tasks, spending and publishing, and ownership where `S`
/// has it.
#[derive(Debug)]
pub struct Equipped<S> {
    store: S,
    ledger: Ledger,
    bulletin: Bulletin,
    tasks: TaskMap,
}

impl<S: Store> Equipped<S> {
    /// `store`, with this process's stand-ins beside it (its memory of spent keys starts now).
    pub fn new(store: S) -> Self {
        Self { store, ledger: Ledger::default(), bulletin: Bulletin::default(), tasks: TaskMap::default() }
    }

    /// The store inside.
    pub fn inner(&self) -> &S {
        &self.store
    }

    /// This node's name, on a store shared by many nodes whose lease it holds.
    pub fn node(&self) -> Option<NodeName> {
        self.store.ownership().and_then(Ownership::node)
    }

    /// How long a writer that displaced a live attachment waits (see [`Ownership::handover`]):
    /// zero in one process, whose fences are immediate.
    pub fn handover(&self) -> Duration {
        self.store.ownership().map_or(Duration::ZERO, Ownership::handover)
    }

    /// Which node serves `session` (see [`Ownership::owner`]): this one, in one process.
    pub async fn owner(&self, session: SessionId) -> Result<Owner> {
        match self.store.ownership() {
            Some(nodes) => nodes.owner(session).await,
            None => Ok(Owner::Here),
        }
    }

    /// Take `session` over from a lapsed owner (see [`Ownership::adopt`]): never, in one
    /// process.
    pub async fn adopt(
        &self,
        session: SessionId,
        what: Takeover,
        now: Timestamp,
    ) -> Result<Option<Vec<Orphan>>> {
        match self.store.ownership() {
            Some(nodes) => nodes.adopt(session, what, now).await,
            None => Ok(None),
        }
    }

    /// Open tasks of lapsed nodes (see [`Ownership::lapsed_tasks`]): none, in one process.
    pub async fn lapsed_tasks(&self) -> Result<Vec<(TaskId, NodeName)>> {
        match self.store.ownership() {
            Some(nodes) => nodes.lapsed_tasks().await,
            None => Ok(Vec::new()),
        }
    }
}

impl<S: Store> Spending for Equipped<S> {
    async fn spend(
        &self,
        key: SpendKey,
        issued: Timestamp,
        until: Timestamp,
        now: Timestamp,
    ) -> Result<Spent> {
        match self.store.spending() {
            Some(shared) => shared.spend(key, issued, until, now).await,
            None => self.ledger.spend(key, issued, until, now),
        }
    }
}

impl<S: Store> Publishing for Equipped<S> {
    async fn publish(&self, message: Bytes) -> Result<()> {
        match self.store.publishing() {
            Some(shared) => shared.publish(message).await,
            None => {
                self.bulletin.publish(message);
                Ok(())
            }
        }
    }

    fn subscribe(&self) -> tokio::sync::broadcast::Receiver<Bytes> {
        match self.store.publishing() {
            Some(shared) => shared.subscribe(),
            None => self.bulletin.subscribe(),
        }
    }
}

impl<S: Store> TaskStore for Equipped<S> {
    async fn create_task(&self, task: &TaskRecord) -> Result<()> {
        match self.store.tasks() {
            Some(kept) => kept.create_task(task).await,
            None => self.tasks.create_task(task).await,
        }
    }

    async fn load_task(&self, id: TaskId) -> Result<Option<Versioned<TaskRecord>>> {
        match self.store.tasks() {
            Some(kept) => kept.load_task(id).await,
            None => self.tasks.load_task(id).await,
        }
    }

    async fn replace_task(&self, expected: Version, task: &TaskRecord) -> Result<Option<Version>> {
        match self.store.tasks() {
            Some(kept) => kept.replace_task(expected, task).await,
            None => self.tasks.replace_task(expected, task).await,
        }
    }

    async fn open_tasks(&self, node: Option<&NodeName>) -> Result<Vec<TaskId>> {
        match self.store.tasks() {
            Some(kept) => kept.open_tasks(node).await,
            None => self.tasks.open_tasks(node).await,
        }
    }

    async fn expire_tasks(&self, now: Timestamp) -> Result<u64> {
        match self.store.tasks() {
            Some(kept) => kept.expire_tasks(now).await,
            None => self.tasks.expire_tasks(now).await,
        }
    }
}

/// The store's own methods, passed through; its capabilities, made whole.
impl<S: Store> Store for Equipped<S> {
    async fn create(&self, record: SessionRecord) -> Result<Version> {
        self.store.create(record).await
    }

    async fn load(&self, id: SessionId) -> Result<Option<Versioned<SessionRecord>>> {
        self.store.load(id).await
    }

    async fn compare_and_set(&self, expected: Version, record: SessionRecord) -> Result<Option<Version>> {
        self.store.compare_and_set(expected, record).await
    }

    async fn append(&self, event: Append<'_>) -> Result<EventId> {
        self.store.append(event).await
    }

    async fn read(
        &self,
        session: SessionId,
        stream: StreamId,
        after: Seq,
        max: usize,
        reader: Reader,
    ) -> Result<Vec<StoredEvent>> {
        self.store.read(session, stream, after, max, reader).await
    }

    async fn watch(&self, session: SessionId, stream: StreamId) -> Result<StreamWatch> {
        self.store.watch(session, stream).await
    }

    async fn remove(&self, id: SessionId) -> Result<()> {
        self.store.remove(id).await
    }

    async fn sessions(&self) -> Result<Vec<SessionId>> {
        self.store.sessions().await
    }

    fn usage(&self) -> Usage {
        self.store.usage()
    }

    fn retained_by(&self, session: SessionId) -> Option<u64> {
        self.store.retained_by(session)
    }

    fn metrics(&self) -> Vec<StoreMetric> {
        self.store.metrics()
    }

    async fn health(&self) -> Result<()> {
        self.store.health().await
    }

    async fn due(&self, now: Timestamp, schedule: &Schedule) -> Result<Vec<SessionId>> {
        self.store.due(now, schedule).await
    }

    fn tasks(&self) -> Option<&impl TaskStore> {
        Some(self)
    }

    fn spending(&self) -> Option<&impl Spending> {
        Some(self)
    }

    fn publishing(&self) -> Option<&impl Publishing> {
        Some(self)
    }

    fn ownership(&self) -> Option<&impl Ownership> {
        self.store.ownership()
    }
}
