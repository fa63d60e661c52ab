//! POST on the session revisions: `initialize`, then requests, notifications and responses on
//! a session, each checked, then run and answered ([`crate::answer`]) and turned into a response
//! ([`crate::respond`]).
//!
//! This module owns the order of a POST's checks and what each kind of message does. The
//! stateless revision's POST is [`crate::stateless`].

use std::sync::Arc;

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use forkless_core::{ClientFacts, EndReason, NewSession, OsEntropy, Revision, SessionId, SessionRecord};
use forkless_store::{Store, transact};
use http::{HeaderMap, StatusCode};
use serde_json::{Value, json};
use tracing::Instrument as _;

use crate::config::AnswerMode;
use crate::context::SessionHandle;
use crate::error::Error;
use crate::handler::Handler;
use crate::jsonrpc::{self, Message};
use crate::metrics::Metrics;
use crate::node::{Delivery, InboxMessage};
use crate::session::SessionShared;

use crate::answer::Call;
use crate::clock::{millis, now};
use crate::headers::SESSION_ID;
use crate::request::{accepts, check_single_valued, header_value, is_json, protocol_version};
use crate::respond::json_response;
use crate::server::App;

impl<S: Store, H: Handler> App<S, H> {
    pub(crate) async fn post(
        &self,
        headers: &HeaderMap,
        peer: Option<crate::quota::PeerAddr>,
        body: Body,
    ) -> Result<Response, Error> {
        check_single_valued(headers)?;
        self.check_origin(headers)?;
        if !is_json(headers) {
            return Err(Error::UnsupportedMediaType);
        }
        if !accepts(headers, "application/json") || !accepts(headers, "text/event-stream") {
            return Err(Error::NotAcceptable("application/json and text/event-stream"));
        }
        let bytes = self.read_request_body(headers, body).await?;
        let body = jsonrpc::parse(&bytes)?;
        let version = match protocol_version(headers) {
            Ok(version) => version,
            Err(e) => return Ok(self.refuse(e, &body)),
        };
        let served = self.common.served;
        if let Some(requested) = version.filter(|r| !served.contains(*r)) {
            return Ok(self.refuse(Error::RevisionNotServed { requested, served }, &body));
        }
        if let Some(revision) = version.filter(|r| r.is_stateless()) {
            // Boxed in statements of their own (here and for initialize below): the state of
            // these paths stays out of the session request's future, moved whole per request.
            let stateless = Box::pin(self.post_stateless(revision, headers, peer, body));
            return stateless.await;
        }
        if let Some(Message::Request { id, method, params }) = body.single()
            && method == "initialize"
        {
            if headers.contains_key(SESSION_ID) {
                return Err(Error::AlreadyInitialized);
            }
            let initializing = Box::pin(self.initialize(headers, peer, id, params.as_ref()));
            return initializing.await;
        }
        if body
            .messages
            .iter()
            .any(|m| matches!(m, Message::Request { method, .. } if method == "initialize"))
        {
            return Err(Error::InvalidMessage("initialize must not be part of a batch".into()));
        }
        let (record, shared) = self.session(headers).await?;
        if let Some(reason) = shared.closing() {
            // Ending (its backend exited): no new request; its streams stay readable.
            return Err(Error::SessionEnded(reason));
        }
        let revision = record.session().revision();
        if body.batch && !revision.accepts_batches() {
            return Err(Error::BatchNotAllowed(revision.as_str()));
        }
        let sid = record.id();
        let has_requests = body.has_requests();
        // A request answered over SSE opens its stream through the core, which checks the
        // session and records the activity itself: a separate `on_request` would be one more
        // load and compare-and-set of the whole record per request.
        // Otherwise the idle clock moves only when it is due (a second's resolution), so a
        // busy session is not rewritten by every request.
        if !(has_requests && self.common.cfg.answer == AnswerMode::Sse)
            && record.activity_due(now(), &self.common.cfg.core)
        {
            transact(&*self.common.store, sid, |r| r.on_request(now()))
                .await
                .map_err(|e| self.store_error(sid, e))?;
        }
        // Whether a request stream could be opened, judged now; the copy of the record goes
        // before any handler runs, so the store's own copy is not shared when it changes.
        let room = record.check_request_stream_room(&self.common.cfg.core.limits);
        drop(record);
        let mut calls = Vec::new();
        for message in body.messages {
            match message {
                Message::Request { id, method, params } => calls.push(Call { id, method, params }),
                Message::Notification { method, params } => self.on_notification(&shared, method, params),
                Message::Response { id, outcome } => {
                    let shown = id.to_string();
                    let message = InboxMessage::Response { id, outcome };
                    if self.common.inbox.deliver(sid, message) == Delivery::Unclaimed {
                        tracing::debug!(session = %sid, id = %shown, "response to no pending request");
                    }
                }
            }
        }
        if !has_requests {
            return Ok(StatusCode::ACCEPTED.into_response());
        }
        match self.common.cfg.answer {
            AnswerMode::Json => Ok(json_response(self.answerer.json(shared, calls, body.batch).await)),
            AnswerMode::Sse => {
                let answered =
                    self.answerer.sse(shared, room, calls).await.map_err(|e| self.store_error(sid, e))?;
                self.respond_sse(sid, revision, answered).await
            }
        }
    }

    /// A refusal of a parsed body, carrying its request's id when it is a single request.
    fn refuse(&self, e: Error, body: &jsonrpc::Body) -> Response {
        let id = match body.single() {
            Some(Message::Request { id, .. }) => Some(id),
            _ => None,
        };
        let (status, _) = e.status_and_code();
        self.common.metrics.error(status.as_str(), e.reason());
        e.into_response_for(id)
    }

