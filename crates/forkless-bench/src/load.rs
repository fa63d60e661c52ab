//! The load generator: MCP clients on hyper 1 (HTTP/1.1, keep-alive, one request in flight
//! per connection), an incremental SSE parser, and the five loads of the harness.
//!
//! This module owns producing load and timing it at the client. It knows nothing about
//! which server it talks to (every server is reached the same way: `initialize`,
//! `notifications/initialized`, then the load) and nothing about processes: CPU and memory
//! of the server are read through a [`Probe`] the caller passes in.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Request, Response, StatusCode, header};
use http_body_util::{BodyExt as _, Empty, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use serde::Serialize;
use tokio::net::TcpStream;

use crate::Error;
use crate::procstat::ProcSample;

const SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");
const PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
const LAST_EVENT_ID: HeaderName = HeaderName::from_static("last-event-id");
const STREAM_ID: HeaderName = HeaderName::from_static("mcp-stream-id");

/// The revision every client negotiates: the newest one all servers under test speak.
pub const REVISION: &str = "2025-06-18";

/// How long one request (or one whole stream) may take before it counts as an error.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

type ReqBody = BoxBody<Bytes, std::convert::Infallible>;

/// Where a server under test listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// Its socket address.
    pub addr: SocketAddr,
    /// The MCP endpoint path.
    pub path: String,
}

impl Endpoint {
    /// Parse `http://ADDR/PATH` (the line servers print once bound).
    pub fn from_url(url: &str) -> Option<Self> {
        let rest = url.trim().strip_prefix("http://")?;
        let (authority, path) = rest.split_once('/').unwrap_or((rest, "mcp"));
        let addr = authority.replace("localhost", "127.0.0.1").parse().ok()?;
        Some(Self { addr, path: format!("/{path}") })
    }
}

/// Reads the server's CPU time and memory (a [`crate::procstat`] sample of its process).
pub type Probe = Arc<dyn Fn() -> Option<ProcSample> + Send + Sync>;

/// One HTTP/1.1 keep-alive connection.
pub struct Conn {
    tx: SendRequest<ReqBody>,
    host: HeaderValue,
    path: String,
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn").field("path", &self.path).finish_non_exhaustive()
    }
}

/// An MCP session as the client knows it (servers without sessions give no id).
#[derive(Clone, Debug)]
pub struct Session {
    /// `Mcp-Session-Id`, if the server gave one.
    pub id: Option<HeaderValue>,
}

impl Conn {
    /// Connect (TCP_NODELAY) and hand the connection to a background task.
    pub async fn open(ep: &Endpoint) -> Result<Self, Error> {
        let tcp = TcpStream::connect(ep.addr).await.map_err(Error::Io)?;
        let _ = tcp.set_nodelay(true);
        let (tx, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
            .await
            .map_err(|e| Error::Load(format!("handshake: {e}")))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let host = HeaderValue::try_from(ep.addr.to_string()).map_err(|e| Error::Load(e.to_string()))?;
        Ok(Self { tx, host, path: ep.path.clone() })
    }

    async fn send(&mut self, req: Request<ReqBody>) -> Result<Response<Incoming>, Error> {
        self.tx.ready().await.map_err(|e| Error::Load(format!("connection: {e}")))?;
        self.tx.send_request(req).await.map_err(|e| Error::Load(format!("request: {e}")))
    }

    fn request(&self, method: http::Method, session: Option<&Session>) -> http::request::Builder {
        let mut b = Request::builder()
            .method(method)
            .uri(self.path.as_str())
            .header(header::HOST, self.host.clone())
            .header(header::ACCEPT, "application/json, text/event-stream");
        if let Some(session) = session {
            b = b.header(PROTOCOL_VERSION, REVISION);
            if let Some(id) = &session.id {
                b = b.header(SESSION_ID, id.clone());
            }
        }
        b
    }

    /// POST a JSON-RPC message.
    pub async fn post(
        &mut self,
        session: Option<&Session>,
        body: Bytes,
    ) -> Result<Response<Incoming>, Error> {
        let req = self
            .request(http::Method::POST, session)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Full::new(body).boxed())
            .map_err(|e| Error::Load(e.to_string()))?;
        self.send(req).await
    }

