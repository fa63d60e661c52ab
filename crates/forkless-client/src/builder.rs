//! Building a client: its settings and their documented defaults ([`ClientBuilder`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use forkless_core::{EntropySource, OsEntropy, Revision, SeededEntropy};
use reqwest::Url;
use serde_json::{Map, Value};
use tokio::sync::mpsc;

use crate::backoff::RetryPolicy;
use crate::client::Client;
use crate::driver::Streams;
use crate::error::Error;
use crate::events::{RejectAll, ServerRequestHandler};
use crate::inner::{Inner, Session, Settings};

/// Configures and creates a [`Client`].
///
/// ```no_run
/// # async fn f() -> Result<(), forkless_client::Error> {
/// use std::time::Duration;
/// let client = forkless_client::Client::builder("http://127.0.0.1:8080/mcp")
///     .retry_budget(Duration::from_secs(30))
///     .reinit_on_404(true)
///     .connect()
///     .await?;
/// # Ok(()) }
/// ```
pub struct ClientBuilder {
    url: String,
    http: Option<reqwest::Client>,
    connect_timeout: Duration,
    /// Certificates trusted beside the system's (see [`crate::tls`]).
    ca_file: Option<std::path::PathBuf>,
    settings: Settings,
    handler: Arc<dyn ServerRequestHandler>,
    credentials: Option<Arc<dyn crate::Credentials>>,
    jitter_seed: Option<u64>,
}

impl std::fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientBuilder").field("url", &self.url).field("settings", &self.settings).finish()
    }
}

