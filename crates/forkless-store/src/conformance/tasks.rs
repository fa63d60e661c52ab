//! The conformance suite's task checks (promise 11 of the crate docs): records read back as
//! written, a replace is a compare-and-set, of many nodes settling one lost owner exactly one
//! changes the task, open tasks are found by their node, expiry removes only what expired;
//! and across a crash, every acknowledged task reads back exactly as last acknowledged, or
//! as unknown, never older.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use forkless_core::{
    Epoch, NewTask, OnOwnerLost, Outcome, SeededEntropy, Settlement, TaskId, TaskOwner, TaskRecord, Timestamp,
};

use super::{T0, wall_clock};
use crate::codec::encode_task;
use crate::{Error, NodeName, TaskStore, Version, transact_task};

/// A new working task, its id from `seed`, owned by `node` at epoch 1, created `now`.
pub fn new_task(
    seed: u64,
    node: Option<&str>,
    policy: OnOwnerLost,
    ttl: Duration,
    now: Timestamp,
) -> TaskRecord {
    TaskRecord::new(NewTask {
        id: TaskId::generate(&mut SeededEntropy::new(seed)),
        kind: forkless_core::TaskKind::Task,
        principal: Some(format!("principal-{seed}")),
        owner: TaskOwner { node: node.map(str::to_owned), epoch: Epoch::new(1) },
        on_owner_lost: policy,
        inputs: Some(format!("{{\"seed\":{seed}}}")),
        ttl,
        poll_interval: Duration::from_millis(250),
        now,
    })
}

const HOUR: Duration = Duration::from_secs(3600);

pub(super) async fn a_task_reads_back_and_replaces_by_compare_and_set<S: TaskStore>(store: Arc<S>) {
    let task = new_task(1, None, OnOwnerLost::Fail, HOUR, T0);
    let id = task.id();
    assert!(store.load_task(id).await.expect("load").is_none(), "unknown before it is created");
    store.create_task(&task).await.expect("create");
    assert!(matches!(store.create_task(&task).await, Err(Error::TaskExists)), "an id is never created twice");
    let read = store.load_task(id).await.expect("load").expect("created");
    assert_eq!((read.version, &read.value), (Version::INITIAL, &task));

    let mut done = task.clone();
    done.on_finished(Outcome::Result("{\"content\":[]}".into()), Epoch::new(1), T0).expect("finishes");
    let v2 = store.replace_task(read.version, &done).await.expect("replace");
    assert_eq!(v2, Some(Version::INITIAL.next()));
    let mut late = task.clone();
    late.on_finished(Outcome::Error("{\"code\":-1}".into()), Epoch::new(1), T0).expect("a stale copy");
    assert_eq!(
        store.replace_task(read.version, &late).await.expect("replace"),
        None,
        "a stale version loses"
    );
    let read = store.load_task(id).await.expect("load").expect("kept");
    assert_eq!(encode_task(&read.value), encode_task(&done), "the winner's bytes, unchanged");
    let unknown = TaskId::generate(&mut SeededEntropy::new(999));
    assert!(matches!(
        transact_task(&*store, unknown, |t| Ok(t.on_cancel_requested(T0))).await,
        Err(Error::TaskUnknown)
    ));
}

pub(super) async fn of_many_settlers_of_a_lost_owner_one_restarts_the_task<S: TaskStore>(store: Arc<S>) {
    let task = new_task(2, None, OnOwnerLost::Restart, HOUR, T0);
    let (id, lost) = (task.id(), task.owner().clone());
    store.create_task(&task).await.expect("create");
    let settlers = (0..8).map(|i| {
        let (store, lost) = (store.clone(), lost.clone());
        tokio::spawn(async move {
            transact_task(&*store, id, |t| Ok(t.on_owner_lost(&lost, Some(format!("n{i}")), T0)))
                .await
                .map(|(settled, _)| settled)
        })
    });
    let mut restarts = 0;
    for settler in settlers {
        match settler.await.expect("joins").expect("settles") {
            Settlement::Restart => restarts += 1,
            Settlement::NotLost => {}
            other => panic!("unexpected settlement {other:?}"),
        }
    }
    assert_eq!(restarts, 1, "exactly one node restarts the lost attempt");
    let read = store.load_task(id).await.expect("load").expect("kept");
    assert_eq!(read.value.owner().epoch, Epoch::new(2), "one new epoch, not one per settler");
    let stale =
        transact_task(&*store, id, |t| t.on_finished(Outcome::Result("{}".into()), Epoch::new(1), T0)).await;
    assert!(matches!(stale, Err(Error::Task(forkless_core::TaskError::Superseded { .. }))), "{stale:?}");
}