    /// GET the session's SSE stream, optionally resuming (`Last-Event-ID`, `Mcp-Stream-Id`).
    pub async fn get(
        &mut self,
        session: &Session,
        last_event_id: Option<&str>,
        stream: Option<&HeaderValue>,
    ) -> Result<Response<Incoming>, Error> {
        let mut b =
            self.request(http::Method::GET, Some(session)).header(header::ACCEPT, "text/event-stream");
        if let Some(last) = last_event_id {
            b = b.header(LAST_EVENT_ID, last);
        }
        if let Some(stream) = stream {
            b = b.header(STREAM_ID, stream.clone());
        }
        let req = b.body(Empty::new().boxed()).map_err(|e| Error::Load(e.to_string()))?;
        self.send(req).await
    }

    /// DELETE the session (errors ignored: not every server supports it).
    pub async fn delete(&mut self, session: &Session) {
        let Ok(req) = self.request(http::Method::DELETE, Some(session)).body(Empty::new().boxed()) else {
            return;
        };
        if let Ok(resp) = self.send(req).await {
            let _ = resp.into_body().collect().await;
        }
    }

    /// `initialize` then `notifications/initialized`.
    pub async fn initialize(&mut self) -> Result<Session, Error> {
        let init = format!(
            r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"{REVISION}","capabilities":{{}},"clientInfo":{{"name":"forkless-bench","version":"1"}}}}}}"#
        );
        let resp = self.post(None, Bytes::from(init)).await?;
        if resp.status() != StatusCode::OK {
            return Err(Error::Load(format!("initialize answered {}", resp.status())));
        }
        let id = resp.headers().get(SESSION_ID).cloned();
        let body = collect(resp).await?;
        if !contains(&body, b"\"result\"") {
            return Err(Error::Load("initialize got no result".into()));
        }
        let session = Session { id };
        let note = Bytes::from_static(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        let resp = self.post(Some(&session), note).await?;
        let status = resp.status();
        let _ = collect(resp).await;
        if !status.is_success() {
            return Err(Error::Load(format!("notifications/initialized answered {status}")));
        }
        Ok(session)
    }
}

async fn collect(resp: Response<Incoming>) -> Result<Bytes, Error> {
    match tokio::time::timeout(REQUEST_TIMEOUT, resp.into_body().collect()).await {
        Ok(Ok(b)) => Ok(b.to_bytes()),
        Ok(Err(e)) => Err(Error::Load(format!("body: {e}"))),
        Err(_) => Err(Error::Load("body timed out".into())),
    }
}

/// Whether `needle` occurs in `hay`.
pub fn contains(hay: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && memchr::memmem::find(hay, needle).is_some()
}

fn is_sse(resp: &Response<Incoming>) -> bool {
    resp.headers().get(header::CONTENT_TYPE).is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"))
}

/// An incremental SSE parser: feed it chunks, get whole events.
#[derive(Debug, Default)]
pub struct SseParser {
    buf: Vec<u8>,
    /// Where the search for the next blank line resumes.
    scanned: usize,
}

/// What an SSE event carried, as far as the load cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// A JSON-RPC notification.
    Notification,
    /// A JSON-RPC response (result or error).
    Response,
    /// A server-to-client request, a priming event, a comment or anything else.
    Other,
}

impl SseParser {
    /// Feed a chunk; `on_event(kind, id)` runs for every complete event. Lines may end in
    /// LF or CRLF (sse-starlette, behind the Python SDK, writes CRLF).
    pub fn push(&mut self, chunk: &[u8], mut on_event: impl FnMut(EventKind, Option<&str>)) {
        // The client must not be what limits a load: line ends are found with `memchr`, not
        // byte by byte (a replay arrives at over a million events a second).
        self.buf.extend_from_slice(chunk);
        let mut event_start = 0;
        let mut line_start = self.scanned;
        for i in memchr::memchr_iter(b'\n', &self.buf[self.scanned..]).map(|at| at + self.scanned) {
            let line = &self.buf[line_start..i];
            let blank = line.is_empty() || line == b"\r";
            line_start = i + 1;
            if blank {
                let (kind, id) = parse_event(&self.buf[event_start..i]);
                on_event(kind, id);
                event_start = i + 1;
            }
        }
        self.buf.drain(..event_start);
        self.scanned = line_start - event_start;
    }
}

