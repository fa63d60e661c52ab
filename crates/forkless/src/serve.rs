//! `forkless serve`: run the demo MCP server on the fork-free Streamable HTTP transport.
//!
//! This module owns the flags, turning them into a checked [`ServerConfig`], the listening
//! socket, logging, and the stop on Ctrl-C or SIGTERM. It owns no protocol decision: those are
//! made by `forkless-server` and `forkless-core`.
//!
//! Output: one start-up line on stdout naming the bound address (so `--listen 127.0.0.1:0`
//! tells the caller its port), one final line on stdout when the server has stopped, and
//! `tracing` logs on stderr (see [`crate::init_logging`]).

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;

use core::future::Future;
use core::pin::Pin;
use forkless_core::Revision;

use forkless_server::node::{Failure, Stopped};
use forkless_server::{Handler, Node, Server, ServerConfig};

use forkless_store::{Advertised, MemoryStore, NodeName, Store};
use forkless_store_postgres::PgConfig;
use forkless_store_redb::{Durability, LostFiles, RedbStore};
use forkless_store_redis::RedisConfig;
use tokio::net::TcpListener;

use crate::Error;

mod config;
pub use config::DurabilityArg;
mod stop;
mod store;
use crate::demo::DemoHandler;
use stop::StopSignal;
pub use store::{StoreSpec, StoreSpecError};

