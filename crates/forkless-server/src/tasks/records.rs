//! The task records of the server's one concrete store (as [`Equipped`]: the process keeps
//! them for a store without tasks), reached without its type (the task
//! table and the handler's handles are not generic), and the compare-and-set loop that applies
//! one transition of the core's [`TaskRecord`] to a stored task.
//!
//! It owns that indirection, not what a task is (the core's) nor where it is stored (the
//! store's [`TaskStore`]).

use std::sync::Arc;

use forkless_core::{TaskError, TaskId, TaskRecord, Timestamp};
use forkless_store::{
    Equipped, Error, MAX_CAS_ATTEMPTS, NodeName, Result, Store, TaskStore, Version, Versioned,
};

use crate::session::BoxFuture;

/// [`TaskStore`] and the node's part of [`forkless_store::Ownership`], object-safe.
pub(crate) trait Records: Send + Sync + 'static {
    fn create<'a>(&'a self, task: &'a TaskRecord) -> BoxFuture<'a, Result<()>>;
    fn load(&self, id: TaskId) -> BoxFuture<'_, Result<Option<Versioned<TaskRecord>>>>;
    fn replace<'a>(
        &'a self,
        expected: Version,
        task: &'a TaskRecord,
    ) -> BoxFuture<'a, Result<Option<Version>>>;
    fn open(&self, node: Option<NodeName>) -> BoxFuture<'_, Result<Vec<TaskId>>>;
    fn lapsed(&self) -> BoxFuture<'_, Result<Vec<(TaskId, NodeName)>>>;
    fn expire(&self, now: Timestamp) -> BoxFuture<'_, Result<u64>>;
    /// This node's name, the owner of the tasks it creates (`None` in one process).
    fn node(&self) -> Option<NodeName>;
}

impl<S: Store> Records for Arc<Equipped<S>> {
    fn create<'a>(&'a self, task: &'a TaskRecord) -> BoxFuture<'a, Result<()>> {
        Box::pin(self.create_task(task))
    }
    fn load(&self, id: TaskId) -> BoxFuture<'_, Result<Option<Versioned<TaskRecord>>>> {
        Box::pin(self.load_task(id))
    }
    fn replace<'a>(
        &'a self,
        expected: Version,
        task: &'a TaskRecord,
    ) -> BoxFuture<'a, Result<Option<Version>>> {
        Box::pin(self.replace_task(expected, task))
    }
    fn open(&self, node: Option<NodeName>) -> BoxFuture<'_, Result<Vec<TaskId>>> {
        Box::pin(async move { self.open_tasks(node.as_ref()).await })
    }
    fn lapsed(&self) -> BoxFuture<'_, Result<Vec<(TaskId, NodeName)>>> {
        Box::pin(Equipped::lapsed_tasks(self))
    }
    fn expire(&self, now: Timestamp) -> BoxFuture<'_, Result<u64>> {
        Box::pin(self.expire_tasks(now))
    }
    fn node(&self) -> Option<NodeName> {
        Equipped::node(self)
    }
}

/// Load task `id`, apply `f` and store the result by compare-and-set, retrying on conflict:
/// `f`'s value and the record as stored. [`Error::TaskUnknown`] if there is none,
/// [`Error::Task`] if `f` refused (nothing written).
pub(crate) async fn transact<R>(
    records: &dyn Records,
    id: TaskId,
    mut f: impl FnMut(&mut TaskRecord) -> Result<R, TaskError> + Send,
) -> Result<(R, TaskRecord)> {
    for _ in 0..MAX_CAS_ATTEMPTS {
        let Some(Versioned { version, mut value }) = records.load(id).await? else {
            return Err(Error::TaskUnknown);
        };
        let out = f(&mut value)?;
        if records.replace(version, &value).await?.is_some() {
            return Ok((out, value));
        }
    }
    Err(Error::Contended { attempts: MAX_CAS_ATTEMPTS })
}