fn parse_event(block: &[u8]) -> (EventKind, Option<&str>) {
    let mut id = None;
    let mut kind = EventKind::Other;
    for line in block.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if let Some(v) = line.strip_prefix(b"id:") {
            id = std::str::from_utf8(v).ok().map(str::trim);
        } else if let Some(data) = line.strip_prefix(b"data:") {
            // Searchers built once: building one per search cost more than the search.
            static KEYS: std::sync::LazyLock<[memchr::memmem::Finder<'static>; 4]> =
                std::sync::LazyLock::new(|| {
                    [&b"\"result\""[..], b"\"error\"", b"\"method\"", b"\"id\""]
                        .map(memchr::memmem::Finder::new)
                });
            let has = |k: usize| KEYS[k].find(data).is_some();
            if has(0) || has(1) {
                kind = EventKind::Response;
            } else if has(2) && !has(3) {
                kind = EventKind::Notification;
            }
        }
    }
    (kind, id)
}

/// What one load measured at the client, plus the server's CPU and memory over the same
/// window.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Measured {
    /// Operations completed in the window (requests, or events for the stream loads).
    pub ops: u64,
    /// Failed operations (bad status, missing result, wrong answer mode, lost events).
    pub errors: u64,
    /// Length of the measured window, s.
    pub seconds: f64,
    /// `ops / seconds`.
    pub throughput: f64,
    /// Median latency, µs (request loads, and delivery latency of `notify-latency`).
    pub p50_us: Option<f64>,
    /// 99th percentile latency, µs (request loads, and delivery latency of `notify-latency`).
    pub p99_us: Option<f64>,
    /// Server CPU time in the window, s.
    pub server_cpu_s: Option<f64>,
    /// Server CPU per operation, µs.
    pub cpu_us_per_op: Option<f64>,
}

impl Measured {
    fn finish(&mut self, latencies: &mut [u32], cpu: Option<f64>) {
        self.throughput = if self.seconds > 0.0 { self.ops as f64 / self.seconds } else { 0.0 };
        if !latencies.is_empty() {
            latencies.sort_unstable();
            let at = |q: f64| f64::from(latencies[((latencies.len() - 1) as f64 * q).round() as usize]);
            self.p50_us = Some(at(0.50));
            self.p99_us = Some(at(0.99));
        }
        self.server_cpu_s = cpu;
        self.cpu_us_per_op = cpu.filter(|_| self.ops > 0).map(|c| c * 1e6 / self.ops as f64);
    }
}

fn cpu_between(probe: &Probe, a: Option<ProcSample>) -> Option<f64> {
    let b = probe()?;
    Some(a?.cpu_seconds_until(&b))
}

