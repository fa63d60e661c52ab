//! One task's record ([`TaskRecord`]) and the transitions on it, each named after the event
//! that causes it; what a new task starts with ([`NewTask`]) and what a store's codec reads
//! back ([`TaskParts`]). The statuses and outcomes are [`super`]'s.

use core::time::Duration;
use std::collections::BTreeMap;

use super::{
    CancelOutcome, Cancelled, Completed, FailCause, Failed, InputRequired, OnOwnerLost, Outcome, Settlement,
    TaskError, TaskKind, TaskOwner, TaskStatus, Text, Update, Working,
};
use crate::id::{Epoch, TaskId};
use crate::time::Timestamp;

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
    pub fn restore(p: TaskParts) -> Self {
        Self {
            id: p.id,
            kind: p.kind,
            principal: p.principal,
            status: p.status,
            message: p.message,
            created: p.created,
            updated: p.updated,
            ttl: p.ttl,
            poll_interval: p.poll_interval,
            owner: p.owner,
            on_owner_lost: p.on_owner_lost,
            inputs: p.inputs,
            answers: p.answers,
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
