//! The probing MCP server `forkless check --client` runs a client against: a minimal
//! 2025-11-25 session server with one tool, `numbers`, whose call is answered as an SSE stream
//! of numbered log notifications (`#1` … `#N`) that the server cuts after `#CUT`. What the
//! client's reconnect (a GET with `Last-Event-ID`) is answered with is the scenario's
//! [`Answer`]: the true continuation, a new stream not marked resumed, a continuation that
//! skips an event, or 404. It records what any server can see: every request, the cursors sent,
//! how often the call was POSTed, and each connection's lane for the report.
//!
//! It owns the wire, not the verdicts (`super`'s).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::check::record::{Carried, Ending, How, Lane, Mark};

/// The session id the probe hands out.
pub(crate) const SESSION: &str = "probe-session";
/// The call's stream, and the new one a fork opens.
const STREAM: &str = "probeStreamOne01";
const OTHER_STREAM: &str = "probeStreamTwo02";
/// Between two numbered events.
const PACE: Duration = Duration::from_millis(20);

/// What the client's reconnect is answered with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Answer {
    /// `#CUT+1` … `#N` and the response, the same stream, marked resumed.
    Continuation,
    /// A new stream (another `Mcp-Stream-Id`, `Mcp-Stream-Resumed: false`) from `#1`, then the
    /// response: the seed's fork.
    NewStream,
    /// The same stream marked resumed, but from `#CUT+2`: one event skipped.
    SkipOne,
    /// 404: the session is gone.
    Gone,
}

/// What the probe saw of one run.
#[derive(Clone, Debug, Default)]
pub(crate) struct Seen {
    /// Every request, as `METHOD what` (for the evidence).
    pub(crate) requests: Vec<String>,
    /// How many times `tools/call numbers` was POSTed.
    pub(crate) calls: usize,
    /// The `Last-Event-ID` of each GET that carried one.
    pub(crate) cursors: Vec<String>,
    /// GETs without one after the call began (a reconnect that forgot its cursor).
    pub(crate) bare_gets_after_call: usize,
    /// One lane per connection that carried events or a refusal.
    pub(crate) lanes: Vec<Lane>,
}

struct Probe {
    answer: Answer,
    count: u64,
    cut: u64,
    started: Instant,
    seen: Mutex<Seen>,
    /// The id of the call's request: its response, on whatever stream, carries it.
    call_id: Mutex<Value>,
}

/// A probe serving one scenario.
#[derive(Clone)]
pub(crate) struct ProbeServer(Arc<Probe>);

impl ProbeServer {
    /// A probe whose call sends `count` events, cut after `cut`, reconnects answered `answer`.
    pub(crate) fn new(answer: Answer, count: u64, cut: u64) -> Self {
        Self(Arc::new(Probe {
            answer,
            count,
            cut,
            started: Instant::now(),
            seen: Mutex::default(),
            call_id: Mutex::new(Value::Null),
        }))
    }

    /// Serve on `listener` until the task is dropped.
    pub(crate) async fn serve(self, listener: tokio::net::TcpListener) {
        let app = axum::Router::new()
            .route("/mcp", axum::routing::post(post).get(get).delete(delete))
            .with_state(self);
        let _ = axum::serve(listener, app).await;
    }

    /// What it saw so far.
    pub(crate) fn seen(&self) -> Seen {
        self.0.seen().clone()
    }
}

impl Probe {
    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// A lane for a connection answered `status`; its index.
    fn lane(&self, label: String, status: u16, sse: bool, resumed: Option<&str>) -> usize {
        let lane = Lane {
            label,
            opened_ms: self.ms(),
            status,
            sse,
            resumed: resumed.map(str::to_owned),
            reason: None,
            marks: Vec::new(),
            end: None,
        };
        let mut seen = self.seen();
        seen.lanes.push(lane);
        seen.lanes.len() - 1
    }

