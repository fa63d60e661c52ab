//! A 2026-07-28 upstream, called statelessly: older clients get resumable sessions in front
//! of a server of the current revision.
//!
//! Such an upstream refuses `initialize` (the revision removed it). The gateway then asks it
//! `server/discover` and answers the client's `initialize` itself from that (its capabilities,
//! `serverInfo`, instructions), in the revision the client asked for. Every request after it
//! is one stateless POST: `MCP-Protocol-Version: 2026-07-28`, `Mcp-Method`, `Mcp-Name`, and the
//! client's info and capabilities (from its `initialize`) in the request's `_meta`; the
//! answer, JSON or SSE, is read as any answer is. What the revision removed is answered
//! here: `ping`; `logging/setLevel`, kept and sent as each request's
//! `io.modelcontextprotocol/logLevel` (a session client gets log messages unless it asked
//! otherwise, so the level defaults to `debug`); client notifications have nowhere to go.
//! There is no upstream session to forget, no GET stream and nothing to DELETE.
//!
//! An upstream's `input_required` result (the revision's multi-round trip) is turned into
//! the session's own requests: each input request goes to the client on the call's stream
//! (elicitation, sampling, roots, as a session revision asks), and once every one is answered
//! the call is sent again with the answers (`inputResponses`) and the upstream's
//! `requestState`, at most [`MAX_ROUNDS`] times; a client's refusal (a JSON-RPC error) ends
//! the call with that error.
//!
//! It owns the translation and the discovery; the posting and reading are `answer`'s.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use futures::StreamExt as _;
use reqwest::header::{ACCEPT, HeaderMap, HeaderValue};
use serde_json::{Value, json};

use forkless_server::backend::FromBackend;
use tokio::sync::oneshot;

use super::Upstream;
use super::sse::{Event, events, is_sse};

/// The revision spoken to the upstream.
pub(crate) const REVISION: &str = "2026-07-28";

/// Rounds of input one call may ask for before it is answered with an error.
pub(crate) const MAX_ROUNDS: u32 = 10;

/// What the gateway keeps of the client to speak for it, statelessly.
#[derive(Debug)]
pub(crate) struct Stateless {
    /// The client's `clientInfo` (from its `initialize`).
    pub(crate) client_info: Value,
    /// The client's `capabilities`.
    pub(crate) capabilities: Value,
    /// The log level asked with `logging/setLevel`, sent with every request.
    log_level: Mutex<String>,
    /// Calls answered `input_required`, by request id: the result, until its round runs.
    asked: Mutex<HashMap<String, Value>>,
    /// Rounds each call has had.
    rounds: Mutex<HashMap<String, u32>>,
    /// The client's answers awaited, by the id of the request sent to it.
    awaited: Mutex<HashMap<String, oneshot::Sender<Value>>>,
    next_ask: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn debug() -> Mutex<String> {
    Mutex::new("debug".to_owned())
}

/// What the gateway does with a client message for a stateless upstream.
#[derive(Debug)]
pub(crate) enum Relay {
    /// POST it upstream with these headers (its `_meta` completed in place).
    Post(HeaderMap),
    /// Answer it here with this result.
    Answer(Value),
    /// Nothing: a notification the revision has no place for.
    Drop,
}

impl Stateless {
    /// Speaking for the client whose `initialize` params are `params`.
    pub(crate) fn of(params: Option<&Value>) -> Self {
        let field = |name| params.and_then(|p| p.get(name)).cloned().unwrap_or_else(|| json!({}));
        Self {
            client_info: field("clientInfo"),
            capabilities: field("capabilities"),
            log_level: debug(),
            asked: Mutex::default(),
            rounds: Mutex::default(),
            awaited: Mutex::default(),
            next_ask: AtomicU64::new(1),
        }
    }

    /// Keep an `input_required` `result` of request `id` for its round; whether it was one.
    pub(crate) fn keep_asked(&self, id: &Value, result: &Value) -> bool {
        let asked = result.get("resultType").and_then(Value::as_str) == Some("input_required");
        if asked {
            lock(&self.asked).insert(id.to_string(), result.clone());
        }
        asked
    }

    /// Request `id` has its final answer: its rounds are over.
    pub(crate) fn done(&self, id: &Value) {
        lock(&self.rounds).remove(&id.to_string());
    }