/// Flags of `forkless serve`.
#[derive(Clone, Debug, clap::Args)]
pub struct ServeArgs {
    /// Address to listen on; port 0 picks a free port (the start-up line names it).
    #[arg(long, default_value = "127.0.0.1:8080", value_name = "ADDR")]
    pub listen: SocketAddr,
    /// Where sessions and stream logs are kept: `redb` (durable, in `--data-dir`),
    /// `redb:PATH` (durable, that file and its write-ahead log `PATH.wal`), `memory` (lost
    /// on exit), a `postgres://` URL (a PostgreSQL database) or a `redis://` URL (a Redis
    /// server), shared by many nodes with `--node-id`.
    #[arg(long, default_value = "redb", value_name = "STORE")]
    pub store: StoreSpec,
    /// Directory of the durable store's files (`forkless.redb` and its write-ahead log
    /// `forkless.redb.wal`) when `--store redb`.
    #[arg(long, default_value = "./forkless-data", value_name = "DIR")]
    pub data_dir: PathBuf,
    /// When the durable store's writes reach the disk: `immediate` (an event is on disk
    /// before it is sent) or `batched` (one fsync per batch window; a power failure can lose
    /// the last window). On a shared store (PostgreSQL, Redis), when a notification's append
    /// returns: `immediate` once stored, `batched` once its group commit is computed (it is
    /// sent once stored either way). See docs/durability.md and docs/shared-stores.md.
    #[arg(long, value_enum, default_value_t = DurabilityArg::Batched)]
    pub durability: DurabilityArg,
    /// The batch window in milliseconds for `--durability batched`.
    #[arg(long, default_value_t = 5, value_name = "MS")]
    pub batch_window: u64,
    /// The MCP endpoint path.
    #[arg(long, default_value = "/mcp", value_name = "PATH")]
    pub path: String,
    /// How requests are answered: as an SSE stream (resumable) or as a single JSON body.
    #[arg(long, value_enum, default_value_t = Answer::Sse)]
    pub answer: Answer,
    /// The MCP revisions offered: `sessions` (2025-03-26, 2025-06-18, 2025-11-25: a cut
    /// stream resumes), `all` (adds 2026-07-28, where a cut loses a call that is neither keyed
    /// nor a task), or a comma-separated list. Clients in auto mode take 2026-07-28 when it
    /// is offered, so it is offered only when asked for (docs/tasks.md).
    #[arg(long, default_value = "sessions", value_name = "LIST")]
    pub revisions: forkless_core::RevisionSet,
    /// Tasks (2026-07-28) whose work runs on this node at once (default 10000).
    #[arg(long, value_name = "N")]
    pub max_tasks: Option<usize>,
    /// Of those, the most one principal may hold (default 1000).
    #[arg(long, value_name = "N")]
    pub max_tasks_per_principal: Option<usize>,
    /// How long a task is kept after its creation, in milliseconds (default 3600000).
    #[arg(long, value_name = "MS")]
    pub task_ttl: Option<u64>,
    /// How long an idempotency key is remembered, in milliseconds (default 3600000).
    #[arg(long, value_name = "MS")]
    pub idempotency_ttl: Option<u64>,
    /// End SSE connections (not their streams) after this many milliseconds so clients poll
    /// with `Last-Event-ID` (2025-11-25 sessions); by default connections stay open.
    #[arg(long, value_name = "MS")]
    pub poll_after: Option<u64>,
    /// Liveness grace window in milliseconds (default 10000); must stay below the retry budget.
    #[arg(long, value_name = "MS")]
    pub grace: Option<u64>,
    /// Require `Mcp-Stream-Id` on every resume (PROTOCOL section 4, row 7).
    #[arg(long)]
    pub strict: bool,
    /// An allowed `Origin` (repeatable; `*` allows any). Without one, only local origins
    /// (localhost, 127.0.0.1, `[::1]`) are allowed, which guards against DNS rebinding.
    #[arg(long = "allowed-origin", value_name = "ORIGIN")]
    pub allowed_origins: Vec<String>,
    /// Largest accepted POST body in bytes (default 4 MiB).
    #[arg(long, value_name = "BYTES")]
    pub max_body_bytes: Option<usize>,
    /// Milliseconds a connection with no request in flight may take to deliver the next
    /// request's headers; silent, slow and idle keep-alive connections are closed after it
    /// (default 10000).
    #[arg(long, value_name = "MS")]
    pub header_read_timeout: Option<u64>,
    /// Milliseconds a connection may sit with no request in flight before it is closed
    /// (default 10000; an open SSE stream is a request in flight).
    #[arg(long, value_name = "MS")]
    pub idle_timeout: Option<u64>,
    /// Milliseconds a POST body may take to arrive; slower ones get 408 (default 10000).
    #[arg(long, value_name = "MS")]
    pub body_read_timeout: Option<u64>,
    /// Milliseconds `/healthz` waits for the store before answering 503 itself (default 1000).
    #[arg(long, value_name = "MS")]
    pub health_timeout: Option<u64>,
    /// Connections held at once; at the limit the longest-idle one makes room, and if all
    /// are busy a new one gets 503 (default 10000, capped below the open-file limit).
    #[arg(long, value_name = "N")]
    pub max_connections: Option<usize>,
    /// Live sessions; at the limit the longest-idle session of the principal holding the most
    /// is reclaimed for a principal holding fewer, else `initialize` gets 503 with Retry-After
    /// (default 50000).
    #[arg(long, value_name = "N")]
    pub max_sessions: Option<usize>,
    /// Sessions one principal (its verified subject, else its address) may hold; more get 429
    /// with Retry-After (default 5000).
    #[arg(long, value_name = "N")]
    pub max_sessions_per_principal: Option<usize>,
    /// A proxy whose X-Forwarded-For names the client, for per-address shares (repeatable;
    /// default none: the header is ignored).
    #[arg(long = "trusted-proxy", value_name = "IP")]
    pub trusted_proxies: Vec<std::net::IpAddr>,
    /// At max-sessions: `reclaim` the longest-idle session of the principal holding the most,
    /// or `refuse` every new one (default reclaim).
    #[arg(long, value_name = "reclaim|refuse", value_parser = ["reclaim", "refuse"])]
    pub at_capacity: Option<String>,
    /// Payload bytes of retained events across all sessions (default 1 GiB).
    #[arg(long, value_name = "BYTES")]
    pub max_retained_bytes: Option<u64>,
    /// Of those, what the sessions of one principal may retain; at it, its notifications are
    /// refused and its `initialize` gets 429 (default 128 MiB).
    #[arg(long, value_name = "BYTES")]
    pub max_retained_bytes_per_principal: Option<u64>,
    /// Memory the durable store keeps for what it reads most, in bytes: three quarters for the
    /// newest retained events (older ones are read from its data file), a quarter for the data
    /// file's pages (default 64 MiB).
    #[arg(long, value_name = "BYTES")]
    pub store_cache: Option<u64>,
    /// Serve TLS with this certificate chain (PEM, the leaf first), with `--tls-key`: ALPN
    /// offers HTTP/2 and HTTP/1.1; both files are read again when they change (or on SIGHUP),
    /// open connections untouched. Default: plaintext HTTP/1.1.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of `--tls-cert` (PEM: PKCS#8, PKCS#1 RSA or SEC1 EC).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// For `rediss://`: trust this CA (PEM) for Redis's certificate instead of the system's
    /// roots.
    #[arg(long, value_name = "FILE")]
    pub redis_ca: Option<PathBuf>,
    /// For `rediss://`: a client certificate (PEM), with `--redis-key`.
    #[arg(long, value_name = "FILE", requires = "redis_key")]
    pub redis_cert: Option<PathBuf>,
    /// The key of `--redis-cert` (PEM).
    #[arg(long, value_name = "FILE", requires = "redis_cert")]
    pub redis_key: Option<PathBuf>,
    /// For `rediss://`: do not verify Redis's certificate at all (logged at every connect; a
    /// test deployment's self-signed certificate, never production).
    #[arg(long)]
    pub redis_insecure: bool,
    /// Also take HTTP/2 with prior knowledge (h2c) on the plaintext listener, for a proxy
    /// that speaks HTTP/2 to its backends.
    #[arg(long, conflicts_with = "tls_cert")]
    pub h2c: bool,
    /// Start even if a durable file is missing, truncated or belongs to another store (what
    /// it held is lost; a warning names it). Without this, such a start is refused.
    #[arg(long)]
    pub accept_lost_files: bool,
    /// This node's id on a shared store (`postgres://`, `redis://`): leased to one live
    /// process at a time (a second start is refused while the first holds it), renewed every
    /// third of `--lease-ttl`; a node that cannot renew stops before its lease can lapse.
    /// Visible ASCII without spaces, at most 128 bytes.
    #[arg(long, value_name = "NAME")]
    pub node_id: Option<NodeName>,
    /// The base URL other nodes reach this one at (`http://HOST:PORT`, an internal address),
    /// for `--node-id`: a POST or DELETE for a session this node owns that reaches another
    /// node is sent here, so the session's handler always runs on its owner. Without it,
    /// other nodes serve this node's sessions themselves when the handler's sessions are
    /// restorable, and refuse them (503 `owner_not_advertised`) otherwise.
    #[arg(long, value_name = "URL", requires = "node_id")]
    pub advertise: Option<Advertised>,
    /// A file of `requestState` keys (2026-07-28 multi-round-trip requests), one `ID:HEX` line
    /// each (64 hex digits; `#` comments), the first sealing and every one opening: give every
    /// node behind one load balancer the same file, so a state sealed on one opens on another.
    /// Without it, a key from the OS CSPRNG that only this process holds.
    #[arg(long, value_name = "FILE")]
    pub request_state_keys: Option<PathBuf>,
    /// The node lease's time to live in milliseconds, for `--node-id`.
    #[arg(long, default_value_t = 10_000, value_name = "MS")]
    pub lease_ttl: u64,
    /// Require OAuth bearer tokens from this authorization server (its `iss`). Sessions are
    /// then bound to the token's issuer and subject.
    #[arg(long, value_name = "URL", requires = "auth_jwks")]
    pub auth_issuer: Option<String>,
    /// This server's canonical resource URL, which every token's `aud` must name (default
    /// `http://<listen><path>`).
    #[arg(long, value_name = "URL", requires = "auth_issuer")]
    pub auth_audience: Option<String>,
    /// The issuer's keys: a JWKS URL (`http(s)://…`) or a JWKS file.
    #[arg(long, value_name = "URL|FILE", requires = "auth_issuer")]
    pub auth_jwks: Option<String>,
    /// A CA file (PEM) trusted for an `https://` JWKS URL, in addition to the system's roots
    /// (and `SSL_CERT_FILE`'s).
    #[arg(long, value_name = "FILE", requires = "auth_jwks")]
    pub auth_jwks_ca: Option<PathBuf>,
    /// A scope every request's token must carry (repeatable); otherwise 403.
    #[arg(long = "auth-scope", value_name = "SCOPE", requires = "auth_issuer")]
    pub auth_scopes: Vec<String>,
}

