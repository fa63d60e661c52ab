//! One task of the tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) as every node
//! and every store sees it (PROTOCOL section 13): its status as an enum of per-status structs,
//! the transitions named after the events that cause them, the owner that runs its work
//! (a node and an epoch), and the decision of what the loss of that owner does to it.
//!
//! ```text
//!   new ──▶ Working ⇄ InputRequired ──▶ Completed | Failed | Cancelled     (terminal)
//!           on_input_needed / on_input_responses     on_finished / on_cancel_requested
//!   owner lost: on_owner_lost, decided by the task's OnOwnerLost policy, once per epoch
//! ```
//!
//! Every change a work makes names the epoch it runs under: once another owner took the task
//! over ([`TaskRecord::on_owner_lost`] bumps the epoch), the old work's writes are refused
//! ([`TaskError::Superseded`]), so a task's outcome is never written by two attempts. A store
//! applies a transition by compare-and-set on the record's version, so two nodes never both
//! settle one loss.
//!
//! No JSON: the payloads a task carries (a result, an error, input requests and answers, the
//! work's persisted inputs) are JSON text the caller encodes. No IO, no clock.

use core::time::Duration;
use std::collections::BTreeMap;

use crate::id::{Epoch, TaskId};
use crate::time::Timestamp;

/// JSON text (an object or a value), kept as the caller encoded it: what a client reads back
/// is these bytes, whatever node renders them.
type Text = String;

/// Where a task is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TaskStatus {
    /// The work is running (or, after a restart, about to run again).
    Working(Working),
    /// The work waits for the client's answers to its input requests.
    InputRequired(InputRequired),
    /// The work returned a result (a tool error, `isError: true`, included).
    Completed(Completed),
    /// The work ended with a JSON-RPC error, or its owner was lost.
    Failed(Failed),
    /// The client cancelled the task before it ended.
    Cancelled(Cancelled),
}

/// [`TaskStatus::Working`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Working;

/// [`TaskStatus::InputRequired`]: the requests not yet answered, by key (JSON text each).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputRequired {
    /// Unanswered requests, by key.
    pub outstanding: BTreeMap<String, Text>,
}

/// [`TaskStatus::Completed`]: the result (JSON text).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Completed {
    /// The work's result.
    pub result: Text,
}

/// [`TaskStatus::Failed`]: why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failed {
    /// The cause.
    pub cause: FailCause,
}

/// Why a task failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FailCause {
    /// The work returned this JSON-RPC error object (JSON text).
    Error(Text),
    /// The process running the work was lost (crash, restart, node loss) and the task's
    /// policy does not restart it: `data.reason: "owner_lost"`.
    OwnerLost,
}

/// [`TaskStatus::Cancelled`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cancelled;

impl TaskStatus {
    /// The status as the wire names it.
    pub const fn name(&self) -> &'static str {
        match self {
            Self::Working(_) => "working",
            Self::InputRequired(_) => "input_required",
            Self::Completed(_) => "completed",
            Self::Failed(_) => "failed",
            Self::Cancelled(_) => "cancelled",
        }
    }

    /// Whether nothing changes the task any more.
    pub const fn is_terminal(&self) -> bool {
        matches!(self, Self::Completed(_) | Self::Failed(_) | Self::Cancelled(_))
    }
}

/// What the loss of a task's owner does to the task: the handler's declaration, made when the
/// task is created.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum OnOwnerLost {
    /// The task ends `failed` with reason `owner_lost` (the default: its work may have had
    /// side effects, and running it again could repeat them).
    #[default]
    Fail,
    /// The work is restartable (idempotent, its inputs persisted with the task): exactly one
    /// successor runs it again under a new epoch; a task waiting for input keeps waiting and
    /// its work runs again, with the answers so far, once the client has answered.
    Restart,
}

/// What a task record stands for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum TaskKind {
    /// A task of the tasks extension: its id was given to the client, which reads it with
    /// `tasks/get`.
    #[default]
    Task,
    /// A request carrying an idempotency key (PROTOCOL section 14): its id is derived from the
    /// principal, the method and the key, never handed out, and `tasks/…` never reads it. The
    /// fingerprint is of the request's method and parameters: a re-issue with the same key
    /// and other parameters is refused.
    Request {
        /// SHA-256 of the request's canonical method and parameters.
        fingerprint: [u8; 32],
    },
}

