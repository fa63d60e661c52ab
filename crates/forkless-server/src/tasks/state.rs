//! One task of the tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663): its status as
//! an enum of per-status structs, the transitions named after the events that cause them, and
//! the task's two wire shapes (`CreateTaskResult` and the `DetailedTask` of `tasks/get`).
//!
//! No IO and no clock: the caller hands in the time of every event. What holds the tasks, who
//! may read them and how a handler's work drives them is [`super`]'s.

use std::collections::HashSet;
use std::time::Duration;

use forkless_core::{TaskId, Timestamp};
use serde_json::{Map, Value, json};

use crate::jsonrpc::RpcError;

/// Where a task is.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Status {
    /// The work is running.
    Working(Working),
    /// The work waits for the client's answers to `inputRequests`.
    InputRequired(InputRequired),
    /// The work returned a result (a tool error, `isError: true`, included).
    Completed(Completed),
    /// The work ended with a JSON-RPC error.
    Failed(Failed),
    /// The client cancelled the task before it ended.
    Cancelled(Cancelled),
}

/// [`Status::Working`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Working;

/// [`Status::InputRequired`]: the requests not yet answered, and the answers so far.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct InputRequired {
    outstanding: Map<String, Value>,
    answered: Map<String, Value>,
}

/// [`Status::Completed`].
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Completed {
    result: Value,
}

/// [`Status::Failed`]: the JSON-RPC error object.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Failed {
    error: Value,
}

/// [`Status::Cancelled`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Cancelled;

impl Status {
    const fn name(&self) -> &'static str {
        match self {
            Self::Working(_) => "working",
            Self::InputRequired(_) => "input_required",
            Self::Completed(_) => "completed",
            Self::Failed(_) => "failed",
            Self::Cancelled(_) => "cancelled",
        }
    }

    const fn is_terminal(&self) -> bool {
        matches!(self, Self::Completed(_) | Self::Failed(_) | Self::Cancelled(_))
    }
}

/// A transition the task's status does not allow.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TaskError {
    /// The task already ended (completed, failed or cancelled): nothing changes it any more.
    #[error("the task already ended ({0})")]
    Ended(&'static str),
    /// The task already waits for input; a second set of requests would hide the first.
    #[error("the task already waits for input")]
    AlreadyWaiting,
    /// Input was asked for with no request at all.
    #[error("an input request needs at least one entry")]
    NoRequests,
    /// An `inputRequests` key this task used before: keys are unique over a task's lifetime.
    #[error("input request key `{0}` was already used by this task")]
    KeyReused(String),
}

/// What a `tasks/update` did.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Update {
    /// Some outstanding requests are still unanswered (or nothing outstanding was answered).
    Waiting,
    /// Every request is answered: the task is working again, with these answers.
    Answered(Map<String, Value>),
}

/// What a `tasks/cancel` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CancelOutcome {
    /// The task was running (or waiting for input) and is now cancelled.
    Cancelled,
    /// The task had already ended; it stays as it was (the acknowledgement is the same).
    AlreadyEnded,
}

/// One task: its id, status and times.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Task {
    id: TaskId,
    status: Status,
    created: Timestamp,
    updated: Timestamp,
    ttl: Duration,
    poll_interval: Duration,
    message: Option<String>,
    keys_used: HashSet<String>,
}

impl Task {
    /// A task created at `now`, working.
    pub(crate) fn new(id: TaskId, now: Timestamp, ttl: Duration, poll_interval: Duration) -> Self {
        Self {
            id,
            status: Status::Working(Working),
            created: now,
            updated: now,
            ttl,
            poll_interval,
            message: None,
            keys_used: HashSet::new(),
        }
    }

    pub(crate) const fn id(&self) -> TaskId {
        self.id
    }

    /// When the task may be forgotten: its creation plus its time to live.
    pub(crate) fn expires_at(&self) -> Timestamp {
        self.created.saturating_add(self.ttl)
    }

    /// The work asks the client for input: working becomes input_required.
    pub(crate) fn on_input_needed(
        &mut self,
        requests: Map<String, Value>,
        now: Timestamp,
    ) -> Result<(), TaskError> {
        match &self.status {
            Status::Working(_) => {}
            Status::InputRequired(_) => return Err(TaskError::AlreadyWaiting),
            ended => return Err(TaskError::Ended(ended.name())),
        }
        if requests.is_empty() {
            return Err(TaskError::NoRequests);
        }
        if let Some(key) = requests.keys().find(|k| self.keys_used.contains(*k)) {
            return Err(TaskError::KeyReused(key.clone()));
        }
        self.keys_used.extend(requests.keys().cloned());
        self.status = Status::InputRequired(InputRequired { outstanding: requests, answered: Map::new() });
        self.updated = now;
        Ok(())
    }

