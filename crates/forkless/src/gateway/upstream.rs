//! `forkless gateway --upstream URL`: a Streamable HTTP MCP server behind the fork-free
//! transport. Per forkless session one upstream session: the client's `initialize` is
//! POSTed upstream and the upstream's `Mcp-Session-Id` kept; every message after it is
//! POSTed with it, each request's answer (a JSON body or an SSE stream) read to its end and
//! handed to the session message by message; the upstream's GET stream carries its own
//! requests and notifications; the upstream session is DELETEd when the forkless session
//! ends. A 2026-07-28 upstream, which has no sessions, is called statelessly instead
//! (`current`).
//!
//! It never passes an upstream fork on: an answer cut before its response is resumed
//! upstream only when the upstream numbers its streams and the resume provably continues it
//! (`resume`); otherwise, or when what comes does not continue it, the request gets an error
//! carrying its id, `data.reason: "upstream_lost"`. An upstream that answers 404 for its session (it
//! restarted, or forgot it) ends the forkless session with reason `upstream_session_lost`;
//! it is never re-initialized under the client's session id. The client's credentials never
//! go upstream: only the headers given with `--upstream-header`.
//!
//! This module owns speaking to the upstream; how its messages meet clients (ids, progress
//! tokens, streams) is `forkless_server::backend`'s, and the transport is `serve`'s.

mod answer;
mod current;
mod resume;
mod sse;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use forkless_core::{EndReason, SessionId};
use forkless_server::RpcError;
use forkless_server::backend::{Connector, ExitReason, FromBackend, Link, LinkFacts};
use forkless_store::{MetricKind, StoreMetric};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::Error;

pub(crate) const SESSION_ID: &str = "mcp-session-id";
pub(crate) const PROTOCOL_VERSION: &str = "mcp-protocol-version";

/// Where the upstream is and how to speak to it.
#[derive(Clone, Debug)]
pub struct UpstreamSpec {
    /// Its MCP endpoint, `http(s)://host/mcp`.
    pub url: reqwest::Url,
    /// Headers sent with every request (the upstream's own credentials), never the client's.
    pub headers: HeaderMap,
    /// How long the upstream may take to start answering one message.
    pub timeout: Duration,
    /// A CA file trusted for `https://`, beside the system's roots.
    pub ca_file: Option<PathBuf>,
}

impl UpstreamSpec {
    /// `--upstream URL`, `--upstream-header 'K: V'`…: checked.
    pub fn parse(
        url: &str,
        headers: &[String],
        timeout: Duration,
        ca_file: Option<PathBuf>,
    ) -> Result<Self, Error> {
        let parsed = reqwest::Url::parse(url).map_err(|e| Error::Config(format!("--upstream {url}: {e}")))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(Error::Config(format!("--upstream {url}: not an http:// or https:// URL")));
        }
        let headers = parse_headers("--upstream-header", headers)?;
        Ok(Self { url: parsed, headers, timeout, ca_file })
    }
}

/// Headers given as `Name: value` with the command-line flag `flag`: checked.
pub(crate) fn parse_headers(flag: &str, headers: &[String]) -> Result<HeaderMap, Error> {
    let mut map = HeaderMap::new();
    for h in headers {
        let (name, value) =
            h.split_once(':').ok_or_else(|| Error::Config(format!("{flag} `{h}` is not `Name: value`")))?;
        let name =
            HeaderName::try_from(name.trim()).map_err(|e| Error::Config(format!("{flag} `{h}`: {e}")))?;
        let value =
            HeaderValue::try_from(value.trim()).map_err(|e| Error::Config(format!("{flag} `{h}`: {e}")))?;
        map.append(name, value);
    }
    Ok(map)
}