/// Who runs a task's work: a node (`None` on a store of one process) and the epoch of the
/// attempt, bumped by every takeover.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TaskOwner {
    /// The node id holding a lease, or `None` on a store one process serves.
    pub node: Option<String>,
    /// The attempt.
    pub epoch: Epoch,
}

/// A transition the task does not allow now.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TaskError {
    /// The task already ended: nothing changes it any more.
    #[error("the task already ended ({0})")]
    Ended(&'static str),
    /// The task already waits for input; a second set of requests would hide the first.
    #[error("the task already waits for input")]
    AlreadyWaiting,
    /// Input was asked for with no request at all.
    #[error("an input request needs at least one entry")]
    NoRequests,
    /// An input request key this task used before: keys are unique over a task's lifetime.
    #[error("input request key `{0}` was already used by this task")]
    KeyReused(String),
    /// The writer runs under an epoch another owner has replaced: its change is refused.
    #[error("the task was taken over (epoch {current}); this attempt's epoch {stale} is stale")]
    Superseded {
        /// The writer's epoch.
        stale: Epoch,
        /// The task's epoch now.
        current: Epoch,
    },
}

/// What a `tasks/update` did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Update {
    /// Requests are still outstanding, or nothing outstanding was answered.
    Waiting,
    /// Every request is answered: the task works again; these are all its answers so far.
    Answered(BTreeMap<String, Text>),
}

/// What a `tasks/cancel` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CancelOutcome {
    /// The task was running or waiting and is now cancelled.
    Cancelled,
    /// The task had already ended; it stays as it was.
    AlreadyEnded,
}

/// What the loss of a task's owner did to it ([`TaskRecord::on_owner_lost`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Settlement {
    /// It had already ended: nothing changed.
    AlreadyEnded,
    /// It is no longer the lost owner's (another node settled this loss first, or the owner
    /// named is not the one running it): nothing changed.
    NotLost,
    /// It ended `failed`, reason `owner_lost`.
    Failed,
    /// Its work must run again now, under the successor's epoch.
    Restart,
    /// It waits for input under the successor; its work runs again once answered.
    AwaitsInput,
}

/// How a work ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Its result (JSON text).
    Result(Text),
    /// Its JSON-RPC error object (JSON text).
    Error(Text),
}

/// What a new task starts with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewTask {
    /// Its id, from the CSPRNG (a [`TaskKind::Request`]: derived from its key).
    pub id: TaskId,
    /// What it stands for.
    pub kind: TaskKind,
    /// Who created it; only the same principal reads it.
    pub principal: Option<String>,
    /// Its first owner.
    pub owner: TaskOwner,
    /// What the loss of its owner does.
    pub on_owner_lost: OnOwnerLost,
    /// What the work needs to run again (JSON text), for [`OnOwnerLost::Restart`].
    pub inputs: Option<Text>,
    /// How long it is kept after its creation.
    pub ttl: Duration,
    /// The polling interval suggested to clients.
    pub poll_interval: Duration,
    /// When.
    pub now: Timestamp,
}

/// One task: its id, principal, status, owner and times.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskRecord {
    id: TaskId,
    kind: TaskKind,
    principal: Option<String>,
    status: TaskStatus,
    message: Option<String>,
    created: Timestamp,
    updated: Timestamp,
    ttl: Duration,
    poll_interval: Duration,
    owner: TaskOwner,
    on_owner_lost: OnOwnerLost,
    inputs: Option<Text>,
    /// Every answer the client gave, over every round, by key: a work that runs again reads
    /// its earlier answers here instead of asking again.
    answers: BTreeMap<String, Text>,
}

impl TaskRecord {
    /// A task created `new.now`, working.
    pub fn new(new: NewTask) -> Self {
        Self {
            id: new.id,
            kind: new.kind,
            principal: new.principal,
            status: TaskStatus::Working(Working),
            message: None,
            created: new.now,
            updated: new.now,
            ttl: new.ttl,
            poll_interval: new.poll_interval,
            owner: new.owner,
            on_owner_lost: new.on_owner_lost,
            inputs: new.inputs,
            answers: BTreeMap::new(),
        }
    }