/// `--node-id`, checked as every node name is ([`forkless_store::shared::NodeName`]).
/// `--answer`: how a POST request is answered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Answer {
    /// A new SSE stream per request: notifications, then the response; resumable.
    #[default]
    Sse,
    /// One `application/json` body with the response; notifications go to the GET stream.
    Json,
}

/// Run `forkless serve` to the end: start a runtime, serve until Ctrl-C or SIGTERM, stop.
pub fn run(args: &ServeArgs) -> Result<(), Error> {
    let config = args.server_config()?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(Error::Startup)?;
    let handler = DemoHandler::new().with_poll_after(config.poll_after);
    runtime.block_on(serve(args, config, Served { command: "serve", handler, after: None }))
}

/// What a command serves on the transport: its handler, its name in the lines it prints,
/// and what it does once the server has stopped.
pub(crate) struct Served<H> {
    pub(crate) command: &'static str,
    pub(crate) handler: H,
    pub(crate) after: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
}

/// Serve `served` on the store `args` name until Ctrl-C, SIGTERM or a store failure. The
/// node's life (what the previous process left, a failing store, the lease and takeovers on
/// a shared store) is the library's [`Node`]; this only configures it.
pub(crate) async fn serve<H: Handler>(
    args: &ServeArgs,
    config: ServerConfig,
    served: Served<H>,
) -> Result<(), Error> {
    forkless_server::raise_open_file_limit();
    let listener =
        TcpListener::bind(args.listen).await.map_err(|source| Error::Bind { addr: args.listen, source })?;
    let local = listener.local_addr().map_err(Error::Startup)?;
    let stop = StopSignal::install()?;
    let Served { command, handler, after } = served;
    let serving = Serving {
        listener,
        local,
        stop,
        command,
        after,
        path: config.path.clone(),
        transport: config.transport.clone(),
    };
    let named = |e: forkless_store::Error| Error::Store(format!("{}: {e}", args.store));
    match &args.store {
        StoreSpec::Memory => {
            let node =
                Node::alone(server(MemoryStore::new(), handler, config)?, &[], None).await.map_err(named)?;
            serving.run(node, "memory".to_owned()).await
        }
        StoreSpec::Redb(path) => {
            let path = path.clone().unwrap_or_else(|| args.data_dir.join("forkless.redb"));
            let durability = args.durability();
            let now = wall_clock();
            let lost = if args.accept_lost_files { LostFiles::StartWithout } else { LostFiles::Refuse };
            let cache_bytes = args.store_cache.unwrap_or(forkless_store_redb::DEFAULT_CACHE_BYTES);
            let options = forkless_store_redb::Options {
                durability,
                lost_files: lost,
                cache_bytes,
                ..Default::default()
            };
            let (store, recovery) =
                RedbStore::open_options(&path, now, options).map_err(|e| Error::Store(e.to_string()))?;
            log_recovery(&path, &recovery);
            let label = match durability {
                Durability::Immediate => format!("redb:{} (immediate)", path.display()),
                Durability::Batched { window } => {
                    format!("redb:{} (batched {} ms)", path.display(), window.as_millis())
                }
            };
            let watched = store.clone();
            let failed: Failure = Box::pin(async move { watched.failed().await });
            let server = server(store, handler, config)?;
            let node = Node::alone(server, &recovery.orphans, Some(failed))
                .await
                .map_err(|e| Error::Store(format!("settling what the previous process left: {e}")))?;
            serving.run(node, label).await
        }
        StoreSpec::Postgres(url) => {
            let config_pg = PgConfig { pipeline: args.pipeline(), ..PgConfig::new(url.clone()) };
            let store = forkless_store_postgres::connect(config_pg).await.map_err(named)?;
            let node = Node::shared(server(store, handler, config)?, args.lease()).await.map_err(named)?;
            serving.run(node, args.store.to_string()).await
        }
        StoreSpec::Redis(url) => {
            let tls = args.redis_tls();
            let config_redis =
                RedisConfig { pipeline: args.pipeline(), tls, ..RedisConfig::new(url.clone()) };
            let store = forkless_store_redis::connect(config_redis).await.map_err(named)?;
            let durability = store.database().durability();
            tracing::info!(store = %args.store, ?durability, "redis store connected");
            let node = Node::shared(server(store, handler, config)?, args.lease()).await.map_err(named)?;
            serving.run(node, format!("{} ({durability:?})", args.store)).await
        }
    }
}