/// What the connector counted, for `/metrics`.
#[derive(Debug, Default)]
pub(crate) struct UpstreamStats {
    /// Requests answered `upstream_lost` (the upstream's answer broke or never came).
    pub(crate) lost: AtomicU64,
    /// Upstream sessions the upstream forgot (404): their forkless sessions ended.
    pub(crate) sessions_lost: AtomicU64,
    /// Upstream sessions opened.
    pub(crate) sessions: AtomicU64,
    /// Times the upstream's GET stream was opened again after it ended.
    pub(crate) standalone_reopened: AtomicU64,
    /// Events of a reopened GET stream or a resumed answer dropped as already delivered.
    pub(crate) duplicates_dropped: AtomicU64,
    /// Answers resumed upstream, their continuation proven.
    pub(crate) resumed: AtomicU64,
    /// Upstream streams that did not continue (a gap, another stream, a resume not marked
    /// as one): their requests answered `upstream_lost`, nothing of the fork passed on.
    pub(crate) forks_refused: AtomicU64,
}

/// Starts one upstream session per forkless session.
#[derive(Debug)]
pub struct HttpConnector {
    spec: Arc<UpstreamSpec>,
    http: reqwest::Client,
    stats: Arc<UpstreamStats>,
}

impl HttpConnector {
    /// A connector for `spec`, its HTTP client trusting the system's roots plus its CA file.
    pub fn new(spec: UpstreamSpec) -> Result<Self, Error> {
        let builder = reqwest::Client::builder().connect_timeout(spec.timeout).pool_max_idle_per_host(64);
        let http = forkless_tls::http::trusting(builder, spec.ca_file.as_deref())
            .map_err(|e| Error::Config(format!("--upstream-ca {e}")))?
            .build()
            .map_err(|e| Error::Config(format!("an HTTP client for the upstream: {e}")))?;
        Ok(Self { spec: Arc::new(spec), http, stats: Arc::default() })
    }
}

impl HttpConnector {
    /// A link to an upstream session: a new one (`known` empty), or one already reached.
    fn link(&self, session: Option<SessionId>, known: Option<Known>) -> Link {
        let (to_backend, to_rx) = mpsc::channel(64);
        let (from_tx, from_backend) = mpsc::channel(256);
        let exit = ExitReason::default();
        let facts = LinkFacts::default();
        let reached = matches!(known, Some(Known::Session { .. }));
        let (id, version, stateless) = match known {
            None => (None, None, std::sync::OnceLock::new()),
            Some(Known::Session { id, version }) => (Some(id), version, std::sync::OnceLock::new()),
            Some(Known::Stateless(s)) => (None, None, std::sync::OnceLock::from(s)),
        };
        let upstream = Arc::new(Upstream {
            spec: self.spec.clone(),
            http: self.http.clone(),
            forkless: session,
            session: Mutex::new(id),
            version: Mutex::new(version),
            stateless,
            from: Mutex::new(Some(from_tx)),
            exit: exit.clone(),
            facts: facts.clone(),
            cancel: CancellationToken::new(),
            stats: self.stats.clone(),
        });
        tokio::spawn(upstream.clone().run(to_rx));
        if reached {
            // Initialized long ago: its GET stream is opened at once.
            tokio::spawn(upstream.clone().standalone());
        }
        Link { to_backend, from_backend, guard: Box::new(Ended(upstream)), exit, facts }
    }
}

/// An upstream session already reached, as a node taking a session over finds it.
enum Known {
    /// A session of the upstream, its id and revision.
    Session { id: HeaderValue, version: Option<HeaderValue> },
    /// A 2026-07-28 upstream, called statelessly for this client.
    Stateless(current::Stateless),
}

/// What a session's record keeps of its upstream session: enough for any node to reach it.
#[derive(serde::Serialize, serde::Deserialize)]
struct Facts {
    /// The upstream it is on (another one never gets its id).
    upstream: String,
    /// The upstream's `Mcp-Session-Id` (none for a 2026-07-28 upstream).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    session: Option<String>,
    /// The revision the upstream answered `initialize` with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    version: Option<String>,
    /// For a 2026-07-28 upstream: the client's info and capabilities, sent with each request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    stateless: Option<Value>,
}

impl Connector for HttpConnector {
    async fn connect(&self, session: Option<SessionId>) -> Result<Link, RpcError> {
        Ok(self.link(session, None))
    }

