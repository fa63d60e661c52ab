//! `forkless gateway`: any stdio MCP server, or any Streamable HTTP MCP server
//! (`--upstream URL`), behind the fork-free Streamable HTTP transport.
//!
//! This module owns the gateway's flags, the security checks a proxy needs (loopback unless
//! authenticated, never a shell), and stopping every child when the gateway stops. The
//! children themselves are [`child`]'s, the upstream's sessions [`upstream`]'s; how their
//! messages meet clients is `forkless_server::backend`'s; the transport, the stores and the
//! cluster are `serve`'s.
//!
//! ```text
//! forkless gateway [--listen 127.0.0.1:8080] [--store …] [--mode per-session|shared]
//!                  [--max-children N] [--idle-ttl 10m] [--env KEY=VALUE]… [--cwd DIR]
//!                  -- COMMAND [ARGS…]
//! forkless gateway [--listen …] [--store …] --upstream http(s)://HOST/mcp
//!                  [--upstream-header 'Name: value']… [--upstream-timeout 30s] [--upstream-ca FILE]
//! ```

pub mod child;
pub mod upstream;

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use forkless_core::IdleClock;
use forkless_server::backend::{BackendConfig, MessageBackend, Sharing};

use crate::Error;
use crate::serve::{ServeArgs, Served, serve};
use child::{ChildSpec, StdioConnector};

/// Flags of `forkless gateway`.
#[derive(Clone, Debug, clap::Args)]
pub struct GatewayArgs {
    /// The transport's flags, as for `forkless serve` (listen address, store, limits, auth).
    #[command(flatten)]
    pub serve: ServeArgs,
    /// `per-session`: one child per session, started at its `initialize`. `shared`: one child
    /// for every session (its requests to clients are refused, its unattributable
    /// notifications dropped and counted).
    #[arg(long, value_enum, default_value_t = Mode::PerSession)]
    pub mode: Mode,
    /// Children running at once (per-session mode: sessions live here); at the limit
    /// `initialize` gets 503 with Retry-After.
    #[arg(long, default_value_t = 100, value_name = "N")]
    pub max_children: usize,
    /// A session with no request for this long ends and its child is stopped, even while a
    /// GET stream is open (`90s`, `10m`).
    #[arg(long, default_value = "10m", value_parser = crate::chaos::parse_duration, value_name = "DURATION")]
    pub idle_ttl: Duration,
    /// A variable for the child's environment (repeatable), added to the gateway's own.
    #[arg(long = "env", value_parser = parse_env, value_name = "KEY=VALUE")]
    pub env: Vec<(String, String)>,
    /// The child's working directory.
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Longest line the child may write on stdout (one JSON-RPC message), in bytes.
    #[arg(long, default_value_t = 4 * 1024 * 1024, value_name = "BYTES")]
    pub max_line_bytes: usize,
    /// How long a child has to exit after SIGTERM before its process group is killed.
    #[arg(long, default_value = "5s", value_parser = crate::chaos::parse_duration, value_name = "DURATION")]
    pub stop_grace: Duration,
    /// How long a child may take to answer `initialize` (`npx` may download it first).
    #[arg(long, default_value = "60s", value_parser = crate::chaos::parse_duration, value_name = "DURATION")]
    pub initialize_timeout: Duration,
    /// A Streamable HTTP MCP server to put behind forkless instead of a command: one upstream
    /// session per forkless session (`--max-children` is then the session limit).
    #[arg(long, value_name = "URL", conflicts_with_all = ["command", "mode"])]
    pub upstream: Option<String>,
    /// A header sent with every request to the upstream (repeatable): its own credentials.
    /// The client's never go upstream.
    #[arg(long = "upstream-header", value_name = "NAME: VALUE", requires = "upstream")]
    pub upstream_headers: Vec<String>,
    /// How long the upstream may take to start answering a message (a request's stream may
    /// then run as long as it runs).
    #[arg(long, default_value = "30s", value_parser = crate::chaos::parse_duration, value_name = "DURATION")]
    pub upstream_timeout: Duration,
    /// For an `https://` upstream: also trust this CA file (PEM), beside the system's roots.
    #[arg(long, value_name = "FILE", requires = "upstream")]
    pub upstream_ca: Option<PathBuf>,
    /// The stdio MCP server to run, after `--`: a program and its arguments, run directly
    /// (never through a shell).
    #[arg(last = true, required_unless_present = "upstream", num_args = 1.., value_name = "COMMAND")]
    pub command: Vec<OsString>,
}

