//! A wrapper that makes any [`Database`] fail on demand, for testing what the shared store
//! does when the database does: a group commit refused before anything is applied, one
//! applied whose answer is lost, a session that cannot be read. It owns the faults, not what
//! the store does about them (the committer's).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use forkless_core::{Schedule, Seq, SessionId, SessionRecord, StreamId, Timestamp};

use super::{Batch, Committed, Database, Declared, LeaseOp, Loaded, OwnerFacts, Write, Written};
use crate::{Error, Result, SpendKey, Spent, Version};

use super::database::Read;
use forkless_core::Stream;

/// A failure to inject into the next matching call of a [`FaultyDatabase`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DbFault {
    /// The next group commit fails before anything is applied (a deadlock victim, an aborted
    /// transaction).
    Batch,
    /// The next group commit is applied, and then reported failed (the connection broke
    /// before the commit's answer arrived).
    BatchUnacknowledged,
    /// The next load of a session fails.
    Load,
    /// The next task write is acknowledged before it is written: it is applied at this
    /// database's next task call instead (a store that answers `CreateTaskResult` before its
    /// commit; for negative controls).
    TaskAckedBeforeWrite,
}

/// A task write acknowledged and not yet applied ([`DbFault::TaskAckedBeforeWrite`]).
#[derive(Debug)]
struct Deferred {
    id: forkless_core::TaskId,
    record: Vec<u8>,
    node: Option<String>,
    open: bool,
    expires: Timestamp,
    expected: Option<Version>,
}

/// Any [`Database`], with failures injected by `FaultyDatabase::inject`.
#[derive(Debug)]
pub struct FaultyDatabase<D> {
    inner: D,
    faults: Arc<Mutex<VecDeque<DbFault>>>,
    deferred: Mutex<Option<Deferred>>,
}

impl<D: Database> FaultyDatabase<D> {
    /// Wrap `inner`, and a handle that arms faults in it (none armed yet).
    pub fn new(inner: D) -> (Self, DbFaults) {
        let faults = Arc::<Mutex<VecDeque<DbFault>>>::default();
        (Self { inner, faults: faults.clone(), deferred: Mutex::default() }, DbFaults(faults))
    }

    /// Apply a task write acknowledged earlier, if one waits.
    async fn flush_deferred(&self) -> Result<()> {
        let deferred = self.deferred.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(d) = deferred {
            let row = super::TaskRow {
                id: d.id,
                record: &d.record,
                node: d.node.as_deref(),
                open: d.open,
                expires: d.expires,
            };
            self.inner.put_task(row, d.expected).await?;
        }
        Ok(())
    }

    fn take(&self, kinds: &[DbFault]) -> Option<DbFault> {
        let mut faults = self.faults.lock().unwrap_or_else(|p| p.into_inner());
        let at = faults.iter().position(|f| kinds.contains(f))?;
        faults.remove(at)
    }
}

/// Arms faults in the [`FaultyDatabase`] it came with.
#[derive(Clone, Debug)]
pub struct DbFaults(Arc<Mutex<VecDeque<DbFault>>>);

