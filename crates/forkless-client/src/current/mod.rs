//! A client of the current revision (2026-07-28, no session) that never runs a call twice and
//! never loses one it can get back ([`CurrentClient`]).
//!
//! In 2026-07-28 a broken response stream loses the request and the client must re-issue it.
//! This client makes that safe where the server allows it:
//!
//! - every request carries an idempotency key (`_meta["dev.forkless/idempotencyKey"]`, 128
//!   random bits) when the server advertises forkless's idempotency extension in
//!   `server/discover`; a request whose answer did not arrive (a cut connection, a 5xx, a
//!   timeout) is re-issued with the same key, so the server runs it once and the re-issue
//!   reads its answer (PROTOCOL section 14). Without the extension a request is never re-issued:
//!   the lost answer is reported ([`Error::Transport`] and friends), never run twice silently;
//! - a result that is a task (`resultType: "task"`, the tasks extension) is driven to its end:
//!   its id is remembered in a [`TaskLog`] first, `tasks/get` is polled at the task's
//!   `pollIntervalMs`, input requests are answered by the client's
//!   [`crate::ServerRequestHandler`] through `tasks/update`, and the final result (or error) is
//!   returned as if the call had answered it; a client that crashed meanwhile finds the id in
//!   its log and polls on ([`CurrentClient::resume_tasks`]);
//! - a result that asks for input (`resultType: "input_required"`, the revision's
//!   multi-round trip) is answered by the same handler and the request sent again with the
//!   answers and the server's `requestState`, at most [`MAX_INPUT_ROUNDS`] times.
//!
//! It owns this request path, not the session revisions (the rest of the crate).

mod answer;
mod task_log;
mod tasks;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::error::Error;
use crate::events::{RejectAll, ServerRequestHandler};
use crate::http::{ACCEPT_POST, PROTOCOL_VERSION, status_error};

pub use task_log::{FileTaskLog, MemoryTaskLog, TaskLog};

/// The revision this client speaks.
pub const REVISION: &str = "2026-07-28";
/// The idempotency extension's name in `server/discover`.
const IDEMPOTENCY: &str = "dev.forkless/idempotency";
/// Where a request's idempotency key travels.
const IDEMPOTENCY_KEY: &str = "dev.forkless/idempotencyKey";
/// The tasks extension.
const TASKS: &str = "io.modelcontextprotocol/tasks";
/// How many `input_required` rounds one request may take before it is given up.
pub const MAX_INPUT_ROUNDS: u32 = 10;

/// How a [`CurrentClient`] behaves; every field has a default.
#[derive(Clone)]
pub struct CurrentSettings {
    /// How many times a request whose answer was lost is re-issued (keyed requests only).
    /// Default 8.
    pub reissues: u32,
    /// The pause before the first re-issue, doubled for each next one (up to 2 s). Default
    /// 50 ms.
    pub reissue_backoff: Duration,
    /// The longest one HTTP exchange may take. Default 60 s.
    pub request_timeout: Duration,
    /// Where the ids of tasks being waited for are kept. Default: in memory.
    pub task_log: Arc<dyn TaskLog>,
    /// Who answers a task's input requests (elicitation, sampling, roots). Default: every
    /// one refused.
    pub input: Arc<dyn ServerRequestHandler>,
    /// `clientInfo`. Default `forkless-client` and this crate's version.
    pub client_info: Value,
    /// The HTTP client (default headers such as credentials, TLS roots, proxies). Default: a
    /// plain `reqwest::Client`.
    pub http: Option<reqwest::Client>,
    /// Where the notifications an answer stream carries (progress, logs) go, as they arrive.
    /// Default: nowhere. Those of a stream that broke before its answer were sent once and are
    /// not repeated by the re-issue.
    pub notifications: Option<tokio::sync::mpsc::UnboundedSender<crate::Notification>>,
    /// Where every request's `Authorization` header comes from (asked afresh each time).
    /// Default none.
    pub credentials: Option<Arc<dyn crate::Credentials>>,
}