    /// The task's id.
    pub const fn id(&self) -> TaskId {
        self.id
    }
    /// What it stands for.
    pub const fn kind(&self) -> TaskKind {
        self.kind
    }
    /// Who may read it.
    pub fn principal(&self) -> Option<&str> {
        self.principal.as_deref()
    }
    /// Where it is.
    pub const fn status(&self) -> &TaskStatus {
        &self.status
    }
    /// Its `statusMessage`.
    pub fn message(&self) -> Option<&str> {
        self.message.as_deref()
    }
    /// When it was created.
    pub const fn created(&self) -> Timestamp {
        self.created
    }
    /// When it last changed (never goes back).
    pub const fn updated(&self) -> Timestamp {
        self.updated
    }
    /// Its time to live.
    pub const fn ttl(&self) -> Duration {
        self.ttl
    }
    /// The suggested polling interval.
    pub const fn poll_interval(&self) -> Duration {
        self.poll_interval
    }
    /// Who runs it.
    pub const fn owner(&self) -> &TaskOwner {
        &self.owner
    }
    /// What the loss of its owner does to it.
    pub const fn policy(&self) -> OnOwnerLost {
        self.on_owner_lost
    }
    /// The work's persisted inputs.
    pub fn inputs(&self) -> Option<&str> {
        self.inputs.as_deref()
    }
    /// Every answer given so far, by key.
    pub const fn answers(&self) -> &BTreeMap<String, Text> {
        &self.answers
    }
    /// When it may be forgotten: its creation plus its time to live.
    pub fn expires_at(&self) -> Timestamp {
        self.created.saturating_add(self.ttl)
    }

    /// Whether `key` was ever used by an input request of this task.
    fn used(&self, key: &str) -> bool {
        self.answers.contains_key(key)
            || matches!(&self.status, TaskStatus::InputRequired(w) if w.outstanding.contains_key(key))
    }

    fn touch(&mut self, now: Timestamp) {
        // `lastUpdatedAt` never goes back, whatever the clock does.
        self.updated = self.updated.max(now);
    }

    /// Refuse a change by a work running under another epoch than the task's.
    fn check_epoch(&self, by: Epoch) -> Result<(), TaskError> {
        if by == self.owner.epoch {
            Ok(())
        } else {
            Err(TaskError::Superseded { stale: by, current: self.owner.epoch })
        }
    }

    fn check_live(&self) -> Result<(), TaskError> {
        if self.status.is_terminal() { Err(TaskError::Ended(self.status.name())) } else { Ok(()) }
    }

    /// The work (running under epoch `by`) asks the client for input: working becomes
    /// input_required with `requests` (keys never used by this task before).
    pub fn on_input_needed(
        &mut self,
        requests: BTreeMap<String, Text>,
        by: Epoch,
        now: Timestamp,
    ) -> Result<(), TaskError> {
        self.check_live()?;
        self.check_epoch(by)?;
        if matches!(self.status, TaskStatus::InputRequired(_)) {
            return Err(TaskError::AlreadyWaiting);
        }
        if requests.is_empty() {
            return Err(TaskError::NoRequests);
        }
        if let Some(key) = requests.keys().find(|k| self.used(k)) {
            return Err(TaskError::KeyReused(key.clone()));
        }
        self.status = TaskStatus::InputRequired(InputRequired { outstanding: requests });
        self.touch(now);
        Ok(())
    }

    /// The client answered (`tasks/update`): answers to outstanding requests are taken, any
    /// other key (never issued, already answered) is ignored, so an answer is applied once.
    /// When none is left outstanding the task works again.
    pub fn on_input_responses(&mut self, responses: &BTreeMap<String, Text>, now: Timestamp) -> Update {
        let TaskStatus::InputRequired(waiting) = &mut self.status else { return Update::Waiting };
        let mut took = false;
        for (key, answer) in responses {
            if waiting.outstanding.remove(key).is_some() {
                self.answers.insert(key.clone(), answer.clone());
                took = true;
            }
        }
        if !waiting.outstanding.is_empty() {
            if took {
                self.touch(now);
            }
            return Update::Waiting;
        }
        self.status = TaskStatus::Working(Working);
        self.touch(now);
        Update::Answered(self.answers.clone())
    }

