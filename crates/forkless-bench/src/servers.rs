//! The servers under test that live in this crate: forkless (around a bench handler with the
//! same tools as `forkless serve`'s demo) and the bare hyper 1 echo, the ceiling for any HTTP
//! transport here.
//!
//! This module owns only serving; the load and the measuring live in [`crate::load`] and
//! [`crate::suite`]. Each server prints one line `listening on http://ADDR/mcp` on stdout
//! once bound (`https://` with [`ServeTls`]), which is how [`crate::suite`] learns the port.

use std::convert::Infallible;
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use forkless_server::{AnswerMode, Handler, RequestContext, RpcError, Server, ServerConfig, ServerInfo};
use forkless_store::{MemoryStore, Store};
use forkless_store_redb::{Durability, RedbStore};
use http::{Request, Response, StatusCode, header};
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{Value, json};
use tokio::net::TcpListener;

use crate::Error;

/// Which store a forkless server under test keeps its sessions in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreKind {
    /// [`MemoryStore`].
    Memory,
    /// [`RedbStore`] at a path, with a durability mode.
    Redb {
        /// The data file (created; removed by the caller).
        path: PathBuf,
        /// Immediate or batched fsync.
        durability: Durability,
        /// Deliver events before their sync, as forkless did before durable-before-delivery:
        /// for a same-run comparison of what the rule costs, never for serving.
        early_delivery: bool,
    },
    /// A PostgreSQL database, by URL.
    Postgres(String),
    /// A Redis, by URL (`#PREFIX` names the key prefix).
    Redis(String),
}

/// The tools the bench servers offer: the demo's `echo` and `start-notification-stream`
/// (without the pause between notifications, so the transport is what is measured).
#[derive(Clone, Copy, Debug, Default)]
pub struct BenchHandler;

/// Most notifications one `start-notification-stream` call may send.
pub const MAX_NOTIFICATIONS: u64 = 1_000_000;

impl Handler for BenchHandler {
    fn info(&self) -> ServerInfo {
        ServerInfo {
            name: "forkless-bench".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            capabilities: json!({ "tools": {}, "logging": {} }),
            instructions: None,
        }
    }

    async fn handle_request(
        &self,
        method: &str,
        params: Option<Value>,
        ctx: RequestContext,
    ) -> Result<Value, RpcError> {
        match method {
            "tools/list" => Ok(json!({ "tools": [
                { "name": "echo", "description": "Returns the given text unchanged.",
                  "inputSchema": { "type": "object", "properties": { "text": { "type": "string" } } } },
                { "name": "start-notification-stream",
                  "description": "Sends `count` log notifications on this request's stream, then answers.",
                  "inputSchema": { "type": "object", "properties": { "count": { "type": "integer" } } } },
                { "name": "timed-notification-stream",
                  "description": "Sends `count` log notifications `interval` ms apart, each carrying the wall-clock time it was emitted (`t=<µs since the epoch>`), then answers.",
                  "inputSchema": { "type": "object", "properties": { "count": { "type": "integer" }, "interval": { "type": "integer" } } } },
            ] })),
            "tools/call" => {
                let params = params.unwrap_or(Value::Null);
                let args = params.get("arguments").unwrap_or(&Value::Null);
                match params.get("name").and_then(Value::as_str) {
                    Some("echo") => {
                        let text = args.get("text").and_then(Value::as_str).unwrap_or_default();
                        Ok(json!({ "content": [{ "type": "text", "text": text }] }))
                    }
                    Some("start-notification-stream") => {
                        let count = args.get("count").and_then(Value::as_u64).unwrap_or(0);
                        if count > MAX_NOTIFICATIONS {
                            return Err(RpcError::invalid_params(format!("count above {MAX_NOTIFICATIONS}")));
                        }
                        for n in 1..=count {
                            ctx.log("info", json!(format!("Periodic notification #{n}")))
                                .await
                                .map_err(|e| RpcError::internal(e.to_string()))?;
                        }
                        Ok(
                            json!({ "content": [{ "type": "text", "text": format!("Sent {count} notifications") }] }),
                        )
                    }
                    Some("timed-notification-stream") => {
                        let count =
                            args.get("count").and_then(Value::as_u64).unwrap_or(0).min(MAX_NOTIFICATIONS);
                        let interval =
                            Duration::from_millis(args.get("interval").and_then(Value::as_u64).unwrap_or(1));
                        for _ in 0..count {
                            tokio::time::sleep(interval).await;
                            let micros = std::time::SystemTime::now()
                                .duration_since(std::time::UNIX_EPOCH)
                                .map_or(0, |d| d.as_micros());
                            ctx.log("info", json!(format!("t={micros}")))
                                .await
                                .map_err(|e| RpcError::internal(e.to_string()))?;
                        }
                        Ok(
                            json!({ "content": [{ "type": "text", "text": format!("Sent {count} timed notifications") }] }),
                        )
                    }
                    other => Err(RpcError::invalid_params(format!("unknown tool {other:?}"))),
                }
            }
            other => Err(RpcError::method_not_found(other)),
        }
    }
}