impl Default for CurrentSettings {
    fn default() -> Self {
        Self {
            reissues: 8,
            reissue_backoff: Duration::from_millis(50),
            request_timeout: Duration::from_secs(60),
            task_log: Arc::new(MemoryTaskLog::default()),
            input: Arc::new(RejectAll),
            client_info: json!({ "name": "forkless-client", "version": env!("CARGO_PKG_VERSION") }),
            http: None,
            notifications: None,
            credentials: None,
        }
    }
}

impl std::fmt::Debug for CurrentSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CurrentSettings")
            .field("reissues", &self.reissues)
            .field("reissue_backoff", &self.reissue_backoff)
            .field("request_timeout", &self.request_timeout)
            .finish_non_exhaustive()
    }
}

/// What `server/discover` said this server offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reissue {
    /// Idempotency keys: a lost answer is re-issued under its key and never runs twice.
    Keyed,
    /// No keys: a lost answer is reported, never re-issued.
    Never,
}

/// A 2026-07-28 client. Cheap to clone.
#[derive(Clone, Debug)]
pub struct CurrentClient {
    http: reqwest::Client,
    url: String,
    settings: Arc<CurrentSettings>,
    reissue: Reissue,
    tasks: bool,
    discovered: Arc<Value>,
}

/// One lost answer, told apart from a final one: a transport failure, a timeout or a 5xx may
/// be cured by a re-issue; anything else is the request's answer.
fn lost(e: &Error) -> bool {
    e.is_transient()
}

impl CurrentClient {
    /// Connect to `url`: `server/discover` must list 2026-07-28; what it advertises decides
    /// whether requests are keyed.
    pub async fn connect(url: &str, settings: CurrentSettings) -> Result<Self, Error> {
        let http = match &settings.http {
            Some(http) => http.clone(),
            None => reqwest::Client::builder().build()?,
        };
        let mut client = Self {
            http,
            url: url.to_owned(),
            settings: Arc::new(settings),
            reissue: Reissue::Never,
            tasks: false,
            discovered: Arc::default(),
        };
        let found = client.exchange("server/discover", Map::new()).await?;
        let versions = found.get("supportedVersions").and_then(Value::as_array);
        if !versions.is_some_and(|v| v.iter().any(|r| r == REVISION)) {
            return Err(Error::UnsupportedRevision(format!("the server lists {versions:?}, not {REVISION}")));
        }
        let extensions = found.pointer("/capabilities/extensions");
        let offers = |name: &str| extensions.and_then(|e| e.get(name)).is_some();
        client.reissue = if offers(IDEMPOTENCY) { Reissue::Keyed } else { Reissue::Never };
        client.tasks = offers(TASKS);
        client.discovered = Arc::new(found);
        Ok(client)
    }

    /// What `server/discover` answered (`serverInfo`, `capabilities`, `supportedVersions`, …).
    pub fn discovery(&self) -> &Value {
        &self.discovered
    }

    /// Whether lost answers are re-issued (the server offers idempotency keys).
    pub fn reissue(&self) -> Reissue {
        self.reissue
    }

    /// Send `method` with `params` and return its result: re-issued under its key when its
    /// answer is lost (if the server offers keys), a task driven to its end.
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, Error> {
        let Value::Object(mut params) = params else {
            return Err(Error::Protocol("request params must be an object".into()));
        };
        // The revision's multi-round trip: an `input_required` result is answered by the
        // client's handler and the request sent again with the answers and the server's state.
        for _ in 0..MAX_INPUT_ROUNDS {
            let result = self.once(method, params.clone()).await?;
            if result.get("resultType").and_then(Value::as_str) != Some("input_required") {
                return Ok(result);
            }
            let requests =
                result.get("inputRequests").and_then(Value::as_object).cloned().unwrap_or_default();
            let answers = self.answer_inputs_of(&requests).await;
            params.insert("inputResponses".into(), Value::Object(answers));
            match result.get("requestState") {
                Some(state) => params.insert("requestState".into(), state.clone()),
                None => params.remove("requestState"),
            };
        }
        Err(Error::Protocol(format!("the server asked for input more than {MAX_INPUT_ROUNDS} times")))
    }

