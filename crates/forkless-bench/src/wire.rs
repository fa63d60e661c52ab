//! The load generator's MCP client on hyper 1: one connection ([`Conn`], HTTP/1.1 keep-alive
//! or, over TLS, HTTP/2 where ALPN chooses it; one request in flight), the session it opened,
//! and an incremental SSE parser.
//!
//! This module owns speaking to a server; what load to put on it and how it is timed is
//! [`crate::load`]'s.
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Request, Response, StatusCode, header};
use http_body_util::{BodyExt as _, Empty, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;

use crate::Error;
use crate::procstat::ProcSample;

pub(crate) const SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");
pub(crate) const PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
pub(crate) const LAST_EVENT_ID: HeaderName = HeaderName::from_static("last-event-id");
pub(crate) const STREAM_ID: HeaderName = HeaderName::from_static("mcp-stream-id");

/// The revision every client negotiates: the newest one all servers under test speak.
pub(crate) const REVISION: &str = "2025-06-18";

/// How long one request (or one whole stream) may take before it counts as an error.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

type ReqBody = BoxBody<Bytes, std::convert::Infallible>;

/// Where a server under test listens.
#[derive(Clone, Debug)]
pub struct Endpoint {
    /// Its socket address.
    pub addr: SocketAddr,
    /// The MCP endpoint path.
    pub path: String,
    /// Plaintext, or TLS with these settings.
    pub tls: Option<Tls>,
}

/// TLS to an endpoint: whom to trust, the name its certificate must hold, what ALPN offers.
#[derive(Clone, Debug)]
pub struct Tls {
    config: Arc<rustls::ClientConfig>,
    name: ServerName<'static>,
    authority: String,
}

/// The protocols a TLS connection offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Alpn {
    /// `h2`, then `http/1.1`: the server chooses.
    H2,
    /// `http/1.1` only.
    Http1,
}

impl Endpoint {
    /// Parse `http://ADDR/PATH` (the line servers print once bound); `https://` is
    /// [`Self::from_https_url`]'s.
    pub fn from_url(url: &str) -> Option<Self> {
        let rest = url.trim().strip_prefix("http://")?;
        let (authority, path) = rest.split_once('/').unwrap_or((rest, "mcp"));
        let addr = authority.replace("localhost", "127.0.0.1").parse().ok()?;
        Some(Self { addr, path: format!("/{path}"), tls: None })
    }

    /// Parse `https://HOST:PORT/PATH` (`localhost` or an IP address), trusting the system's
    /// roots plus `ca_file` (`forkless_tls`'s rule), offering `alpn`.
    pub fn from_https_url(url: &str, ca_file: Option<&std::path::Path>, alpn: Alpn) -> Result<Self, Error> {
        let bad = || Error::Load(format!("not an https://HOST:PORT/PATH URL: {url}"));
        let rest = url.trim().strip_prefix("https://").ok_or_else(bad)?;
        let (authority, path) = rest.split_once('/').unwrap_or((rest, "mcp"));
        let (host, port) = authority.rsplit_once(':').ok_or_else(bad)?;
        let port: u16 = port.parse().map_err(|_| bad())?;
        let ip = if host == "localhost" { [127, 0, 0, 1].into() } else { host.parse().map_err(|_| bad())? };
        let name = ServerName::try_from(host.to_owned()).map_err(|_| bad())?;
        let roots = forkless_tls::roots::store(ca_file).map_err(|e| Error::Load(e.to_string()))?;
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::Load(e.to_string()))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = match alpn {
            Alpn::H2 => vec![b"h2".to_vec(), b"http/1.1".to_vec()],
            Alpn::Http1 => vec![b"http/1.1".to_vec()],
        };
        let tls = Tls { config: Arc::new(config), name, authority: authority.to_owned() };
        Ok(Self { addr: SocketAddr::new(ip, port), path: format!("/{path}"), tls: Some(tls) })
    }
}

/// A connection's sender: HTTP/1.1 or HTTP/2.
enum Sender {
    H1(hyper::client::conn::http1::SendRequest<ReqBody>),
    H2(hyper::client::conn::http2::SendRequest<ReqBody>),
}

/// Reads the server's CPU time and memory (a [`crate::procstat`] sample of its process).
pub type Probe = Arc<dyn Fn() -> Option<ProcSample> + Send + Sync>;

/// One keep-alive connection.
pub struct Conn {
    tx: Sender,
    pub(crate) host: HeaderValue,
    /// The request target: the path, or over HTTP/2 the whole URL.
    target: String,
    /// Where it goes (to open another after a break).
    pub(crate) endpoint: Endpoint,
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn").field("target", &self.target).finish_non_exhaustive()
    }
}

