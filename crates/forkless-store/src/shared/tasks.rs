//! Tasks on a database shared by many nodes: the [`TaskStore`] of [`SharedStore`], each
//! operation one statement or script of the [`Database`]. A task's row is its encoded record
//! and the columns it is found by (its node while open, its expiry); a replace is a
//! compare-and-set on its version in the database, so of two nodes writing one task, one
//! wins, and a write returns once committed. Nothing is cached: a `tasks/get` on any node
//! reads what the database holds now.
//!
//! It owns the mapping from records to rows, not the queries (a backend's) nor any decision
//! (the core's [`forkless_core::TaskRecord`]).

use forkless_core::{TaskId, TaskRecord, Timestamp};

use super::{Database, SharedStore, TaskRow};
use crate::codec::{decode_task, encode_task};
use crate::{Error, NodeName, Result, TaskStore, Version, Versioned};

fn row<'a>(task: &'a TaskRecord, record: &'a [u8]) -> TaskRow<'a> {
    let open = !task.status().is_terminal();
    TaskRow {
        id: task.id(),
        record,
        node: task.owner().node.as_deref().filter(|_| open),
        open,
        expires: task.expires_at(),
    }
}

impl<D: Database> TaskStore for SharedStore<D> {
    async fn create_task(&self, task: &TaskRecord) -> Result<()> {
        self.inner.fence()?;
        let bytes = encode_task(task);
        if self.inner.db.put_task(row(task, &bytes), None).await? { Ok(()) } else { Err(Error::TaskExists) }
    }

    async fn load_task(&self, id: TaskId) -> Result<Option<Versioned<TaskRecord>>> {
        self.inner.fence()?;
        let Some((version, bytes)) = self.inner.db.task(id).await? else { return Ok(None) };
        let value = decode_task(&bytes)?;
        if value.id() != id {
            return Err(Error::Corrupt(format!("task {id}'s row holds task {}", value.id())));
        }
        Ok(Some(Versioned { version, value }))
    }

    async fn replace_task(&self, expected: Version, task: &TaskRecord) -> Result<Option<Version>> {
        self.inner.fence()?;
        let bytes = encode_task(task);
        let stored = self.inner.db.put_task(row(task, &bytes), Some(expected)).await?;
        Ok(stored.then(|| expected.next()))
    }

    async fn open_tasks(&self, node: Option<&NodeName>) -> Result<Vec<TaskId>> {
        self.inner.db.open_tasks(node.map(NodeName::as_str)).await
    }

    async fn expire_tasks(&self, now: Timestamp) -> Result<u64> {
        self.inner.fence()?;
        self.inner.db.expire_tasks(now).await
    }
}
