//! One connection, from its accepted socket to its end: the TLS handshake where the endpoint
//! has one, the protocol (HTTP/1.1, HTTP/2 by ALPN or by its preface), and the loop that
//! enforces the header and idle timeouts, makes room at `max_connections` and shuts down
//! gracefully, the same on every protocol.
//!
//! It owns serving one connection; accepting and admitting it is [`super::serve`]'s, the
//! identity served [`crate::tls`]'s.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Instant;

use axum::body::Body;
use http::Request;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

use super::deadline::Bound;
use super::socket::Socket;
use super::woken::WokenOnly;
use super::{Bounds, Busy, Conn, Control, HYPER_MIN_BUF, Registry, Tracked, may_create_a_session};
use crate::config::{ConfigError, Transport};
use crate::error::Error;
use crate::metrics::Metrics;

/// How the listener takes a connection on ([`Transport`], with the TLS settings built once).
#[derive(Clone)]
pub(crate) enum Accept {
    Http1,
    Cleartext,
    Tls(tokio_rustls::TlsAcceptor),
}

impl Accept {
    pub(crate) fn of(transport: &Transport) -> Result<Self, ConfigError> {
        Ok(match transport {
            Transport::Http1 => Self::Http1,
            Transport::Cleartext => Self::Cleartext,
            Transport::Tls(identity) => Self::Tls(crate::tls::acceptor(identity.clone())?),
        })
    }
}

/// What a connection's task holds besides its socket.
pub(super) struct Ctx {
    pub(super) id: u64,
    pub(super) conn: Arc<Conn>,
    pub(super) dispatch: crate::endpoint::Dispatch,
    pub(super) bounds: Bounds,
    pub(super) registry: Arc<Registry>,
    pub(super) shutdown: CancellationToken,
    pub(super) metrics: Arc<Metrics>,
}

/// Serve `tcp` as `accept` says, until it ends; then release its slot.
pub(super) async fn connection(tcp: TcpStream, accept: Accept, ctx: Ctx) {
    let peer = tcp.peer_addr().ok().map(crate::quota::PeerAddr);
    match accept {
        Accept::Http1 => {
            let socket = Socket::new(tcp, ctx.conn.clone(), ctx.registry.clone());
            let served =
                http1(ctx.bounds).serve_connection(TokioIo::new(socket), service(&ctx, peer)).with_upgrades();
            tokio::pin!(served);
            drive(served, |s| s.graceful_shutdown(), &ctx).await;
        }
        Accept::Cleartext => {
            let socket = Socket::new(tcp, ctx.conn.clone(), ctx.registry.clone());
            let builder = auto(ctx.bounds);
            let served = builder.serve_connection_with_upgrades(TokioIo::new(socket), service(&ctx, peer));
            tokio::pin!(served);
            drive(served, |s| s.graceful_shutdown(), &ctx).await;
        }
        Accept::Tls(acceptor) => {
            if let Some(tls) = handshake(&acceptor, tcp, &ctx).await {
                let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
                Metrics::inc(&ctx.metrics.tls_connections[usize::from(h2)]);
                let socket = Socket::new(tls, ctx.conn.clone(), ctx.registry.clone());
                let builder = if h2 { auto(ctx.bounds).http2_only() } else { auto(ctx.bounds).http1_only() };
                let served =
                    builder.serve_connection_with_upgrades(TokioIo::new(socket), service(&ctx, peer));
                tokio::pin!(served);
                drive(served, |s| s.graceful_shutdown(), &ctx).await;
            }
        }
    }
    ctx.registry.release(ctx.id);
}

/// The TLS handshake, bounded by `header_read_timeout` (a client that opens a connection
/// and says nothing is cut off as on plaintext), by a shutdown and by the connection's
/// eviction. A failed one (plaintext on the TLS port, a client refusing the certificate) is
/// counted and logged at debug level; the listener serves on.
async fn handshake(
    acceptor: &tokio_rustls::TlsAcceptor,
    tcp: TcpStream,
    ctx: &Ctx,
) -> Option<tokio_rustls::server::TlsStream<TcpStream>> {
    let outcome = tokio::select! {
        outcome = tokio::time::timeout(ctx.bounds.header_read_timeout, acceptor.accept(tcp)) => outcome,
        () = ctx.conn.drop_now.cancelled() => return None,
        () = ctx.shutdown.cancelled() => return None,
    };
    match outcome {
        Ok(Ok(tls)) => Some(tls),
        Ok(Err(e)) => {
            Metrics::inc(&ctx.metrics.tls_handshake_failures);
            tracing::debug!(error = %e, "TLS handshake failed");
            None
        }
        Err(_) => {
            Metrics::inc(&ctx.metrics.header_timeouts);
            None
        }
    }
}

