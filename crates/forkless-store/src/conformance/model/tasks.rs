//! The task half of the state-machine test (promise 11 of the crate docs): random histories
//! of task writes by two nodes, each writing from the copy it last read (so most writes of a
//! busy history are stale), against a store of `B`.
//!
//! The reference is what compare-and-set allows: the store's copy of a task changes only when
//! a write names the version it holds, and then becomes exactly that write. Checked after
//! every step, on the store's answer:
//! - the task reads back byte for byte as the reference says, at its version;
//! - its status only moves forward (`working` ⇄ `input_required` → an end), an ended task never
//!   changes, its epoch never goes back, an answer once given is never changed or taken back,
//!   and `lastUpdatedAt` never goes back.
//!
//! [`run_tasks`] runs it; [`run_tasks_against`] takes any store maker (its negative control, a
//! store that ignores versions, is the crate's own test).

use std::time::Duration;

use forkless_core::{
    Epoch, NewTask, OnOwnerLost, OsEntropy, Outcome, TaskId, TaskOwner, TaskRecord, Timestamp,
};
use proptest::prelude::*;
use proptest::test_runner::{Config as ProptestConfig, TestCaseError, TestRunner};

use super::Backend;
use crate::codec::encode_task;
use crate::{TaskStore, Version, Versioned};

/// One change a node makes to its copy of a task.
#[derive(Clone, Debug)]
enum Change {
    Ask(u8),
    Answer(u8),
    Finish { ok: bool, epoch: u64 },
    Cancel,
    OwnerLost { successor: u8 },
    Message,
}

#[derive(Clone, Debug)]
enum Op {
    /// Node `node` reads task `task` (its copy and version are now the store's).
    Read { node: usize, task: usize },
    /// Node `node` applies `change` to its copy and writes it at the version it read.
    Write { node: usize, task: usize, change: Change },
    /// The clock moves on.
    Advance(u16),
}

const TASKS: usize = 2;
const NODES: usize = 2;

fn change() -> impl Strategy<Value = Change> {
    prop_oneof![
        (0..3u8).prop_map(Change::Ask),
        (0..3u8).prop_map(Change::Answer),
        (any::<bool>(), 1..4u64).prop_map(|(ok, epoch)| Change::Finish { ok, epoch }),
        Just(Change::Cancel),
        (0..2u8).prop_map(|successor| Change::OwnerLost { successor }),
        Just(Change::Message),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..NODES, 0..TASKS).prop_map(|(node, task)| Op::Read { node, task }),
        6 => (0..NODES, 0..TASKS, change()).prop_map(|(node, task, change)| Op::Write { node, task, change }),
        1 => (1..5_000u16).prop_map(Op::Advance),
    ]
}

/// Apply `change` to `t` at `now`; whether the core allowed it.
fn apply(t: &mut TaskRecord, change: &Change, now: Timestamp) -> bool {
    let epoch = t.owner().epoch;
    match change {
        Change::Ask(k) => {
            t.on_input_needed([(format!("k{k}"), format!("{{\"ask\":{k}}}"))].into(), epoch, now).is_ok()
        }
        Change::Answer(k) => {
            let answer = [(format!("k{k}"), format!("{{\"at\":{}}}", now.as_millis()))].into();
            t.on_input_responses(&answer, now);
            true
        }
        Change::Finish { ok, epoch } => {
            let outcome = if *ok {
                Outcome::Result(format!("{{\"n\":{epoch}}}"))
            } else {
                Outcome::Error("{\"code\":-1}".into())
            };
            t.on_finished(outcome, Epoch::new(*epoch), now).is_ok()
        }
        Change::Cancel => {
            t.on_cancel_requested(now);
            true
        }
        Change::OwnerLost { successor } => {
            let lost = t.owner().clone();
            t.on_owner_lost(&lost, Some(format!("node-{successor}")), now);
            true
        }
        Change::Message => t.on_message(format!("at {}", now.as_millis()), epoch, now).is_ok(),
    }
}

fn rank(t: &TaskRecord) -> u8 {
    u8::from(t.status().is_terminal())
}

/// The history's rules between two successive stored states of a task.
fn moves_forward(before: &TaskRecord, after: &TaskRecord) -> Result<(), String> {
    if before.status().is_terminal() && encode_task(before) != encode_task(after) {
        return Err(format!("an ended task changed: {before:?} became {after:?}"));
    }
    if rank(after) < rank(before)
        || after.owner().epoch < before.owner().epoch
        || after.updated() < before.updated()
    {
        return Err(format!("a task went back: {before:?} became {after:?}"));
    }
    for (key, answer) in before.answers() {
        if after.answers().get(key) != Some(answer) {
            return Err(format!("answer {key} changed or vanished: {before:?} became {after:?}"));
        }
    }
    Ok(())
}

