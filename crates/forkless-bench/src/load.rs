//! The load generator: MCP clients on hyper 1 (HTTP/1.1, keep-alive, one request in flight
//! per connection), an incremental SSE parser, and the five loads of the harness.
//!
//! This module owns producing load and timing it at the client. It knows nothing about
//! which server it talks to (every server is reached the same way: `initialize`,
//! `notifications/initialized`, then the load) and nothing about processes: CPU and memory
//! of the server are read through a [`Probe`] the caller passes in.

use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode};
use http_body_util::BodyExt as _;
use hyper::body::Incoming;
use serde::Serialize;

use crate::Error;
use crate::procstat::ProcSample;
pub use crate::wire::{Alpn, Conn, Endpoint, EventKind, Probe, Session, SseParser, contains};
use crate::wire::{REQUEST_TIMEOUT, STREAM_ID, is_sse};

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

mod cluster;
mod echo;
mod idle;
pub use cluster::cross_resume;
pub use echo::{EchoCall, Expect, Sessions, echo};
pub use idle::{IdleMeasured, idle};

#[cfg(test)]
mod tests;
