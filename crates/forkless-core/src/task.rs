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
//! This file owns the vocabulary (statuses, policy, owner, what each event did); the record
//! and its transitions are `record`'s.
//!
//! No JSON: the payloads a task carries (a result, an error, input requests and answers, the
//! work's persisted inputs) are JSON text the caller encodes. No IO, no clock.

use std::collections::BTreeMap;

use crate::id::Epoch;

mod record;
pub use record::{NewTask, TaskParts, TaskRecord};

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

#[cfg(test)]
mod tests;