/// Load 1 and 2: `clients` connections sharing one session, each with one `tools/call echo`
/// in flight, for `warmup` (not counted) then `duration`. `expect_sse`: every answer must be
/// `text/event-stream` (else `application/json`); a mismatch counts as an error.
pub async fn echo(
    ep: &Endpoint,
    clients: usize,
    warmup: Duration,
    duration: Duration,
    expect_sse: bool,
    probe: &Probe,
) -> Result<Measured, Error> {
    let mut first = Conn::open(ep).await?;
    let session = first.initialize().await?;
    let mut conns = vec![first];
    for _ in 1..clients {
        conns.push(Conn::open(ep).await?);
    }
    let start = Instant::now();
    let measure_from = start + warmup;
    let end = measure_from + duration;
    let errors = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for (n, mut conn) in conns.into_iter().enumerate() {
        let (session, errors) = (session.clone(), errors.clone());
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(1 << 16);
            let mut id = (n as u64) << 40;
            loop {
                let t0 = Instant::now();
                if t0 >= end {
                    break;
                }
                id += 1;
                let body = format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"hello forkless"}}}}}}"#
                );
                let ok = match conn.post(Some(&session), Bytes::from(body)).await {
                    Ok(resp) => {
                        let status_ok = resp.status() == StatusCode::OK && is_sse(&resp) == expect_sse;
                        match collect(resp).await {
                            Ok(b) => status_ok && contains(&b, b"\"result\"") && contains(&b, b"hello forkless"),
                            Err(_) => false,
                        }
                    }
                    Err(_) => {
                        // The connection is broken: count it and start a new one.
                        match Conn::open(&conn_ep(&conn)).await {
                            Ok(c) => conn = c,
                            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
                        }
                        false
                    }
                };
                let t1 = Instant::now();
                if t0 >= measure_from && t1 <= end {
                    if ok {
                        latencies.push(u32::try_from(t1.duration_since(t0).as_micros()).unwrap_or(u32::MAX));
                    } else {
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            latencies
        }));
    }
    tokio::time::sleep_until(measure_from.into()).await;
    let cpu0 = probe();
    tokio::time::sleep_until(end.into()).await;
    let cpu = cpu_between(probe, cpu0);
    let mut latencies = Vec::new();
    for t in tasks {
        latencies.extend(t.await.map_err(|e| Error::Load(e.to_string()))?);
    }
    let mut m = Measured {
        ops: latencies.len() as u64,
        errors: errors.load(Ordering::Relaxed),
        seconds: duration.as_secs_f64(),
        ..Measured::default()
    };
    m.finish(&mut latencies, cpu);
    Ok(m)
}

fn conn_ep(conn: &Conn) -> Endpoint {
    let addr = conn.host.to_str().ok().and_then(|h| h.parse().ok()).unwrap_or(([127, 0, 0, 1], 0).into());
    Endpoint { addr, path: conn.path.clone() }
}

/// What reading one SSE response body found.
#[derive(Debug, Default)]
struct StreamRead {
    notifications: u64,
    responses: u64,
    first_id: Option<String>,
    stream: Option<HeaderValue>,
    /// From sending the request to the end of reading.
    elapsed: Duration,
    ok: bool,
}

/// Read an SSE response until its body ends or `stop_after` notifications and a response
/// (or, without a response expected, `stop_after` notifications) were seen.
async fn read_stream(
    resp: Response<Incoming>,
    sent: Instant,
    stop_after: u64,
    want_response: bool,
) -> StreamRead {
    let mut out = StreamRead {
        ok: resp.status() == StatusCode::OK && is_sse(&resp),
        stream: resp.headers().get(STREAM_ID).cloned(),
        ..StreamRead::default()
    };
    let mut body = resp.into_body();
    let mut parser = SseParser::default();
    let deadline = tokio::time::Instant::now() + REQUEST_TIMEOUT;
    loop {
        let done = out.notifications >= stop_after && (!want_response || out.responses > 0);
        if done {
            break;
        }
        let frame = match tokio::time::timeout_at(deadline, body.frame()).await {
            Ok(Some(Ok(frame))) => frame,
            Ok(None) => break,
            Ok(Some(Err(_))) | Err(_) => {
                out.ok = false;
                break;
            }
        };
        let Ok(data) = frame.into_data() else { continue };
        parser.push(&data, |kind, id| {
            if out.first_id.is_none() {
                out.first_id = id.map(str::to_owned);
            }
            match kind {
                EventKind::Notification => out.notifications += 1,
                EventKind::Response => out.responses += 1,
                EventKind::Other => {}
            }
        });
    }
    out.elapsed = sent.elapsed();
    out
}

fn notify_call(id: u64, count: u64) -> Bytes {
    Bytes::from(format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"start-notification-stream","arguments":{{"interval":0,"count":{count}}},"_meta":{{"progressToken":{id}}}}}}}"#
    ))
}