    fn mark(&self, lane: usize, what: Carried) {
        let at_ms = self.ms();
        if let Some(l) = self.seen().lanes.get_mut(lane) {
            l.marks.push(Mark { at_ms, what });
        }
    }

    fn end(&self, lane: usize, how: How) {
        let at_ms = self.ms();
        if let Some(l) = self.seen().lanes.get_mut(lane) {
            l.end.get_or_insert(Ending { at_ms, how });
        }
    }
}

async fn post(State(probe): State<ProbeServer>, body: String) -> Response {
    let probe = probe.0;
    let Ok(message) = serde_json::from_str::<Value>(&body) else {
        return (StatusCode::BAD_REQUEST, "not JSON").into_response();
    };
    let method = message["method"].as_str().unwrap_or("(response)").to_owned();
    probe.seen().requests.push(format!("POST {method}"));
    let Some(id) = message.get("id").cloned() else { return StatusCode::ACCEPTED.into_response() };
    let answer = |result: Value| {
        let mut response =
            axum::Json(json!({ "jsonrpc": "2.0", "id": id, "result": result })).into_response();
        response.headers_mut().insert("mcp-session-id", header::HeaderValue::from_static(SESSION));
        response
    };
    match method.as_str() {
        "initialize" => {
            let asked = message.pointer("/params/protocolVersion").and_then(Value::as_str);
            let version = asked
                .filter(|v| ["2025-03-26", "2025-06-18", "2025-11-25"].contains(v))
                .unwrap_or("2025-11-25");
            answer(json!({
                "protocolVersion": version,
                "capabilities": { "tools": {}, "logging": {} },
                "serverInfo": { "name": "forkless-check-probe", "version": env!("CARGO_PKG_VERSION") },
            }))
        }
        "tools/list" => answer(json!({ "tools": [{
            "name": "numbers",
            "description": "Sends numbered log notifications #1..#count on its stream, then answers.",
            "inputSchema": { "type": "object", "properties": { "count": { "type": "integer" } } },
        }]})),
        "tools/call" => {
            probe.seen().calls += 1;
            *probe.call_id.lock().unwrap_or_else(PoisonError::into_inner) = id.clone();
            let lane = probe.lane("POST tools/call".into(), 200, true, None);
            let events = (1..=probe.cut).map(|n| Event::Numbered(STREAM, n, n)).collect();
            sse(&probe, lane, None, events, End::Cut)
        }
        // server/discover (a client in auto mode): not offered; the session revisions are.
        "server/discover" => {
            let error = json!({ "jsonrpc": "2.0", "id": id, "error": { "code": -32601, "message": "method not found" } });
            (StatusCode::BAD_REQUEST, axum::Json(error)).into_response()
        }
        _ => answer(json!({})),
    }
}

async fn get(State(probe): State<ProbeServer>, headers: HeaderMap) -> Response {
    let probe = probe.0;
    let cursor = headers.get("last-event-id").and_then(|v| v.to_str().ok()).map(str::to_owned);
    let Some(cursor) = cursor else {
        let mut seen = probe.seen();
        seen.requests.push("GET (no Last-Event-ID)".into());
        if seen.calls > 0 {
            seen.bare_gets_after_call += 1;
        }
        // No standalone stream: the specification's 405.
        return StatusCode::METHOD_NOT_ALLOWED.into_response();
    };
    {
        let mut seen = probe.seen();
        seen.requests.push(format!("GET Last-Event-ID: {cursor}"));
        seen.cursors.push(cursor.clone());
    }
    let label = format!("GET (Last-Event-ID: {cursor})");
    // The continuation follows the client's cursor (an event may have been lost with the cut).
    let count = probe.count;
    let cut = cursor
        .rsplit_once('.')
        .and_then(|(_, seq)| seq.parse::<u64>().ok())
        .map_or(probe.cut, |seq| seq.min(count));
    let (stream, resumed, events) = match probe.answer {
        Answer::Gone => {
            let lane = probe.lane(label, 404, false, None);
            probe.end(lane, How::Closed);
            let error = json!({ "jsonrpc": "2.0", "id": null, "error": { "code": -32001, "message": "session not found" } });
            return (StatusCode::NOT_FOUND, axum::Json(error)).into_response();
        }
        Answer::Continuation => {
            (STREAM, "true", ((cut + 1)..=count).map(|n| Event::Numbered(STREAM, n, n)).collect())
        }
        Answer::SkipOne => {
            (STREAM, "true", ((cut + 2)..=count).map(|n| Event::Numbered(STREAM, n, n)).collect())
        }
        Answer::NewStream => {
            (OTHER_STREAM, "false", (1..=count).map(|n| Event::Numbered(OTHER_STREAM, n, n)).collect())
        }
    };
    let lane = probe.lane(label, 200, true, Some(resumed));
    let mut events: Vec<Event> = events;
    let last = events.last().map_or(cut, |e| e.seq()) + 1;
    events.push(Event::Response(stream, last));
    sse(&probe, lane, Some((stream, resumed)), events, End::Close)
}

