//! `forkless check`'s task scenarios (2026-07-28, the tasks extension, PROTOCOL section 13):
//! what a client holding a task id can observe of any server. A task id must keep naming its
//! task on every node and across a restart until its time to live ends, a status only moves
//! forward, and an ended task reads the same every time.
//!
//! | scenario | PASS | FAIL | UNSUPPORTED |
//! |---|---|---|---|
//! | `task-read-twice` | a finished task reads back byte for byte the same, twice, from every URL | two reads differ, or a URL does not know it | no 2026-07-28 or no tasks extension, or no task tool |
//! | `task-every-node` | 20 tasks, each read from every URL the moment `CreateTaskResult` arrives: every read resolves | a URL does not know a task it was just given | fewer than two URLs (`--also-url`) |
//! | `task-crash-working` | a task working when `--restart-cmd` ran still resolves after it, and has not moved back: working, completed, or failed (with an error) | unknown after the restart, or its status moved back | no `--restart-cmd` |
//! | `task-crash-input` | a task waiting for input when `--restart-cmd` ran still resolves after it: waiting for the same requests, or failed | unknown after the restart, or another status | no `--restart-cmd`, or no input tool |
//! | `task-node-loss` | a task working on the first URL when `--kill-cmd` killed that node resolves on the other URLs at every read, and ends (failed with an error, or completed by a restart) within 90 s | unknown on another node, its status moved back, or still working after 90 s (left working for ever) | fewer than two URLs, or no `--kill-cmd` |
//!
//! It owns these scenarios and the little 2026-07-28 HTTP they speak; the restart is
//! [`super::steps::restart`]'s.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::{Instant, sleep};

use super::steps::{Ctx, Ev, Step, restart, run};
use super::{Outcome, Scenario};

/// The task scenarios, in the order they run (after the stream scenarios).
pub(crate) const TASK_SCENARIOS: [Scenario; 5] = [
    Scenario {
        name: "task-read-twice",
        title: "finish a task, read it twice from every URL",
        pass_if: "the same bytes every time, everywhere",
    },
    Scenario {
        name: "task-every-node",
        title: "create 20 tasks, read each from every URL at once",
        pass_if: "every read resolves",
    },
    Scenario {
        name: "task-crash-working",
        title: "restart the server (--restart-cmd) while a task works",
        pass_if: "the id still resolves; working, completed or failed, never back",
    },
    Scenario {
        name: "task-crash-input",
        title: "restart the server (--restart-cmd) while a task waits for input",
        pass_if: "the id still resolves: waiting for the same requests, or failed",
    },
    Scenario {
        name: "task-node-loss",
        title: "kill the first URL's node (--kill-cmd) while a task works there",
        pass_if: "it resolves on the other URLs at every read and ends within 90 s",
    },
];

/// What the task scenarios need: the endpoints and the tools.
#[derive(Clone, Debug)]
pub(crate) struct TaskTarget {
    /// The check's HTTP client.
    pub(crate) http: reqwest::Client,
    /// The URL checked and `--also-url`s (other nodes of the same deployment).
    pub(crate) urls: Vec<String>,
    /// `--task-tool` (default `slow_compute`), called with `{"seconds": 1}` where a task must
    /// end soon and `{"seconds": 60}` where it must still work when the server restarts.
    pub(crate) tool: String,
    /// `--input-tool`: a task that asks for input (default `confirm_delete`).
    pub(crate) input_tool: (String, Value),
    /// `--kill-cmd`: kills the first URL's node for good.
    pub(crate) kill: Option<String>,
}