/// Load 3: `streams` concurrent `start-notification-stream` calls of `count` notifications,
/// each in its own session (created before and deleted after each round, outside the
/// timing), repeated in rounds until `duration` has passed (at least one round after an
/// uncounted warm-up round). Throughput: notifications received per second of round time.
pub async fn notifications(
    ep: &Endpoint,
    streams: usize,
    count: u64,
    duration: Duration,
    probe: &Probe,
) -> Result<Measured, Error> {
    let mut m = Measured::default();
    let mut busy = Duration::ZERO;
    let mut cpu = Some(0.0);
    let mut round = 0u64;
    while round == 0 || busy < duration {
        // Fresh connections every round: some servers close a connection after a stream.
        let mut conns = Vec::with_capacity(streams);
        let mut sessions = Vec::with_capacity(streams);
        for _ in 0..streams {
            let mut conn = Conn::open(ep).await?;
            sessions.push(conn.initialize().await?);
            conns.push(conn);
        }
        let cpu0 = probe();
        let started = Instant::now();
        let mut tasks = Vec::with_capacity(streams);
        for (mut conn, session) in conns.drain(..).zip(sessions) {
            tasks.push(tokio::spawn(async move {
                let sent = Instant::now();
                let read = match conn.post(Some(&session), notify_call(1, count)).await {
                    Ok(resp) => read_stream(resp, sent, count, true).await,
                    Err(_) => StreamRead::default(),
                };
                (conn, session, read)
            }));
        }
        let mut results = Vec::with_capacity(streams);
        for t in tasks {
            results.push(t.await.map_err(|e| Error::Load(e.to_string()))?);
        }
        let round_time = started.elapsed();
        let round_cpu = cpu_between(probe, cpu0);
        for (_, session, read) in results {
            if round > 0 {
                m.ops += read.notifications;
                m.errors += u64::from(!read.ok || read.notifications != count || read.responses != 1);
            }
            if let Ok(mut conn) = Conn::open(ep).await {
                conn.delete(&session).await;
            }
        }
        if round > 0 {
            busy += round_time;
            cpu = cpu.zip(round_cpu).map(|(a, b)| a + b);
        }
        round += 1;
    }
    m.seconds = busy.as_secs_f64();
    m.finish(&mut [], cpu);
    Ok(m)
}

/// Load 6: delivery latency. One `timed-notification-stream` call of `count` notifications
/// `interval_ms` apart (a light load, so the figure is the path an event takes, not a
/// queue); each carries the wall-clock time it was emitted (`t=<µs>`), and its latency is
/// the time from then until the client has read it. Server and client share the clock.
pub async fn delivery_latency(
    ep: &Endpoint,
    count: u64,
    interval_ms: u64,
    probe: &Probe,
) -> Result<Measured, Error> {
    let mut conn = Conn::open(ep).await?;
    let session = conn.initialize().await?;
    let call = Bytes::from(format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"timed-notification-stream","arguments":{{"interval":{interval_ms},"count":{count}}}}}}}"#
    ));
    let cpu0 = probe();
    let started = Instant::now();
    let resp = conn.post(Some(&session), call).await?;
    let mut m = Measured::default();
    if resp.status() != StatusCode::OK {
        m.errors = count;
        return Ok(m);
    }
    let mut body = resp.into_body();
    let mut pending: Vec<u8> = Vec::new();
    let mut latencies: Vec<u32> = Vec::with_capacity(usize::try_from(count).unwrap_or(0));
    let deadline = tokio::time::Instant::now() + REQUEST_TIMEOUT;
    while (latencies.len() as u64) < count {
        let frame = match tokio::time::timeout_at(deadline, body.frame()).await {
            Ok(Some(Ok(frame))) => frame,
            _ => break,
        };
        let Ok(data) = frame.into_data() else { continue };
        let now =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros());
        pending.extend_from_slice(&data);
        // Whole lines only; an event split across frames is finished by a later one.
        let Some(end) = pending.iter().rposition(|&b| b == b'\n') else { continue };
        for line in pending[..end].split(|&b| b == b'\n') {
            let Some(at) = find(line, b"\"t=") else { continue };
            let digits: Vec<u8> = line[at + 3..].iter().copied().take_while(u8::is_ascii_digit).collect();
            if let Some(t) = std::str::from_utf8(&digits).ok().and_then(|d| d.parse::<u128>().ok()) {
                latencies.push(u32::try_from(now.saturating_sub(t)).unwrap_or(u32::MAX));
            }
        }
        pending.drain(..=end);
    }
    m.ops = latencies.len() as u64;
    m.errors = count - m.ops.min(count);
    m.seconds = started.elapsed().as_secs_f64();
    let cpu = cpu_between(probe, cpu0);
    m.finish(&mut latencies, cpu);
    // The stream may still be open (its response not read): a fresh connection deletes.
    drop(body);
    if let Ok(mut conn) = Conn::open(ep).await {
        conn.delete(&session).await;
    }
    Ok(m)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The two figures of the resume load.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ResumeMeasured {
    /// Live delivery of the stream (events/s from the POST to its last event).
    pub live: Measured,
    /// The replay of the same stream from its first event (events/s from the GET to its end).
    pub replay: Measured,
}