/// An MCP session as the client knows it (servers without sessions give no id).
#[derive(Clone, Debug)]
pub struct Session {
    /// `Mcp-Session-Id`, if the server gave one.
    pub id: Option<HeaderValue>,
}

impl Conn {
    /// Connect (TCP_NODELAY), over TLS if the endpoint says so, and hand the connection to a
    /// background task.
    pub async fn open(ep: &Endpoint) -> Result<Self, Error> {
        let tcp = TcpStream::connect(ep.addr).await.map_err(Error::Io)?;
        let _ = tcp.set_nodelay(true);
        let handshake = |e: hyper::Error| Error::Load(format!("handshake: {e}"));
        let Some(tls) = &ep.tls else {
            let (tx, conn) =
                hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await.map_err(handshake)?;
            tokio::spawn(conn);
            let host = HeaderValue::try_from(ep.addr.to_string()).map_err(|e| Error::Load(e.to_string()))?;
            return Ok(Self { tx: Sender::H1(tx), host, target: ep.path.clone(), endpoint: ep.clone() });
        };
        let stream = tokio_rustls::TlsConnector::from(tls.config.clone())
            .connect(tls.name.clone(), tcp)
            .await
            .map_err(|e| Error::Load(format!("TLS handshake: {e}")))?;
        let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
        let io = TokioIo::new(stream);
        let host = HeaderValue::try_from(tls.authority.as_str()).map_err(|e| Error::Load(e.to_string()))?;
        let (tx, target) = if h2 {
            let (tx, conn) =
                hyper::client::conn::http2::handshake(TokioExecutor::new(), io).await.map_err(handshake)?;
            tokio::spawn(conn);
            (Sender::H2(tx), format!("https://{}{}", tls.authority, ep.path))
        } else {
            let (tx, conn) = hyper::client::conn::http1::handshake(io).await.map_err(handshake)?;
            tokio::spawn(conn);
            (Sender::H1(tx), ep.path.clone())
        };
        Ok(Self { tx, host, target, endpoint: ep.clone() })
    }

    /// The HTTP version it speaks: `h2` or `http/1.1`.
    pub fn protocol(&self) -> &'static str {
        match self.tx {
            Sender::H1(_) => "http/1.1",
            Sender::H2(_) => "h2",
        }
    }

    async fn send(&mut self, req: Request<ReqBody>) -> Result<Response<Incoming>, Error> {
        let broken = |e: hyper::Error| Error::Load(format!("connection: {e}"));
        let failed = |e: hyper::Error| Error::Load(format!("request: {e}"));
        match &mut self.tx {
            Sender::H1(tx) => {
                tx.ready().await.map_err(broken)?;
                tx.send_request(req).await.map_err(failed)
            }
            Sender::H2(tx) => {
                tx.ready().await.map_err(broken)?;
                tx.send_request(req).await.map_err(failed)
            }
        }
    }

    fn request(&self, method: http::Method, session: Option<&Session>) -> http::request::Builder {
        let mut b = Request::builder()
            .method(method)
            .uri(self.target.as_str())
            .header(header::HOST, self.host.clone())
            .header(header::ACCEPT, "application/json, text/event-stream");
        if let Some(session) = session {
            b = b.header(PROTOCOL_VERSION, REVISION);
            if let Some(id) = &session.id {
                b = b.header(SESSION_ID, id.clone());
            }
        }
        b
    }

    /// POST a JSON-RPC message.
    pub async fn post(
        &mut self,
        session: Option<&Session>,
        body: Bytes,
    ) -> Result<Response<Incoming>, Error> {
        let req = self
            .request(http::Method::POST, session)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Full::new(body).boxed())
            .map_err(|e| Error::Load(e.to_string()))?;
        self.send(req).await
    }

    /// GET the session's SSE stream, optionally resuming (`Last-Event-ID`, `Mcp-Stream-Id`).
    pub async fn get(
        &mut self,
        session: &Session,
        last_event_id: Option<&str>,
        stream: Option<&HeaderValue>,
    ) -> Result<Response<Incoming>, Error> {
        let mut b =
            self.request(http::Method::GET, Some(session)).header(header::ACCEPT, "text/event-stream");
        if let Some(last) = last_event_id {
            b = b.header(LAST_EVENT_ID, last);
        }
        if let Some(stream) = stream {
            b = b.header(STREAM_ID, stream.clone());
        }
        let req = b.body(Empty::new().boxed()).map_err(|e| Error::Load(e.to_string()))?;
        self.send(req).await
    }

    /// DELETE the session (errors ignored: not every server supports it).
    pub async fn delete(&mut self, session: &Session) {
        let Ok(req) = self.request(http::Method::DELETE, Some(session)).body(Empty::new().boxed()) else {
            return;
        };
        if let Ok(resp) = self.send(req).await {
            let _ = resp.into_body().collect().await;
        }
    }

    /// `initialize` then `notifications/initialized`.
    pub async fn initialize(&mut self) -> Result<Session, Error> {
        let init = format!(
            r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"{REVISION}","capabilities":{{}},"clientInfo":{{"name":"forkless-bench","version":"1"}}}}}}"#
        );
        let resp = self.post(None, Bytes::from(init)).await?;
        if resp.status() != StatusCode::OK {
            return Err(Error::Load(format!("initialize answered {}", resp.status())));
        }
        let id = resp.headers().get(SESSION_ID).cloned();
        let body = collect(resp).await?;
        if !contains(&body, b"\"result\"") {
            return Err(Error::Load("initialize got no result".into()));
        }
        let session = Session { id };
        let note = Bytes::from_static(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        let resp = self.post(Some(&session), note).await?;
        let status = resp.status();
        let _ = collect(resp).await;
        if !status.is_success() {
            return Err(Error::Load(format!("notifications/initialized answered {status}")));
        }
        Ok(session)
    }
}

