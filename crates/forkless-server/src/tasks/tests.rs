//! The task table over a store: binding to a principal, unknown and expired ids, the limits,
//! the three methods, the handler's work driving a task through input to its end, and what a
//! successor does with the tasks a lost process left.

use super::*;
use crate::tasks::work::TaskStarter;
use forkless_store::{Equipped, MemoryStore, NodeName, TaskMap, TaskStore as _};
use serde_json::Map;
use std::sync::atomic::{AtomicUsize, Ordering};

const NOW: Timestamp = Timestamp::from_millis(10_000);

/// A memory store as the server holds it: its tasks kept by the process.
type Memory = Arc<Equipped<MemoryStore>>;

fn memory() -> Memory {
    Arc::new(Equipped::new(MemoryStore::new()))
}

fn gone() -> NodeName {
    NodeName::new("gone").expect("a name")
}

fn table_on(store: &Memory, limits: TaskLimits) -> Arc<TaskTable> {
    Arc::new(TaskTable::new(
        Box::new(store.clone()),
        limits,
        IdempotencyLimits::default(),
        CancellationToken::new(),
        Arc::default(),
    ))
}

fn table(limits: TaskLimits) -> Arc<TaskTable> {
    table_on(&memory(), limits)
}

fn starter(table: &Arc<TaskTable>, principal: Option<&str>) -> TaskStarter {
    TaskStarter {
        table: table.clone(),
        principal: principal.map(str::to_owned),
        share: principal.map(|p| Arc::from(format!("principal:{p}"))),
    }
}

async fn get(table: &TaskTable, id: &Value, principal: Option<&str>) -> Result<Value, RpcError> {
    table.answer("tasks/get", Some(&json!({ "taskId": id })), principal, crate::clock::now()).await
}