/// The server configuration the bench runs forkless with: the defaults, except the answer
/// mode and the per-stream event cap (raised so that a 10,000-notification stream plus its
/// response is replayable from its first event).
pub fn forkless_config(answer: AnswerMode) -> ServerConfig {
    let mut config = ServerConfig { answer, ..ServerConfig::default() };
    config.core.limits.stream_max_events = 1 << 20;
    config.core.limits.stream_max_bytes = 256 << 20;
    config.core.limits.session_max_bytes = 1 << 30;
    // For what-if profiling only (never set by the suite): FORKLESS_BENCH_MAX_STREAMS.
    if let Some(n) = std::env::var("FORKLESS_BENCH_MAX_STREAMS").ok().and_then(|v| v.parse().ok()) {
        config.core.limits.session_max_streams = n;
    }
    config
}

/// A certificate and key (PEM) to serve TLS with: HTTP/2 and HTTP/1.1 as ALPN chooses.
#[derive(Clone, Debug)]
pub struct ServeTls {
    /// The certificate chain.
    pub cert: PathBuf,
    /// Its private key.
    pub key: PathBuf,
}

/// Serve forkless with `store` until the process is stopped, over TLS if `tls` says so.
pub async fn serve_forkless(
    listen: SocketAddr,
    answer: AnswerMode,
    store: StoreKind,
    tls: Option<&ServeTls>,
) -> Result<(), Error> {
    let mut config = forkless_config(answer);
    if let Some(tls) = tls {
        let identity = forkless_server::TlsIdentity::load(&tls.cert, &tls.key)
            .map_err(|e| Error::Server(format!("TLS: {e}")))?;
        config.transport = forkless_server::Transport::Tls(Arc::new(identity));
    }
    match store {
        StoreKind::Memory => run(MemoryStore::new(), config, listen).await,
        StoreKind::Redb { path, durability, early_delivery } => {
            let (store, _) = RedbStore::open(&path, durability, forkless_now())
                .map_err(|e| Error::Server(format!("opening {}: {e}", path.display())))?;
            let store = match early_delivery {
                #[cfg(feature = "early-delivery")]
                true => store.break_durable_before_delivery_for_negative_control(),
                #[cfg(not(feature = "early-delivery"))]
                true => return Err(Error::Server("batched-early needs --features early-delivery".into())),
                false => store,
            };
            run(store, config, listen).await
        }
        StoreKind::Redis(url) => {
            let mut cfg = forkless_store_redis::RedisConfig::new(url);
            cfg.tail = tail_config();
            cfg.hints = hints();
            let store =
                forkless_store_redis::connect(cfg).await.map_err(|e| Error::Server(format!("redis: {e}")))?;
            run(store, config, listen).await
        }
        StoreKind::Postgres(url) => {
            let mut cfg = forkless_store_postgres::PgConfig::new(url);
            cfg.tail = tail_config();
            cfg.hints = hints();
            let store = forkless_store_postgres::connect(cfg)
                .await
                .map_err(|e| Error::Server(format!("postgres: {e}")))?;
            run(store, config, listen).await
        }
    }
}

/// The shared stores' tails as configured, or as `FORKLESS_BENCH_TAIL_MS` says (for A/B
/// profiling only; `0` turns them off, as the suite never does).
fn tail_config() -> forkless_store::shared::TailConfig {
    let mut tail = forkless_store::shared::TailConfig::default();
    if let Some(ms) = std::env::var("FORKLESS_BENCH_TAIL_MS").ok().and_then(|v| v.parse().ok()) {
        tail.lease = Duration::from_millis(ms);
    }
    tail
}

/// Hints for other nodes as configured (on), or off with `FORKLESS_BENCH_HINTS=off` (for A/B
/// profiling only: what one node alone on a database saves).
fn hints() -> forkless_store::shared::Hints {
    match std::env::var("FORKLESS_BENCH_HINTS").as_deref() {
        Ok("off") => forkless_store::shared::Hints::Off,
        _ => forkless_store::shared::Hints::Notify,
    }
}