    /// The work (under epoch `by`) ended with `outcome`.
    pub fn on_finished(&mut self, outcome: Outcome, by: Epoch, now: Timestamp) -> Result<(), TaskError> {
        self.check_live()?;
        self.check_epoch(by)?;
        self.status = match outcome {
            Outcome::Result(result) => TaskStatus::Completed(Completed { result }),
            Outcome::Error(error) => TaskStatus::Failed(Failed { cause: FailCause::Error(error) }),
        };
        self.touch(now);
        Ok(())
    }

    /// The client cancelled the task (`tasks/cancel`).
    pub fn on_cancel_requested(&mut self, now: Timestamp) -> CancelOutcome {
        if self.status.is_terminal() {
            return CancelOutcome::AlreadyEnded;
        }
        self.status = TaskStatus::Cancelled(Cancelled);
        self.message = Some("cancelled by the client".to_owned());
        self.touch(now);
        CancelOutcome::Cancelled
    }

    /// The work (under epoch `by`) says what it is doing (`statusMessage`).
    pub fn on_message(&mut self, message: String, by: Epoch, now: Timestamp) -> Result<(), TaskError> {
        self.check_live()?;
        self.check_epoch(by)?;
        self.message = Some(message);
        self.touch(now);
        Ok(())
    }

    /// The owner `lost` (a node and the epoch it ran the task under) was lost, and
    /// `successor`'s node settles the task: the one place that decides what a crash, a restart
    /// or a node loss does to a task. Nothing changes unless `lost` still runs it, and the
    /// epoch moves on, so applied by compare-and-set, of every node settling one loss exactly
    /// one changes the record, and the lost attempt's writes are refused from then on.
    pub fn on_owner_lost(
        &mut self,
        lost: &TaskOwner,
        successor: Option<String>,
        now: Timestamp,
    ) -> Settlement {
        if self.status.is_terminal() {
            return Settlement::AlreadyEnded;
        }
        if self.owner != *lost {
            return Settlement::NotLost;
        }
        let waiting = matches!(self.status, TaskStatus::InputRequired(_));
        self.owner = TaskOwner { node: successor, epoch: self.owner.epoch.next() };
        self.touch(now);
        match (self.policy(), waiting) {
            (OnOwnerLost::Fail, _) => {
                self.status = TaskStatus::Failed(Failed { cause: FailCause::OwnerLost });
                self.message = Some("the server running this task was lost".to_owned());
                Settlement::Failed
            }
            (OnOwnerLost::Restart, false) => Settlement::Restart,
            (OnOwnerLost::Restart, true) => Settlement::AwaitsInput,
        }
    }

    /// Rebuild a record from its stored parts (for a store's codec).
    pub fn restore(parts: TaskParts) -> Self {
        let TaskParts {
            id,
            kind,
            principal,
            status,
            message,
            created,
            updated,
            ttl,
            poll_interval,
            owner,
            on_owner_lost,
            inputs,
            answers,
        } = parts;
        Self {
            id,
            kind,
            principal,
            status,
            message,
            created,
            updated,
            ttl,
            poll_interval,
            owner,
            on_owner_lost,
            inputs,
            answers,
        }
    }
}

/// Every field of a [`TaskRecord`], as a store's codec reads them back
/// ([`TaskRecord::restore`]).
#[derive(Clone, Debug)]
#[allow(missing_docs)]
pub struct TaskParts {
    pub id: TaskId,
    pub kind: TaskKind,
    pub principal: Option<String>,
    pub status: TaskStatus,
    pub message: Option<String>,
    pub created: Timestamp,
    pub updated: Timestamp,
    pub ttl: Duration,
    pub poll_interval: Duration,
    pub owner: TaskOwner,
    pub on_owner_lost: OnOwnerLost,
    pub inputs: Option<Text>,
    pub answers: BTreeMap<String, Text>,
}

#[cfg(test)]
mod tests;
