//! The session behind a [`crate::Client`]: its lifecycle (initialize, `Mcp-Session-Id`,
//! `MCP-Protocol-Version`, 404 handling and re-initialization), the table of requests awaiting
//! a response, progress routing and the registry of live streams.
//!
//! It does not own the reading or resuming of SSE streams (that is `driver.rs`, around the
//! state machine of `resume.rs`).

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use forkless_core::{EntropySource, Revision};
use reqwest::header::ACCEPT;
use reqwest::{Response, StatusCode, Url};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::driver::{self, Host, SessionView, StreamShared, Streams};
use crate::error::Error;
use crate::events::{ClientEvent, Progress, ServerRequestHandler, StreamOrigin};
use crate::http::{self, BodyKind};
use crate::jsonrpc::{self, Incoming};
use crate::resume::{ResumeHeaders, check_grace};

/// The capability key this client declares in `initialize` (PROTOCOL section 7).
pub const RESUME_CAPABILITY: &str = "forkless/resume";

/// Settings, with their defaults; see [`crate::ClientBuilder`].
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    pub(crate) retry: crate::backoff::RetryPolicy,
    pub(crate) reinit_on_404: bool,
    pub(crate) request_timeout: Option<Duration>,
    pub(crate) idle_timeout: Option<Duration>,
    pub(crate) revision: Revision,
    pub(crate) client_name: String,
    pub(crate) client_version: String,
    pub(crate) capabilities: serde_json::Map<String, Value>,
    pub(crate) declare_resume: bool,
}

#[derive(Debug, Default)]
pub(crate) enum SessionState {
    #[default]
    NotStarted,
    Initializing,
    Active,
    Ended(Error),
}

#[derive(Debug, Default)]
pub(crate) struct Session {
    pub(crate) id: Option<String>,
    pub(crate) revision: Option<Revision>,
    pub(crate) init_result: Option<Value>,
    pub(crate) grace: Option<Duration>,
    pub(crate) state: SessionState,
    pub(crate) generation: u64,
    pub(crate) cancel: CancellationToken,
}

impl Session {
    pub(crate) fn view(&self) -> SessionView {
        SessionView {
            id: self.id.clone(),
            revision: self.revision,
            generation: self.generation,
            cancel: self.cancel.clone(),
        }
    }
}

pub(crate) type PendingTx = oneshot::Sender<Result<Value, Error>>;

pub(crate) struct Inner {
    /// The `Arc` this lives in, for tasks that outlive a borrowed `&Inner`.
    pub(crate) me: Weak<Inner>,
    pub(crate) http: reqwest::Client,
    pub(crate) url: Url,
    pub(crate) settings: Settings,
    pub(crate) handler: Arc<dyn ServerRequestHandler>,
    pub(crate) session: Mutex<Session>,
    pub(crate) init_lock: tokio::sync::Mutex<()>,
    pub(crate) closed: AtomicBool,
    pub(crate) next_id: AtomicU64,
    /// Request id → (session generation, waiter).
    pub(crate) pending: Mutex<HashMap<u64, (u64, PendingTx)>>,
    /// Progress token → callback channel.
    pub(crate) progress: Mutex<HashMap<String, mpsc::UnboundedSender<Progress>>>,
    pub(crate) events_tx: mpsc::UnboundedSender<ClientEvent>,
    pub(crate) events_rx: Mutex<Option<mpsc::UnboundedReceiver<ClientEvent>>>,
    pub(crate) streams: Mutex<Streams>,
    pub(crate) entropy: Mutex<Box<dyn EntropySource + Send>>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").field("url", &self.url.as_str()).finish_non_exhaustive()
    }
}

pub(crate) use crate::driver::lock;

/// Removes a request's waiter and progress route when the request is done or abandoned.
pub(crate) struct PendingGuard<'a> {
    pub(crate) inner: &'a Inner,
    pub(crate) id: u64,
    pub(crate) token: Option<String>,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        lock(&self.inner.pending).remove(&self.id);
        if let Some(t) = &self.token {
            lock(&self.inner.progress).remove(t);
        }
    }
}

impl Inner {
    pub(crate) fn emit(&self, event: ClientEvent) {
        // The receiver may have been dropped by an application that does not want events.
        let _ = self.events_tx.send(event);
    }

