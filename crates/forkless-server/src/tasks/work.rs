//! The handler's side of a task: [`TaskStarter`] turns a request's work into a task, and the
//! work talks back through its [`TaskContext`] (input requests, a status message,
//! cancellation).
//!
//! The work runs in a task of its own; its outcome becomes the task's `completed` result or
//! `failed` error, unless the task was cancelled or forgotten first (then the outcome is
//! dropped: an ended task never changes). A panicking work fails its task with `-32603`.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, PoisonError};

use forkless_core::TaskId;
use futures::FutureExt as _;
use serde_json::{Map, Value};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::{Cell, TaskError, TaskTable};
use crate::common::now;
use crate::jsonrpc::RpcError;

/// Starts a request's work as a task. A handler gets one from
/// [`crate::RequestContext::tasks`] only when the request declared the extension.
#[derive(Clone)]
pub struct TaskStarter {
    pub(crate) table: Arc<TaskTable>,
    pub(crate) principal: Option<String>,
}

impl std::fmt::Debug for TaskStarter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskStarter").finish_non_exhaustive()
    }
}

impl TaskStarter {
    /// Create a task, start `work` in a task of its own, and return the `CreateTaskResult`
    /// the handler answers the request with. The task exists (a `tasks/get` finds it) before
    /// this returns. `-32603` when the server already holds its maximum of tasks.
    pub fn start<F, Fut>(&self, work: F) -> Result<Value, RpcError>
    where
        F: FnOnce(TaskContext) -> Fut + Send + 'static,
        Fut: Future<Output = Result<Value, RpcError>> + Send + 'static,
    {
        let cell = self.table.create(self.principal.clone(), now())?;
        let created = cell.task().created_result();
        let ctx = TaskContext { cell: cell.clone() };
        tokio::spawn(async move {
            let outcome = AssertUnwindSafe(work(ctx))
                .catch_unwind()
                .await
                .unwrap_or_else(|_| Err(RpcError::internal("the task's work failed")));
            // Cancelled or already ended: the outcome comes too late and changes nothing.
            let _ = cell.task().on_finished(outcome, now());
        });
        Ok(created)
    }
}

/// Why [`TaskContext::input`] has no answers.
#[derive(Debug, thiserror::Error)]
pub enum TaskInputError {
    /// The task was cancelled (by the client, by expiry or by shutdown) while waiting.
    #[error("the task was cancelled")]
    Cancelled,
    /// The task's status does not allow asking now.
    #[error(transparent)]
    Refused(#[from] TaskError),
}

/// What a task's work holds.
pub struct TaskContext {
    cell: Arc<Cell>,
}

impl std::fmt::Debug for TaskContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("TaskContext").field(&self.id()).finish()
    }
}

impl TaskContext {
    /// The task's id.
    pub fn id(&self) -> TaskId {
        self.cell.task().id()
    }

    /// Cancelled by `tasks/cancel`, when the task's time to live ends, and at server shutdown.
    pub fn cancellation(&self) -> &CancellationToken {
        &self.cell.cancel
    }

    /// Ask the client for input: the task is `input_required` with `requests` (keys unique
    /// over the task's lifetime, values server-to-client requests such as
    /// `{"method": "elicitation/create", "params": …}`) until `tasks/update` has answered
    /// every one of them; resolves with the answers, by key.
    pub async fn input(&self, requests: Map<String, Value>) -> Result<Map<String, Value>, TaskInputError> {
        let (tx, rx) = oneshot::channel();
        {
            let mut task = self.cell.task();
            task.on_input_needed(requests, now())?;
            *self.cell.waiter.lock().unwrap_or_else(PoisonError::into_inner) = Some(tx);
        }
        tokio::select! {
            answers = rx => answers.map_err(|_| TaskInputError::Cancelled),
            () = self.cell.cancel.cancelled() => Err(TaskInputError::Cancelled),
        }
    }

    /// Say what the task is doing (its `statusMessage`).
    pub fn status_message(&self, message: impl Into<String>) -> Result<(), TaskError> {
        self.cell.task().on_message(message.into(), now())
    }
}