/// Poll `tasks/get` until the task's status is `status` (each poll yields to the work).
async fn until(table: &TaskTable, id: &Value, status: &str) -> Value {
    for _ in 0..2000 {
        let got = get(table, id, None).await.expect("the task is known");
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
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let created = starter(&t, Some("alice"))
        .start(move |_| async move {
            let _ = rx.await;
            Ok(json!({ "content": [{ "type": "text", "text": "done" }] }))
        })
        .await
        .expect("created");
    let id = &created["taskId"];
    assert_eq!(get(&t, id, Some("alice")).await.expect("alice reads it")["status"], "working");
    for other in [Some("bob"), None] {
        let err = get(&t, id, other).await.expect_err("another principal");
        assert_eq!(err.code, crate::error::INVALID_PARAMS, "{other:?}: {err:?}");
        // Another principal's update or cancel is acknowledged and changes nothing.
        let cancel = t.answer("tasks/cancel", Some(&json!({ "taskId": id })), other, NOW).await;
        assert_eq!(cancel.expect("acknowledged"), json!({}));
    }
    let _ = tx.send(());
    for _ in 0..1000 {
        if get(&t, id, Some("alice")).await.expect("known")["status"] == "completed" {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("the task never completed");
}

#[tokio::test]
async fn unknown_ids_are_invalid_params_to_get_and_acknowledged_by_update_and_cancel() {
    let t = table(TaskLimits { ttl: Duration::from_millis(5), ..TaskLimits::default() });
    for id in [json!("tasks-conformance-nonexistent-12345"), json!("AAAAAAAAAAAAAAAAAAAAAA")] {
        let err = get(&t, &id, None).await.expect_err("unknown");
        assert_eq!(err.code, crate::error::INVALID_PARAMS, "{id}");
        let update = json!({ "taskId": id, "inputResponses": { "a": 1 } });
        assert_eq!(t.answer("tasks/update", Some(&update), None, NOW).await.expect("ack"), json!({}));
        let cancel = json!({ "taskId": id });
        assert_eq!(t.answer("tasks/cancel", Some(&cancel), None, NOW).await.expect("ack"), json!({}));
    }
    // A request without a taskId string is malformed, whatever the method.
    for method in METHODS {
        let err = t.answer(method, Some(&json!({ "taskId": 7 })), None, NOW).await.expect_err("malformed");
        assert_eq!(err.code, crate::error::INVALID_PARAMS, "{method}");
    }
    let created = starter(&t, None).start(|_| std::future::pending()).await.expect("created");
    let id = created["taskId"].clone();
    let later = crate::clock::now().saturating_add(Duration::from_millis(10));
    let err = t.answer("tasks/get", Some(&json!({ "taskId": id })), None, later).await.expect_err("expired");
    assert!(err.message.contains("expired"), "{err:?}");
    t.sweep(later, 0).await;
    assert_eq!(t.running(), 0, "an expired task's work is told to stop");
}

#[tokio::test]
async fn new_tasks_are_refused_past_the_node_and_principal_limits() {
    let limits = TaskLimits { max_tasks: 3, max_tasks_per_principal: 2, ..TaskLimits::default() };
    let t = table(limits);
    let forever = |_| std::future::pending::<Result<Value, RpcError>>();
    starter(&t, Some("a")).start(forever).await.expect("first");
    starter(&t, Some("a")).start(forever).await.expect("second");
    let err = starter(&t, Some("a")).start(forever).await.expect_err("a's third");
    assert!(err.message.contains("this principal runs its maximum of 2"), "{err:?}");
    starter(&t, Some("b")).start(forever).await.expect("b's first");
    let err = starter(&t, Some("c")).start(forever).await.expect_err("the node is full");
    assert!(err.message.contains("maximum of 3 tasks"), "{err:?}");
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
        .await
        .expect("created");
    let id = &created["taskId"];
    let waiting = until(&t, id, "input_required").await;
    assert_eq!(waiting["inputRequests"].as_object().map(Map::len), Some(2));
    let update = |responses: Value| {
        let params = json!({ "taskId": id, "inputResponses": responses });
        let t = t.clone();
        async move { t.answer("tasks/update", Some(&params), None, NOW).await }
    };
    assert_eq!(update(json!({ "a": "first", "never-issued": 1 })).await.expect("ack"), json!({}));
    let partly = get(&t, id, None).await.expect("known");
    assert_eq!(partly["status"], "input_required");
    assert_eq!(
        partly["inputRequests"].as_object().map(|m| m.keys().cloned().collect::<Vec<_>>()),
        Some(vec!["b".into()])
    );
    update(json!({ "b": "second", "a": "again" })).await.expect("ack");
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
        .await
        .expect("created");
    let id = &created["taskId"];
    let params = json!({ "taskId": id });
    let cancel = || t.answer("tasks/cancel", Some(&params), None, NOW);
    assert_eq!(cancel().await.expect("ack"), json!({}));
    assert_eq!(get(&t, id, None).await.expect("known")["status"], "cancelled");
    for _ in 0..100 {
        tokio::task::yield_now().await;
    }
    // The work's late result changes nothing, and a second cancel is the same empty ack.
    assert_eq!(get(&t, id, None).await.expect("known")["status"], "cancelled");
    assert_eq!(cancel().await.expect("ack"), json!({}));
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
        .await
        .expect("created");
    let failed = until(&t, &created["taskId"], "failed").await;
    assert_eq!(failed["error"]["code"], crate::error::INTERNAL_ERROR);
    assert!(failed.get("result").is_none());
}

/// A runner counting its starts, whose work asks for `confirm` when the inputs say so.
fn counting_runner(starts: Arc<AtomicUsize>) -> Runner {
    Arc::new(move |inputs: Value, task: TaskContext| {
        starts.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            if inputs["ask"] == true {
                let ask = json!({ "confirm": { "method": "elicitation/create" } });
                let answers = task.input(ask.as_object().cloned().unwrap_or_default()).await;
                let answers = answers.map_err(|e| RpcError::internal(e.to_string()))?;
                return Ok(json!({ "answers": answers, "attempt": task.attempt() }));
            }
            task.cancellation().cancelled().await;
            Ok(json!({ "attempt": task.attempt() }))
        })
    })
}

/// A task a lost node `gone` ran, stored as it left it.
async fn left_by_gone(store: &Memory, seed: u64, policy: forkless_core::OnOwnerLost) -> TaskId {
    let task = TaskRecord::new(forkless_core::NewTask {
        id: TaskId::generate(&mut forkless_core::SeededEntropy::new(seed)),
        kind: TaskKind::Task,
        principal: None,
        owner: forkless_core::TaskOwner { node: Some("gone".into()), epoch: Epoch::new(1) },
        on_owner_lost: policy,
        inputs: Some(json!({ "ask": false }).to_string()),
        ttl: Duration::from_secs(60),
        poll_interval: Duration::from_millis(20),
        now: crate::clock::now(),
    });
    store.create_task(&task).await.expect("stored");
    task.id()
}

#[tokio::test]
async fn of_two_successors_one_fails_a_fragile_task_and_one_restarts_a_restartable_one_once() {
    let store = memory();
    let fragile = left_by_gone(&store, 1, forkless_core::OnOwnerLost::Fail).await;
    let restartable = left_by_gone(&store, 2, forkless_core::OnOwnerLost::Restart).await;
    let starts = Arc::new(AtomicUsize::new(0));
    let successors = [table_on(&store, TaskLimits::default()), table_on(&store, TaskLimits::default())];
    for s in &successors {
        s.set_runner(counting_runner(starts.clone()));
    }
    let mut settled = 0;
    let gone = gone();
    for id in [fragile, restartable] {
        let both = futures::future::join_all(successors.iter().map(|s| s.settle(id, Some(&gone), NOW))).await;
        settled += both.into_iter().map(|n| usize::from(n.expect("settles"))).sum::<usize>();
    }
    assert_eq!(settled, 2, "each lost task settled once, by one successor");
    assert_eq!(starts.load(Ordering::SeqCst), 1, "the restartable work ran again once, not twice");

    let lost = get(&successors[0], &json!(fragile.to_string()), None).await.expect("known");
    let reason = lost["error"]["data"]["reason"].as_str();
    assert_eq!((lost["status"].as_str(), reason), (Some("failed"), Some("owner_lost")));
    let again = get(&successors[1], &json!(restartable.to_string()), None).await.expect("known");
    assert_eq!(again["status"], "working");
    let stored = store.load_task(restartable).await.expect("load").expect("kept").value;
    assert_eq!(stored.owner().epoch, Epoch::new(2));
    // Settling again finds nothing of the lost node's: the new attempt is not the lost one.
    for s in &successors {
        for id in [fragile, restartable] {
            assert!(!s.settle(id, Some(&gone), NOW).await.expect("settles"));
        }
    }
}

#[tokio::test]
async fn a_restarted_process_settles_what_its_previous_one_left() {
    let store = memory();
    let first = table_on(&store, TaskLimits::default());
    first.set_runner(counting_runner(Arc::new(AtomicUsize::new(0))));
    let fragile = starter(&first, None).start(|_| std::future::pending()).await.expect("fragile");
    let restartable =
        starter(&first, None).start_restartable(json!({ "ask": false })).await.expect("restartable");
    drop(first);
    let next = table_on(&store, TaskLimits::default());
    let starts = Arc::new(AtomicUsize::new(0));
    next.set_runner(counting_runner(starts.clone()));
    assert_eq!(next.settle_left(NOW).await.expect("settles"), 2);
    assert_eq!(starts.load(Ordering::SeqCst), 1);
    assert_eq!(get(&next, &fragile["taskId"], None).await.expect("known")["status"], "failed");
    assert_eq!(get(&next, &restartable["taskId"], None).await.expect("known")["status"], "working");
    assert_eq!(next.settle_left(NOW).await.expect("settles"), 0, "its own live work is not lost");
}

#[tokio::test]
async fn a_restarted_task_waiting_for_input_keeps_its_request_and_completes_once_answered() {
    let store = memory();
    let first = table_on(&store, TaskLimits::default());
    first.set_runner(counting_runner(Arc::new(AtomicUsize::new(0))));
    let created = starter(&first, None).start_restartable(json!({ "ask": true })).await.expect("created");
    let id = &created["taskId"];
    let waiting = until(&first, id, "input_required").await;
    drop(first);

    let next =
        table_on(&store, TaskLimits { poll_interval: Duration::from_millis(20), ..TaskLimits::default() });
    next.set_runner(counting_runner(Arc::new(AtomicUsize::new(0))));
    assert_eq!(next.settle_left(NOW).await.expect("settles"), 1);
    let still = get(&next, id, None).await.expect("known");
    assert_eq!(still["status"], "input_required");
    assert_eq!(still["inputRequests"], waiting["inputRequests"], "the same key, not a new one");
    let update = json!({ "taskId": id, "inputResponses": { "confirm": { "action": "accept" } } });
    next.answer("tasks/update", Some(&update), None, NOW).await.expect("ack");
    let done = until(&next, id, "completed").await;
    assert_eq!(done["result"]["attempt"], 2);
    assert_eq!(done["result"]["answers"]["confirm"]["action"], "accept");
}

/// A memory store that says it is node `name`'s on a shared store (its tasks name the node).
struct Named(Memory, &'static str);

impl Records for Named {
    fn create<'a>(&'a self, task: &'a TaskRecord) -> BoxFuture<'a, forkless_store::Result<()>> {
        self.0.create(task)
    }
    fn load(
        &self,
        id: TaskId,
    ) -> BoxFuture<'_, forkless_store::Result<Option<forkless_store::Versioned<TaskRecord>>>> {
        Records::load(&self.0, id)
    }
    fn replace<'a>(
        &'a self,
        expected: forkless_store::Version,
        task: &'a TaskRecord,
    ) -> BoxFuture<'a, forkless_store::Result<Option<forkless_store::Version>>> {
        self.0.replace(expected, task)
    }
    fn open(&self, node: Option<NodeName>) -> BoxFuture<'_, forkless_store::Result<Vec<TaskId>>> {
        self.0.open(node)
    }
    fn lapsed(&self) -> BoxFuture<'_, forkless_store::Result<Vec<(TaskId, NodeName)>>> {
        self.0.lapsed()
    }
    fn expire(&self, now: Timestamp) -> BoxFuture<'_, forkless_store::Result<u64>> {
        self.0.expire(now)
    }
    fn node(&self) -> Option<NodeName> {
        Some(NodeName::new(self.1).expect("a name"))
    }
}