/// One history against a fresh `store`.
async fn history<S: TaskStore>(store: &S, ops: &[Op]) -> Result<(), TestCaseError> {
    let mut now = Timestamp::from_millis(1_000_000_000);
    let ids: Vec<TaskId> = (0..TASKS).map(|_| TaskId::generate(&mut OsEntropy)).collect();
    let mut truth: Vec<Versioned<TaskRecord>> = Vec::new();
    for (i, id) in ids.iter().enumerate() {
        let task = TaskRecord::new(NewTask {
            id: *id,
            kind: forkless_core::TaskKind::Task,
            principal: Some(format!("p{i}")),
            owner: TaskOwner { node: Some("node-0".into()), epoch: Epoch::new(1) },
            on_owner_lost: if i == 0 { OnOwnerLost::Fail } else { OnOwnerLost::Restart },
            inputs: None,
            ttl: Duration::from_secs(86_400),
            poll_interval: Duration::from_millis(100),
            now,
        });
        store.create_task(&task).await.map_err(|e| TestCaseError::fail(format!("create: {e}")))?;
        truth.push(Versioned { version: Version::INITIAL, value: task });
    }
    // Each node's copy of each task, as it last read it.
    let mut copies: Vec<Vec<Versioned<TaskRecord>>> = vec![truth.clone(); NODES];
    for op in ops {
        match op {
            Op::Advance(ms) => now = now.saturating_add(Duration::from_millis(u64::from(*ms))),
            Op::Read { node, task } => {
                let read = store
                    .load_task(ids[*task])
                    .await
                    .map_err(|e| TestCaseError::fail(format!("load: {e}")))?;
                copies[*node][*task] =
                    read.ok_or_else(|| TestCaseError::fail("a created task is unknown"))?;
            }
            Op::Write { node, task, change } => {
                let copy = &copies[*node][*task];
                let mut next = copy.value.clone();
                if !apply(&mut next, change, now) {
                    continue;
                }
                let stored = store
                    .replace_task(copy.version, &next)
                    .await
                    .map_err(|e| TestCaseError::fail(format!("replace: {e}")))?;
                let current = &truth[*task];
                let expected = (copy.version == current.version).then(|| copy.version.next());
                prop_assert_eq!(
                    stored,
                    expected,
                    "a write at {} when the store held {}",
                    copy.version,
                    current.version
                );
                if let Some(version) = stored {
                    moves_forward(&current.value, &next).map_err(TestCaseError::fail)?;
                    truth[*task] = Versioned { version, value: next.clone() };
                    copies[*node][*task] = Versioned { version, value: next };
                }
            }
        }
        for (id, want) in ids.iter().zip(&truth) {
            let got = store.load_task(*id).await.map_err(|e| TestCaseError::fail(format!("load: {e}")))?;
            let got = got.ok_or_else(|| TestCaseError::fail("a task vanished"))?;
            prop_assert_eq!(got.version, want.version);
            prop_assert_eq!(encode_task(&got.value), encode_task(&want.value), "the bytes the store holds");
        }
    }
    Ok(())
}

/// Run `cases` random task histories, each on a store from `open`.
pub fn run_tasks_against<S: TaskStore>(
    cases: u32,
    open: impl Fn(&tokio::runtime::Runtime) -> S,
) -> Result<(), String> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
    let mut runner =
        TestRunner::new(ProptestConfig { cases, failure_persistence: None, ..ProptestConfig::default() });
    runner
        .run(&proptest::collection::vec(op(), 1..40), |ops| {
            let store = open(&rt);
            rt.block_on(history(&store, &ops))
        })
        .map_err(|e| e.to_string())
}

/// Run the task histories against `B`'s stores (a fresh one per case), as a server uses them
/// ([`crate::Equipped`]: the process keeps the tasks of a store that does not).
pub fn run_tasks<B: Backend>(cases: u32) {
    let now = Timestamp::from_millis(1_000_000_000);
    if let Err(e) = run_tasks_against(cases, |rt| crate::Equipped::new(B::open(rt, now))) {
        panic!("{}: task histories: {e}", B::NAME);
    }
}