    /// The client answered (`tasks/update`): answers to outstanding requests are taken, any
    /// other key (never issued, already answered) is ignored. When none is left outstanding
    /// the task works again and the answers go to the work.
    pub(crate) fn on_input_responses(&mut self, responses: &Map<String, Value>, now: Timestamp) -> Update {
        let Status::InputRequired(waiting) = &mut self.status else { return Update::Waiting };
        let mut took = false;
        for (key, answer) in responses {
            if waiting.outstanding.remove(key).is_some() {
                waiting.answered.insert(key.clone(), answer.clone());
                took = true;
            }
        }
        if took {
            self.updated = now;
        }
        if !waiting.outstanding.is_empty() {
            return Update::Waiting;
        }
        let answers = std::mem::take(&mut waiting.answered);
        self.status = Status::Working(Working);
        Update::Answered(answers)
    }

    /// The work ended with `outcome`: completed with its result, or failed with its error.
    pub(crate) fn on_finished(
        &mut self,
        outcome: Result<Value, RpcError>,
        now: Timestamp,
    ) -> Result<(), TaskError> {
        if self.status.is_terminal() {
            return Err(TaskError::Ended(self.status.name()));
        }
        self.status = match outcome {
            Ok(result) => Status::Completed(Completed { result }),
            Err(error) => {
                self.message = Some(error.message.clone());
                Status::Failed(Failed { error: error.to_json() })
            }
        };
        self.updated = now;
        Ok(())
    }

    /// The client cancelled the task (`tasks/cancel`).
    pub(crate) fn on_cancel_requested(&mut self, now: Timestamp) -> CancelOutcome {
        if self.status.is_terminal() {
            return CancelOutcome::AlreadyEnded;
        }
        self.status = Status::Cancelled(Cancelled);
        self.message = Some("cancelled by the client".to_owned());
        self.updated = now;
        CancelOutcome::Cancelled
    }

    /// The work says what it is doing (`statusMessage`).
    pub(crate) fn on_message(&mut self, message: String, now: Timestamp) -> Result<(), TaskError> {
        if self.status.is_terminal() {
            return Err(TaskError::Ended(self.status.name()));
        }
        self.message = Some(message);
        self.updated = now;
        Ok(())
    }

    /// The fields every shape of the task carries.
    fn base(&self) -> Map<String, Value> {
        let mut task = Map::new();
        task.insert("taskId".into(), json!(self.id.to_string()));
        task.insert("status".into(), json!(self.status.name()));
        if let Some(message) = &self.message {
            task.insert("statusMessage".into(), json!(message));
        }
        task.insert("createdAt".into(), json!(iso8601(self.created)));
        task.insert("lastUpdatedAt".into(), json!(iso8601(self.updated)));
        task.insert("ttlMs".into(), json!(millis(self.ttl)));
        task.insert("pollIntervalMs".into(), json!(millis(self.poll_interval)));
        task
    }

    /// The `CreateTaskResult` a request that became this task is answered with.
    pub(crate) fn created_result(&self) -> Value {
        let mut task = self.base();
        task.insert("resultType".into(), json!("task"));
        Value::Object(task)
    }

    /// The `tasks/get` result: the task with what its status carries (the outstanding
    /// `inputRequests`, the `result` or the `error`).
    pub(crate) fn detailed(&self) -> Value {
        let mut task = self.base();
        match &self.status {
            Status::InputRequired(waiting) => {
                task.insert("inputRequests".into(), Value::Object(waiting.outstanding.clone()));
            }
            Status::Completed(done) => {
                task.insert("result".into(), done.result.clone());
            }
            Status::Failed(failed) => {
                task.insert("error".into(), failed.error.clone());
            }
            Status::Working(_) | Status::Cancelled(_) => {}
        }
        task.insert("resultType".into(), json!("complete"));
        Value::Object(task)
    }
}

/// Whole milliseconds, at least 1 (the wire wants a positive integer).
fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// `t` in ISO 8601 (UTC, millisecond precision), e.g. `2026-12-02T03:17:40.123Z`.
pub(crate) fn iso8601(t: Timestamp) -> String {
    let ms = t.as_millis();
    let (secs, milli) = (ms / 1000, ms % 1000);
    let (days, of_day) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{milli:03}Z",
        of_day / 3600,
        of_day % 3600 / 60,
        of_day % 60
    )
}