fn forkless_now() -> forkless_core::Timestamp {
    let ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis());
    forkless_core::Timestamp::from_millis(u64::try_from(ms).unwrap_or(u64::MAX))
}

async fn run<S: Store>(store: S, config: ServerConfig, listen: SocketAddr) -> Result<(), Error> {
    let server =
        Server::new(store, BenchHandler, config).map_err(|e| Error::Server(format!("config: {e}")))?;
    let listener = TcpListener::bind(listen).await.map_err(Error::Io)?;
    let tls = matches!(server.config().transport, forkless_server::Transport::Tls(_));
    announce(listener.local_addr().map_err(Error::Io)?, tls);
    // A fresh store: nothing left by a previous process, no lease (one node).
    let node =
        forkless_server::Node::alone(server, &[], None).await.map_err(|e| Error::Server(e.to_string()))?;
    node.serve(listener, stop_signal()).await.map(drop).map_err(Error::Io)
}

/// Serve the bare hyper 1 echo until the process is stopped: every POST is parsed as a
/// JSON-RPC message and answered with the shape of a `tools/call` echo result (`sse`: as one
/// SSE event, like an SSE-answering MCP server without any session or stream state). Over
/// TLS (`tls`), rustls with the same provider as forkless's, and hyper's automatic HTTP/1.1
/// or HTTP/2 per connection, as ALPN chose.
pub async fn serve_hyper(listen: SocketAddr, sse: bool, tls: Option<&ServeTls>) -> Result<(), Error> {
    let acceptor = tls.map(hyper_tls_acceptor).transpose()?;
    let listener = TcpListener::bind(listen).await.map_err(Error::Io)?;
    announce(listener.local_addr().map_err(Error::Io)?, acceptor.is_some());
    let stop = stop_signal();
    tokio::pin!(stop);
    loop {
        let (socket, _) = tokio::select! {
            accepted = listener.accept() => accepted.map_err(Error::Io)?,
            () = &mut stop => return Ok(()),
        };
        let _ = socket.set_nodelay(true);
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| echo(req, sse));
            match acceptor {
                None => {
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(socket), service)
                        .await;
                }
                Some(acceptor) => {
                    let Ok(tls) = acceptor.accept(socket).await else { return };
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(tls), service)
                        .await;
                }
            }
        });
    }
}

fn hyper_tls_acceptor(tls: &ServeTls) -> Result<tokio_rustls::TlsAcceptor, Error> {
    let bad = |e: forkless_tls::Error| Error::Server(format!("TLS: {e}"));
    let certs = forkless_tls::pem::certificates(&tls.cert).map_err(bad)?;
    let key = forkless_tls::pem::private_key(&tls.key).map_err(bad)?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|b| b.with_no_client_auth().with_single_cert(certs, key))
        .map_err(|e| Error::Server(format!("TLS: {e}")))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

async fn echo(req: Request<Incoming>, sse: bool) -> Result<Response<Full<Bytes>>, Infallible> {
    let Ok(body) = req.into_body().collect().await.map(|b| b.to_bytes()) else {
        return Ok(status(StatusCode::BAD_REQUEST));
    };
    let Ok(message) = serde_json::from_slice::<Value>(&body) else {
        return Ok(status(StatusCode::BAD_REQUEST));
    };
    let Some(id) = message.get("id") else { return Ok(status(StatusCode::ACCEPTED)) };
    let text = message.pointer("/params/arguments/text").and_then(Value::as_str).unwrap_or_default();
    let answer =
        json!({ "jsonrpc": "2.0", "id": id, "result": { "content": [{ "type": "text", "text": text }] } });
    let json = answer.to_string();
    let (content_type, body) = if sse {
        ("text/event-stream", format!("event: message\ndata: {json}\n\n"))
    } else {
        ("application/json", json)
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    response.headers_mut().insert(header::CONTENT_TYPE, http::HeaderValue::from_static(content_type));
    Ok(response)
}

fn status(code: StatusCode) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::new()));
    *r.status_mut() = code;
    r
}

fn announce(addr: SocketAddr, tls: bool) {
    let mut out = std::io::stdout().lock();
    let scheme = if tls { "https" } else { "http" };
    let _ = writeln!(out, "listening on {scheme}://{addr}/mcp");
    let _ = out.flush();
}

/// SIGTERM or Ctrl-C; if no handler can be installed, the process is simply killed later.
async fn stop_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let (Ok(mut term), Ok(mut int)) =
            (signal(SignalKind::terminate()), signal(SignalKind::interrupt()))
        {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
    std::future::pending::<()>().await;
}

/// How long a server under test may take to print its address.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
