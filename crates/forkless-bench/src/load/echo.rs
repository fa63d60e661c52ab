//! Loads 1 and 2: `tools/call echo` from many connections, each with one call in flight,
//! answered over SSE or as JSON.
//!
//! It owns this load, not the wire (`crate::wire`) or the figures' shape ([`Measured`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::StatusCode;

use super::{Measured, cpu_between};
use crate::Error;
use crate::wire::{Conn, Endpoint, Probe, collect, contains, is_sse};

/// What an answer to the echo load must be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// `text/event-stream`.
    Sse,
    /// `application/json`.
    Json,
    /// Either (a server that is not ours, which picks).
    Either,
}

/// The echo tool's call: its argument's name (`text` for the servers here; others name it
/// otherwise, `message` for server-everything) and the answer it must get.
#[derive(Clone, Copy, Debug)]
pub struct EchoCall<'a> {
    /// The name of the echo tool's one argument.
    pub argument: &'a str,
    /// What its answers must be.
    pub expect: Expect,
    /// Where to create the session, if not where the load goes (another node of a cluster:
    /// every call is then forwarded to the session's owner).
    pub session_at: Option<&'a Endpoint>,
    /// Whether the connections share one session or each has its own.
    pub sessions: Sessions,
}

/// How the echo load's connections hold sessions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Sessions {
    /// One session, every connection's calls in it (the harness's echo loads).
    #[default]
    Shared,
    /// A session per connection, created through that connection (behind a load balancer,
    /// on whichever node it reaches: its calls that reach other nodes are forwarded).
    PerClient,
}

impl EchoCall<'static> {
    /// The servers of this harness: `{"text": …}`, answered as `sse` says.
    pub fn ours(sse: bool) -> Self {
        let expect = if sse { Expect::Sse } else { Expect::Json };
        Self { argument: "text", expect, session_at: None, sessions: Sessions::Shared }
    }
}

/// Load 1 and 2: `clients` connections sharing one session, each with one `tools/call echo`
/// in flight, for `warmup` (not counted) then `duration`. An answer that is not what `call`
/// expects counts as an error.
pub async fn echo(
    ep: &Endpoint,
    clients: usize,
    warmup: Duration,
    duration: Duration,
    call: EchoCall<'_>,
    probe: &Probe,
) -> Result<Measured, Error> {
    let mut first = Conn::open(ep).await?;
    let session = match call.session_at {
        Some(at) => Conn::open(at).await?.initialize().await?,
        None => first.initialize().await?,
    };
    let mut conns = vec![first];
    for _ in 1..clients {
        conns.push(Conn::open(ep).await?);
    }
    let start = Instant::now();
    let measure_from = start + warmup;
    let end = measure_from + duration;
    let errors = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    // Small ids, as an SDK client's: connection n sends n, n + k, n + 2k… (large ones cost a
    // JavaScript server about a tenth of its rate: they are not small integers in V8).
    let stride = conns.len() as u64;
    for (n, mut conn) in conns.into_iter().enumerate() {
        let (mut session, errors) = (session.clone(), errors.clone());
        let (argument, expect, sessions) = (call.argument.to_owned(), call.expect, call.sessions);
        tasks.push(tokio::spawn(async move {
            if sessions == Sessions::PerClient && n > 0 {
                session = conn.initialize().await?;
            }
            let mut latencies = Vec::with_capacity(1 << 16);
            let mut id = n as u64;
            loop {
                let t0 = Instant::now();
                if t0 >= end {
                    break;
                }
                id += stride;
                let body = format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{{"{argument}":"hello forkless"}}}}}}"#
                );
                let ok = match conn.post(Some(&session), Bytes::from(body)).await {
                    Ok(resp) => {
                        let shape_ok = match expect {
                            Expect::Sse => is_sse(&resp),
                            Expect::Json => !is_sse(&resp),
                            Expect::Either => true,
                        };
                        let status_ok = resp.status() == StatusCode::OK && shape_ok;
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
            Ok::<_, Error>(latencies)
        }));
    }
    tokio::time::sleep_until(measure_from.into()).await;
    let cpu0 = probe();
    tokio::time::sleep_until(end.into()).await;
    let cpu = cpu_between(probe, cpu0);
    let mut latencies = Vec::new();
    for t in tasks {
        latencies.extend(t.await.map_err(|e| Error::Load(e.to_string()))??);
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
    conn.endpoint.clone()
}
