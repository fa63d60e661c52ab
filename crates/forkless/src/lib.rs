//! The `forkless` command line, as a library so its parts can be tested and reused.
//!
//! ```text
//! forkless serve ──► serve::run ──► forkless_server::Server<MemoryStore, demo::DemoHandler>
//! forkless check ──► check::run ──► raw HTTP probes (check::probe), judged per scenario
//! forkless chaos ──► chaos::run ──► N × forkless_client::Client with random cuts
//! forkless connect ► connect::run ► forkless_client::{Client, CurrentClient} ◄► the host's stdio
//! forkless gateway ► gateway::run ► forkless_server::Server<…, backend::MessageBackend<gateway::child::StdioConnector>>
//! ```
//!
//! - [`demo`] owns the demo MCP server: its tools, resources, prompts and the fixtures the MCP
//!   conformance suite expects. It knows nothing about HTTP or the store.
//! - [`serve`] owns `forkless serve`: flags, configuration checks, the listener, and a clean
//!   stop on Ctrl-C or SIGTERM. It makes no protocol decision itself.
//! - [`check`] owns `forkless check URL`: scenarios that probe any MCP server for session
//!   forks, judged by what a client observes, each PASS / FAIL / UNSUPPORTED with evidence;
//!   and `forkless check --client CMD`, which probes a client with a server of its own.
//! - [`gateway`] owns `forkless gateway -- COMMAND`: a stdio MCP server behind the
//!   transport, one child per session (or one shared), children stopped with their sessions.
//! - [`connect`] owns `forkless connect URL`: a stdio bridge an MCP host launches, carrying its
//!   messages to a Streamable HTTP server without ever handing it a fork; OAuth for it.
//! - [`chaos`] owns `forkless chaos URL`: many sessions with random connection cuts, counting
//!   duplicates, gaps, forks, rejections and resume latency.
//!
//! Each subcommand is one module with its clap `Args` struct and a `run` function; `main.rs`
//! only parses and dispatches. The transport (sessions, streams, resumption) lives in
//! `forkless-server` and below; this crate only wires it up.
//!
//! ```text
//! forkless serve [--listen 127.0.0.1:8080] [--store memory] [--path /mcp] [--answer sse|json]
//!                [--poll-after MS] [--grace MS] [--strict] [--allowed-origin ORIGIN]...
//!                [--max-body-bytes N] [--data-dir DIR]
//! ```
//!
//! ```text
//! forkless check URL [--tool NAME] [--background-tool NAME] [--args JSON] [--only A,B] [--json]
//! forkless check --client 'CMD' [--only A,B] [--json]     (CMD URL: a client driver)
//! forkless chaos URL [--sessions N] [--duration D] [--drop-every T] [--interval MS] [--json]
//! forkless connect URL [--header 'K: V']… [--bearer-token-file F] [--revision auto|sessions|2026-07-28]
//! ```
//!
//! Exit codes: 0 after a requested stop (serve), a clean run (check: no scenario failed;
//! chaos: no duplicate, gap or fork) or the host closing stdin (connect), 1 when check or
//! chaos found a failure, when the server ended connect's session or its OAuth failed, and
//! for anything else (address in use, I/O failure), 2 for bad flags or invalid settings, 3
//! when check or chaos cannot probe the target at all or connect cannot reach its server.

pub mod chaos;
pub mod check;
pub mod connect;
pub mod demo;
mod error;
pub mod gateway;
pub mod report;
pub mod serve;

pub use error::{Error, OAuthStep};

/// Install the `tracing` subscriber: stderr, filtered by `RUST_LOG`, `info` by default.
pub fn init_logging() {
    init_logging_at("info");
}

/// Like [`init_logging`] with another default level (`check` and `chaos` print a report on
/// stdout and keep stderr for warnings).
pub fn init_logging_at(default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    // A second call (for example from a test) keeps the first subscriber.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .try_init();
}
