//! The raw HTTP side of `forkless check`: just enough MCP to open a session, call a tool, open
//! and resume SSE streams with hand-made `Last-Event-ID` values, and read what comes back.
//!
//! It deliberately does *not* use `forkless-client`: that client filters duplicates, refuses
//! new streams and retries on its own, which would hide exactly the evidence the check needs.
//! Nothing here judges anything; it records statuses, headers, event ids and payloads.

use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use serde_json::{Value, json};
use tokio::time::Instant;

use super::record;

/// The newest revision with sessions and resumption; the server may negotiate an older one.
const REVISION: &str = "2025-11-25";

/// Why a probe step could not complete (the target is unreachable or does not speak MCP).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProbeError(pub(crate) String);

impl core::fmt::Display for ProbeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(&self.0)
    }
}

fn err(what: impl Into<String>) -> ProbeError {
    ProbeError(what.into())
}

/// The endpoint and an HTTP client.
#[derive(Clone, Debug)]
pub(crate) struct Target {
    http: reqwest::Client,
    url: String,
}

/// The HTTP client of a check: TLS trusting the system's roots, `SSL_CERT_FILE` and
/// `ca_file` ([`forkless_client::tls`]); HTTP/1.1 only if asked.
pub(crate) fn http_client(
    ca_file: Option<&std::path::Path>,
    http1: bool,
) -> Result<reqwest::Client, ProbeError> {
    let builder = reqwest::Client::builder().connect_timeout(Duration::from_secs(5));
    let builder = if http1 { builder.http1_only() } else { builder };
    forkless_client::tls::trusting(builder, ca_file)
        .map_err(|e| err(e.to_string()))?
        .build()
        .map_err(|e| err(format!("cannot build an HTTP client: {e}")))
}

impl Target {
    pub(crate) fn new(url: &str, http: reqwest::Client) -> Self {
        Self { http, url: url.to_owned() }
    }

    /// `initialize` + `notifications/initialized`: a new session.
    pub(crate) async fn open(&self) -> Result<Session, ProbeError> {
        let body = json!({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {
                "protocolVersion": REVISION,
                "capabilities": {},
                "clientInfo": { "name": "forkless-check", "version": env!("CARGO_PKG_VERSION") }
            }
        });
        let response = self
            .http
            .post(&self.url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .json(&body)
            .send()
            .await
            .map_err(|e| err(format!("POST initialize to {}: {e}", self.url)))?;
        let status = response.status().as_u16();
        if status != 200 {
            return Err(err(format!("initialize answered {status}")));
        }
        let id = header(&response, "mcp-session-id");
        let answer = read_answer(response, &json!(0), "initialize", Duration::from_secs(10)).await?;
        let result = answer.get("result").ok_or_else(|| err(format!("initialize failed: {answer}")))?;
        let revision = result["protocolVersion"].as_str().unwrap_or(REVISION).to_owned();
        let server_info = result.get("serverInfo").cloned();
        let session = Session { target: self.clone(), id, revision, next_id: 1, server_info };
        let status = session.notify("notifications/initialized").await?;
        if !(200..300).contains(&status) {
            return Err(err(format!("notifications/initialized answered {status}")));
        }
        Ok(session)
    }
}

/// One MCP session on the target.
#[derive(Debug)]
pub(crate) struct Session {
    target: Target,
    /// `Mcp-Session-Id`, if the server assigned one.
    pub(crate) id: Option<String>,
    revision: String,
    next_id: u64,
    /// The `serverInfo` of the `initialize` result.
    pub(crate) server_info: Option<Value>,
}

impl Session {
    fn with_session(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        let request = request.header("mcp-protocol-version", &self.revision);
        match &self.id {
            Some(id) => request.header("mcp-session-id", id),
            None => request,
        }
    }

    fn post(&self, body: &Value) -> reqwest::RequestBuilder {
        self.with_session(self.target.http.post(&self.target.url))
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .json(body)
    }

    async fn notify(&self, method: &str) -> Result<u16, ProbeError> {
        let body = json!({ "jsonrpc": "2.0", "method": method });
        let response = self.post(&body).send().await.map_err(|e| err(format!("POST {method}: {e}")))?;
        Ok(response.status().as_u16())
    }

    /// Send a request; returns its JSON-RPC id and the raw response (body unread).
    pub(crate) async fn send(
        &mut self,
        method: &str,
        params: Value,
    ) -> Result<(Value, Head, reqwest::Response), ProbeError> {
        let id = json!(self.next_id);
        self.next_id += 1;
        let body = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
        let response = self.post(&body).send().await.map_err(|e| err(format!("POST {method}: {e}")))?;
        Ok((id, Head::of(&response), response))
    }

