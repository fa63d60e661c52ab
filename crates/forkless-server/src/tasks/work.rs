//! The handler's side of a task: [`TaskStarter`] turns a request's work into a task, and the
//! work talks back through its [`TaskContext`] (input requests, a status message,
//! cancellation).
//!
//! A task is created in the store before its `CreateTaskResult` is returned, so a `tasks/get`
//! for it resolves on every node once the client has the id. Its work runs in a task of its
//! own; its outcome becomes the task's `completed` result or `failed` error, written under the
//! attempt's epoch, so an outcome that comes after a cancel, an expiry or a takeover changes
//! nothing. A panicking work fails its task with `-32603`.
//!
//! What the loss of the process running the work does is declared when the task starts:
//! [`TaskStarter::start`] (the default) has it end `failed`/`owner_lost`;
//! [`TaskStarter::start_restartable`] keeps the work's inputs with the task and has exactly one
//! successor run [`crate::Handler::run_task`] on them again. A restartable work asks for input
//! through [`TaskContext::input`], which answers a request the client already answered from the
//! task's record, so a work that runs again replays its earlier rounds without asking twice.

use std::collections::BTreeMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use forkless_core::task::TaskStatus;
use forkless_core::{
    Epoch, NewTask, OnOwnerLost, OsEntropy, Outcome, TaskError, TaskId, TaskOwner, TaskRecord,
};
use futures::FutureExt as _;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use super::{Live, TaskTable, records::transact, store_failed, wire};
use crate::clock::now;
use crate::jsonrpc::RpcError;
use crate::session::BoxFuture;

/// Starts a request's work as a task. A handler gets one from
/// [`crate::RequestContext::tasks`] only when the request declared the extension.
#[derive(Clone)]
pub struct TaskStarter {
    pub(crate) table: Arc<TaskTable>,
    pub(crate) principal: Option<String>,
    /// Whose share of the tasks a new one counts against: the principal, else the client's
    /// address (`crate::quota`); `None` when neither is known.
    pub(crate) share: Option<Arc<str>>,
}

impl std::fmt::Debug for TaskStarter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskStarter").finish_non_exhaustive()
    }
}

impl TaskStarter {
    /// Create a task, start `work` in a task of its own, and return the `CreateTaskResult`
    /// the handler answers the request with. The task is stored (durable in the store's mode:
    /// a `tasks/get` finds it on every node) before this returns. If the process running the
    /// work is lost, the task ends `failed` with reason `owner_lost`: the work is never run
    /// twice. `-32603` when this node or this principal runs its maximum of tasks, or the store
    /// failed.
    pub async fn start<F, Fut>(&self, work: F) -> Result<Value, RpcError>
    where
        F: FnOnce(TaskContext) -> Fut + Send + 'static,
        Fut: Future<Output = Result<Value, RpcError>> + Send + 'static,
    {
        let (task, live) = self.create(OnOwnerLost::Fail, None).await?;
        let ctx = TaskContext { table: self.table.clone(), live, id: task.id() };
        spawn(ctx.clone_handle(), Box::pin(work(ctx)));
        Ok(wire::created_result(&task))
    }

    /// [`Self::start`] for restartable work: `inputs` are kept with the task and the work is
    /// the handler's [`crate::Handler::run_task`] on them. If the process running it is lost,
    /// exactly one successor (this process after a restart, or another node after a takeover)
    /// runs it again under a new epoch; the work must be safe to run again (idempotent), and
    /// reads the input the client already gave from [`TaskContext::input`].
    pub async fn start_restartable(&self, inputs: Value) -> Result<Value, RpcError> {
        let Some(runner) = self.table.runner.get().cloned() else {
            return Err(RpcError::internal("restartable tasks need a running server"));
        };
        let (task, live) = self.create(OnOwnerLost::Restart, Some(wire::text(&inputs))).await?;
        let ctx = TaskContext { table: self.table.clone(), live, id: task.id() };
        spawn(ctx.clone_handle(), runner(inputs, ctx));
        Ok(wire::created_result(&task))
    }

    async fn create(
        &self,
        policy: OnOwnerLost,
        inputs: Option<String>,
    ) -> Result<(TaskRecord, Arc<Live>), RpcError> {
        let table = &self.table;
        let task = TaskRecord::new(NewTask {
            id: TaskId::generate(&mut OsEntropy),
            kind: forkless_core::TaskKind::Task,
            principal: self.principal.clone(),
            owner: TaskOwner { node: table.records.node().map(|n| n.to_string()), epoch: Epoch::new(1) },
            on_owner_lost: policy,
            inputs,
            ttl: table.limits.ttl,
            poll_interval: table.limits.poll_interval,
            now: now(),
        });
        // Registered first, so its work can never finish before the table knows it.
        let live = table.admit(&task, self.share.clone())?;
        if let Err(e) = table.records.create(&task).await {
            table.end_live(task.id(), live.epoch);
            return Err(store_failed(&e));
        }
        live.stored();
        crate::metrics::Metrics::inc(&table.metrics.tasks_created);
        Ok((task, live))
    }
}

