//! The one error type of the `forkless` command line and the process exit code each maps to.

use std::io;
use std::process::ExitCode;

/// Why a `forkless` command could not run to the end.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The settings contradict each other or an invariant; nothing was started.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The listening socket could not be opened.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: std::net::SocketAddr,
        /// What the operating system said.
        source: io::Error,
    },
    /// The server stopped on an I/O error instead of a requested shutdown.
    #[error("server failed: {0}")]
    Serve(io::Error),
    /// The store could not be opened, or failed while serving.
    #[error("store failed: {0}")]
    Store(String),
    /// `check` or `chaos` ran to the end and found what it looks for: a failed scenario, or a
    /// duplicate, gap or fork.
    #[error("{0}")]
    Verdict(String),
    /// `check` or `chaos` could not probe the target at all (unreachable, not MCP, no tool).
    #[error("cannot probe the target: {0}")]
    Probe(String),
    /// Setting up the runtime or a signal handler failed.
    #[error("cannot start: {0}")]
    Startup(io::Error),
    /// `forkless connect` could not get a token for the server.
    #[error("OAuth {step}: {detail}")]
    OAuth {
        /// Where it failed.
        step: OAuthStep,
        /// What went wrong.
        detail: String,
    },
}

/// The steps of `forkless connect`'s OAuth flow, for [`Error::OAuth`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OAuthStep {
    /// Finding the authorization server (RFC 9728, RFC 8414).
    Discovery,
    /// Dynamic client registration (RFC 7591).
    Registration,
    /// The user's authorization through the loopback redirect.
    Authorization,
    /// Exchanging the code for tokens.
    Token,
    /// Refreshing the access token.
    Refresh,
    /// Reading or writing the token file.
    TokenFile,
}

impl std::fmt::Display for OAuthStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Discovery => "discovery",
            Self::Registration => "client registration",
            Self::Authorization => "authorization",
            Self::Token => "token exchange",
            Self::Refresh => "token refresh",
            Self::TokenFile => "token file",
        })
    }
}

impl Error {
    /// The process exit code: 2 for configuration errors (like usage errors), 3 when a
    /// target cannot be probed, 1 otherwise (including a failed check).
    pub fn exit_code(&self) -> ExitCode {
        match self {
            Self::Config(_) => ExitCode::from(2),
            Self::Probe(_) => ExitCode::from(3),
            Self::Bind { .. }
            | Self::Serve(_)
            | Self::Store(_)
            | Self::Startup(_)
            | Self::Verdict(_)
            | Self::OAuth { .. } => ExitCode::FAILURE,
        }
    }
}
