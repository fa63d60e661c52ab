//! The tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) in the 2026-07-28 revision:
//! a request the handler chooses to run as a task is answered with a `CreateTaskResult`, and
//! the client reads the task with `tasks/get`, answers its input requests with `tasks/update`
//! and cancels it with `tasks/cancel` (PROTOCOL section 13).
//!
//! A task lives in the store ([`forkless_store::TaskStore`]): every change is a transition of
//! the core's [`TaskRecord`] written by compare-and-set, durable before it returns, so a task
//! id resolves on every node sharing the store and after any restart, and a `tasks/get` is one
//! store read. This module owns the node's `TaskTable`: a thin cache of the work running
//! here (its cancellation and its wake-up, by task), creating tasks (ids from the OS CSPRNG,
//! bound to the request's principal; limits per node and per principal), answering the three
//! methods, expiry, and settling the tasks a lost owner left (a restart's, a lapsed node's) by
//! each task's policy, decided by the core ([`TaskRecord::on_owner_lost`]). The wire shapes
//! are `wire`'s; the handler's side (starting work, asking for input) is `work`'s.

mod keyed;
mod records;
mod wire;
mod work;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use forkless_core::{Epoch, Settlement, TaskId, TaskKind, TaskRecord, Timestamp};
use forkless_store::NodeName;
use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::jsonrpc::RpcError;
use crate::session::BoxFuture;

pub use forkless_core::TaskError;
pub(crate) use keyed::{Claim, Key};
pub use keyed::{IDEMPOTENCY_EXTENSION, IDEMPOTENCY_KEY, IdempotencyLimits};
pub(crate) use records::Records;
pub use work::{TaskContext, TaskInputError, TaskStarter};

use records::transact;

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

/// The limits of tasks. Every field is a setting of [`crate::ServerConfig::tasks`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskLimits {
    /// How long a task is kept after it was created (`ttlMs`); then it is forgotten and, if
    /// still running, cancelled. Default 1 hour.
    pub ttl: Duration,
    /// The polling interval suggested to clients (`pollIntervalMs`) for a new task, an ended
    /// one, and one working for less than ten times it. Default 1 s.
    pub poll_interval: Duration,
    /// The longest interval suggested: a task working longer is suggested a tenth of its
    /// age, up to this, so long work is polled less. Default 5 s.
    pub max_poll_interval: Duration,
    /// Tasks whose work runs on this node at once; at the limit a new one is refused with
    /// `-32603` (never by forgetting a task a client may still read). Default 10,000.
    pub max_tasks: usize,
    /// Of those, the most one principal may hold: per verified subject, else per client
    /// address (`X-Forwarded-For` believed only from a trusted proxy, as for sessions).
    /// Default 1,000.
    pub max_tasks_per_principal: usize,
}

impl Default for TaskLimits {
    fn default() -> Self {
        Self {
            ttl: Duration::from_secs(3600),
            poll_interval: Duration::from_secs(1),
            max_poll_interval: Duration::from_secs(5),
            max_tasks: 10_000,
            max_tasks_per_principal: 1_000,
        }
    }
}

/// On a store shared by many nodes, the work running here is checked against the store's list
/// of this node's open tasks every this many sweeps: the fallback that stops work a cancel or
/// a takeover on another node ended.
const RECHECK_EVERY: u64 = 8;

/// Runs a restartable task's work: the handler's [`crate::Handler::run_task`].
pub(crate) type Runner =
    Arc<dyn Fn(Value, TaskContext) -> BoxFuture<'static, Result<Value, RpcError>> + Send + Sync>;

/// One task whose work runs on this node.
pub(crate) struct Live {
    /// A task, or a keyed request (which no task limit counts).
    kind: TaskKind,
    /// Whose share it counts against (`crate::quota`).
    share: Option<Arc<str>>,
    /// The attempt this work runs under: its writes are refused once another owner took over.
    epoch: Epoch,
    expires: Timestamp,
    /// Cancelled by `tasks/cancel`, by expiry, by a takeover seen here and by server shutdown.
    cancel: CancellationToken,
    /// Woken when the task's record changed on this node (answers arrived).
    changed: Notify,
    /// Whether the store acknowledged the task (its creation, or the settlement that moved it
    /// here): only then can its absence from this node's open tasks mean it ended elsewhere.
    stored: std::sync::atomic::AtomicBool,
}