impl DbFaults {
    /// Arm `fault` for the next matching call (faults of one kind fire in order).
    pub fn inject(&self, fault: DbFault) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push_back(fault);
    }

    /// How many armed faults have not fired yet.
    pub fn pending(&self) -> usize {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

fn injected(what: &str) -> Error {
    Error::Backend(format!("injected fault: {what}"))
}

impl<D: Database> Database for FaultyDatabase<D> {
    fn shards(&self) -> usize {
        self.inner.shards()
    }
    fn shard(&self, session: SessionId) -> usize {
        self.inner.shard(session)
    }
    async fn load(&self, id: SessionId) -> Result<Option<(Version, SessionRecord)>> {
        if self.take(&[DbFault::Load]).is_some() {
            return Err(injected("load"));
        }
        self.inner.load(id).await
    }
    async fn load_since(&self, id: SessionId, known: Option<(Version, u64)>) -> Result<Loaded> {
        if self.take(&[DbFault::Load]).is_some() {
            return Err(injected("load"));
        }
        self.inner.load_since(id, known).await
    }
    async fn insert(&self, record: &SessionRecord, owner: Option<&str>) -> Result<()> {
        self.inner.insert(record, owner).await
    }
    async fn write(&self, write: Write<'_>) -> Result<Written> {
        self.inner.write(write).await
    }
    async fn write_batch(&self, batch: Batch<'_>) -> Result<Committed> {
        match self.take(&[DbFault::Batch, DbFault::BatchUnacknowledged]) {
            Some(DbFault::Batch) => Err(injected("group commit refused")),
            Some(_) => {
                self.inner.write_batch(batch).await?;
                Err(injected("group commit applied, its answer lost"))
            }
            None => self.inner.write_batch(batch).await,
        }
    }
    async fn oldest_sizes(
        &self,
        session: SessionId,
        stream: StreamId,
        from: Seq,
        n: u64,
    ) -> Result<Vec<u64>> {
        self.inner.oldest_sizes(session, stream, from, n).await
    }
    async fn read(&self, session: SessionId, stream: StreamId, after: Seq, max: usize) -> Result<Read> {
        self.inner.read(session, stream, after, max).await
    }
    async fn stream(&self, session: SessionId, stream: StreamId) -> Result<Stream> {
        self.inner.stream(session, stream).await
    }
    async fn remove(&self, id: SessionId, hint: Option<String>) -> Result<()> {
        self.inner.remove(id, hint).await
    }
    async fn sessions(&self) -> Result<Vec<SessionId>> {
        self.inner.sessions().await
    }
    async fn due(&self, now: Timestamp, schedule: &Schedule) -> Result<Vec<SessionId>> {
        self.inner.due(now, schedule).await
    }
    async fn health(&self) -> Result<()> {
        self.inner.health().await
    }
    async fn owned(&self, node: &str) -> Result<Vec<SessionId>> {
        self.inner.owned(node).await
    }
    async fn ownerless(&self) -> Result<Vec<(SessionId, String)>> {
        self.inner.ownerless().await
    }
    async fn owner(&self, session: SessionId) -> Result<Option<OwnerFacts>> {
        self.inner.owner(session).await
    }
    async fn claim(&self, session: SessionId, from: &str, to: &str) -> Result<bool> {
        self.inner.claim(session, from, to).await
    }
    async fn lease(&self, op: LeaseOp<'_>) -> Result<bool> {
        self.inner.lease(op).await
    }
    async fn spend(
        &self,
        key: SpendKey,
        issued: Timestamp,
        until: Timestamp,
        now: Timestamp,
    ) -> Result<Spent> {
        self.inner.spend(key, issued, until, now).await
    }
    async fn publish(&self, hint: &str) -> Result<()> {
        self.inner.publish(hint).await
    }
    async fn task(&self, id: forkless_core::TaskId) -> Result<Option<(Version, Vec<u8>)>> {
        let found = self.inner.task(id).await;
        self.flush_deferred().await?;
        found
    }
    async fn put_task(&self, row: super::TaskRow<'_>, expected: Option<Version>) -> Result<bool> {
        self.flush_deferred().await?;
        if self.take(&[DbFault::TaskAckedBeforeWrite]).is_some() {
            let deferred = Deferred {
                id: row.id,
                record: row.record.to_vec(),
                node: row.node.map(str::to_owned),
                open: row.open,
                expires: row.expires,
                expected,
            };
            *self.deferred.lock().unwrap_or_else(|p| p.into_inner()) = Some(deferred);
            return Ok(true);
        }
        self.inner.put_task(row, expected).await
    }
    async fn open_tasks(&self, node: Option<&str>) -> Result<Vec<forkless_core::TaskId>> {
        self.inner.open_tasks(node).await
    }
    async fn lapsed_tasks(&self) -> Result<Vec<(forkless_core::TaskId, String)>> {
        self.inner.lapsed_tasks().await
    }
    async fn expire_tasks(&self, now: Timestamp) -> Result<u64> {
        self.inner.expire_tasks(now).await
    }
    fn filters_hints(&self) -> bool {
        self.inner.filters_hints()
    }
    async fn declare(&self, session: SessionId, node: &str, owner: Option<&str>) -> Result<Option<Declared>> {
        self.inner.declare(session, node, owner).await
    }
    async fn withdraw(&self, node: &str, sessions: &[SessionId]) -> Result<()> {
        self.inner.withdraw(node, sessions).await
    }
}