/// Load 4: per round, a `start-notification-stream` call of `count` notifications read
/// live, then a GET with `Last-Event-ID` = the stream's first event id (and `Mcp-Stream-Id`
/// when the server gave one) that replays the buffered events; `rounds` rounds after an
/// uncounted warm-up round.
pub async fn resume(ep: &Endpoint, count: u64, rounds: u32, probe: &Probe) -> Result<ResumeMeasured, Error> {
    let mut out = ResumeMeasured::default();
    let (mut live_time, mut replay_time) = (Duration::ZERO, Duration::ZERO);
    let (mut live_cpu, mut replay_cpu) = (Some(0.0), Some(0.0));
    for round in 0..=rounds {
        let mut conn = Conn::open(ep).await?;
        let session = conn.initialize().await?;
        let cpu0 = probe();
        let sent = Instant::now();
        let resp = conn.post(Some(&session), notify_call(1, count)).await?;
        let live = read_stream(resp, sent, count, true).await;
        let cpu1 = probe();
        let Some(first) = live.first_id.clone() else {
            return Err(Error::Load("the stream's events carry no id: nothing to resume from".into()));
        };
        // The first id is the priming event's (nothing before it) or the first
        // notification's (that one is not replayed).
        let expected = if live.notifications == count && first.ends_with(".0") { count } else { count - 1 };
        let mut replay_conn = Conn::open(ep).await?;
        let sent = Instant::now();
        let resp = replay_conn.get(&session, Some(&first), live.stream.as_ref()).await?;
        let replay = read_stream(resp, sent, expected, false).await;
        let cpu2 = probe();
        if let Ok(mut conn) = Conn::open(ep).await {
            conn.delete(&session).await;
        }
        if round == 0 {
            continue;
        }
        out.live.ops += live.notifications;
        out.live.errors += u64::from(!live.ok || live.notifications != count);
        live_time += live.elapsed;
        live_cpu = live_cpu.zip(cpu0.zip(cpu1).map(|(a, b)| a.cpu_seconds_until(&b))).map(|(a, b)| a + b);
        out.replay.ops += replay.notifications;
        out.replay.errors += u64::from(!replay.ok || replay.notifications < expected);
        replay_time += replay.elapsed;
        replay_cpu = replay_cpu.zip(cpu1.zip(cpu2).map(|(a, b)| a.cpu_seconds_until(&b))).map(|(a, b)| a + b);
    }
    out.live.seconds = live_time.as_secs_f64();
    out.live.finish(&mut [], live_cpu);
    out.replay.seconds = replay_time.as_secs_f64();
    out.replay.finish(&mut [], replay_cpu);
    Ok(out)
}

/// What the idle-sessions load found.
#[derive(Clone, Debug, Default, Serialize)]
pub struct IdleMeasured {
    /// Sessions created.
    pub sessions: u64,
    /// Sessions that could not be created.
    pub session_errors: u64,
    /// Server resident memory per idle session (no stream open), bytes.
    pub bytes_per_session: Option<f64>,
    /// GET streams attached (200, `text/event-stream`) and still open after the hold.
    pub streams_held: u64,
    /// GET streams refused, failed, or closed by the server during the hold.
    pub stream_errors: u64,
    /// Additional server resident memory per open GET stream, bytes.
    pub bytes_per_stream: Option<f64>,
    /// Server resident memory at the end, KiB.
    pub rss_kib: Option<u64>,
}