impl ClientBuilder {
    /// A builder for the MCP endpoint at `url` (point it at a proxy to inject faults).
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            http: None,
            connect_timeout: Duration::from_secs(10),
            ca_file: None,
            settings: Settings {
                retry: RetryPolicy::default(),
                reinit_on_404: false,
                request_timeout: None,
                idle_timeout: Some(Duration::from_secs(60)),
                revision: Revision::LATEST_WITH_SESSIONS,
                client_name: "forkless-client".into(),
                client_version: env!("CARGO_PKG_VERSION").into(),
                capabilities: Map::new(),
                declare_resume: true,
                continuation: crate::resume::Continuation::default(),
            },
            handler: Arc::new(RejectAll),
            credentials: None,
            jitter_seed: None,
        }
    }

    /// Use this `reqwest::Client` (custom TLS, proxies, connectors) instead of a default one.
    pub fn http_client(mut self, http: reqwest::Client) -> Self {
        self.http = Some(http);
        self
    }

    /// Also trust the certificates of this PEM file for `https://` (beside the system's roots
    /// and `SSL_CERT_FILE`'s: [`crate::tls`]), in the default HTTP client.
    pub fn ca_file(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        self.ca_file = Some(path.into());
        self
    }

    /// TCP connect timeout of the default HTTP client.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// The whole reconnect pacing.
    pub fn retry_policy(mut self, policy: RetryPolicy) -> Self {
        self.settings.retry = policy;
        self
    }

    /// Total time from losing a stream's connection to giving up. The server's grace window
    /// must be shorter, or the client refuses it ([`Error::GraceTooLong`]).
    pub fn retry_budget(mut self, budget: Duration) -> Self {
        self.settings.retry.budget = budget;
        self
    }

    /// First reconnect delay and the cap of the exponential backoff.
    pub fn backoff(mut self, initial: Duration, max: Duration) -> Self {
        self.settings.retry.initial = initial;
        self.settings.retry.max_delay = max;
        self
    }

    /// Re-initialize a new session when the server ends ours (404). Off by default: the
    /// application sees [`Error::SessionEnded`] and decides.
    pub fn reinit_on_404(mut self, on: bool) -> Self {
        self.settings.reinit_on_404 = on;
        self
    }

    /// Fail a request with [`Error::Timeout`] (and send `notifications/cancelled`) when it
    /// takes longer than this. None by default.
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.settings.request_timeout = Some(timeout);
        self
    }

    /// Treat an SSE connection that delivers no bytes (not even keep-alive comments) for this
    /// long as lost and resume it. `None` disables the check. Default 60 s.
    pub fn idle_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.settings.idle_timeout = timeout;
        self
    }

    /// The protocol revision requested in `initialize` (default 2025-11-25).
    pub fn protocol_revision(mut self, revision: Revision) -> Self {
        self.settings.revision = revision;
        self
    }

    /// `clientInfo` sent in `initialize`.
    pub fn client_info(mut self, name: impl Into<String>, version: impl Into<String>) -> Self {
        self.settings.client_name = name.into();
        self.settings.client_version = version.into();
        self
    }

    /// Declare a client capability (`sampling`, `elicitation`, `roots`, …) in `initialize`.
    pub fn capability(mut self, name: impl Into<String>, value: Value) -> Self {
        self.settings.capabilities.insert(name.into(), value);
        self
    }

    /// Whether to declare `experimental["forkless/resume"]` (default true). Turning it off
    /// makes a plain-specification client, for tests of servers' fallback paths.
    pub fn declare_resume(mut self, on: bool) -> Self {
        self.settings.declare_resume = on;
        self
    }

    /// What a stream accepts as its continuation after a reconnect. Default
    /// [`Continuation::Follow`](crate::Continuation::Follow).
    pub fn continuation(mut self, continuation: crate::resume::Continuation) -> Self {
        self.settings.continuation = continuation;
        self
    }

    /// Who answers the server's requests (sampling, elicitation, roots). Default: reject all.
    pub fn handler(mut self, handler: impl ServerRequestHandler) -> Self {
        self.handler = Arc::new(handler);
        self
    }

    /// Where every request's `Authorization` header comes from (asked afresh each time).
    /// Default none.
    pub fn credentials(mut self, credentials: Arc<dyn crate::Credentials>) -> Self {
        self.credentials = Some(credentials);
        self
    }

    /// Make backoff jitter deterministic (tests, simulations).
    pub fn jitter_seed(mut self, seed: u64) -> Self {
        self.jitter_seed = Some(seed);
        self
    }

    /// Create the client without contacting the server; the first request initializes.
    pub fn build(self) -> Result<Client, Error> {
        let url = Url::parse(&self.url).map_err(|e| Error::InvalidUrl(format!("{}: {e}", self.url)))?;
        if self.settings.retry.budget.is_zero() {
            return Err(Error::InvalidSetting("retry budget must be positive"));
        }
        let http = match self.http {
            Some(h) => h,
            None => crate::tls::trusting(
                reqwest::Client::builder().connect_timeout(self.connect_timeout),
                self.ca_file.as_deref(),
            )?
            .build()?,
        };
        let entropy: Box<dyn EntropySource + Send> = match self.jitter_seed {
            Some(seed) => Box::new(SeededEntropy::new(seed)),
            None => Box::new(OsEntropy),
        };
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        Ok(Client {
            inner: Arc::new_cyclic(|me| Inner {
                me: me.clone(),
                http,
                url,
                settings: self.settings,
                handler: self.handler,
                credentials: self.credentials,
                session: Mutex::new(Session::default()),
                init_lock: tokio::sync::Mutex::new(()),
                closed: AtomicBool::new(false),
                next_id: AtomicU64::new(1),
                pending: Mutex::new(HashMap::new()),
                progress: Mutex::new(HashMap::new()),
                events_tx,
                events_rx: Mutex::new(Some(events_rx)),
                streams: Mutex::new(Streams::default()),
                entropy: Mutex::new(entropy),
            }),
        })
    }

    /// Create the client and initialize a session.
    pub async fn connect(self) -> Result<Client, Error> {
        let client = self.build()?;
        client.inner.ensure_session().await?;
        Ok(client)
    }
}

impl Client {
    /// Connect to `url` with default settings and initialize a session.
    pub async fn connect(url: impl Into<String>) -> Result<Self, Error> {
        ClientBuilder::new(url).connect().await
    }

    /// A [`ClientBuilder`] for `url`.
    pub fn builder(url: impl Into<String>) -> ClientBuilder {
        ClientBuilder::new(url)
    }
}
