//! The demo's tools that show what the loss of a task's process does (PROTOCOL section 13),
//! one of each kind:
//!
//! - `fragile_job {seconds, label}`: work that must not run twice, started with the default
//!   policy: if the process running it is lost, the task ends `failed` with reason
//!   `owner_lost`;
//! - `restartable_job {seconds, label}`: idempotent work, its inputs kept with the task: if the
//!   process running it is lost, exactly one successor runs it again;
//! - `restartable_confirm {filename}`: restartable work that asks the client to confirm first
//!   and is written to run again (its earlier answer comes back from the task, not the client);
//! - `counted_call {millis, label}`: a plain request (never a task) with a side effect, for
//!   showing that a re-issued keyed request runs once (PROTOCOL section 14).
//!
//! Each run of a job's work is a side effect an operator can count outside the server: with
//! `FORKLESS_DEMO_SIDE_EFFECTS=DIR` set, every start of a work appends the line
//! `attempt N` to `DIR/LABEL`. Without it, nothing is written.

use std::io::Write as _;
use std::time::Duration;

use forkless_server::tasks::{self, TaskContext};
use forkless_server::{RequestContext, RpcError};
use serde_json::{Value, json};

use super::mrtr::elicit;
use super::task_tools::{ask_for, confirmed, stopped_by};
use super::{parse_params, text_result};

/// The environment variable naming the directory side effects are counted in.
pub const SIDE_EFFECTS_ENV: &str = "FORKLESS_DEMO_SIDE_EFFECTS";

/// The longest a job works, in seconds.
const MAX_SECONDS: u64 = 600;

/// The tools, by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Fragile,
    Restartable,
    Confirm,
    Counted,
}

impl Kind {
    const ALL: [Self; 4] = [Self::Fragile, Self::Restartable, Self::Confirm, Self::Counted];

    const fn name(self) -> &'static str {
        match self {
            Self::Fragile => "fragile_job",
            Self::Restartable => "restartable_job",
            Self::Confirm => "restartable_confirm",
            Self::Counted => "counted_call",
        }
    }

    /// The tool named `name`, if it is one of these.
    pub(super) fn named(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.name() == name)
    }

    /// Every `tools/list` entry.
    pub(super) fn entries() -> impl Iterator<Item = Value> {
        Self::ALL.into_iter().map(|t| {
            let (description, properties) = match t {
                Self::Fragile => (
                    "A task whose work must not run twice: lost with its process, it fails (owner_lost)",
                    job_properties(),
                ),
                Self::Restartable => (
                    "A task whose idempotent work runs again, once, if its process is lost",
                    job_properties(),
                ),
                Self::Confirm => (
                    "A restartable task that asks the client to confirm first",
                    json!({ "filename": { "type": "string" } }),
                ),
                Self::Counted => (
                    "A plain call with a side effect: counts its start, then answers after `millis`",
                    json!({
                        "millis": { "type": "integer", "minimum": 0, "maximum": MAX_SECONDS * 1000 },
                        "label": { "type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$" },
                    }),
                ),
            };
            json!({ "name": t.name(), "description": description, "inputSchema": { "type": "object", "properties": properties } })
        })
    }
}

fn job_properties() -> Value {
    json!({
        "seconds": { "type": "integer", "minimum": 0, "maximum": MAX_SECONDS },
        "label": { "type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$" },
    })
}

#[derive(serde::Deserialize, serde::Serialize)]
struct Job {
    seconds: u64,
    label: String,
}

impl Job {
    fn checked(self) -> Result<Self, RpcError> {
        if self.seconds > MAX_SECONDS {
            return Err(RpcError::invalid_params(format!("seconds must be at most {MAX_SECONDS}")));
        }
        let fine = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
        if self.label.is_empty() || self.label.len() > 64 || !self.label.chars().all(fine) {
            return Err(RpcError::invalid_params("label must be 1 to 64 letters, digits, '-' or '_'"));
        }
        Ok(self)
    }
}

