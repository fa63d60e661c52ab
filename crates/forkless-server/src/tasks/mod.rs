//! The tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) in the 2026-07-28 revision:
//! a request the handler chooses to run as a task is answered at once with a
//! `CreateTaskResult`, and the client reads the task with `tasks/get`, answers its input
//! requests with `tasks/update` and cancels it with `tasks/cancel`.
//!
//! This module owns the node's table of tasks ([`TaskTable`]): creating a task (an id from the
//! OS CSPRNG, bound to the request's principal), finding one for a client (a task of another
//! principal reads as unknown, so nothing leaks), forgetting it after its time to live, and
//! answering the three methods. One task's status and wire shapes are [`state`]'s; the
//! handler's side (starting work as a task, asking for input) is [`work`]'s.
//!
//! A task lives in the process that created it: a restart forgets it (its `tasks/get` is then
//! `-32602`, never another task's answer), and another node does not know it.

mod state;
mod work;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use forkless_core::{OsEntropy, TaskId, Timestamp};
use serde_json::{Map, Value, json};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::jsonrpc::RpcError;

pub use state::TaskError;
pub use work::{TaskContext, TaskInputError, TaskStarter};

use state::{CancelOutcome, Task, Update};

/// The extension's identifier, as clients declare it and servers advertise it.
pub const EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// The methods the extension adds; every other `tasks/…` method is unknown (`-32601`).
pub(crate) const METHODS: [&str; 3] = ["tasks/get", "tasks/update", "tasks/cancel"];

/// Whether the extension is declared in `capabilities` (a client's, from a request's `_meta`).
pub(crate) fn declared(capabilities: &Value) -> bool {
    capabilities.get("extensions").and_then(|e| e.get(EXTENSION)).is_some()
}

/// The `-32021` error for a client that did not declare the extension, naming it.
pub fn missing_capability() -> RpcError {
    RpcError::new(crate::error::MISSING_REQUIRED_CLIENT_CAPABILITY, "Missing required client capability")
        .with_data(json!({ "requiredCapabilities": { "extensions": { EXTENSION: {} } } }))
}

/// The limits of the task table. Every field is a setting of [`crate::ServerConfig::tasks`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskLimits {
    /// How long a task is kept after it was created (`ttlMs`); then it is forgotten and, if
    /// still running, cancelled. Default 1 hour.
    pub ttl: Duration,
    /// The polling interval suggested to clients (`pollIntervalMs`). Default 1 s.
    pub poll_interval: Duration,
    /// Tasks held at once; at the limit a new one is refused with `-32603` (never by
    /// forgetting a task a client may still read). Default 10,000.
    pub max_tasks: usize,
}

impl Default for TaskLimits {
    fn default() -> Self {
        Self { ttl: Duration::from_secs(3600), poll_interval: Duration::from_secs(1), max_tasks: 10_000 }
    }
}

/// One task as the table holds it.
struct Cell {
    /// Who created it; only the same principal finds it.
    principal: Option<String>,
    task: Mutex<Task>,
    /// Cancelled by `tasks/cancel`, by expiry and by server shutdown.
    cancel: CancellationToken,
    /// Where the answers go while the work waits for input ([`TaskContext::input`]).
    waiter: Mutex<Option<oneshot::Sender<Map<String, Value>>>>,
}

impl Cell {
    fn task(&self) -> std::sync::MutexGuard<'_, Task> {
        // Every change to a task is one transition that either happens whole or not at all.
        self.task.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The tasks of this node.
pub(crate) struct TaskTable {
    cells: Mutex<HashMap<TaskId, Arc<Cell>>>,
    limits: TaskLimits,
    /// Server shutdown: every task's token is a child of it.
    shutdown: CancellationToken,
}

impl TaskTable {
    pub(crate) fn new(limits: TaskLimits, shutdown: CancellationToken) -> Self {
        Self { cells: Mutex::default(), limits, shutdown }
    }