/// `--mode`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// One child per session.
    #[default]
    PerSession,
    /// One child for every session.
    Shared,
}

fn parse_env(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err(format!("`{s}` is not KEY=VALUE")),
    }
}

impl GatewayArgs {
    /// Refuse what a stdio proxy must not do: listen beyond loopback with no authentication
    /// (anyone who reaches the port could run the child's tools).
    pub fn check(&self) -> Result<(), Error> {
        let listen = self.serve.listen.ip();
        if !listen.is_loopback() && self.serve.auth_issuer.is_none() {
            let what = if self.upstream.is_some() {
                "a gateway speaks to its upstream with the upstream's credentials for every client that reaches it"
            } else {
                "a gateway runs a program for every client that reaches it"
            };
            return Err(Error::Config(format!(
                "refusing to listen on {listen} without authentication: {what}; use a loopback address, \
                 or require tokens with --auth-issuer"
            )));
        }
        if self.max_children == 0 {
            return Err(Error::Config("--max-children must be at least 1".into()));
        }
        Ok(())
    }
}

/// Run `forkless gateway` to the end.
pub fn run(args: &GatewayArgs) -> Result<(), Error> {
    args.check()?;
    let mut config = args.serve.server_config()?;
    config.core.limits.session_idle_ttl = args.idle_ttl;
    // A child is costly: a client that only holds its GET stream open does not keep it.
    config.core.limits.idle_clock = IdleClock::Requests;
    if args.mode == Mode::PerSession {
        // One child per live session: the session limit is the child limit.
        config.max_sessions = args.max_children;
    }
    if let Some(url) = &args.upstream {
        let spec = upstream::UpstreamSpec::parse(
            url,
            &args.upstream_headers,
            args.upstream_timeout,
            args.upstream_ca.clone(),
        )?;
        tracing::info!(upstream = %spec.url, "gateway for a Streamable HTTP MCP server");
        // The upstream holds the session's state, and the record holds the upstream session's
        // id: any node can take the session over and reach it again.
        let handler = MessageBackend::new(
            upstream::HttpConnector::new(spec)?,
            BackendConfig {
                initialize_timeout: args.initialize_timeout,
                restorable: forkless_server::Restorable::Yes,
                // 2026-07-28 where the operator offers it (`--revisions`).
                revisions: forkless_server::Revisions::All,
                ..BackendConfig::default()
            },
        );
        let runtime =
            tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(Error::Startup)?;
        runtime.block_on(discover(&handler, &config));
        return runtime.block_on(serve(
            &args.serve,
            config,
            Served { command: "gateway", handler, after: None },
        ));
    }
    let spec = ChildSpec {
        command: args.command.clone(),
        env: args.env.clone(),
        cwd: args.cwd.clone(),
        max_line_bytes: args.max_line_bytes,
        stop_grace: args.stop_grace,
    };
    tracing::info!(command = %spec.describe(), mode = ?args.mode, "gateway for a stdio MCP server");
    let connector = StdioConnector::new(spec);
    let children = connector.children();
    let sharing = match args.mode {
        Mode::PerSession => Sharing::PerSession,
        Mode::Shared => Sharing::Shared,
    };
    let handler = MessageBackend::new(
        connector,
        BackendConfig {
            sharing,
            initialize_timeout: args.initialize_timeout,
            // 2026-07-28 where the operator offers it (`--revisions`).
            revisions: forkless_server::Revisions::All,
            ..BackendConfig::default()
        },
    );
    let grace = args.stop_grace;
    // Once the server has stopped, no child outlives the gateway.
    let after = Box::pin(async move {
        let running = children.len();
        children.stop_all(grace).await;
        tracing::info!(stopped = running, "every MCP server child stopped");
    });
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(Error::Startup)?;
    runtime.block_on(discover(&handler, &config));
    runtime.block_on(serve(&args.serve, config, Served { command: "gateway", handler, after: Some(after) }))
}

/// Where 2026-07-28 is offered, ask the MCP server what it is before serving: `server/discover`
/// has no session to learn it from. A server that does not answer is served all the same
/// (discover then names the gateway, until a session's `initialize` says more).
async fn discover<C: forkless_server::backend::Connector>(
    handler: &MessageBackend<C>,
    config: &forkless_server::ServerConfig,
) {
    if !config.revisions.contains(forkless_core::Revision::V2026_07_28) {
        return;
    }
    if let Err(e) = handler.discover().await {
        tracing::warn!(error = %e.message, "the MCP server did not say what it is: server/discover names the gateway");
    }
}