#[derive(serde::Deserialize)]
struct Counted {
    millis: u64,
    label: String,
}

#[derive(serde::Deserialize)]
struct Confirm {
    #[serde(default)]
    filename: String,
}

/// Run `kind` for a `tools/call` with `params`: a task (or `-32021` for a client that did not
/// declare the extension), or the counted call's answer.
pub(super) async fn call(kind: Kind, params: &Value, ctx: &RequestContext) -> Result<Value, RpcError> {
    let arguments = Some(params.get("arguments").cloned().unwrap_or_else(|| json!({})));
    let starter = || ctx.tasks().ok_or_else(tasks::missing_capability);
    match kind {
        Kind::Counted => counted(arguments, ctx).await,
        Kind::Fragile => {
            let job = parse_params::<Job>(arguments)?.checked()?;
            starter()?.start(move |task| async move { work(&task, &job).await }).await
        }
        Kind::Restartable => {
            let job = parse_params::<Job>(arguments)?.checked()?;
            starter()?.start_restartable(json!({ "tool": kind.name(), "job": job })).await
        }
        Kind::Confirm => {
            let Confirm { filename } = parse_params(arguments)?;
            starter()?.start_restartable(json!({ "tool": kind.name(), "filename": filename })).await
        }
    }
}

/// The counted call: count the start, answer after `millis` (unless cancelled first).
async fn counted(arguments: Option<Value>, ctx: &RequestContext) -> Result<Value, RpcError> {
    let Counted { millis, label } = parse_params(arguments)?;
    let Job { label, .. } = Job { seconds: millis / 1000, label }.checked()?;
    let n = count_start(&label, 1);
    tokio::select! {
        () = tokio::time::sleep(Duration::from_millis(millis)) => {}
        () = ctx.cancellation().cancelled() => return Err(RpcError::new(super::REQUEST_CANCELLED, "cancelled")),
    }
    Ok(text_result(format!("{label}: start {n}")))
}

/// Run a restartable task's work again (or the first time) on its kept inputs.
pub(super) async fn run(inputs: Value, task: TaskContext) -> Result<Value, RpcError> {
    match inputs.get("tool").and_then(Value::as_str).and_then(Kind::named) {
        Some(Kind::Restartable) => {
            let job = parse_params::<Job>(inputs.get("job").cloned())?;
            work(&task, &job).await
        }
        Some(Kind::Confirm) => {
            let filename = inputs.get("filename").and_then(Value::as_str).unwrap_or_default();
            let ask = elicit(&format!("Delete {filename}?"), "confirm", "boolean");
            let answers = ask_for(&task, [("confirm", ask)]).await?;
            let verb = if confirmed(&answers) { "deleted" } else { "kept" };
            Ok(text_result(format!("{verb} {filename} (attempt {})", task.attempt())))
        }
        _ => Err(RpcError::internal(format!("no restartable work for the inputs {inputs}"))),
    }
}

/// A job's work: count the start, then work `seconds` (unless cancelled).
async fn work(task: &TaskContext, job: &Job) -> Result<Value, RpcError> {
    let _ = count_start(&job.label, task.attempt());
    stopped_by(task, tokio::time::sleep(Duration::from_secs(job.seconds))).await?;
    Ok(text_result(format!("job {} done (attempt {})", job.label, task.attempt())))
}

/// Append `attempt N` to the side-effect file of `label`, if side effects are counted: how
/// many starts the file holds now (0 when they are not counted).
fn count_start(label: &str, attempt: u64) -> usize {
    let Some(dir) = std::env::var_os(SIDE_EFFECTS_ENV) else { return 0 };
    let path = std::path::Path::new(&dir).join(label);
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| writeln!(f, "attempt {attempt}").and_then(|()| f.sync_data()));
    if let Err(e) = written {
        tracing::warn!(path = %path.display(), error = %e, "a side effect could not be counted");
    }
    std::fs::read_to_string(&path).map_or(0, |s| s.lines().count())
}