    async fn reconnect(&self, session: SessionId, facts: Arc<str>) -> Result<Link, RpcError> {
        let facts: Facts = serde_json::from_str(&facts)
            .map_err(|e| RpcError::internal(format!("the session's upstream facts do not read: {e}")))?;
        if facts.upstream != self.spec.url.as_str() {
            return Err(RpcError::internal(format!(
                "the session's upstream session is on {}, not on this gateway's upstream",
                facts.upstream
            )));
        }
        if let Some(client) = facts.stateless {
            tracing::info!(%session, "speaking for the session's client to its 2026-07-28 upstream again");
            return Ok(
                self.link(Some(session), Some(Known::Stateless(current::Stateless::of(Some(&client)))))
            );
        }
        let bad =
            |e: reqwest::header::InvalidHeaderValue| RpcError::internal(format!("upstream session id: {e}"));
        let id = facts
            .session
            .ok_or_else(|| RpcError::internal("the session's upstream facts name no session"))?;
        let id = HeaderValue::try_from(id).map_err(bad)?;
        let version = facts.version.map(HeaderValue::try_from).transpose().map_err(bad)?;
        tracing::info!(%session, "reaching the session's upstream session again");
        Ok(self.link(Some(session), Some(Known::Session { id, version })))
    }

    fn metrics(&self) -> Vec<StoreMetric> {
        let counter = |name, help, v: &AtomicU64| StoreMetric {
            name,
            help,
            kind: MetricKind::Counter,
            value: v.load(Ordering::Relaxed),
        };
        let s = &self.stats;
        vec![
            counter("forkless_upstream_sessions_total", "Upstream sessions opened.", &s.sessions),
            counter(
                "forkless_upstream_lost_total",
                "Requests answered upstream_lost: the upstream's answer broke or never came.",
                &s.lost,
            ),
            counter(
                "forkless_upstream_sessions_lost_total",
                "Upstream sessions the upstream forgot (404): their sessions ended upstream_session_lost.",
                &s.sessions_lost,
            ),
            counter(
                "forkless_upstream_standalone_reopened_total",
                "Times the upstream's GET stream was opened again.",
                &s.standalone_reopened,
            ),
            counter(
                "forkless_upstream_duplicates_dropped_total",
                "Events of a reopened upstream GET stream or resumed answer dropped as already delivered.",
                &s.duplicates_dropped,
            ),
            counter(
                "forkless_upstream_resumed_total",
                "Upstream answers resumed after a break, their continuation proven.",
                &s.resumed,
            ),
            counter(
                "forkless_upstream_forks_refused_total",
                "Upstream streams that did not continue: their requests answered upstream_lost.",
                &s.forks_refused,
            ),
        ]
    }
}

/// Held while the forkless session lives: its end stops the upstream session's work and
/// DELETEs it upstream.
struct Ended(Arc<Upstream>);

impl Drop for Ended {
    fn drop(&mut self) {
        let upstream = self.0.clone();
        upstream.cancel.cancel();
        drop(upstream.from.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take());
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { upstream.delete().await });
        }
    }
}

