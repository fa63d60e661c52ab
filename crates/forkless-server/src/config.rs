//! The server's settings, their documented defaults, and their validation.
//!
//! This module owns [`ServerConfig`] and what counts as an allowed `Origin`. The settings the
//! core decides with (grace, retry, keep-alive, retention) live in [`forkless_core::Config`]
//! and are validated by it; [`ServerConfig::validate`] adds the server's own checks.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use http::HeaderMap;

/// How a POSTed request is answered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AnswerMode {
    /// A new SSE stream per request (resumable via GET with `Last-Event-ID`). The default.
    #[default]
    Sse,
    /// One `application/json` response; the request's notifications go to the standalone
    /// stream.
    Json,
}

/// Which `Origin` headers are accepted (a request without `Origin` is always accepted:
/// non-browser clients do not send one).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum AllowedOrigins {
    /// `http://` or `https://` with host `localhost`, `127.0.0.1` or `[::1]`, any port.
    /// The default: protects a local server from DNS rebinding.
    #[default]
    Localhost,
    /// Exactly these origins (compared case-insensitively, e.g. `https://app.example`).
    List(Vec<String>),
    /// Every origin. Only for servers behind another origin check.
    Any,
}

impl AllowedOrigins {
    /// Whether `origin` (the header's value) is allowed.
    pub fn allows(&self, origin: &str) -> bool {
        match self {
            Self::Any => true,
            Self::List(list) => list.iter().any(|o| o.eq_ignore_ascii_case(origin)),
            Self::Localhost => is_local_origin(origin),
        }
    }
}

fn is_local_origin(origin: &str) -> bool {
    let lower = origin.to_ascii_lowercase();
    let Some(rest) = lower.strip_prefix("http://").or_else(|| lower.strip_prefix("https://")) else {
        return false;
    };
    let (host, port) = if let Some(v6) = rest.strip_prefix("[::1]") {
        ("[::1]", v6)
    } else {
        match rest.find(':') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        }
    };
    let port_ok = port.is_empty()
        || port
            .strip_prefix(':')
            .is_some_and(|p| !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()));
    port_ok && matches!(host, "localhost" | "127.0.0.1" | "[::1]")
}

/// Derives the authenticated principal of a request (for example from `Authorization`).
/// Sessions are bound to the principal that created them; a request from another principal
/// is answered 404, as if the session did not exist.
#[derive(Clone)]
pub struct PrincipalFn(pub Arc<PrincipalClosure>);

/// The closure behind [`PrincipalFn`].
pub type PrincipalClosure = dyn Fn(&HeaderMap) -> Option<String> + Send + Sync;

impl PrincipalFn {
    /// Wrap a closure.
    pub fn new(f: impl Fn(&HeaderMap) -> Option<String> + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }
}

impl fmt::Debug for PrincipalFn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PrincipalFn(..)")
    }
}

/// What the listener speaks on its socket. The server behaves the same on each (streams,
/// resumption, limits, timeouts, metrics).
#[derive(Clone, Debug, Default)]
pub enum Transport {
    /// Plaintext HTTP/1.1.
    #[default]
    Http1,
    /// Plaintext HTTP/1.1 and HTTP/2 with prior knowledge (h2c), told apart by the HTTP/2
    /// preface: behind a proxy that speaks HTTP/2 to its backends.
    Cleartext,
    /// TLS with this identity, ALPN offering HTTP/2 and HTTP/1.1 (a client offering neither
    /// gets HTTP/1.1).
    Tls(Arc<crate::TlsIdentity>),
}