/// HTTP/1.1 as the plaintext listener speaks it.
fn http1(bounds: Bounds) -> hyper::server::conn::http1::Builder {
    let mut builder = hyper::server::conn::http1::Builder::new();
    // The header and idle timeouts are this task's (`drive`), not hyper's timer: one timer
    // per connection rather than one per request.
    builder
        .header_read_timeout(None)
        // hyper refuses a head larger than its buffer with a 431 (given a JSON-RPC body by
        // the socket).
        .max_buf_size(bounds.max_header_bytes.max(HYPER_MIN_BUF));
    builder
}

/// HTTP/1.1 and HTTP/2 (either, or one of them once ALPN chose), with the same bounds.
fn auto(bounds: Bounds) -> hyper_util::server::conn::auto::Builder<TokioExecutor> {
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder.http1().header_read_timeout(None).max_buf_size(bounds.max_header_bytes.max(HYPER_MIN_BUF));
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_header_list_size(u32::try_from(bounds.max_header_bytes).unwrap_or(u32::MAX));
    builder
}

/// The service every request of the connection goes to: the dispatch, with the connection kept
/// busy while a response is in flight.
fn service(
    ctx: &Ctx,
    peer: Option<crate::quota::PeerAddr>,
) -> impl hyper::service::Service<
    Request<Incoming>,
    Response = http::Response<Tracked>,
    Error = Infallible,
    Future = impl Future<Output = Result<http::Response<Tracked>, Infallible>> + Send + 'static,
> + Clone
+ 'static {
    let (conn, registry, dispatch) = (ctx.conn.clone(), ctx.registry.clone(), ctx.dispatch.clone());
    let max_header = ctx.bounds.max_header_bytes;
    hyper::service::service_fn(move |mut request: Request<Incoming>| {
        // Only a request that may create a session or a task needs its client's address (its
        // share, `crate::quota`); the others, the hot path, carry nothing extra.
        if let Some(peer) = peer
            && may_create_a_session(&request)
        {
            request.extensions_mut().insert(peer);
        }
        let busy = Busy::new(conn.clone(), registry.clone());
        let dispatch = dispatch.clone();
        async move {
            // hyper's buffer bounds the head at `max_header_bytes` when that is at least its
            // minimum (8 KiB; hyper's own 431 then gets its JSON body from the socket); below
            // that, the headers are measured here.
            let too_large = max_header < HYPER_MIN_BUF
                && request.headers().iter().map(|(k, v)| k.as_str().len() + v.len() + 4).sum::<usize>()
                    > max_header;
            let response = if too_large {
                axum::response::IntoResponse::into_response(Error::HeadersTooLarge { max: max_header })
            } else {
                dispatch(request.map(Body::new)).await
            };
            Ok::<_, Infallible>(response.map(|inner| Tracked { inner, _busy: busy }))
        }
    })
}

/// Serve until the connection ends: the deadline as it stood, an eviction, a shutdown.
async fn drive<F, E>(mut served: Pin<&mut F>, shut_down: fn(Pin<&mut F>), ctx: &Ctx)
where
    F: Future<Output = Result<(), E>>,
    E: std::fmt::Display,
{
    let (conn, registry, bounds) = (&ctx.conn, &ctx.registry, &ctx.bounds);
    let mut closing = false;
    loop {
        // Nothing wakes this task when a head starts or a response ends (that would cost a
        // wake-up per request): it wakes at the deadline as it stood, or, while idle, once at
        // `header_read_timeout` after the idle start (a head may have started since), and
        // looks again. A head that starts later than that is cut off at the idle deadline
        // at the latest.
        let wake = conn.wake(registry, bounds, Instant::now());
        // The control events are polled only when one of them woke the task, not on each of
        // the connection's own wake-ups.
        let open = !closing;
        let (drop_now, stopping) = (&conn.drop_now, &ctx.shutdown);
        let mut control = WokenOnly::new(async move {
            tokio::select! {
                () = drop_now.cancelled() => Control::DropNow,
                () = stopping.cancelled(), if open => Control::Shutdown,
                () = tokio::time::sleep_until(wake.into()), if open => Control::Deadline,
            }
        });
        let event = std::future::poll_fn(|cx| {
            if let Poll::Ready(out) = served.as_mut().poll(cx) {
                return Poll::Ready(Err(out));
            }
            control.poll_if_woken(cx).map(Ok)
        })
        .await;
        match event {
            Err(out) => {
                if let Err(e) = out {
                    tracing::debug!(error = %e, "connection ended with an error");
                }
                break;
            }
            Ok(Control::DropNow) => break,
            Ok(Control::Shutdown) => {
                closing = true;
                shut_down(served.as_mut());
            }
            Ok(Control::Deadline) => {
                // Re-checked: a request may have started, or a head begun, since.
                let (now_due, now_bound) = conn.deadline(registry, bounds);
                if now_bound != Bound::Busy && now_due <= Instant::now() {
                    // Nothing is in flight: dropping the connection loses no response.
                    let counter = match now_bound {
                        Bound::Header => &ctx.metrics.header_timeouts,
                        Bound::Idle | Bound::Busy => &ctx.metrics.idle_timeouts,
                    };
                    Metrics::inc(counter);
                    break;
                }
            }
        }
    }
}