    /// The client's response `message` to a request the gateway sent it, handed to its round;
    /// whether it was one.
    pub(crate) fn answered_by_client(&self, message: &Value) -> bool {
        if message.get("method").is_some() {
            return false;
        }
        let Some(id) = message.get("id").and_then(Value::as_str) else { return false };
        match lock(&self.awaited).remove(id) {
            Some(tx) => {
                let _ = tx.send(message.clone());
                true
            }
            None => false,
        }
    }

    /// What a session's record keeps of it: enough for another node to speak for the client.
    pub(crate) fn facts(&self) -> Value {
        json!({ "clientInfo": self.client_info, "capabilities": self.capabilities })
    }

    /// What to do with `message`, which is not `initialize`.
    pub(crate) fn relay(&self, message: &mut Value) -> Relay {
        let Some(method) = message.get("method").and_then(Value::as_str).map(str::to_owned) else {
            // A client's response to a request the upstream never sent (it sends none).
            return Relay::Drop;
        };
        if message.get("id").is_none() {
            return Relay::Drop;
        }
        match method.as_str() {
            "ping" => return Relay::Answer(json!({})),
            "logging/setLevel" => {
                if let Some(level) = message.pointer("/params/level").and_then(Value::as_str) {
                    *self.log_level.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
                        level.to_owned();
                }
                return Relay::Answer(json!({}));
            }
            _ => {}
        }
        let level = self.log_level.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        let params = message.as_object_mut().map(|m| m.entry("params").or_insert_with(|| json!({})));
        let mut name = None;
        if let Some(params) = params.and_then(Value::as_object_mut) {
            let field = match method.as_str() {
                "tools/call" | "prompts/get" => Some("name"),
                "resources/read" => Some("uri"),
                _ => None,
            };
            name = field.and_then(|f| params.get(f)).and_then(Value::as_str).map(header_text);
            let meta = params.entry("_meta").or_insert_with(|| json!({}));
            if let Some(meta) = meta.as_object_mut() {
                meta.insert("io.modelcontextprotocol/protocolVersion".into(), json!(REVISION));
                meta.insert("io.modelcontextprotocol/clientCapabilities".into(), self.capabilities.clone());
                meta.insert("io.modelcontextprotocol/clientInfo".into(), self.client_info.clone());
                meta.entry("io.modelcontextprotocol/logLevel").or_insert(json!(level));
            }
        }
        let mut headers = HeaderMap::new();
        if let Ok(v) = HeaderValue::try_from(method.as_str()) {
            headers.insert("mcp-method", v);
        }
        if let Some(v) = name.and_then(|n| HeaderValue::try_from(n).ok()) {
            headers.insert("mcp-name", v);
        }
        Relay::Post(headers)
    }
}

/// A header value for `text`: as is when it is visible ASCII, else the revision's Base64
/// sentinel (`=?base64?…?=`).
fn header_text(text: &str) -> String {
    use base64::Engine as _;
    if text.bytes().all(|b| b.is_ascii_graphic() || b == b' ') && !text.starts_with("=?") {
        text.to_owned()
    } else {
        format!("=?base64?{}?=", base64::engine::general_purpose::STANDARD.encode(text))
    }
}

/// The upstream's final answer to a request, as a session client takes it:
/// `resultType: "complete"` is dropped.
pub(crate) fn answered(mut message: Value) -> Value {
    let complete = message.pointer("/result/resultType").and_then(Value::as_str) == Some("complete");
    if complete && let Some(result) = message.get_mut("result").and_then(Value::as_object_mut) {
        result.remove("resultType");
    }
    message
}

/// The `server/discover` request of the gateway (its own, not a client's).
pub(crate) fn discover_request() -> Value {
    json!({ "jsonrpc": "2.0", "id": "forkless-discover", "method": "server/discover", "params": { "_meta": {
        "io.modelcontextprotocol/protocolVersion": REVISION,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": { "name": "forkless-gateway", "version": env!("CARGO_PKG_VERSION") },
    } } })
}

/// The client's `initialize` answered from the upstream's `server/discover` result, in the
/// revision the client asked for (`None` if the upstream does not speak 2026-07-28).
pub(crate) fn initialize_result(discovered: &Value, asked: Option<&Value>) -> Option<Value> {
    let versions = discovered.get("supportedVersions")?.as_array()?;
    if !versions.iter().any(|v| v == REVISION) {
        return None;
    }
    let mut capabilities =
        discovered.get("capabilities").cloned().filter(Value::is_object).unwrap_or(json!({}));
    // The revision's extensions (tasks, idempotency keys) are for its own clients.
    if let Some(caps) = capabilities.as_object_mut() {
        caps.remove("extensions");
    }
    let info = discovered.pointer("/_meta/io.modelcontextprotocol~1serverInfo").cloned();
    let mut result = json!({
        "protocolVersion": asked.cloned().unwrap_or(json!("2025-11-25")),
        "capabilities": capabilities,
        "serverInfo": info.unwrap_or(json!({ "name": "mcp-server", "version": "0" })),
    });
    if let Some(text) = discovered.get("instructions") {
        result["instructions"] = text.clone();
    }
    Some(result)
}

impl Upstream {
    /// If the upstream answered request `message` with `input_required`, run the round: ask
    /// the client each input request on the call's stream, then send the call again with the
    /// answers and the upstream's `requestState`. Whether there was a round to run.
    pub(super) async fn input_round(self: Arc<Self>, message: &Value) -> bool {
        let Some(stateless) = self.stateless.get() else { return false };
        let Some(id) = message.get("id").cloned() else { return false };
        let Some(asked) = lock(&stateless.asked).remove(&id.to_string()) else { return false };
        let round = {
            let mut rounds = lock(&stateless.rounds);
            let n = rounds.entry(id.to_string()).or_insert(0);
            *n += 1;
            *n
        };
        if round > MAX_ROUNDS {
            lock(&stateless.rounds).remove(&id.to_string());
            let why = format!("the upstream asked for input more than {MAX_ROUNDS} times");
            self.lost(&id, &why).await;
            return true;
        }
        let requests = asked.get("inputRequests").and_then(Value::as_object).cloned().unwrap_or_default();
        let mut answers = serde_json::Map::new();
        for (key, request) in requests {
            let ask = format!("forkless-input-{}", stateless.next_ask.fetch_add(1, Ordering::Relaxed));
            let (tx, rx) = oneshot::channel();
            lock(&stateless.awaited).insert(ask.clone(), tx);
            let params = request.get("params").cloned().unwrap_or_else(|| json!({}));
            let to_client =
                json!({ "jsonrpc": "2.0", "id": ask, "method": request.get("method"), "params": params });
            self.deliver(FromBackend::Related { message: to_client, request: id.clone() }).await;
            let response = tokio::select! {
                () = self.cancel.cancelled() => return true,
                response = rx => response,
            };
            let Ok(response) = response else { return true };
            match (response.get("result"), response.get("error")) {
                (Some(result), _) => {
                    answers.insert(key, result.clone());
                }
                (None, error) => {
                    lock(&stateless.rounds).remove(&id.to_string());
                    let error =
                        error.cloned().unwrap_or_else(|| json!({ "code": -32603, "message": "no answer" }));
                    self.deliver(json!({ "jsonrpc": "2.0", "id": id, "error": error })).await;
                    return true;
                }
            }
        }
        let mut again = message.clone();
        if let Some(params) = again.get_mut("params").and_then(Value::as_object_mut) {
            params.insert("inputResponses".into(), Value::Object(answers));
            match asked.get("requestState") {
                Some(state) => params.insert("requestState".into(), state.clone()),
                None => params.remove("requestState"),
            };
        }
        Box::pin(self.post(again)).await;
        true
    }