    fn cells(&self) -> std::sync::MutexGuard<'_, HashMap<TaskId, Arc<Cell>>> {
        self.cells.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A new working task for `principal`, held before anyone can learn its id.
    fn create(&self, principal: Option<String>, now: Timestamp) -> Result<Arc<Cell>, RpcError> {
        let mut cells = self.cells();
        if cells.len() >= self.limits.max_tasks {
            Self::forget_expired(&mut cells, now);
        }
        if cells.len() >= self.limits.max_tasks {
            return Err(RpcError::internal(format!(
                "the server holds its maximum of {} tasks; try again later",
                self.limits.max_tasks
            )));
        }
        let id = TaskId::generate(&mut OsEntropy);
        let task = Task::new(id, now, self.limits.ttl, self.limits.poll_interval);
        let cell = Arc::new(Cell {
            principal,
            task: Mutex::new(task),
            cancel: self.shutdown.child_token(),
            waiter: Mutex::new(None),
        });
        cells.insert(id, cell.clone());
        Ok(cell)
    }

    /// Forget (and cancel) every task whose time to live has passed.
    fn forget_expired(cells: &mut HashMap<TaskId, Arc<Cell>>, now: Timestamp) {
        cells.retain(|_, cell| {
            let live = cell.task().expires_at() > now;
            if !live {
                cell.cancel.cancel();
            }
            live
        });
    }

    /// Forget the tasks whose time has passed (the server's sweeper calls this).
    pub(crate) fn sweep(&self, now: Timestamp) {
        Self::forget_expired(&mut self.cells(), now);
    }

    /// The task `params.taskId` names, if `principal` may see it and it has not expired.
    fn find(
        &self,
        params: Option<&Value>,
        principal: Option<&str>,
        now: Timestamp,
    ) -> Result<Arc<Cell>, RpcError> {
        let Some(text) = params.and_then(|p| p.get("taskId")).and_then(Value::as_str) else {
            return Err(RpcError::invalid_params("invalid params: taskId (a string) is required"));
        };
        let unknown =
            || RpcError::invalid_params(format!("Failed to retrieve task: Task not found ({text})"));
        let id = text.parse::<TaskId>().map_err(|_| unknown())?;
        let cell = self.cells().get(&id).cloned().ok_or_else(unknown)?;
        if cell.principal.as_deref() != principal {
            return Err(unknown());
        }
        if cell.task().expires_at() <= now {
            self.cells().remove(&id);
            cell.cancel.cancel();
            return Err(RpcError::invalid_params(format!(
                "Failed to retrieve task: Task has expired ({text})"
            )));
        }
        Ok(cell)
    }

    /// Answer `tasks/get`, `tasks/update` or `tasks/cancel` (one of [`METHODS`]) from a client
    /// whose request declared the extension.
    pub(crate) fn answer(
        &self,
        method: &str,
        params: Option<&Value>,
        principal: Option<&str>,
        now: Timestamp,
    ) -> Result<Value, RpcError> {
        let cell = self.find(params, principal, now)?;
        match method {
            "tasks/get" => Ok(cell.task().detailed()),
            "tasks/update" => {
                let Some(responses) = params.and_then(|p| p.get("inputResponses")).and_then(Value::as_object)
                else {
                    return Err(RpcError::invalid_params(
                        "invalid params: inputResponses (an object) is required",
                    ));
                };
                let update = cell.task().on_input_responses(responses, now);
                if let Update::Answered(answers) = update
                    && let Some(waiter) = cell.waiter.lock().unwrap_or_else(PoisonError::into_inner).take()
                {
                    let _ = waiter.send(answers);
                }
                Ok(json!({}))
            }
            "tasks/cancel" => {
                if cell.task().on_cancel_requested(now) == CancelOutcome::Cancelled {
                    cell.cancel.cancel();
                }
                Ok(json!({}))
            }
            other => Err(RpcError::method_not_found(other)),
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.cells().len()
    }
}

#[cfg(test)]
mod tests;