impl TaskTarget {
    async fn post(&self, url: &str, method: &str, params: Value) -> Result<Value, String> {
        let mut params = params;
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": { "elicitation": {}, "extensions": { "io.modelcontextprotocol/tasks": {} } },
            "io.modelcontextprotocol/clientInfo": { "name": "forkless-check", "version": env!("CARGO_PKG_VERSION") },
        });
        let name =
            params.get("name").or_else(|| params.get("taskId")).and_then(Value::as_str).map(str::to_owned);
        let mut rb = self
            .http
            .post(url)
            .timeout(Duration::from_secs(30))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", method);
        if let Some(name) = name {
            rb = rb.header("mcp-name", name);
        }
        let body = json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params });
        let resp = rb.body(body.to_string()).send().await.map_err(|e| format!("{method}: {e}"))?;
        let status = resp.status();
        let text = resp.text().await.map_err(|e| format!("{method}: {e}"))?;
        let last = text.lines().filter_map(|l| l.strip_prefix("data:")).next_back().unwrap_or(&text);
        serde_json::from_str(last.trim())
            .map_err(|_| format!("{method}: HTTP {status}, not JSON-RPC: {text:.200}"))
    }

    /// Whether the server offers tasks in 2026-07-28.
    async fn offers_tasks(&self, ev: &mut Ev) -> Step<()> {
        let found =
            self.post(&self.urls[0], "server/discover", json!({})).await.map_err(|e| ev.unsupported(e))?;
        let tasks = found.pointer("/result/capabilities/extensions/io.modelcontextprotocol~1tasks");
        if tasks.is_none() {
            return Err(ev.unsupported("server/discover lists no 2026-07-28 tasks extension"));
        }
        Ok(())
    }

    /// Call `tool` and return its task id.
    async fn create(&self, url: &str, tool: &(String, Value), ev: &mut Ev) -> Step<String> {
        let answer = self
            .post(url, "tools/call", json!({ "name": tool.0, "arguments": tool.1 }))
            .await
            .map_err(|e| ev.unsupported(e))?;
        match answer.pointer("/result/taskId").and_then(Value::as_str) {
            Some(id) => {
                ev.note(format!("{} became task {id}", tool.0));
                Ok(id.to_owned())
            }
            None => Err(ev.unsupported(format!("{} did not become a task: {answer:.300}", tool.0))),
        }
    }

    /// `tasks/get` of `id` at `url`: the task, or the refusal's text.
    async fn get(&self, url: &str, id: &str) -> Result<Value, String> {
        let answer = self.post(url, "tasks/get", json!({ "taskId": id })).await?;
        answer.get("result").cloned().ok_or_else(|| format!("tasks/get {id} at {url}: {answer}"))
    }

    /// Poll `id` at the first URL until `done` holds (30 s at most).
    async fn until(&self, id: &str, ev: &mut Ev, done: impl Fn(&Value) -> bool) -> Step<Value> {
        let give_up = Instant::now() + Duration::from_secs(30);
        loop {
            let task = self.get(&self.urls[0], id).await.map_err(|e| ev.fail(e))?;
            if done(&task) {
                return Ok(task);
            }
            if Instant::now() > give_up {
                return Err(ev.fail(format!("task {id} stayed {} for 30 s", task["status"])));
            }
            sleep(Duration::from_millis(50)).await;
        }
    }
}

const ORDER: [&str; 5] = ["working", "input_required", "completed", "failed", "cancelled"];

fn rank(task: &Value) -> usize {
    let status = task["status"].as_str().unwrap_or_default();
    ORDER.iter().position(|s| *s == status).map_or(usize::MAX, |i| i.min(2))
}

impl TaskTarget {
    fn short(&self) -> (String, Value) {
        (self.tool.clone(), json!({ "seconds": 1 }))
    }
    fn long(&self) -> (String, Value) {
        (self.tool.clone(), json!({ "seconds": 60 }))
    }
}

pub(crate) async fn read_twice(t: &TaskTarget) -> Outcome {
    run(&mut Ev::default(), async |ev| {
        t.offers_tasks(ev).await?;
        let id = t.create(&t.urls[0], &t.short(), ev).await?;
        let done = t.until(&id, ev, |task| rank(task) == 2).await?;
        for url in &t.urls {
            for read in 0..2 {
                let again = t.get(url, &id).await.map_err(|e| ev.fail(e))?;
                if again != done {
                    return Ok(ev.fail(format!("read {read} at {url} differs: {again} after {done}")));
                }
            }
        }
        Ok(ev.pass(format!(
            "{} ended {}; every read the same, at {} URL(s)",
            id,
            done["status"],
            t.urls.len()
        )))
    })
    .await
}

pub(crate) async fn every_node(t: &TaskTarget) -> Outcome {
    run(&mut Ev::default(), async |ev| {
        if t.urls.len() < 2 {
            return Ok(ev.unsupported("one URL: give the deployment's other nodes with --also-url"));
        }
        t.offers_tasks(ev).await?;
        for round in 0..20 {
            let origin = &t.urls[round % t.urls.len()];
            let id = t.create(origin, &t.long(), ev).await?;
            let reads = t.urls.iter().map(|url| t.get(url, &id));
            for (url, read) in t.urls.iter().zip(futures::future::join_all(reads).await) {
                if let Err(e) = read {
                    return Ok(
                        ev.fail(format!("task {id}, created at {origin}, unknown at {url} at once: {e}"))
                    );
                }
            }
        }
        Ok(ev.pass(format!("20 tasks, each resolved at once on all {} URLs", t.urls.len())))
    })
    .await
}