/// The server for `handler` on `store`.
fn server<S: Store, H: Handler>(store: S, handler: H, config: ServerConfig) -> Result<Server<S, H>, Error> {
    Server::new(store, handler, config).map_err(|e| Error::Config(e.to_string()))
}

/// What `serve` has set up before it knows the store's type.
struct Serving {
    listener: TcpListener,
    local: SocketAddr,
    stop: StopSignal,
    command: &'static str,
    after: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
    path: String,
    transport: forkless_server::Transport,
}

impl Serving {
    /// Serve `node` until a stop signal or until its store refuses work (stopping is then the
    /// only honest answer), printing the start-up and stop lines a supervisor reads.
    async fn run<S: Store, H: Handler>(self, node: Node<S, H>, label: String) -> Result<(), Error> {
        let Self { listener, local, stop, command, after, path, transport } = self;
        let served = node.server().revisions();
        let revisions: Vec<_> =
            Revision::ALL.iter().filter(|r| served.contains(**r)).map(|r| r.as_str()).collect();
        for r in Revision::ALL.iter().filter(|r| served.contains(**r)) {
            let cut = if r.has_sessions() {
                "a cut stream resumes from its cursor (Last-Event-ID); nothing is lost or run twice"
            } else {
                "a cut response loses the call unless it carries an idempotency key (run once, re-issue reads its answer) or runs as a task"
            };
            tracing::info!(revision = r.as_str(), "offered: {cut}");
        }
        let scheme = match transport {
            forkless_server::Transport::Tls(identity) => {
                stop::reload_on_hangup(identity);
                "https"
            }
            forkless_server::Transport::Http1 | forkless_server::Transport::Cleartext => "http",
        };
        announce(&format!(
            "forkless {command}: listening on {scheme}://{local}{path} (store: {label}, revisions: {revisions})",
            revisions = revisions.join(", "),
        ));
        tracing::info!(%local, %path, store = %label, "serving");
        let (why_tx, why_rx) = tokio::sync::oneshot::channel::<&'static str>();
        let signalled = async move {
            let why = stop.wait().await;
            tracing::info!("{why}: stopping");
            let _ = why_tx.send(why);
        };
        let stopped = node.serve(listener, signalled).await.map_err(Error::Serve);
        if let Some(after) = after {
            after.await;
        }
        let stopped = stopped?;
        tracing::info!("stopped");
        match stopped {
            Stopped::Signalled => {
                let why = why_rx.await.unwrap_or("server finished");
                announce(&format!("forkless {command}: stopped ({why})"));
                Ok(())
            }
            Stopped::StoreFailed(failed) => {
                announce(&format!("forkless {command}: stopped (store failure: {failed})"));
                Err(Error::Store(failed))
            }
        }
    }
}