    pub(crate) async fn initialize(
        &self,
        headers: &HeaderMap,
        peer: Option<crate::quota::PeerAddr>,
        id: &Value,
        params: Option<&Value>,
    ) -> Result<Response, Error> {
        let params = params.cloned().unwrap_or(Value::Null);
        // The revision asked for if it is served, else the newest served one with sessions.
        let served = self.common.served;
        let Some(revision) = params
            .get("protocolVersion")
            .and_then(Value::as_str)
            .and_then(|v| v.parse::<Revision>().ok())
            .filter(|r| r.has_sessions() && served.contains(*r))
            .or_else(|| served.newest_with_sessions())
        else {
            return Err(Error::RevisionNotServed { requested: Revision::LATEST_WITH_SESSIONS, served });
        };
        let capabilities = params.get("capabilities").cloned().unwrap_or_else(|| json!({}));
        let reset_contract =
            capabilities.pointer("/experimental/forkless~1resume/version").and_then(Value::as_u64) == Some(1);
        let client_info = params.get("clientInfo").cloned().unwrap_or(Value::Null);
        let principal = self.principal(headers);
        let quota_key = crate::quota::key(principal.as_deref(), headers, peer, &self.common.cfg.quotas);
        self.common.admit_session(quota_key.as_deref()).await?;
        // Kept with the session, so a handler still knows its client after a restart.
        let client = ClientFacts {
            capabilities: Some(capabilities.to_string().into()),
            info: (!client_info.is_null()).then(|| client_info.to_string().into()),
        };
        let record = self.create_session(revision, reset_contract, principal, client).await?;
        let sid = record.id();
        Metrics::inc(&self.common.metrics.sessions_created);
        self.common.metrics.stream_opened(crate::metrics::Opened::Standalone);
        let shared = Arc::new(SessionShared::new(
            sid,
            revision,
            capabilities,
            client_info,
            Some(self.common.outbox.clone()),
            self.common.shutdown.child_token(),
        ));
        if let Some(key) = quota_key {
            let _ = shared.quota_key.set(key);
        }
        self.common.sessions.insert(shared.clone());
        tracing::info!(session = %sid, revision = revision.as_str(), reset_contract, "session created");

        let session = SessionHandle { shared: shared.clone() };
        let info = match self.handler.initialize(&params, session).await {
            Ok(info) => info,
            Err(e) => {
                // Refused by the handler: the session ends, and the client gets the error.
                tracing::info!(session = %sid, error = %e, "initialize refused by the handler");
                let _ = transact(&*self.common.store, sid, |r| r.on_end(EndReason::Failed, now())).await;
                self.common.end_local(sid, EndReason::Failed);
                return Ok(axum::Json(jsonrpc::error(id, &e)).into_response());
            }
        };
        let core = &self.common.cfg.core;
        let mut caps = if info.capabilities.is_object() { info.capabilities } else { json!({}) };
        let resume = json!({
            "version": 1,
            "graceMs": millis(core.grace),
            "retryBudgetMs": millis(core.retry_budget),
        });
        match caps.get_mut("experimental").and_then(Value::as_object_mut) {
            Some(experimental) => {
                experimental.insert("forkless/resume".into(), resume);
            }
            None => caps["experimental"] = json!({ "forkless/resume": resume }),
        }
        let mut result = json!({
            "protocolVersion": revision.as_str(),
            "capabilities": caps,
            "serverInfo": { "name": info.name, "version": info.version },
        });
        if let Some(instructions) = info.instructions {
            result["instructions"] = json!(instructions);
        }
        let mut response = axum::Json(jsonrpc::result(id, result)).into_response();
        response.headers_mut().insert(SESSION_ID, header_value(sid.to_string()));
        Ok(response)
    }

    pub(crate) async fn create_session(
        &self,
        revision: Revision,
        reset_contract: bool,
        principal: Option<String>,
        client: ClientFacts,
    ) -> Result<SessionRecord, Error> {
        // A collision of 128 random bits is not going to happen; still, never overwrite.
        for _ in 0..3 {
            let new = NewSession {
                id: SessionId::generate(&mut OsEntropy),
                revision,
                reset_contract,
                principal: principal.clone(),
                client: client.clone(),
            };
            let record = SessionRecord::create(new, now(), &mut OsEntropy)
                .map_err(|e| Error::from(forkless_store::Error::Core(e)))?;
            match self.common.store.create(record.clone()).await {
                Ok(_) => return Ok(record),
                Err(forkless_store::Error::SessionExists) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(Error::Store(forkless_store::Error::SessionExists))
    }

    pub(crate) fn on_notification(&self, shared: &Arc<SessionShared>, method: String, params: Option<Value>) {
        match method.as_str() {
            "notifications/initialized" => {}
            "notifications/cancelled" => {
                let id = params.as_ref().and_then(|p| p.get("requestId")).cloned();
                let delivery = match id.clone() {
                    Some(id) => self.common.inbox.deliver(shared.id, InboxMessage::Cancelled { id }),
                    None => Delivery::Unclaimed,
                };
                tracing::debug!(session = %shared.id, ?id, ?delivery, "cancellation");
            }
            _ => {
                let handler = self.handler.clone();
                let session = SessionHandle { shared: shared.clone() };
                let span = tracing::info_span!("notification", session = %shared.id, method = %method);
                tokio::spawn(
                    async move { handler.handle_notification(&method, params, session).await }
                        .instrument(span),
                );
            }
        }
    }
}
