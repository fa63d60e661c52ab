//! Accepting connections and bounding them: how long a connection may take to send a
//! request's headers (or wait for its next request), how many connections are held at once,
//! what happens at that limit, accept errors, and the process's open-file limit.
//!
//! This module owns the TCP and HTTP/1.1 connection layer under the dispatch. It knows
//! nothing about MCP: a request, once its headers are read, is the dispatch's
//! ([`crate::endpoint`]). Bounds on the body and on sessions are the request path's
//! ([`crate::request`], [`crate::post`]).
//!
//! ```text
//!  accept ─ error? ─▶ count, log (at most once a second), back off 10 ms … 1 s, retry
//!     │
//!     ├─ below max_connections ─▶ serve (header_read_timeout: opened or idle → headers read)
//!     └─ at the limit ─▶ close the longest-idle connection (no request in flight) and serve;
//!                        none idle ─▶ 503 + JSON-RPC error, close
//! ```

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::Body;
use bytes::Bytes;
use http::Request;
use tokio::io::AsyncWriteExt as _;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::error::Error;
use crate::metrics::Metrics;

mod connection;
mod deadline;
mod files;
mod socket;
mod woken;
pub(crate) use connection::Accept;
pub(crate) use files::open_file_limit;
pub use files::raise_open_file_limit;

/// The bounds this layer enforces (from [`crate::ServerConfig`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Bounds {
    pub(crate) header_read_timeout: Duration,
    pub(crate) idle_timeout: Duration,
    pub(crate) max_connections: usize,
    pub(crate) max_header_bytes: usize,
}

/// One accepted connection, as the limit sees it.
#[derive(Debug)]
struct Conn {
    /// Requests whose response has not finished (an SSE stream is one until it ends).
    in_flight: AtomicUsize,
    /// When the last response finished (milliseconds after the registry's origin).
    idle_since: AtomicU64,
    /// When the next request's head started arriving (milliseconds after the origin, plus
    /// one; 0 while none is arriving).
    head_since: AtomicU64,
    /// Cancelled to drop the connection at once (it was idle and its slot is needed).
    drop_now: CancellationToken,
}

/// What the connection task is told besides its connection's progress.
enum Control {
    /// Dropped to make room at `max_connections`.
    DropNow,
    /// Graceful shutdown began.
    Shutdown,
    /// Its deadline (as it stood) passed.
    Deadline,
}

/// The connections held, by id.
#[derive(Debug)]
pub(crate) struct Registry {
    conns: Mutex<HashMap<u64, Arc<Conn>>>,
    next_id: AtomicU64,
    origin: Instant,
}

impl Default for Registry {
    fn default() -> Self {
        Self { conns: Mutex::default(), next_id: AtomicU64::new(1), origin: Instant::now() }
    }
}

impl Registry {
    fn lock(&self) -> MutexGuard<'_, HashMap<u64, Arc<Conn>>> {
        self.conns.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// A slot for a new connection: free, or taken from the longest-idle one (which is
    /// dropped); `None` when every held connection has a request in flight.
    fn admit(&self, max: usize, metrics: &Metrics) -> Option<(u64, Arc<Conn>)> {
        let mut conns = self.lock();
        if conns.len() >= max {
            let idlest = conns
                .iter()
                .filter(|(_, c)| c.in_flight.load(Ordering::Acquire) == 0)
                .min_by_key(|(_, c)| c.idle_since.load(Ordering::Relaxed))
                .map(|(id, _)| *id)?;
            if let Some(evicted) = conns.remove(&idlest) {
                evicted.drop_now.cancel();
                Metrics::inc(&metrics.connections_dropped_idle);
            }
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let conn = Arc::new(Conn {
            in_flight: AtomicUsize::new(0),
            idle_since: AtomicU64::new(self.now_ms()),
            head_since: AtomicU64::new(0),
            drop_now: CancellationToken::new(),
        });
        conns.insert(id, conn.clone());
        Some((id, conn))
    }

    fn release(&self, id: u64) {
        self.lock().remove(&id);
    }

    /// How many connections are held.
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }
}

/// Marks its connection busy while a response is being sent; idle again when dropped.
struct Busy {
    conn: Arc<Conn>,
    registry: Arc<Registry>,
}

