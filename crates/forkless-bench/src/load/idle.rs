//! The idle load: many sessions, each with an attached standalone stream, held open while
//! nothing happens, to measure what an idle session costs the server (memory, CPU).

use crate::Error;
use crate::wire::is_sse;
use crate::wire::{Conn, Endpoint, Probe};
use http::StatusCode;
use http_body_util::BodyExt as _;
use serde::Serialize;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

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
