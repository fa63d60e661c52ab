//! Durable tasks over real processes (PROTOCOL section 13): `forkless serve` on the durable
//! default is killed with `kill -9` while it holds tasks in every state, and restarted on the
//! same data directory. The oracle is everything the client saw: every task id it was given
//! still resolves, a completed task reads back byte for byte, a task's status never moves
//! back, a task whose work may not run twice ends `failed`/`owner_lost`, a restartable one is
//! run again exactly once per loss (counted by a side effect outside the server), and a
//! restartable task waiting for input keeps its request and completes once answered.
//! A task killed the moment its id was acknowledged is still known after the restart; the
//! negative control runs those rounds with a server whose task writes are acknowledged before
//! their sync (the store's test hook) and shows the oracle catches the lost task.

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::{Serve, fresh_data_dir, guard};

async fn rpc(url: &str, method: &str, params: Value) -> Value {
    support::current::rpc(&reqwest::Client::new(), url, method, params).await
}

async fn call(url: &str, tool: &str, arguments: Value) -> String {
    support::current::create_task(&reqwest::Client::new(), url, tool, arguments).await
}

async fn get(url: &str, id: &str) -> Value {
    let v = rpc(url, "tasks/get", json!({ "taskId": id })).await;
    v.get("result").cloned().unwrap_or_else(|| panic!("task {id} must resolve: {v}"))
}

