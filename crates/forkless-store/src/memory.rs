//! The in-memory store: the [`Engine`], a [`TaskMap`], a [`Ledger`] and a [`Bulletin`] with
//! nothing behind them. Nothing survives the process. Its capabilities are those of one
//! process: every clone of it shares them (two servers on one memory store are two nodes of
//! it), and no session has another owner.

use std::sync::Arc;

use forkless_core::{EventId, Schedule, Seq, SessionId, SessionRecord, StreamId, Timestamp};

use crate::engine::Engine;
use crate::{
    Append, Bulletin, Ledger, NodeName, Publishing, Reader, Result, SpendKey, Spending, Spent, Store,
    StoredEvent, StreamWatch, TaskMap, TaskStore, Version, Versioned,
};
use forkless_core::{TaskId, TaskRecord};

/// A [`Store`] in process memory: one mutex per session, logs as ring buffers, wake-ups
/// through `tokio::sync::watch`. Cheap to clone (shared state).
#[derive(Clone, Debug, Default)]
pub struct MemoryStore {
    engine: Arc<Engine>,
    spent: Arc<Ledger>,
    bulletin: Arc<Bulletin>,
    tasks: Arc<TaskMap>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Store for MemoryStore {
    async fn create(&self, record: SessionRecord) -> Result<Version> {
        self.engine.create(record, |_| {})
    }

    async fn load(&self, id: SessionId) -> Result<Option<Versioned<SessionRecord>>> {
        self.engine.load(id)
    }

    async fn compare_and_set(&self, expected: Version, record: SessionRecord) -> Result<Option<Version>> {
        self.engine.compare_and_set(expected, record, |_| {})
    }

    async fn append(&self, event: Append<'_>) -> Result<EventId> {
        self.engine.append(event, true, |_| {})
    }

    async fn read(
        &self,
        session: SessionId,
        stream: StreamId,
        after: Seq,
        max: usize,
        reader: Reader,
    ) -> Result<Vec<StoredEvent>> {
        self.engine.read(session, stream, after, max, reader)
    }

    async fn watch(&self, session: SessionId, stream: StreamId) -> Result<StreamWatch> {
        self.engine.watch(session, stream)
    }

    async fn remove(&self, id: SessionId) -> Result<()> {
        self.engine.remove(id, |_| {})
    }

    async fn sessions(&self) -> Result<Vec<SessionId>> {
        self.engine.sessions()
    }

    fn usage(&self) -> crate::Usage {
        self.engine.usage()
    }

    fn retained_by(&self, session: SessionId) -> Option<u64> {
        self.engine.retained_by(session)
    }

    async fn due(&self, now: Timestamp, schedule: &Schedule) -> Result<Vec<SessionId>> {
        self.engine.due(now, schedule)
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
}

impl Spending for MemoryStore {
    async fn spend(
        &self,
        key: SpendKey,
        issued: Timestamp,
        until: Timestamp,
        now: Timestamp,
    ) -> Result<Spent> {
        self.spent.spend(key, issued, until, now)
    }
}

impl Publishing for MemoryStore {
    async fn publish(&self, message: bytes::Bytes) -> Result<()> {
        self.bulletin.publish(message);
        Ok(())
    }

    fn subscribe(&self) -> tokio::sync::broadcast::Receiver<bytes::Bytes> {
        self.bulletin.subscribe()
    }
}

impl TaskStore for MemoryStore {
    async fn create_task(&self, task: &TaskRecord) -> Result<()> {
        self.tasks.create_task(task).await
    }

    async fn load_task(&self, id: TaskId) -> Result<Option<Versioned<TaskRecord>>> {
        self.tasks.load_task(id).await
    }

    async fn replace_task(&self, expected: Version, task: &TaskRecord) -> Result<Option<Version>> {
        self.tasks.replace_task(expected, task).await
    }

    async fn open_tasks(&self, node: Option<&NodeName>) -> Result<Vec<TaskId>> {
        self.tasks.open_tasks(node).await
    }

    async fn expire_tasks(&self, now: Timestamp) -> Result<u64> {
        self.tasks.expire_tasks(now).await
    }
}
