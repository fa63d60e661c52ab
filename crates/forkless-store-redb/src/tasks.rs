//! Tasks in the durable store: served from an in-memory [`forkless_store::TaskMap`], every
//! write journaled as one log write ([`Op::PutTask`], [`Op::DropTask`]) and read back at
//! recovery (`super::recovery`). It owns the [`forkless_store::TaskStore`] of [`RedbStore`],
//! not the tables (`super::checkpoint`) nor the encoding (`forkless_store::codec`).

use forkless_core::Timestamp;
use forkless_store::{Result, Version, Versioned};

use super::RedbStore;
use super::group::{Ack, Write};
use super::op::Op;

/// Tasks are served from memory and journaled like sessions; every write waits for its
/// group's sync in either mode (a `CreateTaskResult` leaves only once the task survives a
/// crash), and starts that sync at once rather than at the end of the batch window.
impl forkless_store::TaskStore for RedbStore {
    async fn create_task(&self, task: &forkless_core::TaskRecord) -> Result<()> {
        self.check()?;
        let (waiter, done) = Self::waiter(!self.inner.early_delivery);
        self.inner.tasks.create(task, |t| self.journal_task(t, waiter))?;
        self.settled(done).await
    }

    async fn load_task(
        &self,
        id: forkless_core::TaskId,
    ) -> Result<Option<Versioned<forkless_core::TaskRecord>>> {
        self.check()?;
        Ok(self.inner.tasks.load(id))
    }

    async fn replace_task(
        &self,
        expected: Version,
        task: &forkless_core::TaskRecord,
    ) -> Result<Option<Version>> {
        self.check()?;
        let (waiter, done) = Self::waiter(!self.inner.early_delivery);
        let stored = self.inner.tasks.replace(expected, task, |t| self.journal_task(t, waiter));
        if stored.is_some() {
            self.settled(done).await?;
        }
        Ok(stored)
    }

    async fn open_tasks(
        &self,
        node: Option<&forkless_store::NodeName>,
    ) -> Result<Vec<forkless_core::TaskId>> {
        self.check()?;
        Ok(self.inner.tasks.open(node.map(forkless_store::NodeName::as_str)))
    }

    async fn expire_tasks(&self, now: Timestamp) -> Result<u64> {
        self.check()?;
        let mut drops = Vec::new();
        let removed =
            self.inner.tasks.expire(now, |id| drops.push(Write::Op(Op::DropTask { id: *id.as_bytes() })));
        if !drops.is_empty() {
            // Nobody waits: a task forgotten again after a crash is forgotten at the next sweep.
            let _ = self.inner.inbox.send(drops, [], None);
        }
        Ok(removed)
    }
}

impl RedbStore {
    /// Queue a task's write (under the task map's lock, so in the order of the writes), to be
    /// acknowledged to `waiter` once synced.
    fn journal_task(&self, task: &forkless_core::TaskRecord, waiter: Option<Ack>) {
        let op = Op::PutTask { id: *task.id().as_bytes(), record: forkless_store::codec::encode_task(task) };
        // Closed: the store is closing; the waiter dropped unsent then asks a barrier.
        let _ = self.inner.inbox.send([Write::Op(op)], [], waiter);
    }
}