/// Load 5: create `sessions` sessions (16 connections), then open one GET stream per session
/// (each on its own connection), hold them all for `hold`, and count those still open.
pub async fn idle(
    ep: &Endpoint,
    sessions: usize,
    hold: Duration,
    probe: &Probe,
) -> Result<IdleMeasured, Error> {
    const POOL: usize = 16;
    let mut out = IdleMeasured::default();
    let rss0 = probe().map(|s| s.rss_kib);
    let mut tasks = Vec::new();
    for w in 0..POOL {
        let ep = ep.clone();
        let n = sessions / POOL + usize::from(w < sessions % POOL);
        tasks.push(tokio::spawn(async move {
            let mut conn = Conn::open(&ep).await?;
            let mut made = Vec::with_capacity(n);
            let mut errors = 0u64;
            for _ in 0..n {
                match conn.initialize().await {
                    Ok(s) => made.push(s),
                    Err(_) => {
                        errors += 1;
                        conn = Conn::open(&ep).await?;
                    }
                }
            }
            Ok::<_, Error>((made, errors))
        }));
    }
    let mut all = Vec::with_capacity(sessions);
    for t in tasks {
        let (made, errors) = t.await.map_err(|e| Error::Load(e.to_string()))??;
        all.extend(made);
        out.session_errors += errors;
    }
    out.sessions = all.len() as u64;
    let rss1 = probe().map(|s| s.rss_kib);
    out.bytes_per_session = rss0
        .zip(rss1)
        .filter(|_| out.sessions > 0)
        .map(|(a, b)| b.saturating_sub(a) as f64 * 1024.0 / out.sessions as f64);

    // One connection per stream, opened 256 at a time.
    let closed = Arc::new(AtomicU64::new(0));
    let mut held = Vec::with_capacity(all.len());
    for chunk in all.chunks(256) {
        let mut opening = Vec::with_capacity(chunk.len());
        for session in chunk {
            let (ep, session, closed) = (ep.clone(), session.clone(), closed.clone());
            opening.push(tokio::spawn(async move {
                let mut conn = Conn::open(&ep).await.ok()?;
                let resp = conn.get(&session, None, None).await.ok()?;
                if resp.status() != StatusCode::OK || !is_sse(&resp) {
                    return None;
                }
                // Drain the stream until it ends; an end before the hold is over is an error.
                let reader = tokio::spawn(async move {
                    let mut body = resp.into_body();
                    while let Some(Ok(_)) = body.frame().await {}
                    closed.fetch_add(1, Ordering::Relaxed);
                });
                Some((conn, reader))
            }));
        }
        for t in opening {
            match t.await.ok().flatten() {
                Some(h) => held.push(h),
                None => out.stream_errors += 1,
            }
        }
    }
    tokio::time::sleep(hold).await;
    let rss2 = probe().map(|s| s.rss_kib);
    let gone = closed.load(Ordering::Relaxed);
    out.streams_held = (held.len() as u64).saturating_sub(gone);
    out.stream_errors += gone;
    out.bytes_per_stream = rss1
        .zip(rss2)
        .filter(|_| !held.is_empty())
        .map(|(a, b)| b.saturating_sub(a) as f64 * 1024.0 / held.len() as f64);
    out.rss_kib = rss2;
    for (conn, reader) in held {
        reader.abort();
        drop(conn);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_events_across_chunks() {
        let mut p = SseParser::default();
        let mut seen = Vec::new();
        let wire = b"id: s.0\nretry: 1000\ndata: \n\nid: s.1\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"}\r\n\r\n: keep-alive\n\nid: s.2\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n";
        for chunk in wire.chunks(7) {
            p.push(chunk, |k, id| seen.push((k, id.map(str::to_owned))));
        }
        assert_eq!(
            seen,
            vec![
                (EventKind::Other, Some("s.0".into())),
                (EventKind::Notification, Some("s.1".into())),
                (EventKind::Other, None),
                (EventKind::Response, Some("s.2".into())),
            ]
        );
    }

    #[test]
    fn endpoints_from_announced_urls() {
        let ep = Endpoint::from_url("http://127.0.0.1:8080/mcp").expect("url");
        assert_eq!(ep.addr, "127.0.0.1:8080".parse().expect("addr"));
        assert_eq!(ep.path, "/mcp");
        assert!(Endpoint::from_url("https://x").is_none());
    }
}