/// Everything the server is configured with. Every field has a documented default.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// The MCP endpoint. Default `/mcp`.
    pub path: String,
    /// What the core decides with (grace, retry interval and budget, keep-alive, retention).
    /// Default [`forkless_core::Config::default`].
    pub core: forkless_core::Config,
    /// How POSTed requests are answered. Default [`AnswerMode::Sse`]. (`initialize`, which
    /// the server answers itself at once, is always answered with JSON.)
    pub answer: AnswerMode,
    /// Accepted `Origin`s. Default [`AllowedOrigins::Localhost`].
    pub allowed_origins: AllowedOrigins,
    /// Largest accepted POST body; larger ones get 413. Default 4 MiB.
    pub max_body_bytes: usize,
    /// 2025-11-25 polling: close an SSE connection (not its stream) after this long, after
    /// sending `retry:`; the client reconnects with `Last-Event-ID`. Default `None` (never).
    pub poll_after: Option<Duration>,
    /// How often the sweeper applies liveness expiry, retention and idle ends. Default 1 s.
    pub sweep_interval: Duration,
    /// How long an ended session's tombstone is kept (so late requests learn the reason)
    /// before it is removed from the store. Default 5 minutes.
    pub tombstone_ttl: Duration,
    /// Events read from the store per batch while delivering. Default 256.
    pub read_batch: usize,
    /// How many times an SSE writer that finds new events yields to the runtime before it
    /// reads them, while more keep arriving (it reads once two yields bring nothing new, or a
    /// read batch is waiting): the events of one burst then leave in one write rather than
    /// one each. A lone event waits two yields (microseconds when the server is idle). `0`
    /// reads at once. Default 16.
    pub gather_passes: u32,
    /// How long a POST answered over SSE waits for a handler that was not done on its first
    /// poll (it awaits a database, an upstream) before it sends the response's head. An answer
    /// ready within it, with nothing sent before it, goes out with the head as one finished
    /// body (one write, no stream left open), as an answer ready at once does; otherwise the
    /// stream opens when it ends (its priming event at most this late) and a message the
    /// handler sent meanwhile follows then. Zero opens the stream at once. Default 1 ms.
    pub answer_linger: Duration,
    /// How long graceful shutdown waits for connections to finish after every SSE body was
    /// ended. Default 5 s.
    pub drain_timeout: Duration,
    /// Binds sessions to a principal. Default `None` (no binding). With [`Self::auth`] the
    /// principal is the token's issuer and subject, and this is not consulted.
    pub principal: Option<PrincipalFn>,
    /// Require an OAuth bearer token on the MCP endpoint ([`crate::auth`]). Default `None`.
    pub auth: Option<crate::auth::AuthConfig>,
    /// How long a connection with no request in flight may take to deliver the next request's
    /// headers: from when it opens, or its last response ends, until the headers are complete.
    /// A silent connection, a slow header and an idle keep-alive connection are all closed
    /// after it (hyper runs one timer for the three; an open SSE response is a request in
    /// flight and keeps its connection with keep-alives). Default 10 s.
    pub header_read_timeout: Duration,
    /// How long a connection may sit with no request in flight (between requests, or before
    /// its first) before it is closed. An open SSE response is a request in flight. hyper's
    /// header timer also runs while a connection waits for a request, so the shorter of this
    /// and `header_read_timeout` applies. Default 10 s.
    pub idle_timeout: Duration,
    /// How long a POST body may take to arrive once its headers are read; a slower one is
    /// answered 408 and its connection closed. Default 10 s.
    pub body_read_timeout: Duration,
    /// Largest accepted request head (all header names and values); larger ones get 431.
    /// Default 16 KiB.
    pub max_header_bytes: usize,
    /// What the listener speaks. Default [`Transport::Http1`].
    pub transport: Transport,
    /// Connections held at once. At the limit the longest-idle connection (no request in
    /// flight) is closed to make room; if every connection is busy, the new one is answered
    /// 503 and closed. Capped below the open-file limit in force (keeping 64 descriptors for
    /// the store and logs). Default 10,000.
    pub max_connections: usize,
    /// Live sessions held by this server; at the limit `initialize` is answered 503 with
    /// `Retry-After` (never by dropping an existing session). Default 50,000 (measured: 161 MiB
    /// resident for the whole `forkless serve` process on the durable store).
    pub max_sessions: usize,
    /// Payload bytes of retained events across all sessions; at the limit `initialize` is
    /// refused like at `max_sessions`, and appends are refused with a typed error. Default
    /// 1 GiB.
    pub max_retained_bytes: u64,
    /// How long a node waits to connect to a session's owner node when it sends it a request
    /// (owner routing, PROTOCOL section 10). Default 2 s.
    pub forward_connect_timeout: Duration,
    /// How long a node waits for the owner's answer to start (its status and headers; an SSE
    /// answer starts at once, a JSON one when the call is done). Default 60 s.
    pub forward_head_timeout: Duration,
    /// How long `/healthz` waits for the store's answer before it answers 503 itself (a
    /// database behind a silent partition never answers; a load balancer must learn it in
    /// time). Default 1 s.
    pub health_timeout: Duration,
    /// Each principal's share of the sessions, and what happens at `max_sessions`. Default
    /// [`crate::quota::Quotas::default`].
    pub quotas: crate::quota::Quotas,
    /// The task table of the tasks extension (2026-07-28): time to live, suggested polling
    /// interval, most tasks held. Default [`crate::tasks::TaskLimits::default`].
    pub tasks: crate::tasks::TaskLimits,
    /// The revisions offered (PROTOCOL section 9), within those the handler serves. A client
    /// asking for another is refused with 400 `-32022` naming the served ones (an auto-mode
    /// client then falls back to `initialize`); `initialize` answers with the newest served
    /// revision with sessions when the one asked for is not served. Default
    /// [`forkless_core::RevisionSet::ALL`]; `forkless serve` offers the session revisions
    /// unless told otherwise (see its `--revisions`).
    pub revisions: forkless_core::RevisionSet,
    /// Keyed requests of the forkless idempotency extension (2026-07-28): how long a key is
    /// remembered, how often a waiting re-issue reads the first execution's record. Default
    /// [`crate::tasks::IdempotencyLimits::default`].
    pub idempotency: crate::tasks::IdempotencyLimits,
    /// How `requestState` of multi-round-trip requests is sealed (2026-07-28): the key ring
    /// and the time to live. Default
    /// [`crate::request_state::RequestStateConfig::default`] (a key only this process holds).
    pub request_state: crate::request_state::RequestStateConfig,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            path: "/mcp".to_owned(),
            core: forkless_core::Config::default(),
            answer: AnswerMode::Sse,
            allowed_origins: AllowedOrigins::Localhost,
            max_body_bytes: 4 << 20,
            poll_after: None,
            sweep_interval: Duration::from_secs(1),
            tombstone_ttl: Duration::from_secs(300),
            read_batch: 256,
            gather_passes: 16,
            answer_linger: Duration::from_millis(1),
            drain_timeout: Duration::from_secs(5),
            principal: None,
            auth: None,
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(10),
            max_header_bytes: 16 << 10,
            transport: Transport::Http1,
            max_connections: 10_000,
            max_sessions: 50_000,
            max_retained_bytes: 1 << 30,
            forward_connect_timeout: Duration::from_secs(2),
            forward_head_timeout: Duration::from_secs(60),
            health_timeout: Duration::from_secs(1),
            quotas: crate::quota::Quotas::default(),
            tasks: crate::tasks::TaskLimits::default(),
            revisions: forkless_core::RevisionSet::ALL,
            idempotency: crate::tasks::IdempotencyLimits::default(),
            request_state: crate::request_state::RequestStateConfig::default(),
        }
    }
}

