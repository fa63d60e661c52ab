//! A task's two wire shapes (SEP-2663): the `CreateTaskResult` a request that became a task is
//! answered with, and the `DetailedTask` of `tasks/get`; and the JSON text a task's payloads
//! are kept in. Rendered from the stored record alone, so every node answers a `tasks/get` with
//! the same bytes.
//!
//! No IO and no clock.

use std::collections::BTreeMap;
use std::time::Duration;

use forkless_core::task::{FailCause, TaskStatus};
use forkless_core::{TaskRecord, Timestamp};
use serde_json::{Map, Value, json};

use crate::jsonrpc::RpcError;

/// JSON text of `v`, as a task keeps its payloads.
pub(crate) fn text(v: &Value) -> String {
    v.to_string()
}

/// The value of JSON text a task kept (written by [`text`]; anything else reads as a string).
pub(crate) fn value(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

/// A JSON object's entries as JSON text, by key.
pub(crate) fn texts(map: &Map<String, Value>) -> BTreeMap<String, String> {
    map.iter().map(|(k, v)| (k.clone(), text(v))).collect()
}

/// JSON text entries as a JSON object.
pub(crate) fn object(texts: &BTreeMap<String, String>) -> Map<String, Value> {
    texts.iter().map(|(k, v)| (k.clone(), value(v))).collect()
}

/// The error a task whose owner was lost (and whose work was not restarted) fails with.
pub(crate) fn owner_lost() -> RpcError {
    RpcError::internal("the server running this task was lost (a crash, a restart or a node loss); its work was not restarted")
        .with_data(json!({ "reason": "owner_lost" }))
}

/// The polling interval to suggest for `t` at `now`: its own for a task that ended (so an
/// ended task reads the same every time) and for a young one; for one that has worked longer,
/// a tenth of its age, up to `ceiling`. Long work is polled less, so a server holding many
/// long tasks spends little on their polls, while a short task's result is found at once.
pub(crate) fn pace(t: &TaskRecord, now: Timestamp, ceiling: Duration) -> Duration {
    if t.status().is_terminal() {
        return t.poll_interval();
    }
    (now.saturating_since(t.created()) / 10).clamp(t.poll_interval(), ceiling.max(t.poll_interval()))
}

/// The fields every shape of the task carries.
fn base(t: &TaskRecord, poll: Duration) -> Map<String, Value> {
    let mut task = Map::new();
    task.insert("taskId".into(), json!(t.id().to_string()));
    task.insert("status".into(), json!(t.status().name()));
    if let Some(message) = t.message() {
        task.insert("statusMessage".into(), json!(message));
    }
    task.insert("createdAt".into(), json!(iso8601(t.created())));
    task.insert("lastUpdatedAt".into(), json!(iso8601(t.updated())));
    task.insert("ttlMs".into(), json!(millis(t.ttl())));
    task.insert("pollIntervalMs".into(), json!(millis(poll)));
    task
}

/// The `CreateTaskResult` a request that became this task is answered with.
pub(crate) fn created_result(t: &TaskRecord) -> Value {
    let mut task = base(t, t.poll_interval());
    task.insert("resultType".into(), json!("task"));
    Value::Object(task)
}

/// The `tasks/get` result: the task with what its status carries (the outstanding
/// `inputRequests`, the `result` or the `error`), suggesting polls every `poll` ([`pace`]).
pub(crate) fn detailed(t: &TaskRecord, poll: Duration) -> Value {
    let mut task = base(t, poll);
    match t.status() {
        TaskStatus::InputRequired(waiting) => {
            task.insert("inputRequests".into(), Value::Object(object(&waiting.outstanding)));
        }
        TaskStatus::Completed(done) => {
            task.insert("result".into(), value(&done.result));
        }
        TaskStatus::Failed(failed) => {
            let error = match &failed.cause {
                FailCause::Error(error) => value(error),
                FailCause::OwnerLost => owner_lost().to_json(),
            };
            task.insert("error".into(), error);
        }
        TaskStatus::Working(_) | TaskStatus::Cancelled(_) => {}
    }
    task.insert("resultType".into(), json!("complete"));
    Value::Object(task)
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
    use forkless_core::{Epoch, NewTask, OnOwnerLost, Outcome, SeededEntropy, TaskId, TaskOwner};

    const T0: Timestamp = Timestamp::from_millis(1_000);

    fn task() -> TaskRecord {
        TaskRecord::new(NewTask {
            id: TaskId::generate(&mut SeededEntropy::new(7)),
            kind: forkless_core::TaskKind::Task,
            principal: None,
            owner: TaskOwner { node: None, epoch: Epoch::new(1) },
            on_owner_lost: OnOwnerLost::Fail,
            inputs: None,
            ttl: Duration::from_secs(60),
            poll_interval: Duration::from_millis(500),
            now: T0,
        })
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
        let created = created_result(&t);
        assert_eq!(created["resultType"], "task");
        assert_eq!(created["status"], "working");
        assert_eq!(created["ttlMs"], 60_000);
        assert_eq!(created["pollIntervalMs"], 500);
        for absent in ["task", "result", "error", "inputRequests", "requestState", "ttl", "pollInterval"] {
            assert!(created.get(absent).is_none(), "{absent} in {created}");
        }
        assert_eq!(detailed(&t, t.poll_interval())["resultType"], "complete");
    }

    #[test]
    fn long_work_is_polled_less_and_an_ended_task_always_suggests_the_same() {
        let mut t = task();
        let ceiling = Duration::from_secs(5);
        let at = |s: u64| T0.saturating_add(Duration::from_secs(s));
        assert_eq!(pace(&t, at(1), ceiling), Duration::from_millis(500), "young: its own interval");
        assert_eq!(pace(&t, at(20), ceiling), Duration::from_secs(2), "a tenth of its age");
        assert_eq!(pace(&t, at(3600), ceiling), ceiling, "never above the ceiling");
        t.on_finished(Outcome::Result("{}".into()), Epoch::new(1), at(30)).expect("ends");
        assert_eq!(pace(&t, at(3600), ceiling), Duration::from_millis(500));
    }

    #[test]
    fn a_failed_task_carries_its_error_and_a_lost_owner_says_so() {
        let mut t = task();
        let boom = RpcError::internal("boom").to_json();
        t.on_finished(Outcome::Error(text(&boom)), Epoch::new(1), T0).expect("ends");
        let poll = t.poll_interval();
        assert_eq!(detailed(&t, poll)["error"], boom);
        assert!(detailed(&t, poll).get("result").is_none());
        let mut lost = task();
        let owner = lost.owner().clone();
        lost.on_owner_lost(&owner, None, T0);
        let got = detailed(&lost, lost.poll_interval());
        assert_eq!(got["status"], "failed");
        assert_eq!(got["error"]["data"]["reason"], "owner_lost");
        assert_eq!(got["error"]["code"], crate::error::INTERNAL_ERROR);
    }
}