/// One upstream session.
pub(crate) struct Upstream {
    spec: Arc<UpstreamSpec>,
    http: reqwest::Client,
    /// The forkless session it serves (for the log).
    forkless: Option<SessionId>,
    /// The upstream's `Mcp-Session-Id`, once `initialize` answered with one.
    session: Mutex<Option<HeaderValue>>,
    /// The revision the upstream answered `initialize` with.
    version: Mutex<Option<HeaderValue>>,
    /// Set when the upstream speaks 2026-07-28: every request is a stateless POST.
    stateless: std::sync::OnceLock<current::Stateless>,
    /// To the forkless session; taken (closing it) when the upstream session is over.
    from: Mutex<Option<mpsc::Sender<FromBackend>>>,
    exit: ExitReason,
    /// What the session's record keeps of the upstream session (set after `initialize`).
    facts: LinkFacts,
    cancel: CancellationToken,
    stats: Arc<UpstreamStats>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Upstream {
    /// Messages from the forkless session, each POSTed upstream: `initialize` and
    /// `notifications/initialized` in order (the session id and the GET stream follow from
    /// them), every other message on its own task.
    async fn run(self: Arc<Self>, mut to: mpsc::Receiver<Value>) {
        loop {
            let message = tokio::select! {
                () = self.cancel.cancelled() => return,
                m = to.recv() => match m { Some(m) => m, None => return },
            };
            match message.get("method").and_then(Value::as_str) {
                Some("initialize") => self.clone().post(message).await,
                Some("notifications/initialized") => {
                    self.clone().post(message).await;
                    if self.stateless.get().is_none() {
                        tokio::spawn(self.clone().standalone());
                    }
                }
                _ => {
                    tokio::spawn(self.clone().post(message));
                }
            }
        }
    }

    /// Hand `message` to the forkless session (nothing, once it is over).
    pub(crate) async fn deliver(&self, message: impl Into<FromBackend>) {
        let tx = lock(&self.from).clone();
        if let Some(tx) = tx {
            let _ = tx.send(message.into()).await;
        }
    }

    /// A request of the session goes unanswered by the upstream: its error, with its id.
    pub(crate) async fn lost(&self, id: &Value, why: &str) {
        self.stats.lost.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(session = ?self.forkless, %id, why, "upstream answer lost: the request is answered upstream_lost");
        let error = RpcError::internal(format!("the upstream MCP server's answer was lost: {why}"))
            .with_data(serde_json::json!({ "reason": "upstream_lost" }));
        self.deliver(serde_json::json!({ "jsonrpc": "2.0", "id": id, "error": error.to_json() })).await;
    }

    /// The upstream forgot its session: the forkless session ends `upstream_session_lost`.
    pub(crate) fn forgotten(&self) {
        if self.cancel.is_cancelled() {
            return;
        }
        self.stats.sessions_lost.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(session = ?self.forkless, "the upstream answered 404 for its session: the session ends upstream_session_lost");
        self.exit.set(EndReason::UpstreamSessionLost);
        self.cancel.cancel();
        drop(lock(&self.from).take());
    }

    /// A request upstream with the spec's headers and the upstream session's.
    pub(crate) fn request(&self, method: reqwest::Method) -> reqwest::RequestBuilder {
        let mut b = self.http.request(method, self.spec.url.clone()).headers(self.spec.headers.clone());
        if self.stateless.get().is_some() {
            return b.header(PROTOCOL_VERSION, current::REVISION);
        }
        if let Some(id) = lock(&self.session).clone() {
            b = b.header(SESSION_ID, id);
        }
        if let Some(v) = lock(&self.version).clone() {
            b = b.header(PROTOCOL_VERSION, v);
        }
        b
    }

    /// What `initialize` answered with: the session id (from the head) and the revision
    /// (from the result).
    pub(crate) fn initialized(&self, head: &HeaderMap, message: &Value) {
        if let Some(id) = head.get(SESSION_ID) {
            *lock(&self.session) = Some(id.clone());
            self.stats.sessions.fetch_add(1, Ordering::Relaxed);
        }
        let version = message.pointer("/result/protocolVersion").and_then(Value::as_str);
        if let Some(v) = version.and_then(|v| HeaderValue::try_from(v).ok()) {
            *lock(&self.version) = Some(v);
        }
        if let Some(id) = head.get(SESSION_ID).and_then(|v| v.to_str().ok()) {
            let facts = Facts {
                upstream: self.spec.url.to_string(),
                session: Some(id.to_owned()),
                version: version.map(str::to_owned),
                stateless: None,
            };
            if let Ok(text) = serde_json::to_string(&facts) {
                self.facts.set(text);
            }
        }
    }

    /// The upstream session, DELETEd (best effort: an upstream that does not allow it says 405).
    async fn delete(&self) {
        if lock(&self.session).is_none() || self.exit.get() == EndReason::UpstreamSessionLost {
            return;
        }
        let sent =
            tokio::time::timeout(self.spec.timeout, self.request(reqwest::Method::DELETE).send()).await;
        tracing::debug!(session = ?self.forkless, ?sent, "upstream session deleted");
    }
}