    /// The active session, initializing (or re-initializing, if configured) as needed.
    pub(crate) async fn ensure_session(&self) -> Result<SessionView, Error> {
        loop {
            if self.closed.load(Ordering::SeqCst) {
                return Err(Error::Closed);
            }
            {
                let s = lock(&self.session);
                match &s.state {
                    SessionState::Active => return Ok(s.view()),
                    SessionState::Ended(e) if !self.settings.reinit_on_404 => return Err(e.clone()),
                    _ => {}
                }
            }
            let _serial = self.init_lock.lock().await;
            let needs_init = {
                let s = lock(&self.session);
                !matches!(s.state, SessionState::Active)
            };
            if needs_init {
                self.initialize().await?;
            }
        }
    }

    pub(crate) fn initialize_params(&self) -> Value {
        let mut caps = self.settings.capabilities.clone();
        if self.settings.declare_resume {
            let experimental = caps.entry("experimental").or_insert_with(|| json!({}));
            if let Some(obj) = experimental.as_object_mut() {
                obj.insert(RESUME_CAPABILITY.into(), json!({"version": 1}));
            }
        }
        json!({
            "protocolVersion": self.settings.revision.as_str(),
            "capabilities": caps,
            "clientInfo": {"name": self.settings.client_name, "version": self.settings.client_version},
        })
    }

    /// Run `initialize` + `notifications/initialized`. Called with `init_lock` held.
    pub(crate) async fn initialize(&self) -> Result<(), Error> {
        let provisional = {
            let mut s = lock(&self.session);
            let restarted = s.generation > 0;
            s.generation += 1;
            s.id = None;
            s.revision = None;
            s.init_result = None;
            s.grace = None;
            s.cancel = CancellationToken::new();
            s.state = SessionState::Initializing;
            (s.view(), restarted)
        };
        let (mut view, restarted) = provisional;
        let result = self.initialize_exchange(&mut view).await;
        let mut s = lock(&self.session);
        if s.generation != view.generation {
            return Err(Error::Closed);
        }
        match result {
            Ok((result, revision, grace)) => {
                s.id = view.id.clone();
                s.revision = Some(revision);
                s.init_result = Some(result);
                s.grace = grace;
                s.state = SessionState::Active;
                drop(s);
                if restarted {
                    self.emit(ClientEvent::SessionStarted { session_id: view.id });
                }
                Ok(())
            }
            Err(e) => {
                // Not Ended: nothing was established, so a later call may simply try again.
                s.state = SessionState::NotStarted;
                s.cancel.cancel();
                Err(e)
            }
        }
    }