impl Live {
    pub(crate) fn stored(&self) {
        self.stored.store(true, std::sync::atomic::Ordering::Release);
    }
}

/// The tasks of this node: the store's records and the work running here.
pub(crate) struct TaskTable {
    records: Box<dyn Records>,
    live: Mutex<HashMap<TaskId, Arc<Live>>>,
    limits: TaskLimits,
    keys: IdempotencyLimits,
    /// Server shutdown: every work's token is a child of it.
    shutdown: CancellationToken,
    runner: OnceLock<Runner>,
    metrics: Arc<crate::metrics::Metrics>,
}

/// The refusal of an id that names no task the asker may read.
fn unknown(text: &str) -> RpcError {
    RpcError::invalid_params(format!("Failed to retrieve task: Task not found ({text})"))
}

fn store_failed(e: &forkless_store::Error) -> RpcError {
    RpcError::internal(format!("the task store failed: {e}"))
}

impl TaskTable {
    pub(crate) fn new(
        records: Box<dyn Records>,
        limits: TaskLimits,
        keys: IdempotencyLimits,
        shutdown: CancellationToken,
        metrics: Arc<crate::metrics::Metrics>,
    ) -> Self {
        Self { records, live: Mutex::default(), limits, keys, shutdown, runner: OnceLock::new(), metrics }
    }

    /// Where restartable work is run from (the handler); set once, when the server starts.
    pub(crate) fn set_runner(&self, runner: Runner) {
        let _ = self.runner.set(runner);
    }