/// The current wall-clock time for the store (persisted deadlines need wall time).
fn wall_clock() -> forkless_core::Timestamp {
    let since_epoch = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    forkless_core::Timestamp::from_millis(u64::try_from(since_epoch.as_millis()).unwrap_or(u64::MAX))
}

/// Print a line on stdout and flush it at once, so a supervising process sees it immediately.
fn announce(line: &str) {
    let mut out = std::io::stdout().lock();
    // Nothing useful can be done if stdout is gone; the logs on stderr still say the same.
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

#[cfg(test)]
mod tests;

/// What opening the durable store found and did, in one line: after an unclean stop, that redb
/// repaired its own structures (and how long it took) and how many log entries were replayed
/// over the last checkpoint; after a clean stop, what was read back.
fn log_recovery(path: &std::path::Path, recovery: &forkless_store_redb::Recovery) {
    let (sessions, events, tasks) = (recovery.sessions, recovery.events, recovery.tasks);
    let (detached, orphaned_requests, replayed) =
        (recovery.detached, recovery.orphans.len(), recovery.replayed);
    let took_ms = recovery.took.as_millis();
    match recovery.repaired {
        Some(repair) => tracing::info!(
            path = %path.display(),
            repair_ms = repair.as_millis(),
            replayed_log_entries = replayed,
            sessions, events, tasks, detached, orphaned_requests, took_ms,
            "durable store recovered after an unclean stop: redb repaired its free-space bookkeeping from the last committed checkpoint (no committed data changes), then the write-ahead log entries written after that checkpoint were replayed"
        ),
        None => tracing::info!(
            path = %path.display(),
            replayed_log_entries = replayed,
            sessions, events, tasks, detached, orphaned_requests, took_ms,
            "durable store opened after a clean stop"
        ),
    }
}
