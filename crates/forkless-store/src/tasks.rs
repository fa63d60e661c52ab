//! Task records (PROTOCOL section 13): what every store keeps of the tasks extension's tasks,
//! the [`TaskStore`] capability, and the in-process map the stores of one process keep them
//! in ([`TaskMap`]).
//!
//! A store keeps a task's [`TaskRecord`] under its id with a [`Version`], like a session's
//! record: [`TaskStore::create_task`] inserts it, [`TaskStore::replace_task`] replaces it only
//! at the version it was read at, and both return only once the write is durable in the
//! store's mode (a redb group's sync, a database's commit), so an id a client was given
//! resolves on every node sharing the store and after any crash. The store decides nothing:
//! every change is a transition of the core's record ([`transact_task`]), and what the loss
//! of an owner does is [`TaskRecord::on_owner_lost`]'s.

use core::future::Future;
use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use forkless_core::{TaskError, TaskId, TaskRecord, Timestamp};

use crate::{Error, MAX_CAS_ATTEMPTS, NodeName, Result, Version, Versioned};

/// The tasks a store keeps: a capability ([`crate::Store::tasks`]); the process keeps them in a
/// [`TaskMap`] for a store without it.
pub trait TaskStore: Send + Sync + 'static {
    /// Insert a new task at [`Version::INITIAL`], durable when this returns;
    /// [`Error::TaskExists`] if the id is taken.
    fn create_task(&self, task: &TaskRecord) -> impl Future<Output = Result<()>> + Send;

    /// The task and its version; `None` if unknown or expired and removed.
    fn load_task(&self, id: TaskId) -> impl Future<Output = Result<Option<Versioned<TaskRecord>>>> + Send;

    /// Replace the task if it is still stored at `expected`, durable when this returns: its new
    /// version, or `None` when another writer got there first (nothing written).
    fn replace_task(
        &self,
        expected: Version,
        task: &TaskRecord,
    ) -> impl Future<Output = Result<Option<Version>>> + Send;

    /// Ids of the tasks not yet ended whose owner is `node` (`None`: a store of one process,
    /// whose tasks name no node). Called before a process serves, these are the tasks its
    /// previous process left.
    fn open_tasks(&self, node: Option<&NodeName>) -> impl Future<Output = Result<Vec<TaskId>>> + Send;

    /// Remove every task whose time to live ended before `now`; how many.
    fn expire_tasks(&self, now: Timestamp) -> impl Future<Output = Result<u64>> + Send;
}

/// Load task `id`, apply `f` to it and write it back by compare-and-set, retrying on conflict
/// (`f` may run several times: it must be a transition of the record). The value of `f` and
/// the record as stored; [`Error::TaskUnknown`] if there is no such task, [`Error::Task`] if
/// `f` refused (nothing written).
pub async fn transact_task<S, R, F>(store: &S, id: TaskId, mut f: F) -> Result<(R, TaskRecord)>
where
    S: TaskStore + ?Sized,
    F: FnMut(&mut TaskRecord) -> Result<R, TaskError> + Send,
    R: Send,
{
    for _ in 0..MAX_CAS_ATTEMPTS {
        let Some(Versioned { version, mut value }) = store.load_task(id).await? else {
            return Err(Error::TaskUnknown);
        };
        let out = f(&mut value)?;
        if store.replace_task(version, &value).await?.is_some() {
            return Ok((out, value));
        }
    }
    Err(Error::Contended { attempts: MAX_CAS_ATTEMPTS })
}

/// The tasks of a store of one process, in memory: what [`crate::MemoryStore`] keeps them in,
/// and what a durable store of one process serves them from (journaling each write itself).
#[derive(Debug, Default)]
pub struct TaskMap {
    tasks: Mutex<HashMap<TaskId, Versioned<TaskRecord>>>,
}

impl TaskMap {
    fn tasks(&self) -> std::sync::MutexGuard<'_, HashMap<TaskId, Versioned<TaskRecord>>> {
        // Every change is one insert, replace or retain: a panic elsewhere leaves it whole.
        self.tasks.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Insert `task` unless its id is taken; `then` runs under the lock once it is in (a
    /// durable store journals the write there, in the order of the writes).
    pub fn create(&self, task: &TaskRecord, then: impl FnOnce(&TaskRecord)) -> Result<()> {
        let mut tasks = self.tasks();
        if tasks.contains_key(&task.id()) {
            return Err(Error::TaskExists);
        }
        tasks.insert(task.id(), Versioned { version: Version::INITIAL, value: task.clone() });
        then(task);
        Ok(())
    }

    /// The task and its version.
    pub fn load(&self, id: TaskId) -> Option<Versioned<TaskRecord>> {
        self.tasks().get(&id).cloned()
    }

    /// Replace the task if it is at `expected`; `then` runs under the lock once it is.
    pub fn replace(
        &self,
        expected: Version,
        task: &TaskRecord,
        then: impl FnOnce(&TaskRecord),
    ) -> Option<Version> {
        let mut tasks = self.tasks();
        let stored = tasks.get_mut(&task.id())?;
        if stored.version != expected {
            return None;
        }
        *stored = Versioned { version: expected.next(), value: task.clone() };
        then(task);
        Some(expected.next())
    }

    /// Insert or replace as a recovery read it back (at its stored version).
    pub fn restore(&self, task: Versioned<TaskRecord>) {
        self.tasks().insert(task.value.id(), task);
    }

    /// The tasks not ended whose owner is `node`.
    pub fn open(&self, node: Option<&str>) -> Vec<TaskId> {
        self.tasks()
            .values()
            .filter(|t| !t.value.status().is_terminal() && t.value.owner().node.as_deref() == node)
            .map(|t| t.value.id())
            .collect()
    }

    /// Remove the tasks whose time to live ended before `now`; `then` runs under the lock
    /// for each one removed.
    pub fn expire(&self, now: Timestamp, mut then: impl FnMut(TaskId)) -> u64 {
        let mut removed = 0;
        self.tasks().retain(|id, t| {
            let live = t.value.expires_at() > now;
            if !live {
                removed += 1;
                then(*id);
            }
            live
        });
        removed
    }

    /// How many tasks it holds.
    pub fn len(&self) -> usize {
        self.tasks().len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The tasks of one process, as a [`TaskStore`] (nothing journaled).
impl TaskStore for TaskMap {
    async fn create_task(&self, task: &TaskRecord) -> Result<()> {
        self.create(task, |_| {})
    }

    async fn load_task(&self, id: TaskId) -> Result<Option<Versioned<TaskRecord>>> {
        Ok(self.load(id))
    }

    async fn replace_task(&self, expected: Version, task: &TaskRecord) -> Result<Option<Version>> {
        Ok(self.replace(expected, task, |_| {}))
    }

    async fn open_tasks(&self, node: Option<&NodeName>) -> Result<Vec<TaskId>> {
        Ok(self.open(node.map(NodeName::as_str)))
    }

    async fn expire_tasks(&self, now: Timestamp) -> Result<u64> {
        Ok(self.expire(now, |_| {}))
    }
}