    /// A request answered in full (JSON or SSE); the JSON-RPC response message.
    pub(crate) async fn request(&mut self, method: &str, params: Value) -> Result<Value, ProbeError> {
        let (id, head, response) = self.send(method, params).await?;
        if head.status != 200 {
            return Err(err(format!("{method} answered {}", head.status)));
        }
        read_answer(response, &id, method, Duration::from_secs(15)).await
    }

    /// `tools/list`: the tool names.
    pub(crate) async fn tool_names(&mut self) -> Result<Vec<String>, ProbeError> {
        let answer = self.request("tools/list", json!({})).await?;
        let tools = answer["result"]["tools"].as_array().cloned().unwrap_or_default();
        Ok(tools.iter().filter_map(|t| t["name"].as_str().map(str::to_owned)).collect())
    }

    /// A GET on the endpoint, with `Last-Event-ID` when given.
    pub(crate) async fn get(&self, last_event_id: Option<&str>) -> Result<Conn, ProbeError> {
        let mut request =
            self.with_session(self.target.http.get(&self.target.url)).header("accept", "text/event-stream");
        if let Some(lei) = last_event_id {
            request = request.header("last-event-id", lei);
        }
        let response = request.send().await.map_err(|e| err(format!("GET: {e}")))?;
        let label =
            last_event_id.map_or_else(|| "GET".to_owned(), |lei| format!("GET (Last-Event-ID: {lei})"));
        Ok(Conn::new(response, &label))
    }

    /// End the session (DELETE); failures do not matter to the check.
    pub(crate) async fn close(self) {
        let request = self.with_session(self.target.http.delete(&self.target.url));
        let _ = tokio::time::timeout(Duration::from_secs(2), request.send()).await;
    }
}

/// What the response head said.
#[derive(Clone, Debug, Default)]
pub(crate) struct Head {
    pub(crate) status: u16,
    pub(crate) sse: bool,
    /// `Mcp-Stream-Id`.
    pub(crate) stream_id: Option<String>,
    /// `Mcp-Stream-Resumed`.
    pub(crate) resumed: Option<String>,
}

impl Head {
    fn of(response: &reqwest::Response) -> Self {
        Self {
            status: response.status().as_u16(),
            sse: header(response, "content-type").is_some_and(|c| c.starts_with("text/event-stream")),
            stream_id: header(response, "mcp-stream-id"),
            resumed: header(response, "mcp-stream-resumed"),
        }
    }

    /// The status with the forkless headers, e.g. `200 SSE (Mcp-Stream-Resumed: true)`.
    pub(crate) fn describe(&self) -> String {
        let mut s = self.status.to_string();
        if self.sse {
            s.push_str(" SSE");
        }
        if let Some(r) = &self.resumed {
            s.push_str(&format!(" (Mcp-Stream-Resumed: {r})"));
        }
        s
    }

    /// A 2xx answer carrying an event stream: something a client reads events from.
    pub(crate) fn is_stream(&self) -> bool {
        (200..300).contains(&self.status) && self.sse
    }

    /// Explicitly flagged as a new stream (PROTOCOL section 3).
    pub(crate) fn flagged_new(&self) -> bool {
        self.resumed.as_deref() == Some("false")
    }
}

fn header(response: &reqwest::Response, name: &str) -> Option<String> {
    response.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_owned)
}

/// One server-sent event.
#[derive(Clone, Debug, Default)]
pub(crate) struct Event {
    pub(crate) id: Option<String>,
    pub(crate) data: String,
}

/// How reading a connection stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stop {
    /// The condition the caller waited for was met; the connection is still open.
    Met,
    /// The server ended the body.
    Ended,
    /// The body failed (reset, or not SSE at all).
    Failed,
    /// Nothing more arrived before the deadline.
    Timeout,
}

/// One HTTP response being read as SSE. Dropping it drops the connection (a cut).
pub(crate) struct Conn {
    pub(crate) head: Head,
    /// The body of a non-SSE answer (for the evidence), read on demand.
    response: Option<reqwest::Response>,
    body: Option<BoxStream<'static, reqwest::Result<Bytes>>>,
    buf: Vec<u8>,
    /// Its lane in the scenario's timeline, when one is recorded.
    lane: Option<record::LaneRef>,
}

impl core::fmt::Debug for Conn {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Conn").field("head", &self.head).finish_non_exhaustive()
    }
}