impl Busy {
    fn new(conn: Arc<Conn>, registry: Arc<Registry>) -> Self {
        conn.in_flight.fetch_add(1, Ordering::AcqRel);
        conn.head_since.store(0, Ordering::Relaxed);
        Self { conn, registry }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.conn.idle_since.store(self.registry.now_ms(), Ordering::Relaxed);
        self.conn.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A response body that keeps its connection busy until it ends or is dropped.
struct Tracked {
    inner: Body,
    _busy: Busy,
}

impl http_body::Body for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// A refusal written straight to a socket: a complete HTTP/1.1 response, then close.
fn raw_response(error: &Error) -> Vec<u8> {
    let (status, _) = error.status_and_code();
    let body = error.body().to_string();
    let retry = match error {
        Error::AtCapacity { retry_after, .. } => format!("retry-after: {}\r\n", retry_after.as_secs().max(1)),
        _ => String::new(),
    };
    format!(
        "HTTP/1.1 {} {}\r\ncontent-type: application/json\r\n{retry}connection: close\r\ncontent-length: {}\r\n\r\n{body}",
        status.as_u16(),
        status.canonical_reason().unwrap_or(""),
        body.len()
    )
    .into_bytes()
}

/// Accept on `listener` and serve `dispatch` until `shutdown`, then stop accepting and let
/// every connection finish (the caller bounds how long: `drain_timeout`).
pub(crate) async fn serve(
    listener: TcpListener,
    accept: Accept,
    dispatch: crate::endpoint::Dispatch,
    bounds: Bounds,
    metrics: Arc<Metrics>,
    registry: Arc<Registry>,
    shutdown: CancellationToken,
) -> TaskTracker {
    let tracker = TaskTracker::new();
    let mut backoff = ACCEPT_BACKOFF_MIN;
    let mut last_logged: Option<Instant> = None;
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = shutdown.cancelled() => break,
        };
        let tcp = match accepted {
            Ok((tcp, _)) => {
                backoff = ACCEPT_BACKOFF_MIN;
                tcp
            }
            Err(e) => {
                // Out of file descriptors (or another transient failure): never a busy loop.
                Metrics::inc(&metrics.accept_errors);
                if last_logged.is_none_or(|t| t.elapsed() >= Duration::from_secs(1)) {
                    tracing::warn!(error = %e, backoff_ms = backoff.as_millis() as u64, "accept failed; backing off");
                    last_logged = Some(Instant::now());
                }
                tokio::select! {
                    () = tokio::time::sleep(backoff) => {}
                    () = shutdown.cancelled() => break,
                }
                backoff = (backoff * 2).min(ACCEPT_BACKOFF_MAX);
                continue;
            }
        };
        // SSE bodies go out as several small writes; with Nagle's algorithm each write after
        // the first waits for the client's delayed ACK (about 40 ms on Linux).
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "TCP_NODELAY not set");
        }
        let Some((id, conn)) = registry.admit(bounds.max_connections, &metrics) else {
            Metrics::inc(&metrics.connections_refused);
            tracker.spawn(refuse(tcp));
            continue;
        };
        let ctx = connection::Ctx {
            id,
            conn,
            dispatch: dispatch.clone(),
            bounds,
            registry: registry.clone(),
            shutdown: shutdown.clone(),
            metrics: metrics.clone(),
        };
        tracker.spawn(connection::connection(tcp, accept.clone(), ctx));
    }
    tracker.close();
    tracker
}

/// Whether `request` may count against its client's share ([`crate::quota`]): a POST
/// without a session id that could be an `initialize`, or a 2026-07-28 request that may
/// create a task (any but a `tasks/…` request or a notification, as `Mcp-Method` names it).
/// The others (GETs, requests of a session, task polls) carry nothing extra.
fn may_create_a_session<B>(request: &Request<B>) -> bool {
    let headers = request.headers();
    if request.method() != hyper::Method::POST || headers.contains_key(crate::headers::SESSION_ID) {
        return false;
    }
    let stateless = headers
        .get(crate::headers::PROTOCOL_VERSION)
        .and_then(|v| v.to_str().ok()?.parse::<forkless_core::Revision>().ok())
        .is_some_and(forkless_core::Revision::is_stateless);
    !stateless
        || headers.get("mcp-method").is_some_and(|m| {
            !m.as_bytes().starts_with(b"tasks/") && !m.as_bytes().starts_with(b"notifications/")
        })
}

/// The smallest read buffer hyper accepts.
const HYPER_MIN_BUF: usize = 8 * 1024;

const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(10);
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

async fn refuse(mut tcp: TcpStream) {
    let error = Error::AtCapacity { limit: "max_connections", retry_after: Duration::from_secs(1) };
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        let _ = tcp.write_all(&raw_response(&error)).await;
        let _ = tcp.shutdown().await;
    })
    .await;
}

#[cfg(test)]
mod tests;
