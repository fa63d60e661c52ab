//! The demo MCP server: [`DemoHandler`].
//!
//! It owns what an MCP server *offers*: tools, resources, resource templates, prompts,
//! completions, the client-chosen log level and resource subscriptions. It does not own the
//! transport: sessions, streams, resumption, `initialize` and `ping` are `forkless-server`'s.
//!
//! Two sets of things are offered:
//!
//! - the demo tools that exercise resumption (`echo`, `start-notification-stream`,
//!   `start-background-stream`, `long-task`), whose notifications are numbered `#1..#N` so a
//!   client can see a gap or a duplicate at a glance;
//! - the fixtures the MCP conformance suite (`@modelcontextprotocol/conformance` 0.1.16) calls
//!   by name (`test_*` tools and prompts, `test://` resources), implemented to what it checks.
//!
//! Bad input never panics: every argument is parsed into a typed struct and a mismatch is a
//! JSON-RPC invalid-params error (-32602).

mod mrtr;
mod prompts;
mod resources;
pub mod restartable;
mod task_tools;
mod tools;

pub use tools::{MAX_COUNT, MAX_INTERVAL_MS, Tool};

use core::str::FromStr;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use forkless_server::{Handler, RequestContext, RpcError, ServerInfo, SessionHandle, TaskSupport};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// The server name announced in `initialize`.
pub const SERVER_NAME: &str = "forkless-demo";

/// JSON-RPC code MCP uses for an unknown resource.
pub const RESOURCE_NOT_FOUND: i64 = -32002;

/// Code of the error a cancelled request ends with (the response is normally discarded).
pub const REQUEST_CANCELLED: i64 = -32800;

/// How many sessions' log levels and subscriptions are remembered; the oldest is forgotten
/// first. The handler is not told when a session ends, so the table must bound itself.
const SESSION_TABLE_CAPACITY: usize = 4096;

/// The demo MCP server. Cheap to clone; clones share their per-session state.
#[derive(Clone, Debug, Default)]
pub struct DemoHandler {
    sessions: Arc<Mutex<SessionTable>>,
    /// The server's `poll_after`, which `test_reconnection` waits out (see there).
    poll_after: Option<Duration>,
}

impl DemoHandler {
    /// A demo server with no session state yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Tell the demo the server closes SSE answers after `poll_after`, so `test_reconnection`
    /// can answer only after its stream was closed.
    #[must_use]
    pub fn with_poll_after(self, poll_after: Option<Duration>) -> Self {
        Self { poll_after, ..self }
    }

    /// The log level a session asked for with `logging/setLevel` (`debug` until it does).
    pub fn log_level(&self, session: &str) -> LogLevel {
        self.table().get(session).map_or(LogLevel::Debug, |s| s.log_level)
    }

    /// Whether a session has subscribed to `uri` with `resources/subscribe`.
    pub fn is_subscribed(&self, session: &str, uri: &str) -> bool {
        self.table().get(session).is_some_and(|s| s.subscriptions.iter().any(|u| u == uri))
    }