/// A setting the server refuses to start with.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The core's settings are inconsistent.
    #[error(transparent)]
    Core(#[from] forkless_core::ConfigError),
    /// The endpoint path must start with `/` and must not shadow `/metrics` or `/healthz`.
    #[error("endpoint path {0:?} must start with '/' and differ from /metrics and /healthz")]
    Path(String),
    /// A size or duration that must be above zero is zero.
    #[error("{0} must be above zero")]
    Zero(&'static str),
    /// The auth audience must be this resource's absolute URL (RFC 8707).
    #[error("auth audience {0:?} must be an absolute URL such as https://mcp.example.com/mcp")]
    Audience(String),
    /// None of the revisions offered is one the handler serves (or none is offered).
    #[error("no revision to serve: offered {offered}, and the handler serves none of them")]
    NoRevision {
        /// The revisions the configuration offered.
        offered: forkless_core::RevisionSet,
    },
    /// A TLS certificate or key file cannot be used.
    #[error("TLS file {}: {why}", path.display())]
    TlsFile {
        /// The file.
        path: std::path::PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// The TLS private key is not the certificate's.
    #[error("TLS key {} does not belong to the certificate in {}", key.display(), cert.display())]
    TlsKeyMismatch {
        /// The certificate file.
        cert: std::path::PathBuf,
        /// The key file.
        key: std::path::PathBuf,
    },
    /// The TLS certificate is expired or not yet valid.
    #[error("TLS certificate {} is valid from {} to {}, not now", path.display(), rfc3339(*not_before), rfc3339(*not_after))]
    TlsNotValidNow {
        /// The certificate file.
        path: std::path::PathBuf,
        /// Its `notBefore`.
        not_before: std::time::SystemTime,
        /// Its `notAfter`.
        not_after: std::time::SystemTime,
    },
}

/// A certificate's date as the error shows it.
fn rfc3339(t: std::time::SystemTime) -> String {
    crate::x509::utc(t)
}

impl ServerConfig {
    /// Check every setting; [`crate::Server::new`] calls this.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.core.validate()?;
        if !self.path.starts_with('/') || self.path == "/metrics" || self.path == "/healthz" {
            return Err(ConfigError::Path(self.path.clone()));
        }
        if self.revisions.is_empty() {
            return Err(ConfigError::NoRevision { offered: self.revisions });
        }
        let zero: [(&'static str, bool); 23] = [
            ("request_state.ttl", self.request_state.ttl.is_zero()),
            ("tasks.ttl", self.tasks.ttl.is_zero()),
            ("tasks.poll_interval", self.tasks.poll_interval.is_zero()),
            ("tasks.max_poll_interval", self.tasks.max_poll_interval.is_zero()),
            ("tasks.max_tasks", self.tasks.max_tasks == 0),
            ("tasks.max_tasks_per_principal", self.tasks.max_tasks_per_principal == 0),
            ("idempotency.ttl", self.idempotency.ttl.is_zero()),
            ("idempotency.poll_interval", self.idempotency.poll_interval.is_zero()),
            ("forward_connect_timeout", self.forward_connect_timeout.is_zero()),
            ("forward_head_timeout", self.forward_head_timeout.is_zero()),
            ("idle_timeout", self.idle_timeout.is_zero()),
            ("max_body_bytes", self.max_body_bytes == 0),
            ("header_read_timeout", self.header_read_timeout.is_zero()),
            ("body_read_timeout", self.body_read_timeout.is_zero()),
            ("max_header_bytes", self.max_header_bytes == 0),
            ("max_connections", self.max_connections == 0),
            ("max_sessions", self.max_sessions == 0),
            ("max_retained_bytes", self.max_retained_bytes == 0),
            ("quotas.max_retained_bytes_per_principal", self.quotas.max_retained_bytes_per_principal == 0),
            ("sweep_interval", self.sweep_interval.is_zero()),
            ("read_batch", self.read_batch == 0),
            ("drain_timeout", self.drain_timeout.is_zero()),
            ("poll_after", self.poll_after.is_some_and(|d| d.is_zero())),
        ];
        if let Some(auth) = &self.auth {
            let uri = auth.audience.parse::<http::Uri>().ok();
            if uri.is_none_or(|u| u.scheme().is_none() || u.authority().is_none()) {
                return Err(ConfigError::Audience(auth.audience.clone()));
            }
        }
        match zero.iter().find(|(_, z)| *z) {
            Some((name, _)) => Err(ConfigError::Zero(name)),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        assert_eq!(ServerConfig::default().validate(), Ok(()));
    }

    #[test]
    fn bad_settings_are_refused() {
        let cfg = ServerConfig { path: "mcp".into(), ..ServerConfig::default() };
        assert!(matches!(cfg.validate(), Err(ConfigError::Path(_))));
        let cfg = ServerConfig { read_batch: 0, ..ServerConfig::default() };
        assert_eq!(cfg.validate(), Err(ConfigError::Zero("read_batch")));
        let mut cfg = ServerConfig::default();
        cfg.core.grace = cfg.core.retry_budget;
        assert!(matches!(cfg.validate(), Err(ConfigError::Core(_))));
    }

    #[test]
    fn local_origins() {
        let o = AllowedOrigins::Localhost;
        for ok in ["http://localhost", "http://localhost:3000", "https://127.0.0.1:8443", "http://[::1]:9"] {
            assert!(o.allows(ok), "{ok}");
        }
        for bad in [
            "null",
            "http://evil.example",
            "http://localhost.evil.example",
            "http://127.0.0.1.nip.io",
            "ftp://localhost",
            "http://localhost:",
            "http://localhost:80/x",
        ] {
            assert!(!o.allows(bad), "{bad}");
        }
        assert!(AllowedOrigins::List(vec!["https://app.example".into()]).allows("HTTPS://app.example"));
    }
}