pub(crate) async fn collect(resp: Response<Incoming>) -> Result<Bytes, Error> {
    match tokio::time::timeout(REQUEST_TIMEOUT, resp.into_body().collect()).await {
        Ok(Ok(b)) => Ok(b.to_bytes()),
        Ok(Err(e)) => Err(Error::Load(format!("body: {e}"))),
        Err(_) => Err(Error::Load("body timed out".into())),
    }
}

/// Whether `needle` occurs in `hay`.
pub fn contains(hay: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && memchr::memmem::find(hay, needle).is_some()
}

pub(crate) fn is_sse(resp: &Response<Incoming>) -> bool {
    resp.headers().get(header::CONTENT_TYPE).is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"))
}

/// An incremental SSE parser: feed it chunks, get whole events.
#[derive(Debug, Default)]
pub struct SseParser {
    buf: Vec<u8>,
    /// Where the search for the next blank line resumes.
    scanned: usize,
}

/// What an SSE event carried, as far as the load cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// A JSON-RPC notification.
    Notification,
    /// A JSON-RPC response (result or error).
    Response,
    /// A server-to-client request, a priming event, a comment or anything else.
    Other,
}

impl SseParser {
    /// Feed a chunk; `on_event(kind, id)` runs for every complete event. Lines may end in
    /// LF or CRLF (sse-starlette, behind the Python SDK, writes CRLF).
    pub fn push(&mut self, chunk: &[u8], mut on_event: impl FnMut(EventKind, Option<&str>)) {
        // The client must not be what limits a load: line ends are found with `memchr`, not
        // byte by byte (a replay arrives at over a million events a second).
        self.buf.extend_from_slice(chunk);
        let mut event_start = 0;
        let mut line_start = self.scanned;
        for i in memchr::memchr_iter(b'\n', &self.buf[self.scanned..]).map(|at| at + self.scanned) {
            let line = &self.buf[line_start..i];
            let blank = line.is_empty() || line == b"\r";
            line_start = i + 1;
            if blank {
                let (kind, id) = parse_event(&self.buf[event_start..i]);
                on_event(kind, id);
                event_start = i + 1;
            }
        }
        self.buf.drain(..event_start);
        self.scanned = line_start - event_start;
    }
}

pub(crate) fn parse_event(block: &[u8]) -> (EventKind, Option<&str>) {
    let mut id = None;
    let mut kind = EventKind::Other;
    for line in block.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if let Some(v) = line.strip_prefix(b"id:") {
            id = std::str::from_utf8(v).ok().map(str::trim);
        } else if let Some(data) = line.strip_prefix(b"data:") {
            // Searchers built once: building one per search cost more than the search.
            static KEYS: std::sync::LazyLock<[memchr::memmem::Finder<'static>; 4]> =
                std::sync::LazyLock::new(|| {
                    [&b"\"result\""[..], b"\"error\"", b"\"method\"", b"\"id\""]
                        .map(memchr::memmem::Finder::new)
                });
            let has = |k: usize| KEYS[k].find(data).is_some();
            if has(0) || has(1) {
                kind = EventKind::Response;
            } else if has(2) && !has(3) {
                kind = EventKind::Notification;
            }
        }
    }
    (kind, id)
}