#[tokio::test]
async fn a_cancel_on_another_node_stops_the_work_at_the_owners_next_recheck() {
    let store = memory();
    let on = |name| {
        let records: Box<dyn Records> = Box::new(Named(store.clone(), name));
        Arc::new(TaskTable::new(
            records,
            TaskLimits::default(),
            IdempotencyLimits::default(),
            CancellationToken::new(),
            Arc::default(),
        ))
    };
    let (a, b) = (on("a"), on("b"));
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let created = starter(&a, None)
        .start(move |task| async move {
            task.cancellation().cancelled().await;
            let _ = tx.send(());
            Ok(json!({}))
        })
        .await
        .expect("created");
    let params = json!({ "taskId": created["taskId"] });
    assert_eq!(b.answer("tasks/cancel", Some(&params), None, NOW).await.expect("ack"), json!({}));
    assert_eq!(a.running(), 1, "node a has not seen it yet");
    a.sweep(crate::clock::now(), 1).await;
    assert_eq!(a.running(), 1, "not a recheck round");
    a.sweep(crate::clock::now(), 0).await;
    tokio::time::timeout(Duration::from_secs(5), rx).await.expect("stopped").expect("told");
    assert_eq!(a.running(), 0);
}

/// The tasks of one process, counting the operations it serves.
#[derive(Default)]
struct Counted {
    tasks: TaskMap,
    creates: AtomicUsize,
    loads: AtomicUsize,
    replaces: AtomicUsize,
}

