//! The task table: binding to a principal, unknown and expired ids, the three methods, and
//! the handler's work driving a task through input to its end.

use super::*;
use crate::tasks::work::TaskStarter;

const NOW: Timestamp = Timestamp::from_millis(10_000);

fn table(limits: TaskLimits) -> Arc<TaskTable> {
    Arc::new(TaskTable::new(limits, CancellationToken::new()))
}

fn starter(table: &Arc<TaskTable>, principal: Option<&str>) -> TaskStarter {
    TaskStarter { table: table.clone(), principal: principal.map(str::to_owned) }
}

fn get(table: &TaskTable, id: &Value, principal: Option<&str>) -> Result<Value, RpcError> {
    table.answer("tasks/get", Some(&json!({ "taskId": id })), principal, crate::common::now())
}

/// Poll `tasks/get` until the task's status is `status` (each poll yields to the work).
async fn until(table: &TaskTable, id: &Value, status: &str) -> Value {
    for _ in 0..1000 {
        let got = get(table, id, None).expect("the task is known");
        if got["status"] == status {
            return got;
        }
        tokio::task::yield_now().await;
    }
    panic!("task {id} never reached {status}");
}

#[tokio::test]
async fn a_task_is_readable_at_once_and_only_by_its_principal() {
    let t = table(TaskLimits::default());
    let (tx, rx) = oneshot::channel::<()>();
    let created = starter(&t, Some("alice"))
        .start(move |_| async move {
            let _ = rx.await;
            Ok(json!({ "content": [{ "type": "text", "text": "done" }] }))
        })
        .expect("created");
    let id = &created["taskId"];
    assert_eq!(get(&t, id, Some("alice")).expect("alice reads it")["status"], "working");
    for other in [Some("bob"), None] {
        let err = get(&t, id, other).expect_err("another principal");
        assert_eq!(err.code, crate::error::INVALID_PARAMS, "{other:?}: {err:?}");
    }
    let _ = tx.send(());
    for _ in 0..1000 {
        if get(&t, id, Some("alice")).expect("known")["status"] == "completed" {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("the task never completed");
}

#[tokio::test]
async fn unknown_malformed_and_expired_ids_are_invalid_params() {
    let t = table(TaskLimits { ttl: Duration::from_millis(5), ..TaskLimits::default() });
    for id in [json!("tasks-conformance-nonexistent-12345"), json!("AAAAAAAAAAAAAAAAAAAAAA"), json!(7)] {
        let err = get(&t, &id, None).expect_err("unknown");
        assert_eq!(err.code, crate::error::INVALID_PARAMS, "{id}");
    }
    let cell = t.create(None, NOW).expect("created");
    let id = json!(cell.task().id().to_string());
    let later = NOW.saturating_add(Duration::from_millis(5));
    let err = t.answer("tasks/get", Some(&json!({ "taskId": id })), None, later).expect_err("expired");
    assert!(err.message.contains("expired"), "{err:?}");
    assert!(cell.cancel.is_cancelled(), "an expired task's work is told to stop");
    assert_eq!(t.len(), 0);
}

#[tokio::test]
async fn the_table_refuses_past_its_limit_and_makes_room_from_expired_tasks_only() {
    let t = table(TaskLimits { max_tasks: 2, ttl: Duration::from_millis(100), ..TaskLimits::default() });
    t.create(None, NOW).expect("first");
    t.create(None, NOW).expect("second");
    let err = t.create(None, NOW).err().expect("full");
    assert_eq!(err.code, crate::error::INTERNAL_ERROR);
    assert!(err.message.contains("maximum of 2 tasks"), "{err:?}");
    t.create(None, NOW.saturating_add(Duration::from_millis(100))).expect("room from the expired");
    assert_eq!(t.len(), 1);
}

#[tokio::test]
async fn input_is_answered_in_parts_and_the_work_gets_every_answer() {
    let t = table(TaskLimits::default());
    let created = starter(&t, None)
        .start(|task| async move {
            let asks =
                json!({ "a": { "method": "elicitation/create" }, "b": { "method": "elicitation/create" } });
            let answers = task.input(asks.as_object().cloned().unwrap_or_default()).await;
            let answers = answers.map_err(|e| RpcError::internal(e.to_string()))?;
            Ok(json!({ "content": [{ "type": "text", "text": Value::Object(answers).to_string() }] }))
        })
        .expect("created");
    let id = &created["taskId"];
    let waiting = until(&t, id, "input_required").await;
    assert_eq!(waiting["inputRequests"].as_object().map(Map::len), Some(2));
    let update = |responses: Value| {
        t.answer("tasks/update", Some(&json!({ "taskId": id, "inputResponses": responses })), None, NOW)
    };
    assert_eq!(update(json!({ "a": "first", "never-issued": 1 })).expect("ack"), json!({}));
    let partly = get(&t, id, None).expect("known");
    assert_eq!(partly["status"], "input_required");
    assert_eq!(
        partly["inputRequests"].as_object().map(|m| m.keys().cloned().collect::<Vec<_>>()),
        Some(vec!["b".into()])
    );
    update(json!({ "b": "second", "a": "again" })).expect("ack");
    let done = until(&t, id, "completed").await;
    assert_eq!(done["result"]["content"][0]["text"], r#"{"a":"first","b":"second"}"#);
}

#[tokio::test]
async fn cancel_ends_a_running_task_at_once_and_is_idempotent_on_an_ended_one() {
    let t = table(TaskLimits::default());
    let created = starter(&t, None)
        .start(|task| async move {
            task.cancellation().cancelled().await;
            Ok(json!({ "content": [{ "type": "text", "text": "finished anyway" }] }))
        })
        .expect("created");
    let id = &created["taskId"];
    let cancel = || t.answer("tasks/cancel", Some(&json!({ "taskId": id })), None, NOW);
    assert_eq!(cancel().expect("ack"), json!({}));
    assert_eq!(get(&t, id, None).expect("known")["status"], "cancelled");
    for _ in 0..100 {
        tokio::task::yield_now().await;
    }
    // The work's late result changes nothing, and a second cancel is the same empty ack.
    assert_eq!(get(&t, id, None).expect("known")["status"], "cancelled");
    assert_eq!(cancel().expect("ack"), json!({}));
}

#[tokio::test]
async fn a_panicking_work_fails_its_task_with_an_internal_error() {
    let t = table(TaskLimits::default());
    let created = starter(&t, None)
        .start(|_| async move {
            if true {
                panic!("the work broke");
            }
            Ok(json!({}))
        })
        .expect("created");
    let failed = until(&t, &created["taskId"], "failed").await;
    assert_eq!(failed["error"]["code"], crate::error::INTERNAL_ERROR);
    assert!(failed.get("result").is_none());
}
