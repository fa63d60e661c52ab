use super::*;
use crate::SeededEntropy;
use crate::id::TaskId;
use crate::time::Timestamp;
use core::time::Duration;

const T0: Timestamp = Timestamp::from_millis(1_000);
const E1: Epoch = Epoch::new(1);

fn task(policy: OnOwnerLost) -> TaskRecord {
    TaskRecord::new(NewTask {
        id: TaskId::generate(&mut SeededEntropy::new(7)),
        kind: TaskKind::Task,
        principal: Some("alice".into()),
        owner: TaskOwner { node: Some("a".into()), epoch: E1 },
        on_owner_lost: policy,
        inputs: Some(r#"{"n":3}"#.into()),
        ttl: Duration::from_secs(60),
        poll_interval: Duration::from_millis(500),
        now: T0,
    })
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

#[test]
fn input_is_asked_answered_in_parts_and_keys_are_never_reused() {
    let mut t = task(OnOwnerLost::Fail);
    t.on_input_needed(map(&[("a", "{}"), ("b", "{}")]), E1, T0).expect("working asks");
    assert_eq!(t.on_input_needed(map(&[("c", "{}")]), E1, T0), Err(TaskError::AlreadyWaiting));
    assert_eq!(t.on_input_responses(&map(&[("zzz", "1"), ("a", "true")]), T0), Update::Waiting);
    assert_eq!(t.status().name(), "input_required");
    // A second answer to `a` is not applied: an answer is taken once.
    assert_eq!(t.on_input_responses(&map(&[("a", "false")]), T0), Update::Waiting);
    let Update::Answered(all) = t.on_input_responses(&map(&[("b", "2")]), T0) else {
        panic!("every request answered")
    };
    assert_eq!(all, map(&[("a", "true"), ("b", "2")]));
    assert_eq!(t.status().name(), "working");
    assert_eq!(t.on_input_needed(map(&[("a", "{}")]), E1, T0), Err(TaskError::KeyReused("a".into())));
    assert_eq!(t.on_input_needed(BTreeMap::new(), E1, T0), Err(TaskError::NoRequests));
}

#[test]
fn an_ended_task_never_changes() {
    let mut t = task(OnOwnerLost::Restart);
    t.on_finished(Outcome::Result("{}".into()), E1, T0).expect("first outcome");
    let done = t.clone();
    let later = Timestamp::from_millis(9_000);
    assert_eq!(t.on_finished(Outcome::Error("{}".into()), E1, later), Err(TaskError::Ended("completed")));
    assert_eq!(t.on_cancel_requested(later), CancelOutcome::AlreadyEnded);
    assert_eq!(t.on_message("late".into(), E1, later), Err(TaskError::Ended("completed")));
    assert_eq!(t.on_owner_lost(&done.owner().clone(), Some("b".into()), later), Settlement::AlreadyEnded);
    assert_eq!(t, done);
}

#[test]
fn last_updated_never_goes_back() {
    let mut t = task(OnOwnerLost::Fail);
    t.on_message("one".into(), E1, Timestamp::from_millis(5_000)).expect("live");
    t.on_message("two".into(), E1, Timestamp::from_millis(2_000)).expect("live");
    assert_eq!(t.updated(), Timestamp::from_millis(5_000));
}

#[test]
fn by_default_a_lost_owner_fails_the_task_whatever_it_was_doing() {
    for waiting in [false, true] {
        let mut t = task(OnOwnerLost::Fail);
        if waiting {
            t.on_input_needed(map(&[("a", "{}")]), E1, T0).expect("asks");
        }
        let lost = t.owner().clone();
        assert_eq!(t.on_owner_lost(&lost, Some("b".into()), T0), Settlement::Failed);
        assert_eq!(t.status(), &TaskStatus::Failed(Failed { cause: FailCause::OwnerLost }));
        assert_eq!(t.owner().epoch, Epoch::new(2));
    }
}

#[test]
fn a_restartable_task_moves_to_its_successor_and_the_lost_attempt_is_fenced() {
    let mut t = task(OnOwnerLost::Restart);
    let lost = t.owner().clone();
    assert_eq!(t.on_owner_lost(&lost, Some("b".into()), T0), Settlement::Restart);
    assert_eq!(t.owner(), &TaskOwner { node: Some("b".into()), epoch: Epoch::new(2) });
    assert_eq!(t.status().name(), "working");
    // The lost attempt (epoch 1) can neither finish nor ask nor speak any more.
    let stale = TaskError::Superseded { stale: E1, current: Epoch::new(2) };
    assert_eq!(t.on_finished(Outcome::Result("{}".into()), E1, T0), Err(stale.clone()));
    assert_eq!(t.on_input_needed(map(&[("a", "{}")]), E1, T0), Err(stale.clone()));
    assert_eq!(t.on_message("x".into(), E1, T0), Err(stale));
    t.on_finished(Outcome::Result("{}".into()), Epoch::new(2), T0).expect("the restart finishes");
}

#[test]
fn a_restartable_task_waiting_for_input_keeps_its_requests_and_answers() {
    let mut t = task(OnOwnerLost::Restart);
    t.on_input_needed(map(&[("first", "{}")]), E1, T0).expect("asks");
    let Update::Answered(_) = t.on_input_responses(&map(&[("first", "1")]), T0) else { panic!() };
    t.on_input_needed(map(&[("second", "{}")]), E1, T0).expect("asks again");
    let lost = t.owner().clone();
    assert_eq!(t.on_owner_lost(&lost, None, T0), Settlement::AwaitsInput);
    assert_eq!(t.status().name(), "input_required");
    let Update::Answered(all) = t.on_input_responses(&map(&[("second", "2")]), T0) else { panic!() };
    assert_eq!(all, map(&[("first", "1"), ("second", "2")]), "the rerun reads every earlier answer");
}

#[test]
fn of_two_settlers_of_one_loss_only_the_first_changes_the_task() {
    // Both read the record naming the lost owner; the store's compare-and-set lets one write,
    // and the other, re-reading, finds the task no longer the lost owner's: no second restart.
    let mut t = task(OnOwnerLost::Restart);
    let lost = t.owner().clone();
    assert_eq!(t.on_owner_lost(&lost, Some("b".into()), T0), Settlement::Restart);
    let after_first = t.clone();
    assert_eq!(t.on_owner_lost(&lost, Some("c".into()), T0), Settlement::NotLost);
    assert_eq!(t, after_first);
    // The successor's own loss is a new loss, settled once in its turn.
    let b = t.owner().clone();
    assert_eq!(t.on_owner_lost(&b, Some("c".into()), T0), Settlement::Restart);
    assert_eq!(t.owner().epoch, Epoch::new(3));
}