/// Run `work` for `ctx`'s task in a task of its own, and write its outcome under the attempt's
/// epoch.
fn spawn(ctx: TaskContext, work: BoxFuture<'static, Result<Value, RpcError>>) {
    tokio::spawn(async move {
        let outcome = AssertUnwindSafe(work)
            .catch_unwind()
            .await
            .unwrap_or_else(|_| Err(RpcError::internal("the task's work failed")));
        let outcome = match outcome {
            Ok(result) => Outcome::Result(wire::text(&result)),
            Err(error) => Outcome::Error(wire::text(&error.to_json())),
        };
        let epoch = ctx.live.epoch;
        match transact(&*ctx.table.records, ctx.id, |t| t.on_finished(outcome.clone(), epoch, now())).await {
            // Cancelled, expired or taken over: the outcome comes too late and changes nothing.
            Ok(_) | Err(forkless_store::Error::Task(_) | forkless_store::Error::TaskUnknown) => {}
            Err(e) => {
                tracing::warn!(task = %ctx.id, error = %e, "a task's outcome could not be stored; it is settled when its owner is found lost");
            }
        }
        ctx.table.end_live(ctx.id, epoch);
    });
}

/// Run `task`'s work again here (a successor settled its lost owner).
pub(super) fn restart(table: &Arc<TaskTable>, task: &TaskRecord) {
    let Some(runner) = table.runner.get().cloned() else { return };
    let inputs = task.inputs().map_or(Value::Null, wire::value);
    let live = table.start_live(task);
    live.stored();
    let ctx = TaskContext { table: table.clone(), live, id: task.id() };
    spawn(ctx.clone_handle(), runner(inputs, ctx));
}

/// Why [`TaskContext::input`] has no answers.
#[derive(Debug, thiserror::Error)]
pub enum TaskInputError {
    /// The task was cancelled (by the client, by expiry, by a takeover or by shutdown) while
    /// waiting.
    #[error("the task was cancelled")]
    Cancelled,
    /// The task's status does not allow asking now.
    #[error(transparent)]
    Refused(#[from] TaskError),
    /// The store failed.
    #[error("the task store failed: {0}")]
    Store(String),
}

/// What a task's work holds.
pub struct TaskContext {
    table: Arc<TaskTable>,
    live: Arc<Live>,
    id: TaskId,
}

impl std::fmt::Debug for TaskContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("TaskContext").field(&self.id).field(&self.live.epoch).finish()
    }
}

impl TaskContext {
    fn clone_handle(&self) -> Self {
        Self { table: self.table.clone(), live: self.live.clone(), id: self.id }
    }

    /// The task's id.
    pub fn id(&self) -> TaskId {
        self.id
    }

    /// The attempt this work runs as: 1 for the first, one more for each restart.
    pub fn attempt(&self) -> u64 {
        self.live.epoch.get()
    }

    /// Cancelled by `tasks/cancel`, when the task's time to live ends, when another owner took
    /// the task over, and at server shutdown.
    pub fn cancellation(&self) -> &CancellationToken {
        &self.live.cancel
    }

    /// Ask the client for input: the task is `input_required` with `requests` (keys unique over
    /// the task's lifetime, values server-to-client requests such as
    /// `{"method": "elicitation/create", "params": …}`) until `tasks/update` has answered every
    /// one of them; resolves with the answers, by key. Requests the client already answered
    /// (a work that runs again after a restart) are answered from the task at once; a work
    /// that runs again while the same requests are outstanding waits for them.
    pub async fn input(&self, requests: Map<String, Value>) -> Result<Map<String, Value>, TaskInputError> {
        let keys: Vec<String> = requests.keys().cloned().collect();
        let asked = wire::texts(&requests);
        let records = &*self.table.records;
        loop {
            let changed = self.live.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let Some(task) = records.load(self.id).await.map_err(|e| TaskInputError::Store(e.to_string()))?
            else {
                return Err(TaskInputError::Cancelled);
            };
            let task = task.value;
            if task.status().is_terminal() || task.owner().epoch != self.live.epoch {
                return Err(TaskInputError::Cancelled);
            }
            let answered = |k: &String| task.answers().contains_key(k);
            if keys.iter().all(answered) {
                let mine: BTreeMap<String, String> = task
                    .answers()
                    .iter()
                    .filter(|(k, _)| asked.contains_key(*k))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                return Ok(wire::object(&mine));
            }
            let unanswered: BTreeMap<String, String> =
                asked.iter().filter(|(k, _)| !answered(k)).map(|(k, v)| (k.clone(), v.clone())).collect();
            let waiting_already = matches!(task.status(), TaskStatus::InputRequired(w)
                if w.outstanding.keys().eq(unanswered.keys()));
            if !waiting_already {
                let epoch = self.live.epoch;
                match transact(records, self.id, |t| t.on_input_needed(unanswered.clone(), epoch, now()))
                    .await
                {
                    Ok(_) => {}
                    Err(forkless_store::Error::Task(e)) => return Err(TaskInputError::Refused(e)),
                    Err(forkless_store::Error::TaskUnknown) => return Err(TaskInputError::Cancelled),
                    Err(e) => return Err(TaskInputError::Store(e.to_string())),
                }
                continue;
            }
            // Answers given on this node wake it at once; on another node, the next poll.
            tokio::select! {
                () = &mut changed => {}
                () = tokio::time::sleep(task.poll_interval()) => {}
                () = self.live.cancel.cancelled() => return Err(TaskInputError::Cancelled),
            }
        }
    }

    /// Say what the task is doing (its `statusMessage`).
    pub async fn status_message(&self, message: impl Into<String>) -> Result<(), TaskInputError> {
        let message = message.into();
        let epoch = self.live.epoch;
        match transact(&*self.table.records, self.id, |t| t.on_message(message.clone(), epoch, now())).await {
            Ok(_) => Ok(()),
            Err(forkless_store::Error::Task(e)) => Err(TaskInputError::Refused(e)),
            Err(e) => Err(TaskInputError::Store(e.to_string())),
        }
    }
}