impl Records for Arc<Counted> {
    fn create<'a>(&'a self, task: &'a TaskRecord) -> BoxFuture<'a, forkless_store::Result<()>> {
        self.creates.fetch_add(1, Ordering::SeqCst);
        Box::pin(self.tasks.create_task(task))
    }
    fn load(
        &self,
        id: TaskId,
    ) -> BoxFuture<'_, forkless_store::Result<Option<forkless_store::Versioned<TaskRecord>>>> {
        self.loads.fetch_add(1, Ordering::SeqCst);
        Box::pin(self.tasks.load_task(id))
    }
    fn replace<'a>(
        &'a self,
        expected: forkless_store::Version,
        task: &'a TaskRecord,
    ) -> BoxFuture<'a, forkless_store::Result<Option<forkless_store::Version>>> {
        self.replaces.fetch_add(1, Ordering::SeqCst);
        Box::pin(self.tasks.replace_task(expected, task))
    }
    fn open(&self, node: Option<NodeName>) -> BoxFuture<'_, forkless_store::Result<Vec<TaskId>>> {
        Box::pin(async move { self.tasks.open_tasks(node.as_ref()).await })
    }
    fn lapsed(&self) -> BoxFuture<'_, forkless_store::Result<Vec<(TaskId, NodeName)>>> {
        Box::pin(async { Ok(Vec::new()) })
    }
    fn expire(&self, now: Timestamp) -> BoxFuture<'_, forkless_store::Result<u64>> {
        Box::pin(self.tasks.expire_tasks(now))
    }
    fn node(&self) -> Option<NodeName> {
        None
    }
}

/// What each operation costs the store: creating a task is one write (the store's one
/// durable write, a group commit on redb), a `tasks/get` one read, and no read or write
/// happens on the way.
#[tokio::test]
async fn creating_a_task_is_one_store_write_and_reading_it_one_store_read() {
    let counted = Arc::new(Counted::default());
    let records: Box<dyn Records> = Box::new(counted.clone());
    let t = Arc::new(TaskTable::new(
        records,
        TaskLimits::default(),
        IdempotencyLimits::default(),
        CancellationToken::new(),
        Arc::default(),
    ));
    let created = starter(&t, None).start(|_| std::future::pending()).await.expect("created");
    let ops = |c: &Counted| {
        (c.creates.load(Ordering::SeqCst), c.loads.load(Ordering::SeqCst), c.replaces.load(Ordering::SeqCst))
    };
    assert_eq!(ops(&counted), (1, 0, 0), "one write, nothing read");
    for n in 1..=3 {
        get(&t, &created["taskId"], None).await.expect("known");
        assert_eq!(ops(&counted), (1, n, 0), "one read per tasks/get");
    }
}
