//! The tools that run as tasks (the tasks extension of 2026-07-28, SEP-2663): the fixtures the
//! conformance suite calls by name, each the smallest honest version of what it stands for.
//!
//! A request that declared the extension gets a task (from `forkless-server`'s task table);
//! one that did not gets the result at once when the tool can work that way (`greet`,
//! `slow_compute`), or `-32021` naming the extension when it cannot (the others). The task's
//! status, its wire shapes and `tasks/get|update|cancel` are the server's, not this module's.

use std::time::Duration;

use forkless_server::tasks::{self, TaskContext, TaskInputError};
use forkless_server::{RequestContext, RpcError};
use serde_json::{Map, Value, json};

use super::mrtr::{self, elicit, elicited};
use super::{REQUEST_CANCELLED, parse_params, pause, text_result, tool_error};

/// The longest `slow_compute` accepts, in seconds.
pub(super) const MAX_SECONDS: u64 = 600;

/// How long `failing_job` and `protocol_error_job` work before they fail.
const JOB_TIME: Duration = Duration::from_millis(300);

/// The tools, by what they do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum TaskTool {
    /// Answers at once: `Hello, {name}!`.
    Greet,
    /// Sleeps `seconds`, as a task when it may (and at once for `seconds: 0`).
    SlowCompute,
    /// A task that ends with a tool error (`isError: true`): completed, not failed.
    FailingJob,
    /// A task that ends with a JSON-RPC error: failed.
    ProtocolErrorJob,
    /// A task that asks the client to confirm first (one input request).
    ConfirmDelete,
    /// A task that asks for two inputs at once.
    MultiInput,
    /// Asks for a name as a multi-round-trip request, then continues as a task.
    WithTask,
}

impl TaskTool {
    const ALL: [Self; 7] = [
        Self::Greet,
        Self::SlowCompute,
        Self::FailingJob,
        Self::ProtocolErrorJob,
        Self::ConfirmDelete,
        Self::MultiInput,
        Self::WithTask,
    ];

    const fn name(self) -> &'static str {
        match self {
            Self::Greet => "greet",
            Self::SlowCompute => "slow_compute",
            Self::FailingJob => "failing_job",
            Self::ProtocolErrorJob => "protocol_error_job",
            Self::ConfirmDelete => "confirm_delete",
            Self::MultiInput => "multi_input",
            Self::WithTask => "test_tool_with_task",
        }
    }

    /// The tool named `name`, if it is one of these.
    pub(super) fn named(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.name() == name)
    }

    /// Every `tools/list` entry.
    pub(super) fn entries() -> impl Iterator<Item = Value> {
        Self::ALL.into_iter().map(Self::entry)
    }

    fn entry(self) -> Value {
        let (description, properties) = match self {
            Self::Greet => ("Says hello at once (never a task)", json!({ "name": { "type": "string" } })),
            Self::SlowCompute => (
                "Works for `seconds` (at most 600), as a task when the client declared the tasks extension",
                json!({ "seconds": { "type": "integer", "minimum": 0, "maximum": MAX_SECONDS }, "label": { "type": "string" } }),
            ),
            Self::FailingJob => ("A task whose tool reports an error (isError)", json!({})),
            Self::ProtocolErrorJob => ("A task that fails with a JSON-RPC error", json!({})),
            Self::ConfirmDelete => {
                ("A task that asks the client to confirm first", json!({ "filename": { "type": "string" } }))
            }
            Self::MultiInput => ("A task that asks for two inputs at once", json!({})),
            Self::WithTask => ("Asks for a name (multi-round trip), then runs as a task", json!({})),
        };
        json!({
            "name": self.name(),
            "description": description,
            "inputSchema": { "type": "object", "properties": properties },
        })
    }
}

#[derive(serde::Deserialize)]
struct Greet {
    #[serde(default)]
    name: String,
}

#[derive(serde::Deserialize)]
struct SlowCompute {
    seconds: u64,
    #[serde(default)]
    label: String,
}

#[derive(serde::Deserialize)]
struct ConfirmDelete {
    #[serde(default)]
    filename: String,
}