pub(crate) async fn crash_working(ctx: &mut Ctx, t: &TaskTarget) -> Outcome {
    run(&mut Ev::default(), async |ev| {
        let Some(command) = ctx.restart.clone() else {
            return Ok(ev.unsupported("no --restart-cmd: this scenario needs a way to restart the server"));
        };
        t.offers_tasks(ev).await?;
        let id = t.create(&t.urls[0], &t.long(), ev).await?;
        let before = t.get(&t.urls[0], &id).await.map_err(|e| ev.fail(e))?;
        restart(&command, &ctx.target, ev).await?;
        let after = t.get(&t.urls[0], &id).await.map_err(|e| ev.fail(format!("after the restart: {e}")))?;
        ev.note(format!("before the restart {}, after it {}", before["status"], after["status"]));
        if rank(&after) < rank(&before) {
            return Ok(
                ev.fail(format!("the status moved back: {} after {}", after["status"], before["status"]))
            );
        }
        if after["status"] == "failed" && after.get("error").is_none() {
            return Ok(ev.fail("failed without an error"));
        }
        Ok(ev.pass(format!("task {id} resolves after the restart ({})", after["status"])))
    })
    .await
}

pub(crate) async fn crash_input(ctx: &mut Ctx, t: &TaskTarget) -> Outcome {
    run(&mut Ev::default(), async |ev| {
        let Some(command) = ctx.restart.clone() else {
            return Ok(ev.unsupported("no --restart-cmd: this scenario needs a way to restart the server"));
        };
        t.offers_tasks(ev).await?;
        let id = t.create(&t.urls[0], &t.input_tool, ev).await?;
        let waiting = t.until(&id, ev, |task| task["status"] != "working").await?;
        if waiting["status"] != "input_required" {
            return Err(
                ev.unsupported(format!("{} did not ask for input: {}", t.input_tool.0, waiting["status"]))
            );
        }
        restart(&command, &ctx.target, ev).await?;
        let after = t.get(&t.urls[0], &id).await.map_err(|e| ev.fail(format!("after the restart: {e}")))?;
        match after["status"].as_str() {
            Some("input_required") if after["inputRequests"] == waiting["inputRequests"] => {
                Ok(ev.pass(format!("task {id} still waits for the same requests")))
            }
            Some("failed") if after.get("error").is_some() => {
                Ok(ev.pass(format!("task {id} failed with {}", after["error"])))
            }
            _ => Ok(ev.fail(format!(
                "after the restart {after}; before it waited for {}",
                waiting["inputRequests"]
            ))),
        }
    })
    .await
}

pub(crate) async fn node_loss(t: &TaskTarget) -> Outcome {
    run(&mut Ev::default(), async |ev| {
        let Some(command) = t.kill.clone() else {
            return Ok(
                ev.unsupported("no --kill-cmd: this scenario needs a way to kill the first URL's node")
            );
        };
        if t.urls.len() < 2 {
            return Ok(ev.unsupported("one URL: give the deployment's other nodes with --also-url"));
        }
        t.offers_tasks(ev).await?;
        let id = t.create(&t.urls[0], &(t.tool.clone(), json!({ "seconds": 10 })), ev).await?;
        let mut last = t.get(&t.urls[1], &id).await.map_err(|e| ev.fail(e))?;
        let status = tokio::process::Command::new("sh").args(["-c", &command]).status().await;
        if !status.is_ok_and(|s| s.success()) {
            return Err(ev.fail("--kill-cmd failed"));
        }
        let killed = Instant::now();
        ev.note(format!("killed the node at {}; reading task {id} on the others", t.urls[0]));
        loop {
            for url in &t.urls[1..] {
                let task = t.get(url, &id).await.map_err(|e| ev.fail(format!("after the kill: {e}")))?;
                if rank(&task) < rank(&last) {
                    return Ok(ev.fail(format!(
                        "the status moved back: {} after {}",
                        task["status"], last["status"]
                    )));
                }
                last = task;
            }
            if rank(&last) == 2 {
                let ended = format!(
                    "{} {}",
                    last["status"],
                    last.get("error").map_or(String::new(), Value::to_string)
                );
                return Ok(ev.pass(format!(
                    "task {id} ended {ended} {:.1} s after the kill",
                    killed.elapsed().as_secs_f64()
                )));
            }
            if killed.elapsed() > Duration::from_secs(90) {
                return Ok(
                    ev.fail(format!("task {id} still {} 90 s after its node was killed", last["status"]))
                );
            }
            sleep(Duration::from_millis(100)).await;
        }
    })
    .await
}
