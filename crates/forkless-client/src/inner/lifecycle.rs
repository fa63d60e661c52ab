//! The session's lifecycle: `initialize` and its exchange, the session headers every request
//! carries, the session's end (404 and re-initialization), and the HTTP calls made on it.

use crate::driver::SessionView;
use crate::error::Error;
use crate::events::{ClientEvent, Progress};
use crate::http::{self};
use crate::jsonrpc::{self};
use crate::resume::{ResumeHeaders, check_grace};
use forkless_core::Revision;
use reqwest::Response;
use reqwest::header::ACCEPT;
use serde_json::{Value, json};
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

use super::{Inner, PendingTx, RESUME_CAPABILITY, SessionState, lock};

impl Inner {
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
        if matches!(error, Error::Closed) {
            tracing::debug!("session closed by the client");
        } else {
            tracing::warn!(%error, "session ended");
        }
        self.emit(ClientEvent::SessionEnded { error });
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
        if let Some(rev) = view.revision.filter(|r| r.sends_version_header()) {
            rb = rb.header(http::PROTOCOL_VERSION, rev.as_str());
        }
        crate::credentials::apply(rb, self.credentials.as_ref())
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
