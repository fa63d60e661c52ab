//! A minimal scripted MCP server that speaks exactly the forkless headers (or, in plain mode,
//! only the specification), for the client's tests.
//!
//! It keeps one session and an in-memory log per stream, serves every connection by reading
//! the log from the connection's cursor (so replay and live delivery are one path), and lets
//! each test script how connections end and how resumes are answered. It records every request
//! it receives so tests can assert on the headers the client sent.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::sync::Notify;

mod routes;
use routes::{delete, get, post, push};

/// Which dialect the fake speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    /// `Mcp-Stream-*` headers, `<stream>.<seq>` event ids.
    Forkless,
    /// No `Mcp-Stream-*` headers, opaque event ids.
    Plain,
}

/// How one SSE connection is served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Conn {
    /// Every event, live, closing when the stream completes.
    Full,
    /// `n` events (the priming event counts), then a clean close of the connection only.
    CloseAfter(usize),
    /// `n` events, then silence with the connection held open.
    HangAfter(usize),
}

/// How a GET with `Last-Event-ID` is answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resume {
    /// `Resumed: true`, same stream, replay from the cursor + 1.
    Honest,
    /// Same stream id but `Resumed: false`, from the beginning.
    ResumedFalse,
    /// Another stream id (with `Resumed: true`, which must not fool the client).
    OtherStream,
    /// `Resumed: true`, same stream, but replay from this seq (duplicates or a gap).
    ReplayFrom(u64),
    /// 404 ending the session with this reason.
    NotFound(&'static str),
    /// This status, without ending anything.
    Status(u16),
}

/// Settings of the fake.
#[derive(Clone, Debug)]
pub struct FakeConfig {
    pub dialect: Dialect,
    /// `Mcp-Stream-Grace-Ms` on SSE responses.
    pub grace_ms: u64,
    /// `graceMs` in the initialize result's capability, if any.
    pub init_grace_ms: Option<u64>,
    /// `retry:` on priming events.
    pub retry_ms: u64,
}

impl Default for FakeConfig {
    fn default() -> Self {
        Self { dialect: Dialect::Forkless, grace_ms: 1000, init_grace_ms: None, retry_ms: 10 }
    }
}

/// One request the fake received.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub method: Method,
    pub headers: HeaderMap,
    pub body: Option<Value>,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

#[derive(Default)]
struct StreamLog {
    /// (seq, data); seq 0 is the priming event.
    events: Vec<(u64, String)>,
    complete: bool,
}

#[derive(Default)]
struct World {
    session: Option<String>,
    sessions_created: u64,
    ended: Option<String>,
    streams: HashMap<String, StreamLog>,
    next_stream: u64,
    standalone: Option<String>,
    resume_answers: VecDeque<Resume>,
    post_conns: VecDeque<Conn>,
    get_conns: VecDeque<Conn>,
    /// Server-to-client requests awaiting the client's answer: request id → (stream, tool).
    asks: HashMap<String, String>,
    recorded: Vec<Recorded>,
}

pub struct Fake {
    config: FakeConfig,
    world: Mutex<World>,
    changed: Notify,
}

/// A running fake server.
#[derive(Clone)]
pub struct FakeServer {
    pub addr: SocketAddr,
    pub fake: Arc<Fake>,
}

impl FakeServer {
    pub async fn start(config: FakeConfig) -> Self {
        let fake = Arc::new(Fake { config, world: Mutex::new(World::default()), changed: Notify::new() });
        let app = Router::new()
            .route("/mcp", axum::routing::post(post).get(get).delete(delete))
            .with_state(fake.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { addr, fake }
    }

    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// How the next POST answered with SSE is served.
    pub fn next_post_conn(&self, c: Conn) {
        self.fake.world().post_conns.push_back(c);
    }

    /// How the next GET is served.
    pub fn next_get_conn(&self, c: Conn) {
        self.fake.world().get_conns.push_back(c);
    }

    /// How the next resuming GET is answered.
    pub fn next_resume(&self, r: Resume) {
        self.fake.world().resume_answers.push_back(r);
    }

    /// End the session server-side: every later request gets 404 with `reason`.
    pub fn end_session(&self, reason: &str) {
        let mut w = self.fake.world();
        w.ended = Some(reason.to_owned());
        drop(w);
        self.fake.changed.notify_waiters();
    }

    /// Append a notification to the standalone stream.
    pub fn push_standalone(&self, text: &str) {
        let mut w = self.fake.world();
        let Some(s) = w.standalone.clone() else { panic!("no standalone stream yet") };
        let data =
            json!({"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":text}});
        push(&mut w, &s, data.to_string());
        drop(w);
        self.fake.changed.notify_waiters();
    }

    pub fn recorded(&self) -> Vec<Recorded> {
        self.fake.world().recorded.clone()
    }

    /// Wait until a recorded request satisfies `pred` (guarded by the caller).
    pub async fn wait_for_request(&self, pred: impl Fn(&Recorded) -> bool) -> Recorded {
        loop {
            let changed = self.fake.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if let Some(r) = self.fake.world().recorded.iter().find(|r| pred(r)) {
                return r.clone();
            }
            changed.await;
        }
    }

    /// Recorded GETs that carried `Last-Event-ID`.
    pub fn resumes(&self) -> Vec<Recorded> {
        self.recorded()
            .into_iter()
            .filter(|r| r.method == Method::GET && r.header("last-event-id").is_some())
            .collect()
    }

    pub fn sessions_created(&self) -> u64 {
        self.fake.world().sessions_created
    }
}

impl Fake {
    fn world(&self) -> MutexGuard<'_, World> {
        self.world.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn event_id(&self, stream: &str, seq: u64) -> String {
        match self.config.dialect {
            Dialect::Forkless => format!("{stream}.{seq}"),
            Dialect::Plain => format!("ev-{stream}-{seq}"),
        }
    }

    fn parse_event_id(&self, text: &str) -> Option<(String, u64)> {
        let (stream, seq) = match self.config.dialect {
            Dialect::Forkless => text.split_once('.')?,
            Dialect::Plain => text.strip_prefix("ev-")?.rsplit_once('-')?,
        };
        Some((stream.to_owned(), seq.parse().ok()?))
    }
}