pub(super) async fn open_tasks_are_found_by_node_and_expiry_removes_only_what_expired<S: TaskStore>(
    store: Arc<S>,
) {
    // A database expires on the real clock's scale: the tasks are created "now".
    let now = wall_clock();
    let mine = new_task(3, Some("node-a"), OnOwnerLost::Fail, HOUR, now);
    let other = new_task(4, Some("node-b"), OnOwnerLost::Fail, HOUR, now);
    let local = new_task(5, None, OnOwnerLost::Fail, HOUR, now);
    let mut ended = new_task(6, Some("node-a"), OnOwnerLost::Fail, HOUR, now);
    ended.on_cancel_requested(now);
    let short = new_task(7, None, OnOwnerLost::Fail, Duration::from_millis(10), now);
    for t in [&mine, &other, &local, &ended, &short] {
        store.create_task(t).await.expect("create");
    }
    let sorted = |mut ids: Vec<TaskId>| {
        ids.sort();
        ids
    };
    assert_eq!(
        store.open_tasks(Some(&NodeName::new("node-a").expect("a name"))).await.expect("open"),
        vec![mine.id()],
        "not the ended one"
    );
    assert_eq!(sorted(store.open_tasks(None).await.expect("open")), sorted(vec![local.id(), short.id()]));

    let later = now.saturating_add(Duration::from_secs(1));
    assert_eq!(store.expire_tasks(later).await.expect("expire"), 1, "only the short-lived task");
    assert!(store.load_task(short.id()).await.expect("load").is_none());
    for t in [&mine, &other, &local, &ended] {
        assert!(store.load_task(t.id()).await.expect("load").is_some(), "{:?} kept", t.id());
    }
    assert_eq!(store.open_tasks(None).await.expect("open"), vec![local.id()]);
}

/// Promise 11 across nodes: 200 tasks, each created on `a` and read on `b` the moment the
/// creation returns, and changed on `b` and read on `a` the same way: every read finds the
/// write (the creation's acknowledgement is what a client is given its id with). The first
/// violation, if any.
pub async fn resolves_on_the_other_node<S: TaskStore>(a: &S, b: &S) -> Result<(), String> {
    for seed in 0..200u64 {
        let task = new_task(500 + seed, Some("node-a"), OnOwnerLost::Fail, HOUR, T0);
        a.create_task(&task).await.map_err(|e| format!("create: {e}"))?;
        let Some(read) = b.load_task(task.id()).await.map_err(|e| format!("load: {e}"))? else {
            return Err(format!(
                "try {seed}: task {} created on one node is unknown on the other",
                task.id()
            ));
        };
        let (_, done) = transact_task(b, task.id(), |t| {
            t.on_finished(Outcome::Result(format!("{{\"n\":{seed}}}")), Epoch::new(1), T0)
        })
        .await
        .map_err(|e| format!("finish: {e}"))?;
        let back = a.load_task(task.id()).await.map_err(|e| format!("load: {e}"))?;
        if back.map(|v| v.value) != Some(done) {
            return Err(format!(
                "try {seed}: task {} finished on one node reads otherwise on the other",
                read.value.id()
            ));
        }
    }
    Ok(())
}

/// What [`crash_keeps_every_acknowledged_task`] saw.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TaskCrashReport {
    /// Tasks whose creation was acknowledged before the crash.
    pub acknowledged: usize,
    /// Of those, tasks that read back exactly as last acknowledged.
    pub kept: usize,
    /// Of those, tasks that read as unknown (a store that keeps nothing across a crash).
    pub forgotten: usize,
}

/// Promise 11 across a crash: tasks are created and changed (completed, failed, waiting for
/// input, cancelled, left working), each write acknowledged; then `crash` turns the store into
/// what a restart after a crash finds. Every acknowledged task must read back byte for byte as
/// its last acknowledged write left it, or as unknown: never as an older state, which a client
/// that read the newer one would see go backwards. Returns what it saw, or the first violation.
pub async fn crash_keeps_every_acknowledged_task<S, F, Fut>(
    store: S,
    crash: F,
) -> Result<TaskCrashReport, String>
where
    S: TaskStore,
    F: FnOnce(S) -> Fut,
    Fut: Future<Output = S>,
{
    let e1 = Epoch::new(1);
    let mut acknowledged: Vec<TaskRecord> = Vec::new();
    for seed in 0..20u64 {
        let task = new_task(100 + seed, None, OnOwnerLost::Restart, HOUR, T0);
        store.create_task(&task).await.map_err(|e| format!("create: {e}"))?;
        let change = |t: &mut TaskRecord| -> Result<(), forkless_core::TaskError> {
            match seed % 5 {
                0 => t.on_finished(Outcome::Result(format!("{{\"n\":{seed}}}")), e1, T0),
                1 => t.on_finished(Outcome::Error(format!("{{\"code\":-{seed}}}")), e1, T0),
                2 => t.on_input_needed([(format!("k{seed}"), "{}".to_owned())].into(), e1, T0),
                3 => {
                    t.on_cancel_requested(T0);
                    Ok(())
                }
                _ => Ok(()),
            }
        };
        let last = if seed % 5 == 4 {
            task
        } else {
            transact_task(&store, task.id(), change).await.map_err(|e| format!("change: {e}"))?.1
        };
        acknowledged.push(last);
    }
    let store = crash(store).await;
    let mut report = TaskCrashReport { acknowledged: acknowledged.len(), ..TaskCrashReport::default() };
    for task in &acknowledged {
        match store.load_task(task.id()).await.map_err(|e| format!("load after the crash: {e}"))? {
            None => report.forgotten += 1,
            Some(read) if encode_task(&read.value) == encode_task(task) => report.kept += 1,
            Some(read) => {
                return Err(format!(
                    "task {} read back as {} after the crash; it was acknowledged as {}",
                    task.id(),
                    read.value.status().name(),
                    task.status().name()
                ));
            }
        }
    }
    Ok(report)
}