/// The proleptic Gregorian date `days` days after 1970-01-01.
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    // Shift the epoch to 0000-03-01, so that leap days fall at the end of a 400-year era.
    let z = days + 719_468;
    let era = z / 146_097;
    let day_of_era = z % 146_097;
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use forkless_core::SeededEntropy;

    const T0: Timestamp = Timestamp::from_millis(1_000);

    fn task() -> Task {
        let id = TaskId::generate(&mut SeededEntropy::new(7));
        Task::new(id, T0, Duration::from_secs(60), Duration::from_millis(500))
    }

    fn map(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn dates_are_iso_8601_in_utc() {
        assert_eq!(iso8601(Timestamp::ZERO), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601(Timestamp::from_millis(951_782_400_000)), "2000-02-29T00:00:00.000Z");
        assert_eq!(iso8601(Timestamp::from_millis(1_796_181_460_123)), "2026-12-02T03:17:40.123Z");
    }

    #[test]
    fn a_created_task_is_flat_and_working() {
        let t = task();
        let created = t.created_result();
        assert_eq!(created["resultType"], "task");
        assert_eq!(created["status"], "working");
        assert_eq!(created["ttlMs"], 60_000);
        assert_eq!(created["pollIntervalMs"], 500);
        for absent in ["task", "result", "error", "inputRequests", "requestState", "ttl", "pollInterval"] {
            assert!(created.get(absent).is_none(), "{absent} in {created}");
        }
        assert_eq!(t.detailed()["resultType"], "complete");
    }

    #[test]
    fn input_is_asked_answered_in_parts_and_keys_are_never_reused() {
        let mut t = task();
        let asks =
            map(json!({ "a": { "method": "elicitation/create" }, "b": { "method": "elicitation/create" } }));
        t.on_input_needed(asks.clone(), T0).expect("working asks");
        assert_eq!(t.on_input_needed(asks.clone(), T0), Err(TaskError::AlreadyWaiting));
        assert_eq!(t.detailed()["inputRequests"].as_object().map(Map::len), Some(2));
        // An unknown key is ignored; a part keeps the task waiting, with the rest outstanding.
        assert_eq!(
            t.on_input_responses(&map(json!({ "zzz": 1, "a": { "action": "accept" } })), T0),
            Update::Waiting
        );
        assert_eq!(t.detailed()["status"], "input_required");
        assert!(t.detailed()["inputRequests"].get("a").is_none());
        let Update::Answered(all) = t.on_input_responses(&map(json!({ "b": 2, "a": 3 })), T0) else {
            panic!("every request answered")
        };
        assert_eq!(all, map(json!({ "a": { "action": "accept" }, "b": 2 })));
        assert_eq!(t.detailed()["status"], "working");
        assert_eq!(t.on_input_needed(map(json!({ "a": {} })), T0), Err(TaskError::KeyReused("a".into())));
        assert_eq!(t.on_input_needed(Map::new(), T0), Err(TaskError::NoRequests));
    }

    #[test]
    fn an_ended_task_never_changes() {
        let mut t = task();
        t.on_finished(Ok(json!({ "content": [] })), T0).expect("first outcome");
        let done = t.detailed();
        assert_eq!(done["status"], "completed");
        assert_eq!(t.on_finished(Err(RpcError::internal("late")), T0), Err(TaskError::Ended("completed")));
        assert_eq!(t.on_cancel_requested(T0), CancelOutcome::AlreadyEnded);
        assert_eq!(t.on_message("late".into(), T0), Err(TaskError::Ended("completed")));
        assert_eq!(t.detailed(), done);
    }

    #[test]
    fn a_cancelled_task_discards_the_outcome_that_comes_later() {
        let mut t = task();
        assert_eq!(t.on_cancel_requested(Timestamp::from_millis(2_000)), CancelOutcome::Cancelled);
        assert_eq!(t.on_finished(Ok(json!({})), T0), Err(TaskError::Ended("cancelled")));
        let got = t.detailed();
        assert_eq!(got["status"], "cancelled");
        assert!(got.get("result").is_none() && got.get("error").is_none());
        assert_eq!(got["lastUpdatedAt"], "1970-01-01T00:00:02.000Z");
    }

    #[test]
    fn a_failed_task_carries_the_error_and_no_result() {
        let mut t = task();
        t.on_finished(Err(RpcError::internal("boom")), T0).expect("first outcome");
        let got = t.detailed();
        assert_eq!(got["status"], "failed");
        assert_eq!(got["error"]["code"], -32603);
        assert_eq!(got["statusMessage"], "boom");
        assert!(got.get("result").is_none());
    }
}
