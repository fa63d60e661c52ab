//! Requests awaiting a response: registering one, executing it (over JSON or SSE), routing
//! what arrives (responses, progress, server-to-client requests), and cancelling one that is
//! abandoned.

use crate::driver::{self, SessionView, StreamShared};
use crate::error::Error;
use crate::events::{ClientEvent, Progress, StreamOrigin};
use crate::http::{self, BodyKind};
use crate::jsonrpc::{self, Incoming};
use reqwest::{Response, StatusCode};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use tokio::sync::{mpsc, oneshot};

use super::{Inner, PendingGuard, lock};

impl Inner {
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