    /// Dispatch one request by method. Unknown methods get method-not-found (-32601).
    pub async fn dispatch(
        &self,
        method: &str,
        params: Option<Value>,
        ctx: &RequestContext,
    ) -> Result<Value, RpcError> {
        match method {
            "tools/list" => {
                let mut list = tools::list();
                if let Some(tools) = list["tools"].as_array_mut() {
                    tools.extend(mrtr::InputTool::ALL.map(mrtr::InputTool::entry));
                    tools.extend(task_tools::TaskTool::entries());
                    tools.extend(restartable::Kind::entries());
                }
                Ok(list)
            }
            "tools/call" => {
                let name = params.as_ref().and_then(|p| p["name"].as_str());
                if let (Some(tool), Some(p)) = (name.and_then(task_tools::TaskTool::named), &params) {
                    return task_tools::call(tool, p, ctx).await;
                }
                if let (Some(kind), Some(p)) = (name.and_then(restartable::Kind::named), &params) {
                    return restartable::call(kind, p, ctx).await;
                }
                let named = params.as_ref().and_then(|p| p["name"].as_str()).and_then(mrtr::InputTool::named);
                match (named, &params) {
                    (Some(tool), Some(p)) => mrtr::call(tool, p, ctx),
                    _ => tools::call(self, parse_params(params)?, ctx).await,
                }
            }
            "resources/list" => Ok(resources::list()),
            "resources/templates/list" => Ok(resources::list_templates()),
            "resources/read" => resources::read(parse_params(params)?),
            "resources/subscribe" => {
                let uri = resources::subscribable(parse_params(params)?)?;
                self.session_mut(ctx.session(), |s| {
                    if !s.subscriptions.contains(&uri) {
                        s.subscriptions.push(uri);
                    }
                });
                Ok(json!({}))
            }
            "resources/unsubscribe" => {
                let uri = resources::subscribable(parse_params(params)?)?;
                self.session_mut(ctx.session(), |s| s.subscriptions.retain(|u| *u != uri));
                Ok(json!({}))
            }
            "prompts/list" => {
                let mut list = prompts::list();
                if let Some(prompts) = list["prompts"].as_array_mut() {
                    prompts.push(json!({
                        "name": mrtr::PROMPT,
                        "description": "Conformance (2026-07-28, SEP-2322): needs an elicitation first",
                    }));
                }
                Ok(list)
            }
            "prompts/get" => match &params {
                Some(p) if p["name"] == mrtr::PROMPT => mrtr::prompt(p, ctx),
                _ => prompts::get(parse_params(params)?),
            },
            "completion/complete" => prompts::complete(parse_params(params)?),
            "logging/setLevel" => {
                let SetLevel { level } = parse_params(params)?;
                let level = level.parse::<LogLevel>().map_err(|()| {
                    RpcError::invalid_params(format!(
                        "unknown log level `{level}`; expected one of {}",
                        LogLevel::NAMES
                    ))
                })?;
                self.session_mut(ctx.session(), |s| s.log_level = level);
                Ok(json!({}))
            }
            "ping" => Ok(json!({})),
            other => Err(RpcError::method_not_found(other)),
        }
    }

    /// Send a `notifications/message` on the request's stream unless the session's level
    /// filters it out.
    async fn log(&self, ctx: &RequestContext, level: LogLevel, data: Value) -> Result<(), RpcError> {
        if level < self.log_level(&session_key(ctx.session())) {
            return Ok(());
        }
        ctx.log(level.as_str(), data).await.map_err(|e| RpcError::internal(format!("cannot send log: {e}")))
    }

    fn table(&self) -> MutexGuard<'_, SessionTable> {
        // The table holds plain data and every update is a single assignment, so a panic
        // elsewhere cannot leave it half-written: recovering from poisoning is safe.
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn session_mut(&self, session: &SessionHandle, update: impl FnOnce(&mut SessionState)) {
        update(self.table().entry(session_key(session)));
    }
}

impl Handler for DemoHandler {
    fn task_support(&self) -> TaskSupport {
        TaskSupport::Offered
    }

    fn tool_input_schema(&self, name: &str) -> Option<Value> {
        name.parse::<Tool>().ok().map(Tool::input_schema)
    }

    fn info(&self) -> ServerInfo {
        ServerInfo {
            name: SERVER_NAME.to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            capabilities: json!({
                "tools": { "listChanged": false },
                "resources": { "subscribe": true, "listChanged": false },
                "prompts": { "listChanged": false },
                "logging": {},
                "completions": {},
            }),
            instructions: Some(
                "Demo server of forkless. Tools `start-notification-stream`, `start-background-stream` \
                 and `long-task` emit numbered notifications (#1..#N) to observe resumption."
                    .to_owned(),
            ),
        }
    }

    async fn handle_request(
        &self,
        method: &str,
        params: Option<Value>,
        ctx: RequestContext,
    ) -> Result<Value, RpcError> {
        self.dispatch(method, params, &ctx).await
    }

    async fn run_task(
        &self,
        inputs: Value,
        task: forkless_server::tasks::TaskContext,
    ) -> Result<Value, RpcError> {
        restartable::run(inputs, task).await
    }

    async fn handle_notification(&self, method: &str, _params: Option<Value>, _session: SessionHandle) {
        tracing::debug!(method, "notification");
    }
}

/// Severity of a log notification, least severe first (RFC 5424 order, as MCP uses).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LogLevel {
    /// `debug`
    #[default]
    Debug,
    /// `info`
    Info,
    /// `notice`
    Notice,
    /// `warning`
    Warning,
    /// `error`
    Error,
    /// `critical`
    Critical,
    /// `alert`
    Alert,
    /// `emergency`
    Emergency,
}