    pub(crate) async fn initialize_exchange(
        &self,
        view: &mut SessionView,
    ) -> Result<(Value, Revision, Option<Duration>), Error> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let body = jsonrpc::request(id, "initialize", Some(self.initialize_params()));
        let (rx, guard) = self.register(id, view.generation, None);
        let resp = self.post(view, &body).await?;
        if resp.status().is_success() {
            view.id = http::header(resp.headers(), http::SESSION_ID);
            if let Some(id) = &view.id
                && (id.is_empty() || !id.bytes().all(|b| (0x21..=0x7e).contains(&b)))
            {
                return Err(Error::Protocol(format!("Mcp-Session-Id {id:?} is not visible ASCII")));
            }
            lock(&self.session).id = view.id.clone();
        }
        let result = self.await_response(view, id, resp, rx, None::<(_, fn(Progress))>).await;
        drop(guard);
        let result = result?;
        let version = result.get("protocolVersion").and_then(Value::as_str).unwrap_or_default();
        let revision: Revision =
            version.parse().map_err(|_| Error::UnsupportedRevision(version.to_owned()))?;
        if !revision.has_sessions() && revision > self.settings.revision {
            return Err(Error::UnsupportedRevision(version.to_owned()));
        }
        view.revision = Some(revision);
        let grace = result
            .pointer("/capabilities/experimental")
            .and_then(|e| e.get(RESUME_CAPABILITY))
            .and_then(|c| c.get("graceMs"))
            .and_then(Value::as_u64)
            .map(Duration::from_millis);
        if let Some(grace) = grace {
            check_grace(grace, self.settings.retry.budget)?;
        }
        self.send_one_way(view, &jsonrpc::notification("notifications/initialized", None)).await?;
        Ok((result, revision, grace))
    }

    pub(crate) fn register(
        &self,
        id: u64,
        generation: u64,
        token: Option<(String, mpsc::UnboundedSender<Progress>)>,
    ) -> (oneshot::Receiver<Result<Value, Error>>, PendingGuard<'_>) {
        let (tx, rx) = oneshot::channel();
        lock(&self.pending).insert(id, (generation, tx));
        let token = token.map(|(t, ptx)| {
            lock(&self.progress).insert(t.clone(), ptx);
            t
        });
        (rx, PendingGuard { inner: self, id, token })
    }

    pub(crate) async fn execute<F: FnMut(Progress)>(
        self: &Arc<Self>,
        method: &str,
        params: Option<Value>,
        mut on_progress: Option<F>,
    ) -> Result<Value, Error> {
        let run = async {
            // One retry, and only when the server provably never saw the request (404 to
            // the POST itself) and we are configured to start a new session.
            for attempt in 0..2 {
                let view = self.ensure_session().await?;
                match self.execute_in(&view, method, params.clone(), on_progress.as_mut()).await {
                    Err((e @ Error::SessionEnded { .. }, true))
                        if attempt == 0 && self.settings.reinit_on_404 =>
                    {
                        tracing::info!(error = %e, "session ended; re-initializing and retrying once");
                    }
                    other => return other.map_err(|(e, _)| e),
                }
            }
            Err(Error::Closed)
        };
        match self.settings.request_timeout {
            None => run.await,
            Some(limit) => match tokio::time::timeout(limit, run).await {
                Ok(r) => r,
                Err(_) => Err(Error::Timeout(limit)),
            },
        }
    }

    /// One attempt; the `bool` says whether the server provably did not process it.
    pub(crate) async fn execute_in<F: FnMut(Progress)>(
        self: &Arc<Self>,
        view: &SessionView,
        method: &str,
        mut params: Option<Value>,
        on_progress: Option<&mut F>,
    ) -> Result<Value, (Error, bool)> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let progress = match on_progress {
            Some(cb) => {
                let token = format!("forkless-progress-{id}");
                let p = params.get_or_insert_with(|| json!({}));
                let Some(obj) = p.as_object_mut() else {
                    return Err((
                        Error::InvalidSetting("request params must be an object for progress"),
                        true,
                    ));
                };
                let meta = obj.entry("_meta").or_insert_with(|| json!({}));
                if let Some(meta) = meta.as_object_mut() {
                    meta.insert("progressToken".into(), token.clone().into());
                }
                let (ptx, prx) = mpsc::unbounded_channel();
                Some(((token, ptx), (prx, cb)))
            }
            None => None,
        };
        let (route, sink) = match progress {
            Some((route, sink)) => (Some(route), Some(sink)),
            None => (None, None),
        };
        let (rx, guard) = self.register(id, view.generation, route);
        let body = jsonrpc::request(id, method, params);
        let timeout_guard = CancelOnDrop { inner: self.clone(), view: view.clone(), id, armed: true };
        let resp = self.post(view, &body).await.map_err(|e| (e, false))?;
        if resp.status() == StatusCode::NOT_FOUND {
            let e = http::status_error(resp).await;
            self.end_session(view, e.clone());
            timeout_guard.disarm();
            return Err((e, true));
        }
        let result = self.await_response(view, id, resp, rx, sink).await;
        timeout_guard.disarm();
        drop(guard);
        result.map_err(|e| (e, false))
    }

    /// Wait for the response to request `id`, whose POST was answered with `resp`.
    pub(crate) async fn await_response<F: FnMut(Progress)>(
        &self,
        view: &SessionView,
        id: u64,
        resp: Response,
        mut rx: oneshot::Receiver<Result<Value, Error>>,
        sink: Option<(mpsc::UnboundedReceiver<Progress>, F)>,
    ) -> Result<Value, Error> {
        let status = resp.status();
        if !status.is_success() {
            let e = http::status_error(resp).await;
            if matches!(e, Error::SessionEnded { .. }) {
                self.end_session(view, e.clone());
            }
            return Err(e);
        }
        if status == StatusCode::ACCEPTED {
            return Err(Error::Protocol("a request was answered 202 Accepted".into()));
        }
        match http::body_kind(resp.headers()) {
            BodyKind::Json => {
                let text = resp.text().await?;
                for msg in jsonrpc::parse(&text)? {
                    self.dispatch(view, msg, StreamOrigin::Request(id));
                }
            }
            BodyKind::Sse => {
                let shared = StreamShared::new(StreamOrigin::Request(id), view.clone());
                driver::start(self.self_arc()?, shared, resp)?;
            }
            BodyKind::Other => {
                return Err(Error::Protocol(format!(
                    "response content type {:?} is neither JSON nor SSE",
                    http::header(resp.headers(), "content-type")
                )));
            }
        }
        let Some((mut prx, mut cb)) = sink else {
            return rx.await.unwrap_or(Err(Error::Closed));
        };
        loop {
            tokio::select! {
                biased;
                Some(p) = prx.recv() => cb(p),
                r = &mut rx => {
                    // Progress that raced the response is still reported, in order.
                    while let Ok(p) = prx.try_recv() {
                        cb(p);
                    }
                    return r.unwrap_or(Err(Error::Closed));
                }
            }
        }
    }

    /// The `Arc` this `Inner` lives in (drivers need an owned handle).
    pub(crate) fn self_arc(&self) -> Result<Arc<Self>, Error> {
        self.me.upgrade().ok_or(Error::Closed)
    }

    /// Route one message from the server.
    pub(crate) fn dispatch(&self, view: &SessionView, msg: Incoming, origin: StreamOrigin) -> bool {
        match msg {
            Incoming::Response { id, outcome } => {
                let Some(n) = id.as_u64() else {
                    tracing::warn!(?id, "response with an id we never used; dropped");
                    return false;
                };
                match lock(&self.pending).remove(&n) {
                    Some((_, tx)) => {
                        let _ = tx.send(outcome);
                    }
                    None => tracing::warn!(
                        id = n,
                        "response for a request nobody awaits (cancelled or timed out)"
                    ),
                }
                origin == StreamOrigin::Request(n)
            }
            Incoming::Notification(n) => {
                if n.method == "notifications/progress"
                    && let Some(params) = &n.params
                    && let Some(route) = params
                        .get("progressToken")
                        .map(token_key)
                        .and_then(|k| lock(&self.progress).get(&k).cloned())
                    && let Some(p) = Progress::from_params(params)
                    && route.send(p).is_ok()
                {
                    return false;
                }
                self.emit(ClientEvent::Notification(n));
                false
            }
            Incoming::Request { id, method, params } => {
                let handler = self.handler.clone();
                let me = self.self_arc();
                let view = view.clone();
                tokio::spawn(async move {
                    let outcome =
                        if method == "ping" { Ok(json!({})) } else { handler.handle(method, params).await };
                    let Ok(me) = me else { return };
                    if let Err(e) = me.send_one_way(&view, &jsonrpc::response(id, outcome)).await {
                        tracing::warn!(error = %e, "could not deliver our answer to a server request");
                    }
                });
                false
            }
        }
    }

    /// The session ended (404, gap, close): fail everything waiting in it, stop its streams.
    pub(crate) fn end_session(&self, view: &SessionView, error: Error) {
        {
            let mut s = lock(&self.session);
            if s.generation != view.generation || matches!(s.state, SessionState::Ended(_)) {
                return;
            }
            s.state = SessionState::Ended(error.clone());
            s.cancel.cancel();
        }
        let failed: Vec<PendingTx> = {
            let mut p = lock(&self.pending);
            let ids: Vec<u64> =
                p.iter().filter(|(_, (g, _))| *g == view.generation).map(|(id, _)| *id).collect();
            ids.into_iter().filter_map(|id| p.remove(&id)).map(|(_, tx)| tx).collect()
        };
        for tx in failed {
            let _ = tx.send(Err(error.clone()));
        }
        tracing::warn!(%error, "session ended");
        self.emit(ClientEvent::SessionEnded { error });
    }

    /// Whether request `id` still awaits its response.
    pub(crate) fn is_pending(&self, id: u64) -> bool {
        lock(&self.pending).contains_key(&id)
    }

    /// Fail one request (its stream could not be continued).
    pub(crate) fn fail_request(&self, id: u64, error: Error) {
        if let Some((_, tx)) = lock(&self.pending).remove(&id) {
            let _ = tx.send(Err(error));
        }
    }

    pub(crate) fn note_grace(&self, view: &SessionView, grace: Duration) {
        let mut s = lock(&self.session);
        if s.generation == view.generation {
            s.grace = Some(grace);
        }
    }

    pub(crate) fn with_session_headers(
        &self,
        mut rb: reqwest::RequestBuilder,
        view: &SessionView,
    ) -> reqwest::RequestBuilder {
        if let Some(id) = &view.id {
            rb = rb.header(http::SESSION_ID, id);
        }
        if let Some(rev) = view.revision.filter(|r| *r >= Revision::V2025_06_18) {
            rb = rb.header(http::PROTOCOL_VERSION, rev.as_str());
        }
        rb
    }

    pub(crate) async fn post(&self, view: &SessionView, body: &Value) -> Result<Response, Error> {
        let rb = self.http.post(self.url.clone()).header(ACCEPT, http::ACCEPT_POST).json(body);
        Ok(self.with_session_headers(rb, view).send().await?)
    }

    pub(crate) async fn get(
        &self,
        view: &SessionView,
        resume: Option<&ResumeHeaders>,
    ) -> Result<Response, Error> {
        let mut rb = self.http.get(self.url.clone()).header(ACCEPT, http::ACCEPT_SSE);
        if let Some(h) = resume {
            rb = rb.header(http::LAST_EVENT_ID, &h.last_event_id);
            if let Some(token) = h.stream_token {
                rb = rb.header(http::STREAM_ID, token.to_string());
            }
        }
        Ok(self.with_session_headers(rb, view).send().await?)
    }

    pub(crate) async fn delete(&self, view: &SessionView) -> Result<(), Error> {
        if view.id.is_none() {
            return Ok(());
        }
        let rb = self.with_session_headers(self.http.delete(self.url.clone()), view);
        let resp = rb.send().await?;
        match resp.status().as_u16() {
            200..=299 | 404 | 405 => Ok(()),
            _ => Err(http::status_error(resp).await),
        }
    }

    /// POST a notification or a response: the server answers 202.
    pub(crate) async fn send_one_way(&self, view: &SessionView, body: &Value) -> Result<(), Error> {
        let resp = self.post(view, body).await?;
        if resp.status().is_success() {
            return Ok(());
        }
        let e = http::status_error(resp).await;
        if matches!(e, Error::SessionEnded { .. }) {
            self.end_session(view, e.clone());
        }
        Err(e)
    }
}