impl Conn {
    /// The connection of `response`, sent as `label` says (`POST tools/call`, `GET …`).
    pub(crate) fn new(response: reqwest::Response, label: &str) -> Self {
        let head = Head::of(&response);
        let lane = record::open(label, &head);
        if head.is_stream() {
            let body = Some(response.bytes_stream().boxed());
            Self { head, response: None, body, buf: Vec::new(), lane }
        } else {
            Self { head, response: Some(response), body: None, buf: Vec::new(), lane }
        }
    }

    /// The `data.reason` (forkless) or `message` of a JSON error body, if any.
    pub(crate) async fn reason(&mut self) -> Option<String> {
        let response = self.response.take()?;
        let text = tokio::time::timeout(Duration::from_secs(2), response.text()).await.ok()?.ok()?;
        let v: Value = serde_json::from_str(&text).ok()?;
        let e = &v["error"];
        let reason = e["data"]["reason"].as_str().or_else(|| e["message"].as_str()).map(str::to_owned);
        if let (Some(lane), Some(reason)) = (&self.lane, &reason) {
            lane.refused(reason);
        }
        reason
    }

    /// `head.describe()` plus the error reason of a refusal.
    pub(crate) async fn describe(&mut self) -> String {
        let mut s = self.head.describe();
        if let Some(reason) = self.reason().await {
            let reason: String = reason.chars().take(80).collect();
            s.push_str(&format!(" ({reason})"));
        }
        s
    }

    /// The next event, `Err(stop)` when none comes before `deadline`.
    pub(crate) async fn next_event(&mut self, deadline: Instant) -> Result<Event, Stop> {
        let next = self.read_event(deadline).await;
        if let Some(lane) = &self.lane {
            match &next {
                Ok(event) => lane.event(&event.data),
                Err(Stop::Ended) => lane.end(record::How::Closed),
                Err(Stop::Failed) => lane.end(record::How::Failed),
                Err(Stop::Met | Stop::Timeout) => {}
            }
        }
        next
    }

    async fn read_event(&mut self, deadline: Instant) -> Result<Event, Stop> {
        let Some(body) = self.body.as_mut() else { return Err(Stop::Failed) };
        let mut event = Event::default();
        let mut has_field = false;
        loop {
            while let Some(pos) = self.buf.iter().position(|&b| b == b'\n') {
                let raw: Vec<u8> = self.buf.drain(..=pos).collect();
                let line = String::from_utf8_lossy(&raw);
                let line = line.trim_end_matches(['\n', '\r']);
                if line.is_empty() {
                    if has_field {
                        return Ok(event);
                    }
                    continue;
                }
                if line.starts_with(':') {
                    continue;
                }
                let (field, value) = line.split_once(':').unwrap_or((line, ""));
                let value = value.strip_prefix(' ').unwrap_or(value);
                match field {
                    "id" => {
                        event.id = Some(value.to_owned());
                        has_field = true;
                    }
                    "data" => {
                        if !event.data.is_empty() {
                            event.data.push('\n');
                        }
                        event.data.push_str(value);
                        has_field = true;
                    }
                    _ => {}
                }
            }
            match tokio::time::timeout_at(deadline, body.next()).await {
                Err(_) => return Err(Stop::Timeout),
                Ok(Some(Ok(chunk))) => self.buf.extend_from_slice(&chunk),
                Ok(Some(Err(_))) => return Err(Stop::Failed),
                Ok(None) => return Err(Stop::Ended),
            }
        }
    }
}

/// Read a POST answer (JSON or SSE) up to the JSON-RPC response with `id`.
async fn read_answer(
    response: reqwest::Response,
    id: &Value,
    method: &str,
    limit: Duration,
) -> Result<Value, ProbeError> {
    let head = Head::of(&response);
    if !head.sse {
        let text = tokio::time::timeout(limit, response.text())
            .await
            .map_err(|_| err("JSON answer timed out"))?
            .map_err(|e| err(format!("reading a JSON answer: {e}")))?;
        return serde_json::from_str(&text).map_err(|e| err(format!("answer is not JSON ({e}): {text}")));
    }
    let mut conn = Conn::new(response, &format!("POST {method}"));
    let deadline = Instant::now() + limit;
    loop {
        let event = conn.next_event(deadline).await.map_err(|stop| err(format!("SSE answer: {stop:?}")))?;
        if let Ok(message) = serde_json::from_str::<Value>(&event.data)
            && message.get("id") == Some(id)
            && message.get("method").is_none()
        {
            return Ok(message);
        }
    }
}