    fn live(&self) -> std::sync::MutexGuard<'_, HashMap<TaskId, Arc<Live>>> {
        // Every change is one insert or remove: a panic elsewhere leaves the map whole.
        self.live.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Register the work of new task `task` as running here, within the limits (checked and
    /// taken under one lock, so two creations racing for the last place cannot both have it).
    /// `share`: whose share it counts against (`crate::quota`). Refusals carry
    /// `data.reason` `max_tasks` or `max_tasks_per_principal`.
    fn admit(&self, task: &TaskRecord, share: Option<Arc<str>>) -> Result<Arc<Live>, RpcError> {
        let mut live = self.live();
        let tasks = || live.values().filter(|l| l.kind == TaskKind::Task);
        if tasks().count() >= self.limits.max_tasks {
            self.metrics.capacity_refused("max_tasks");
            return Err(RpcError::internal(format!(
                "the server runs its maximum of {} tasks; try again later",
                self.limits.max_tasks
            ))
            .with_data(serde_json::json!({ "reason": "max_tasks" })));
        }
        let mine = tasks().filter(|l| l.share == share).count();
        if mine >= self.limits.max_tasks_per_principal {
            self.metrics.capacity_refused("max_tasks_per_principal");
            return Err(RpcError::internal(format!(
                "this principal runs its maximum of {} tasks; try again later",
                self.limits.max_tasks_per_principal
            ))
            .with_data(serde_json::json!({ "reason": "max_tasks_per_principal" })));
        }
        let entry = self.new_live(task, share);
        live.insert(task.id(), entry.clone());
        Ok(entry)
    }

    /// Register the work of `task` as running here (a restart, a keyed request: no limit).
    fn start_live(&self, task: &TaskRecord) -> Arc<Live> {
        let share = task.principal().map(|p| Arc::from(format!("principal:{p}")));
        let live = self.new_live(task, share);
        self.live().insert(task.id(), live.clone());
        live
    }

    fn new_live(&self, task: &TaskRecord, share: Option<Arc<str>>) -> Arc<Live> {
        Arc::new(Live {
            kind: task.kind(),
            share,
            epoch: task.owner().epoch,
            expires: task.expires_at(),
            cancel: self.shutdown.child_token(),
            changed: Notify::new(),
            stored: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// The work of `id` under `epoch` ended here.
    fn end_live(&self, id: TaskId, epoch: Epoch) {
        let mut live = self.live();
        if live.get(&id).is_some_and(|l| l.epoch == epoch) {
            live.remove(&id);
        }
    }

    /// The task `text` names, if `principal` may read it, or the refusal (`-32602`, the same
    /// for an unknown id and another principal's).
    async fn find(
        &self,
        text: &str,
        principal: Option<&str>,
        now: Timestamp,
    ) -> Result<TaskRecord, RpcError> {
        let id = text.parse::<TaskId>().map_err(|_| unknown(text))?;
        let task = self.records.load(id).await.map_err(|e| store_failed(&e))?.ok_or_else(|| unknown(text))?;
        // Another principal's task, or a keyed request (never handed out as a task): unknown.
        if task.value.principal() != principal || task.value.kind() != TaskKind::Task {
            return Err(unknown(text));
        }
        if task.value.expires_at() <= now {
            return Err(RpcError::invalid_params(format!(
                "Failed to retrieve task: Task has expired ({text})"
            )));
        }
        Ok(task.value)
    }

    /// Answer `tasks/get`, `tasks/update` or `tasks/cancel` (one of [`METHODS`]) from a client
    /// whose request declared the extension. An update or cancel of an id that names no task
    /// the client may read is acknowledged all the same (SEP-2663), changing nothing.
    pub(crate) async fn answer(
        &self,
        method: &str,
        params: Option<&Value>,
        principal: Option<&str>,
        now: Timestamp,
    ) -> Result<Value, RpcError> {
        let Some(text) = params.and_then(|p| p.get("taskId")).and_then(Value::as_str) else {
            return Err(RpcError::invalid_params("invalid params: taskId (a string) is required"));
        };
        let found = self.find(text, principal, now).await;
        match method {
            "tasks/get" => {
                let task = found?;
                Ok(wire::detailed(&task, wire::pace(&task, now, self.limits.max_poll_interval)))
            }
            "tasks/update" => {
                let Some(responses) = params.and_then(|p| p.get("inputResponses")).and_then(Value::as_object)
                else {
                    return Err(RpcError::invalid_params(
                        "invalid params: inputResponses (an object) is required",
                    ));
                };
                let Ok(task) = found else { return Ok(json!({})) };
                let responses = wire::texts(responses);
                match transact(&*self.records, task.id(), |t| Ok(t.on_input_responses(&responses, now))).await
                {
                    Ok((forkless_core::Update::Answered(_), _)) => self.wake(task.id()),
                    Ok(_) | Err(forkless_store::Error::TaskUnknown) => {}
                    Err(e) => return Err(store_failed(&e)),
                }
                Ok(json!({}))
            }
            "tasks/cancel" => {
                let Ok(task) = found else { return Ok(json!({})) };
                match transact(&*self.records, task.id(), |t| Ok(t.on_cancel_requested(now))).await {
                    Ok(_) | Err(forkless_store::Error::TaskUnknown) => self.stop(task.id()),
                    Err(e) => return Err(store_failed(&e)),
                }
                Ok(json!({}))
            }
            other => Err(RpcError::method_not_found(other)),
        }
    }

    /// Wake the work of `id` running here (its record changed).
    fn wake(&self, id: TaskId) {
        if let Some(live) = self.live().get(&id) {
            live.changed.notify_one();
        }
    }

    /// Cancel the work of `id` running here.
    fn stop(&self, id: TaskId) {
        if let Some(live) = self.live().remove(&id) {
            live.cancel.cancel();
        }
    }

    /// The sweeper's pass (`round` counts passes): forget the tasks whose time passed and stop
    /// their work here; on a store shared by many nodes, every [`RECHECK_EVERY`] passes, also
    /// stop work here that a change on another node ended (a cancel or a takeover: the task is
    /// no longer among this node's open ones, one store query). On a store of one process
    /// every change passes through this table, which stops the work at once.
    pub(crate) async fn sweep(&self, now: Timestamp, round: u64) {
        if let Err(e) = self.records.expire(now).await {
            tracing::warn!(error = %e, "expiring tasks failed; retrying at the next sweep");
        }
        // Taken before the store is asked: a task acknowledged by then is in its answer if it
        // is still open here.
        let running: Vec<(TaskId, Timestamp, bool)> = self
            .live()
            .iter()
            .map(|(id, l)| (*id, l.expires, l.stored.load(std::sync::atomic::Ordering::Acquire)))
            .collect();
        let node = self.records.node();
        let still_mine = match node {
            Some(_) if round.is_multiple_of(RECHECK_EVERY) => match self.records.open(node).await {
                Ok(ids) => Some(ids.into_iter().collect::<std::collections::HashSet<_>>()),
                Err(e) => {
                    tracing::warn!(error = %e, "listing this node's open tasks failed; retrying at a later sweep");
                    None
                }
            },
            _ => None,
        };
        for (id, expires, stored) in running {
            if expires <= now || (stored && still_mine.as_ref().is_some_and(|mine| !mine.contains(&id))) {
                self.stop(id);
            }
        }
    }

    /// Settle the tasks this node's previous process left (call before serving): every open
    /// task owned by this node ends `failed`/`owner_lost` or is restarted here, by its policy.
    /// How many were settled. On a store whose tasks name no node (a store of one process, or
    /// a shared store without a node lease) the store is taken to be this process's alone, as
    /// for sessions: one process settles at a time.
    pub(crate) async fn settle_left(
        self: &Arc<Self>,
        now: Timestamp,
    ) -> Result<usize, forkless_store::Error> {
        let node = self.records.node();
        let ids = self.records.open(node.clone()).await?;
        crate::metrics::Metrics::inc(&self.metrics.task_settle_passes);
        let mut settled = 0;
        for id in ids {
            settled += usize::from(self.settle(id, node.as_ref(), now).await?);
        }
        Ok(settled)
    }

    /// Settle the open tasks of nodes whose lease lapsed (a node's takeover loop calls this).
    pub(crate) async fn settle_lapsed(
        self: &Arc<Self>,
        now: Timestamp,
    ) -> Result<usize, forkless_store::Error> {
        crate::metrics::Metrics::inc(&self.metrics.task_settle_passes);
        let mut settled = 0;
        for (id, node) in self.records.lapsed().await? {
            settled += usize::from(self.settle(id, Some(&node), now).await?);
        }
        Ok(settled)
    }

    /// Settle task `id` if `lost` (a node, or none) still runs it: whether this node did.
    async fn settle(
        self: &Arc<Self>,
        id: TaskId,
        lost: Option<&NodeName>,
        now: Timestamp,
    ) -> Result<bool, forkless_store::Error> {
        let me = self.records.node().map(|n| n.to_string());
        let outcome = transact(&*self.records, id, |t| {
            if t.owner().node.as_deref() != lost.map(NodeName::as_str) || self.live().contains_key(&id) {
                return Ok(Settlement::NotLost);
            }
            let owner = t.owner().clone();
            Ok(t.on_owner_lost(&owner, me.clone(), now))
        })
        .await;
        let (settlement, task) = match outcome {
            Ok(done) => done,
            Err(forkless_store::Error::TaskUnknown) => return Ok(false),
            Err(e) => return Err(e),
        };
        match settlement {
            Settlement::Failed => self.metrics.task_settled("failed"),
            Settlement::Restart => self.metrics.task_settled("restarted"),
            Settlement::AwaitsInput => self.metrics.task_settled("awaits_input"),
            Settlement::AlreadyEnded | Settlement::NotLost => return Ok(false),
        }
        match settlement {
            Settlement::Failed if task.kind() == TaskKind::Task => {
                tracing::warn!(task = %id, "a task's owner was lost: it failed (owner_lost)");
            }
            Settlement::Failed => {
                tracing::warn!("a keyed request's owner was lost: a re-issue is answered owner_lost");
            }
            Settlement::Restart | Settlement::AwaitsInput => {
                tracing::warn!(task = %id, epoch = %task.owner().epoch, ?settlement, "a task's owner was lost: its work restarts here");
                work::restart(self, &task);
            }
            Settlement::AlreadyEnded | Settlement::NotLost => return Ok(false),
        }
        Ok(true)
    }

    #[cfg(test)]
    fn running(&self) -> usize {
        self.live().len()
    }
}

#[cfg(test)]
mod tests;
