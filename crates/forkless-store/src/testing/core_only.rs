//! A store with nothing but the core ([`CoreOnly`]): what a new backend's first version looks
//! like. It proves that the core is enough: the conformance suite and a server run on it, with
//! the process keeping its tasks, spent keys and listen notifications
//! ([`crate::Equipped`]'s stand-ins, which no store shipped here needs otherwise).

use forkless_core::{EventId, Schedule, Seq, SessionId, SessionRecord, StreamId, Timestamp};

use crate::{
    Append, Reader, Result, Store, StoreMetric, StoredEvent, StreamWatch, Usage, Version, Versioned,
};

/// `S`'s sessions and logs, with none of its capabilities.
#[derive(Clone, Debug, Default)]
pub struct CoreOnly<S>(pub S);

impl<S: Store> Store for CoreOnly<S> {
    async fn create(&self, record: SessionRecord) -> Result<Version> {
        self.0.create(record).await
    }

    async fn load(&self, id: SessionId) -> Result<Option<Versioned<SessionRecord>>> {
        self.0.load(id).await
    }

    async fn compare_and_set(&self, expected: Version, record: SessionRecord) -> Result<Option<Version>> {
        self.0.compare_and_set(expected, record).await
    }

    async fn append(&self, event: Append<'_>) -> Result<EventId> {
        self.0.append(event).await
    }

    async fn read(
        &self,
        session: SessionId,
        stream: StreamId,
        after: Seq,
        max: usize,
        reader: Reader,
    ) -> Result<Vec<StoredEvent>> {
        self.0.read(session, stream, after, max, reader).await
    }

    async fn watch(&self, session: SessionId, stream: StreamId) -> Result<StreamWatch> {
        self.0.watch(session, stream).await
    }

    async fn remove(&self, id: SessionId) -> Result<()> {
        self.0.remove(id).await
    }

    async fn sessions(&self) -> Result<Vec<SessionId>> {
        self.0.sessions().await
    }

    fn usage(&self) -> Usage {
        self.0.usage()
    }

    fn retained_by(&self, session: SessionId) -> Option<u64> {
        self.0.retained_by(session)
    }

    fn metrics(&self) -> Vec<StoreMetric> {
        self.0.metrics()
    }

    async fn health(&self) -> Result<()> {
        self.0.health().await
    }

    async fn due(&self, now: Timestamp, schedule: &Schedule) -> Result<Vec<SessionId>> {
        self.0.due(now, schedule).await
    }
}