    /// The upstream refused `initialize` (`refusal`): if it speaks 2026-07-28, the client's
    /// `initialize` is answered from its `server/discover` and every request after it is a
    /// stateless POST; otherwise the client gets the refusal.
    pub(super) async fn initialize_statelessly(&self, initialize: &Value, refusal: reqwest::Response) {
        let id = initialize.get("id").cloned().unwrap_or(Value::Null);
        let status = refusal.status();
        let refused = refusal.bytes().await.ok().and_then(|b| serde_json::from_slice::<Value>(&b).ok());
        let discovered = self.discover().await;
        let asked = initialize.pointer("/params/protocolVersion");
        match discovered.as_ref().and_then(|d| initialize_result(d, asked)) {
            Some(result) => {
                let client = Stateless::of(initialize.get("params"));
                let facts = super::Facts {
                    upstream: self.spec.url.to_string(),
                    session: None,
                    version: Some(REVISION.to_owned()),
                    stateless: Some(client.facts()),
                };
                let _ = self.stateless.set(client);
                if let Ok(text) = serde_json::to_string(&facts) {
                    self.facts.set(text);
                }
                self.stats.sessions.fetch_add(1, Ordering::Relaxed);
                tracing::info!(session = ?self.forkless, "the upstream speaks 2026-07-28: it is called statelessly for this session");
                self.deliver(serde_json::json!({ "jsonrpc": "2.0", "id": id, "result": result })).await;
            }
            None => match refused.filter(|r| r.get("error").is_some()) {
                Some(mut refusal) => {
                    refusal["id"] = id;
                    self.deliver(refusal).await;
                }
                None => {
                    let error = forkless_server::RpcError::internal(format!(
                        "the upstream refused initialize: HTTP {status}"
                    ))
                    .with_data(serde_json::json!({ "reason": "upstream_error", "status": status.as_u16() }));
                    self.deliver(serde_json::json!({ "jsonrpc": "2.0", "id": id, "error": error.to_json() }))
                        .await;
                }
            },
        }
    }