/// Poll `tasks/get` until `done` holds (a guard bounds the wait).
async fn until(url: &str, id: &str, done: impl Fn(&Value) -> bool) -> Value {
    guard("task status", async {
        loop {
            let t = get(url, id).await;
            if done(&t) {
                return t;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
}

const ORDER: [&str; 5] = ["working", "input_required", "completed", "failed", "cancelled"];

/// The status only moves forward: a terminal one never changes.
fn moves_forward(before: &Value, after: &Value) {
    let terminal = |s: &Value| ORDER[2..].contains(&s.as_str().unwrap_or_default());
    if terminal(&before["status"]) {
        assert_eq!(before, after, "an ended task never changes, byte for byte");
    }
    assert!(after["lastUpdatedAt"].as_str() >= before["lastUpdatedAt"].as_str(), "lastUpdatedAt went back");
}

fn side_effects(dir: &std::path::Path, label: &str) -> usize {
    std::fs::read_to_string(dir.join(label)).map_or(0, |s| s.lines().count())
}

/// What one round left running, to check after the restart.
struct Round {
    completed: (String, Value),
    fragile: String,
    restartable: (String, String),
    fragile_input: String,
    restartable_input: (String, Value),
}

/// Start tasks in every state on the server at `url`.
async fn start_round(url: &str, r: usize, effects: &std::path::Path) -> Round {
    let label = |what: &str| format!("{what}-{r}");
    let completed = call(url, "restartable_job", json!({ "seconds": 0, "label": label("done") })).await;
    let completed_read = until(url, &completed, |t| t["status"] == "completed").await;
    let fragile = call(url, "fragile_job", json!({ "seconds": 600, "label": label("fragile") })).await;
    let restartable =
        call(url, "restartable_job", json!({ "seconds": 600, "label": label("restart") })).await;
    let fragile_input = call(url, "confirm_delete", json!({ "filename": label("kept") })).await;
    let restartable_input = call(url, "restartable_confirm", json!({ "filename": label("gone") })).await;
    until(url, &fragile_input, |t| t["status"] == "input_required").await;
    let asked = until(url, &restartable_input, |t| t["status"] == "input_required").await;
    // Both jobs' work has started (its side effect is counted) before the kill.
    guard("the jobs' work started", async {
        while side_effects(effects, &label("fragile")) < 1 || side_effects(effects, &label("restart")) < 1 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    Round {
        completed: (completed, completed_read),
        fragile,
        restartable: (restartable, label("restart")),
        fragile_input,
        restartable_input: (restartable_input, asked),
    }
}

/// After the restart: every rule of the round, checked; what went wrong, if anything.
async fn check_round(url: &str, round: &Round, effects: &std::path::Path, wrong: &mut Vec<String>) {
    let (id, before) = &round.completed;
    let after = get(url, id).await;
    if after != *before {
        wrong.push(format!("completed task {id} read {after} after the restart, {before} before"));
    }
    for id in [&round.fragile, &round.fragile_input] {
        let t = get(url, id).await;
        if t["status"] != "failed" || t["error"]["data"]["reason"] != "owner_lost" {
            wrong.push(format!("task {id} whose work may not run twice is {t} after the restart"));
        }
    }
    let (id, label) = &round.restartable;
    let t = get(url, id).await;
    if t["status"] != "working" {
        wrong.push(format!("restartable task {id} is {t} after the restart"));
    }
    guard("the restartable work ran again", async {
        while side_effects(effects, label) < 2 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    // Cancelled now, so a later loss must not run it again (checked at the end).
    let cancel = rpc(url, "tasks/cancel", json!({ "taskId": id })).await;
    assert_eq!(cancel["result"], json!({ "resultType": "complete" }), "an empty acknowledgement: {cancel}");
    let (id, asked) = &round.restartable_input;
    let t = get(url, id).await;
    if t["status"] != "input_required" || t["inputRequests"] != asked["inputRequests"] {
        wrong.push(format!(
            "restartable task {id} waiting for input is {t} after the restart, {asked} before"
        ));
        return;
    }
    let key = asked["inputRequests"].as_object().and_then(|m| m.keys().next().cloned()).unwrap_or_default();
    let answer = json!({ "taskId": id, "inputResponses": { key: { "action": "accept", "content": { "confirm": true } } } });
    let ack = rpc(url, "tasks/update", answer).await;
    assert_eq!(ack["result"], json!({ "resultType": "complete" }), "an empty acknowledgement: {ack}");
    let done = until(url, id, |t| ORDER[2..].contains(&t["status"].as_str().unwrap_or_default())).await;
    let text = done["result"]["content"][0]["text"].as_str().unwrap_or_default();
    if done["status"] != "completed" || !text.starts_with("deleted ") {
        wrong.push(format!("restartable task {id} ended {done} once answered"));
    }
}

/// `rounds` times: tasks in every state, `kill -9`, a restart on the same files, every rule
/// checked. What went wrong (empty: every rule held).
async fn kill_and_restart(rounds: usize) -> Vec<String> {
    let data = fresh_data_dir();
    let effects = fresh_data_dir();
    std::fs::create_dir_all(&effects).expect("a side-effect directory");
    let (data_arg, effects_arg) = (data.display().to_string(), effects.display().to_string());
    let args = ["--data-dir", data_arg.as_str(), "--revisions", "all"];
    let env = [("FORKLESS_DEMO_SIDE_EFFECTS", effects_arg.as_str())];
    let mut server = Serve::start_with_env("127.0.0.1:0", &args, &env).await;
    let mut wrong = Vec::new();
    let mut seen: Vec<(String, Value)> = Vec::new();
    for r in 0..rounds {
        let round = start_round(&server.url, r, &effects).await;
        for id in [
            &round.completed.0,
            &round.fragile,
            &round.restartable.0,
            &round.fragile_input,
            &round.restartable_input.0,
        ] {
            seen.push((id.clone(), get(&server.url, id).await));
        }
        server.signal("KILL");
        let _ = server.wait().await;
        server = Serve::start_with_env("127.0.0.1:0", &args, &env).await;
        // Every id the client was ever given still names its task, moving only forward.
        for (id, before) in &mut seen {
            let after = get(&server.url, id).await;
            moves_forward(before, &after);
            *before = after;
        }
        check_round(&server.url, &round, &effects, &mut wrong).await;
    }
    server.terminate();
    let _ = server.wait().await;
    for r in 0..rounds {
        let runs = side_effects(&effects, &format!("restart-{r}"));
        if runs != 2 {
            wrong.push(format!(
                "restartable job {r} ran {runs} times over {rounds} losses; once and once again is right"
            ));
        }
        let fragile = side_effects(&effects, &format!("fragile-{r}"));
        if fragile != 1 {
            wrong.push(format!("fragile job {r} ran {fragile} times"));
        }
    }
    wrong
}

/// Twenty `kill -9`s of the durable default with tasks in every state: every rule holds in
/// every round.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_survive_kill_9_by_their_policy_over_twenty_rounds() {
    let wrong = kill_and_restart(20).await;
    assert!(wrong.is_empty(), "{} rule(s) broken:\n{}", wrong.len(), wrong.join("\n"));
}

/// `rounds` times: a task created and the server killed (`kill -9`) the moment its id is
/// acknowledged, then restarted on the same files; each id that no longer resolves. With
/// `early`, the store acknowledges task writes before their sync (its test hook).
async fn killed_at_the_acknowledgement(rounds: usize, early: bool) -> Vec<String> {
    let data = fresh_data_dir().display().to_string();
    // A long batch window: a write waits up to 200 ms for its group's sync, so an early
    // acknowledgement leaves a wide window for the kill (the positive rounds wait it out).
    let args = ["--data-dir", data.as_str(), "--revisions", "all", "--batch-window", "200"];
    let env: &[(&str, &str)] = if early { &[("FORKLESS_TEST_EARLY_DELIVERY", "1")] } else { &[] };
    let mut server = Serve::start_with_env("127.0.0.1:0", &args, env).await;
    let mut lost = Vec::new();
    for r in 0..rounds {
        let id =
            call(&server.url, "fragile_job", json!({ "seconds": 600, "label": format!("acked-{r}") })).await;
        server.signal("KILL");
        let _ = server.wait().await;
        server = Serve::start_with_env("127.0.0.1:0", &args, env).await;
        let read = rpc(&server.url, "tasks/get", json!({ "taskId": id })).await;
        if read.get("result").is_none() {
            lost.push(format!("task {id}, acknowledged before the kill, is unknown after it: {read}"));
        }
    }
    server.terminate();
    let _ = server.wait().await;
    lost
}

/// A task id is durable before the client is given it: killed the moment it was
/// acknowledged, the server still knows it after a restart.
#[tokio::test]
async fn a_task_acknowledged_just_before_kill_9_is_never_forgotten() {
    let lost = killed_at_the_acknowledgement(5, false).await;
    assert!(lost.is_empty(), "{}", lost.join("\n"));
}

/// The negative control: with task writes acknowledged before their sync, the same rounds
/// lose a task the client was given.
#[tokio::test]
async fn negative_control_a_task_acknowledged_before_its_sync_is_caught() {
    let lost = killed_at_the_acknowledgement(10, true).await;
    assert!(!lost.is_empty(), "no acknowledged task was lost in ten rounds");
}