impl LogLevel {
    const ALL: [Self; 8] = [
        Self::Debug,
        Self::Info,
        Self::Notice,
        Self::Warning,
        Self::Error,
        Self::Critical,
        Self::Alert,
        Self::Emergency,
    ];
    const NAMES: &'static str = "debug, info, notice, warning, error, critical, alert, emergency";

    /// The wire form.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Debug => "debug",
            Self::Info => "info",
            Self::Notice => "notice",
            Self::Warning => "warning",
            Self::Error => "error",
            Self::Critical => "critical",
            Self::Alert => "alert",
            Self::Emergency => "emergency",
        }
    }
}

impl FromStr for LogLevel {
    type Err = ();

    fn from_str(s: &str) -> Result<Self, ()> {
        Self::ALL.into_iter().find(|l| l.as_str() == s).ok_or(())
    }
}

#[derive(serde::Deserialize)]
struct SetLevel {
    level: String,
}

/// What the demo remembers per session.
#[derive(Clone, Debug, Default)]
struct SessionState {
    log_level: LogLevel,
    subscriptions: Vec<String>,
}

/// Per-session state, bounded: past [`SESSION_TABLE_CAPACITY`] the oldest session is forgotten
/// (it falls back to the defaults, which is what a new session has anyway).
#[derive(Debug, Default)]
struct SessionTable {
    states: HashMap<String, SessionState>,
    order: VecDeque<String>,
}

impl SessionTable {
    fn get(&self, session: &str) -> Option<&SessionState> {
        self.states.get(session)
    }

    fn entry(&mut self, session: String) -> &mut SessionState {
        if !self.states.contains_key(&session) {
            while self.order.len() >= SESSION_TABLE_CAPACITY {
                if let Some(oldest) = self.order.pop_front() {
                    self.states.remove(&oldest);
                }
            }
            self.order.push_back(session.clone());
        }
        self.states.entry(session).or_default()
    }
}

fn session_key(session: &SessionHandle) -> String {
    session.id().to_string()
}

/// Parse request params (absent counts as `{}`) into `T`; a mismatch is invalid params.
fn parse_params<T: DeserializeOwned>(params: Option<Value>) -> Result<T, RpcError> {
    let params = match params {
        None | Some(Value::Null) => Value::Object(serde_json::Map::new()),
        Some(p) => p,
    };
    serde_json::from_value(params).map_err(|e| RpcError::invalid_params(format!("invalid params: {e}")))
}

/// Wait `ms` milliseconds, or until the request is cancelled.
async fn pause(ctx: &RequestContext, ms: u64) -> Result<(), RpcError> {
    tokio::select! {
        () = tokio::time::sleep(Duration::from_millis(ms)) => Ok(()),
        () = ctx.cancellation().cancelled() => Err(RpcError::new(REQUEST_CANCELLED, "request cancelled")),
    }
}

/// A tool result with one text item.
fn text_result(text: impl Into<String>) -> Value {
    json!({ "content": [{ "type": "text", "text": text.into() }] })
}

/// A tool result that reports a failure of the tool itself (not of the protocol).
fn tool_error(text: impl Into<String>) -> Value {
    json!({ "content": [{ "type": "text", "text": text.into() }], "isError": true })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_levels_parse_and_order() {
        for level in LogLevel::ALL {
            assert_eq!(level.as_str().parse::<LogLevel>(), Ok(level));
        }
        assert!(LogLevel::Debug < LogLevel::Info && LogLevel::Alert < LogLevel::Emergency);
        assert_eq!("verbose".parse::<LogLevel>(), Err(()));
    }

    #[test]
    fn session_table_forgets_the_oldest_past_capacity() {
        let mut table = SessionTable::default();
        for i in 0..=SESSION_TABLE_CAPACITY {
            table.entry(format!("s{i}")).log_level = LogLevel::Error;
        }
        assert!(table.get("s0").is_none());
        assert_eq!(table.get("s1").map(|s| s.log_level), Some(LogLevel::Error));
        assert_eq!(table.states.len(), SESSION_TABLE_CAPACITY);
        assert_eq!(table.order.len(), SESSION_TABLE_CAPACITY);
    }

    #[test]
    fn params_absent_or_null_count_as_empty_object() {
        #[derive(serde::Deserialize)]
        struct Nothing {}
        assert!(parse_params::<Nothing>(None).is_ok());
        assert!(parse_params::<Nothing>(Some(Value::Null)).is_ok());
        let err = parse_params::<SetLevel>(Some(json!({ "level": 3 }))).err().expect("type mismatch");
        assert_eq!(err.code, -32602);
    }
}