    /// The upstream's `server/discover` result (2026-07-28), if it answers one.
    async fn discover(&self) -> Option<Value> {
        let request = self
            .http
            .post(self.spec.url.clone())
            .headers(self.spec.headers.clone())
            .header(ACCEPT, "application/json, text/event-stream")
            .header(super::PROTOCOL_VERSION, REVISION)
            .header("mcp-method", "server/discover")
            .json(&discover_request())
            .send();
        let response = tokio::time::timeout(self.spec.timeout, request).await.ok()?.ok()?;
        if !response.status().is_success() {
            return None;
        }
        let answer = if is_sse(&response) {
            let events = events(response, None);
            tokio::pin!(events);
            loop {
                let Event { message, .. } = events.next().await?.ok()?;
                if let Some(m) = message.filter(|m| m.get("id").is_some()) {
                    break m;
                }
            }
        } else {
            response.json::<Value>().await.ok()?
        };
        answer.get("result").cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_carries_the_clients_meta_and_the_revisions_headers() {
        let s = Stateless::of(Some(
            &json!({ "clientInfo": { "name": "c" }, "capabilities": { "sampling": {} } }),
        ));
        let mut call =
            json!({ "jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": { "name": "echo" } });
        let Relay::Post(headers) = s.relay(&mut call) else { panic!("posted") };
        assert_eq!(headers["mcp-method"], "tools/call");
        assert_eq!(headers["mcp-name"], "echo");
        let meta = &call["params"]["_meta"];
        assert_eq!(meta["io.modelcontextprotocol/protocolVersion"], REVISION);
        assert_eq!(meta["io.modelcontextprotocol/clientInfo"]["name"], "c");
        assert_eq!(meta["io.modelcontextprotocol/clientCapabilities"], json!({ "sampling": {} }));
        assert_eq!(meta["io.modelcontextprotocol/logLevel"], "debug");
        let mut level = json!({ "jsonrpc": "2.0", "id": 4, "method": "logging/setLevel", "params": { "level": "error" } });
        assert!(matches!(s.relay(&mut level), Relay::Answer(_)));
        let mut read = json!({ "jsonrpc": "2.0", "id": 5, "method": "resources/read", "params": { "uri": "file:///é" } });
        let Relay::Post(headers) = s.relay(&mut read) else { panic!("posted") };
        assert!(headers["mcp-name"].to_str().unwrap().starts_with("=?base64?"));
        assert_eq!(read["params"]["_meta"]["io.modelcontextprotocol/logLevel"], "error");
        let mut ping = json!({ "jsonrpc": "2.0", "id": 6, "method": "ping" });
        assert!(matches!(s.relay(&mut ping), Relay::Answer(_)));
        let mut note = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
        assert!(matches!(s.relay(&mut note), Relay::Drop));
    }

    #[test]
    fn initialize_is_answered_from_discover_only_for_a_current_upstream() {
        let discovered = json!({ "supportedVersions": ["2026-07-28"], "capabilities": { "tools": {}, "extensions": { "x": {} } },
            "_meta": { "io.modelcontextprotocol/serverInfo": { "name": "up", "version": "9" } }, "instructions": "hi" });
        let result = initialize_result(&discovered, Some(&json!("2025-06-18"))).expect("current");
        assert_eq!(result["protocolVersion"], "2025-06-18");
        assert_eq!(result["capabilities"], json!({ "tools": {} }));
        assert_eq!(result["serverInfo"]["name"], "up");
        assert_eq!(result["instructions"], "hi");
        assert_eq!(initialize_result(&json!({ "supportedVersions": ["2025-11-25"] }), None), None);
    }
}