/// Run `tool` for a `tools/call` with `params`.
pub(super) async fn call(tool: TaskTool, params: &Value, ctx: &RequestContext) -> Result<Value, RpcError> {
    let arguments = || Some(params.get("arguments").cloned().unwrap_or_else(|| json!({})));
    let starter = ctx.tasks();
    match tool {
        TaskTool::Greet => {
            let Greet { name } = parse_params(arguments())?;
            Ok(text_result(format!("Hello, {name}!")))
        }
        TaskTool::SlowCompute => {
            let SlowCompute { seconds, label } = parse_params(arguments())?;
            if seconds > MAX_SECONDS {
                return Err(RpcError::invalid_params(format!("seconds must be at most {MAX_SECONDS}")));
            }
            let done = move || text_result(format!("computed `{label}` in {seconds} s"));
            match starter {
                Some(tasks) if seconds > 0 => {
                    tasks
                        .start(move |task| async move {
                            stopped_by(&task, tokio::time::sleep(Duration::from_secs(seconds))).await?;
                            Ok(done())
                        })
                        .await
                }
                _ => {
                    pause(ctx, seconds.saturating_mul(1000)).await?;
                    Ok(done())
                }
            }
        }
        TaskTool::FailingJob => {
            let tasks = starter.ok_or_else(tasks::missing_capability)?;
            tasks
                .start(|task| async move {
                    stopped_by(&task, tokio::time::sleep(JOB_TIME)).await?;
                    Ok(tool_error("the job failed: its input could not be processed"))
                })
                .await
        }
        TaskTool::ProtocolErrorJob => {
            let tasks = starter.ok_or_else(tasks::missing_capability)?;
            tasks
                .start(|task| async move {
                    stopped_by(&task, tokio::time::sleep(JOB_TIME)).await?;
                    Err(RpcError::internal("the job broke inside the server"))
                })
                .await
        }
        TaskTool::ConfirmDelete => {
            let ConfirmDelete { filename } = parse_params(arguments())?;
            let tasks = starter.ok_or_else(tasks::missing_capability)?;
            tasks
                .start(move |task| async move {
                    let ask = elicit(&format!("Delete {filename}?"), "confirm", "boolean");
                    let answers = ask_for(&task, [("confirm", ask)]).await?;
                    Ok(text_result(if confirmed(&answers) {
                        format!("deleted {filename}")
                    } else {
                        format!("kept {filename}")
                    }))
                })
                .await
        }
        TaskTool::MultiInput => {
            let tasks = starter.ok_or_else(tasks::missing_capability)?;
            tasks
                .start(|task| async move {
                    let asks = [
                        ("name", elicit("What is your name?", "name", "string")),
                        ("confirm", elicit("Shall I go on?", "confirm", "boolean")),
                    ];
                    let answers = ask_for(&task, asks).await?;
                    let who = answers.get("name").and_then(|a| elicited(a, "name")).unwrap_or("stranger");
                    Ok(text_result(format!("{who} answered both questions")))
                })
                .await
        }
        TaskTool::WithTask => {
            let who = match mrtr::name_first(tool.name(), params, ctx) {
                Ok(who) => who,
                Err(ask) => return Ok(ask),
            };
            let tasks = starter.ok_or_else(tasks::missing_capability)?;
            tasks
                .start(move |task| async move {
                    stopped_by(&task, tokio::time::sleep(JOB_TIME)).await?;
                    Ok(text_result(format!("Hello, {who}! (answered by task {})", task.id())))
                })
                .await
        }
    }
}

/// Whether the client accepted a `confirm` elicitation.
pub(super) fn confirmed(answers: &Map<String, Value>) -> bool {
    answers.get("confirm").is_some_and(|a| a["action"] == "accept" && a["content"]["confirm"] == true)
}

/// Wait for `work`, or fail with `-32800` when the task is cancelled first.
pub(super) async fn stopped_by(task: &TaskContext, work: impl Future<Output = ()>) -> Result<(), RpcError> {
    tokio::select! {
        () = work => Ok(()),
        () = task.cancellation().cancelled() => Err(RpcError::new(REQUEST_CANCELLED, "the task was cancelled")),
    }
}

/// Ask the client for `asks` (key, request) through the task; the answers by key.
pub(super) async fn ask_for<const N: usize>(
    task: &TaskContext,
    asks: [(&str, Value); N],
) -> Result<Map<String, Value>, RpcError> {
    let requests = asks.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
    task.input(requests).await.map_err(|e| match e {
        TaskInputError::Cancelled => RpcError::new(REQUEST_CANCELLED, e.to_string()),
        TaskInputError::Refused(_) | TaskInputError::Store(_) => RpcError::internal(e.to_string()),
    })
}