    /// One round of `request`: keyed and re-issued where the server offers keys, a task
    /// driven to its end.
    async fn once(&self, method: &str, mut params: Map<String, Value>) -> Result<Value, Error> {
        if self.reissue == Reissue::Keyed {
            let meta = params.entry("_meta").or_insert_with(|| json!({}));
            if let Some(meta) = meta.as_object_mut() {
                meta.insert(IDEMPOTENCY_KEY.into(), json!(new_key()));
            }
        }
        let mut pause = self.settings.reissue_backoff;
        let mut tries = 0;
        let result = loop {
            match self.exchange(method, params.clone()).await {
                Err(e) if lost(&e) && self.reissue == Reissue::Keyed && tries < self.settings.reissues => {
                    tries += 1;
                    tracing::debug!(method, tries, error = %e, "an answer was lost; re-issuing under its key");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(2));
                }
                other => break other?,
            }
        };
        if result.get("resultType").and_then(Value::as_str) == Some("task") {
            let id = result
                .get("taskId")
                .and_then(Value::as_str)
                .ok_or_else(|| Error::Protocol(format!("a task result without a taskId: {result}")))?;
            return self.drive(id).await;
        }
        Ok(result)
    }

    /// `tools/call`.
    pub async fn call_tool(&self, name: &str, arguments: Value) -> Result<Value, Error> {
        self.request("tools/call", json!({ "name": name, "arguments": arguments })).await
    }

    /// One POST of `method` with `params` (its `_meta` completed): the result, a JSON-RPC
    /// error, or why no answer arrived.
    async fn exchange(&self, method: &str, mut params: Map<String, Value>) -> Result<Value, Error> {
        let meta = params.entry("_meta").or_insert_with(|| json!({}));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert("io.modelcontextprotocol/protocolVersion".into(), json!(REVISION));
            let mut caps = json!({ "elicitation": {} });
            if self.tasks {
                caps["extensions"] = json!({ TASKS: {} });
            }
            meta.insert("io.modelcontextprotocol/clientCapabilities".into(), caps);
            meta.insert("io.modelcontextprotocol/clientInfo".into(), self.settings.client_info.clone());
        }
        let name =
            params.get("name").or_else(|| params.get("taskId")).and_then(Value::as_str).map(str::to_owned);
        let body = json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params });
        let mut rb = self
            .http
            .post(&self.url)
            .timeout(self.settings.request_timeout)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(reqwest::header::ACCEPT, ACCEPT_POST)
            .header(PROTOCOL_VERSION, REVISION)
            .header("mcp-method", method);
        if let Some(name) = name {
            rb = rb.header("mcp-name", name);
        }
        let rb = crate::credentials::apply(rb, self.settings.credentials.as_ref());
        let resp = rb.body(body.to_string()).send().await?;
        let status = resp.status();
        // 2026-07-28 answers an unknown method with 404 and a refused capability with 400,
        // each with a JSON-RPC body: those are answers, not lost ones.
        if !status.is_success() && status.as_u16() != 404 && status.as_u16() != 400 {
            return Err(status_error(resp).await);
        }
        let answer = answer::read(resp, self.settings.notifications.as_ref()).await?;
        rpc_outcome(&answer)
    }
}

/// The result of a JSON-RPC response, or its error.
fn rpc_outcome(answer: &Value) -> Result<Value, Error> {
    if let Some(error) = answer.get("error") {
        return Err(Error::Rpc {
            code: error.get("code").and_then(Value::as_i64).unwrap_or(0),
            message: error.get("message").and_then(Value::as_str).unwrap_or_default().to_owned(),
            data: error.get("data").cloned(),
        });
    }
    answer
        .get("result")
        .cloned()
        .ok_or_else(|| Error::Protocol(format!("a response without result: {answer}")))
}

/// 128 random bits, hex: a key no other request of this or another client will carry.
fn new_key() -> String {
    let mut bytes = [0u8; 16];
    forkless_core::EntropySource::fill(&mut forkless_core::OsEntropy, &mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