/// Sends `notifications/cancelled` for a request abandoned before its response (timeout or
/// a dropped future), as the specification asks.
pub(crate) struct CancelOnDrop {
    pub(crate) inner: Arc<Inner>,
    pub(crate) view: SessionView,
    pub(crate) id: u64,
    pub(crate) armed: bool,
}

impl CancelOnDrop {
    pub(crate) fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if !self.armed || self.view.cancel.is_cancelled() {
            return;
        }
        let Ok(rt) = tokio::runtime::Handle::try_current() else { return };
        let (inner, view, id) = (self.inner.clone(), self.view.clone(), self.id);
        driver::stop_request_stream(&*inner, id);
        rt.spawn(async move {
            let params = json!({"requestId": id, "reason": "client abandoned the request"});
            let _ = inner
                .send_one_way(&view, &jsonrpc::notification("notifications/cancelled", Some(params)))
                .await;
        });
    }
}

fn token_key(token: &Value) -> String {
    match token {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

// ===== the driver's host =====

impl Host for Inner {
    fn streams(&self) -> &Mutex<Streams> {
        &self.streams
    }
    fn retry(&self) -> crate::backoff::RetryPolicy {
        self.settings.retry
    }
    fn idle_timeout(&self) -> Option<Duration> {
        self.settings.idle_timeout
    }
    fn jitter(&self) -> &Mutex<Box<dyn EntropySource + Send>> {
        &self.entropy
    }
    fn emit(&self, event: ClientEvent) {
        Inner::emit(self, event);
    }
    fn dispatch(&self, view: &SessionView, msg: Incoming, origin: StreamOrigin) -> bool {
        Inner::dispatch(self, view, msg, origin)
    }
    fn end_session(&self, view: &SessionView, error: Error) {
        Inner::end_session(self, view, error);
    }
    fn is_pending(&self, id: u64) -> bool {
        Inner::is_pending(self, id)
    }
    fn fail_request(&self, id: u64, error: Error) {
        Inner::fail_request(self, id, error);
    }
    fn note_grace(&self, view: &SessionView, grace: Duration) {
        Inner::note_grace(self, view, grace);
    }
    fn get(
        &self,
        view: &SessionView,
        resume: Option<&ResumeHeaders>,
    ) -> impl Future<Output = Result<Response, Error>> + Send {
        Inner::get(self, view, resume)
    }
    fn delete(&self, view: &SessionView) -> impl Future<Output = Result<(), Error>> + Send {
        Inner::delete(self, view)
    }
}