async fn delete(State(probe): State<ProbeServer>) -> StatusCode {
    probe.0.seen().requests.push("DELETE".into());
    StatusCode::OK
}

/// One event the probe sends.
#[derive(Clone, Copy, Debug)]
enum Event {
    /// `#n` as event `stream.seq`.
    Numbered(&'static str, u64, u64),
    /// The call's response as event `stream.seq`.
    Response(&'static str, u64),
}

impl Event {
    fn seq(self) -> u64 {
        match self {
            Self::Numbered(_, seq, _) | Self::Response(_, seq) => seq,
        }
    }
}

/// How a stream ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    /// The connection breaks (the body fails) after the last event.
    Cut,
    /// The body ends.
    Close,
}

fn sse(
    probe: &Arc<Probe>,
    lane: usize,
    head: Option<(&str, &str)>,
    events: Vec<Event>,
    end: End,
) -> Response {
    let probe = Arc::clone(probe);
    let body = futures::stream::unfold((events.into_iter(), false), move |(mut rest, done)| {
        let probe = Arc::clone(&probe);
        async move {
            if done {
                return None;
            }
            let Some(event) = rest.next() else {
                // Let the last event reach the client before the connection breaks.
                tokio::time::sleep(PACE).await;
                probe.end(lane, if end == End::Cut { How::Failed } else { How::Closed });
                return match end {
                    // An error ends the body abruptly: the client sees the connection break.
                    End::Cut => Some((Err(std::io::Error::other("cut by the probe")), (rest, true))),
                    End::Close => None,
                };
            };
            tokio::time::sleep(PACE).await;
            let text = match event {
                Event::Numbered(stream, seq, n) => {
                    probe.mark(lane, Carried::Numbered(n));
                    let message = json!({ "jsonrpc": "2.0", "method": "notifications/message",
                                          "params": { "level": "info", "data": format!("#{n}") } });
                    // The first event asks for reconnects after 100 ms (a client's default is
                    // often a second or more).
                    let retry = if seq == 1 { "retry: 100\n" } else { "" };
                    format!("id: {stream}.{seq}\n{retry}data: {message}\n\n")
                }
                Event::Response(stream, seq) => {
                    probe.mark(lane, Carried::Response);
                    let id = probe.call_id.lock().unwrap_or_else(PoisonError::into_inner).clone();
                    let message = json!({ "jsonrpc": "2.0", "id": id,
                                          "result": { "content": [{ "type": "text", "text": "numbers sent" }] } });
                    format!("id: {stream}.{seq}\ndata: {message}\n\n")
                }
            };
            Some((Ok::<_, std::io::Error>(text), (rest, false)))
        }
    });
    let mut response = Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .header("mcp-session-id", SESSION);
    let stream = head.map_or(STREAM, |(s, _)| s);
    response = response.header("mcp-stream-id", stream);
    if let Some((_, resumed)) = head {
        response = response.header("mcp-stream-resumed", resumed);
    }
    response
        .body(Body::from_stream(body))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}
