//! Answering a session's requests: as one JSON body, or as an SSE stream (a finished body when
//! the handler answered at once, else a writer serving the stream its POST opened).
//!
//! A POST answered over SSE opens its request stream only when it has to: when the handler
//! sends something on it, or is still running after its first poll. A handler that answers at
//! once is stored with one append that opens, fills and releases the stream
//! ([`forkless_core::AppendTarget::Answer`]), and the answer leaves as a finished body. Every
//! SSE response head is built by [`App::sse_headers`].

use forkless_core::EventKind;
use forkless_store::Append;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use forkless_core::{AppendTarget, Grant, OsEntropy, Revision, SessionId, StreamId};
use forkless_store::{Store, transact};
use http::{HeaderMap, HeaderName, HeaderValue, header};
use serde_json::Value;

use crate::context::Outlet;
use crate::error::Error;
use crate::handler::Handler;
use crate::jsonrpc::RpcError;
use crate::jsonrpc::{self};
use crate::session::{RequestStream, SessionShared};
use crate::writer::{self, Preamble, WriterOptions};

use crate::common::now;
use crate::dispatch::{Call, Detached, first_poll, start_detached};
use crate::request::{STREAM_GRACE_MS, STREAM_ID, STREAM_RESUMED};
use crate::server::App;

impl<S: Store, H: Handler> App<S, H> {
    pub(crate) async fn answer_json(
        &self,
        shared: Arc<SessionShared>,
        calls: Vec<Call>,
        batch: bool,
    ) -> Response {
        let tasks: Vec<_> = calls
            .into_iter()
            .map(|mut call| {
                let app = self.clone();
                let shared = shared.clone();
                // Detached: a client disconnecting does not cancel the request (2025 revisions).
                start_detached(async move {
                    let cancel = shared.begin_request(&call.id);
                    let out = app.run(shared.clone(), &mut call, cancel, Outlet::Standalone).await;
                    shared.finish_request(&call.id);
                    jsonrpc::response_payload(&call.id, &out)
                })
            })
            .collect();
        let mut responses = Vec::with_capacity(tasks.len());
        for task in tasks {
            match task.finish().await {
                Ok(v) => responses.push(v),
                Err(e) => tracing::warn!(error = %e, "request task failed"),
            }
        }
        let body = match (batch, responses.pop()) {
            (true, last) => {
                responses.extend(last);
                jsonrpc::batch_payload(&responses)
            }
            (false, Some(single)) => single,
            // Only if the request's task itself died (its handler's panics are caught).
            (false, None) => {
                jsonrpc::response_payload(&Value::Null, &Err(RpcError::internal("the request failed")))
            }
        };
        json_response(body)
    }

    /// `room`: whether the session could take another request stream when the request came.
    pub(crate) async fn answer_sse(
        &self,
        shared: Arc<SessionShared>,
        revision: Revision,
        room: Result<(), forkless_core::Error>,
        mut calls: Vec<Call>,
    ) -> Result<Response, Error> {
        let sid = shared.id;
        // A single request's stream keeps its id, so that a restart can still answer it.
        let label = match calls.as_slice() {
            [single] => Some(jsonrpc::id_label(&single.id)),
            _ => None,
        };
        let stream = RequestStream::new(StreamId::generate(&mut OsEntropy), label);
        let single = match calls.pop() {
            Some(call) if calls.is_empty() => call,
            last => {
                calls.extend(last);
                return self.answer_sse_batch(shared, revision, stream, calls).await;
            }
        };
        // Refused before the handler runs, not after, if the session could not take the stream.
        room.map_err(|e| self.store_error(sid, forkless_store::Error::Core(e)))?;
        // Detached (a client going away does not cancel the request).
        let task = start_detached(self.clone().run_on_stream(shared.clone(), single, stream.clone()));
        if let Detached::Done(Finished::AtOnce(Some(payload))) = &task
            && stream.claim_for_answer()
        {
            // The common case: the whole stream is known before its connection is served. One
            // append opens, fills and releases it, and the POST carries it as a finished body:
            // no writer, no wake-up, no detach. A client that loses the body resumes it.
            let limits = &self.common.cfg.core.limits;
            let event = self
                .common
                .store
                .append(Append {
                    session: sid,
                    target: AppendTarget::Answer(stream.id),
                    payload: payload.clone(),
                    kind: EventKind::Final,
                    now: now(),
                    limits,
                })
                .await
                .map_err(|e| self.store_error(sid, e))?;
            self.common.metrics.stream_opened("request");
            let retry = self.common.cfg.core.retry_interval;
            let body = writer::finished_body(preamble(revision, false), event, payload, retry);
            return Ok(self.sse_headers(Response::new(Body::from(body)), stream.id, false));
        }
        let grant = self.open_stream(sid, &stream).await?;
        if let Detached::Done(Finished::AtOnce(payload)) = task {
            // Done at once, but on a stream its handler opened to send something first (or
            // withdrawn): the answer goes on the open stream.
            let _ = start_detached(deliver(shared, stream, payload));
        }
        self.stream_response(sid, grant, revision).await
    }

    /// A batch (2025-03-26) answered over SSE: one stream, opened first, completed by the last
    /// response.
    pub(crate) async fn answer_sse_batch(
        &self,
        shared: Arc<SessionShared>,
        revision: Revision,
        stream: Arc<RequestStream>,
        calls: Vec<Call>,
    ) -> Result<Response, Error> {
        let sid = shared.id;
        let grant = self.open_stream(sid, &stream).await?;
        // The last response of the batch completes the stream; the count and the append are
        // one step under this lock, so no response lands after the completing one.
        let remaining = Arc::new(tokio::sync::Mutex::new(calls.len()));
        for mut call in calls {
            let (app, shared, remaining, stream) =
                (self.clone(), shared.clone(), remaining.clone(), stream.clone());
            // Detached (a client going away does not cancel the request).
            start_detached(async move {
                let cancel = shared.begin_request(&call.id);
                let outlet = Outlet::Stream(stream.clone());
                let out = app.run(shared.clone(), &mut call, cancel.clone(), outlet).await;
                let withdrawn = app.withdrawn(&shared, &cancel);
                let mut left = remaining.lock().await;
                *left = left.saturating_sub(1);
                let last = *left == 0;
                let sent = if withdrawn {
                    // A cancelled request gets no response; its stream still completes.
                    match (&shared.outbox, last) {
                        (Some(outbox), true) => outbox.complete(sid, stream.id).await,
                        _ => Ok(()),
                    }
                } else {
                    let payload = jsonrpc::response_payload(&call.id, &out);
                    shared.append_payload(AppendTarget::Stream(stream.id), payload, last).await.map(|_| ())
                };
                if let Err(e) = sent {
                    tracing::debug!(session = %sid, stream = %stream.id, error = %e, "response not delivered");
                }
                // In flight until its answer is on the stream (see `SessionShared::close`).
                shared.finish_request(&call.id);
            });
        }
        self.stream_response(sid, grant, revision).await
    }

    /// Run one request whose answer goes on `stream`. A handler done on its first poll hands
    /// its answer back (the POST decides how it goes out); otherwise the answer is delivered
    /// here, on the stream the POST opened meanwhile.
    pub(crate) async fn run_on_stream(
        self,
        shared: Arc<SessionShared>,
        mut call: Call,
        stream: Arc<RequestStream>,
    ) -> Finished {
        let cancel = shared.begin_request(&call.id);
        let outlet = Outlet::Stream(stream.clone());
        let (out, at_once) = first_poll(self.run(shared.clone(), &mut call, cancel.clone(), outlet)).await;
        // A cancelled request gets no response; its stream still completes.
        let payload = (!self.withdrawn(&shared, &cancel)).then(|| jsonrpc::response_payload(&call.id, &out));
        if at_once {
            shared.finish_request(&call.id);
            return Finished::AtOnce(payload);
        }
        deliver(shared.clone(), stream, payload).await;
        // In flight until its answer is on the stream (see `SessionShared::close`).
        shared.finish_request(&call.id);
        Finished::Delivered
    }

    /// Open `stream` (unless its handler did already), for the POST that asked.
    pub(crate) async fn open_stream(&self, sid: SessionId, stream: &RequestStream) -> Result<Grant, Error> {
        let cfg = self.common.cfg.core;
        let grant = stream
            .open(|| async {
                transact(&*self.common.store, sid, |r| {
                    r.open_labeled_request_stream(stream.id, stream.label.clone(), now(), &cfg)
                })
                .await
                .map(|(grant, _)| Some(grant))
            })
            .await
            .map_err(|e| self.store_error(sid, e))?
            // Claimed for an answer (only this POST claims, and then it never opens), or open
            // without a grant (only a handler's opening can end so, never this POST's).
            .ok_or(Error::Store(forkless_store::Error::Core(forkless_core::Error::StreamExists)))?;
        self.common.metrics.stream_opened("request");
        Ok(grant)
    }

    /// The SSE answer serving an open request stream through its writer.
    pub(crate) async fn stream_response(
        &self,
        sid: SessionId,
        grant: Grant,
        revision: Revision,
    ) -> Result<Response, Error> {
        let watch = self.common.store.watch(sid, grant.stream).await.map_err(|e| self.store_error(sid, e))?;
        let opts =
            WriterOptions { preamble: preamble(revision, false), poll_after: self.poll_after(revision) };
        Ok(self.sse_response(sid, grant, watch, opts))
    }

    pub(crate) fn poll_after(&self, revision: Revision) -> Option<Duration> {
        self.common.cfg.poll_after.filter(|_| revision == Revision::V2025_11_25)
    }

    pub(crate) fn sse_response(
        &self,
        session: SessionId,
        grant: Grant,
        watch: forkless_store::StreamWatch,
        opts: WriterOptions,
    ) -> Response {
        let body = writer::body(self.common.clone(), session, grant, watch, opts);
        self.sse_headers(Response::new(body), grant.stream, grant.resumed)
    }

    /// The headers of every SSE answer that serves a stream.
    pub(crate) fn sse_headers(&self, mut response: Response, stream: StreamId, resumed: bool) -> Response {
        // Sized for these and what hyper adds, so the map never grows.
        let mut h = HeaderMap::with_capacity(8);
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        h.insert(HeaderName::from_static("x-accel-buffering"), HeaderValue::from_static("no"));
        let id = HeaderValue::from_bytes(stream.wire().as_bytes())
            .unwrap_or_else(|_| HeaderValue::from_static("invalid"));
        h.insert(STREAM_ID, id);
        h.insert(STREAM_RESUMED, HeaderValue::from_static(if resumed { "true" } else { "false" }));
        h.insert(STREAM_GRACE_MS, self.common.grace_ms.clone());
        *response.headers_mut() = h;
        response
    }
}

pub(crate) fn preamble(revision: Revision, resumed: bool) -> Preamble {
    if revision.sends_priming_event() && !resumed { Preamble::Priming } else { Preamble::Retry }
}

/// A `200` with an already serialized JSON body.
pub(crate) fn json_response(body: Bytes) -> Response {
    ([(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], body).into_response()
}

/// How a request run by [`App::run_on_stream`] ended.
pub(crate) enum Finished {
    /// Its handler was done on its first poll: here is its answer (`None`: it was withdrawn),
    /// not yet on any stream.
    AtOnce(Option<Bytes>),
    /// It ran longer, and its answer is on its stream.
    Delivered,
}

/// Put a request's answer on its stream as the final event (or, if it was withdrawn, complete
/// the stream without one), opening the stream if nobody has yet.
pub(crate) async fn deliver(shared: Arc<SessionShared>, stream: Arc<RequestStream>, payload: Option<Bytes>) {
    let sent = match shared.open_stream(&stream).await {
        Err(e) => Err(e),
        Ok(()) => match (payload, &shared.outbox) {
            (Some(payload), _) => {
                shared.append_payload(AppendTarget::Stream(stream.id), payload, true).await.map(|_| ())
            }
            (None, Some(outbox)) => outbox.complete(shared.id, stream.id).await,
            (None, None) => Ok(()),
        },
    };
    if let Err(e) = sent {
        tracing::debug!(session = %shared.id, stream = %stream.id, error = %e, "response not delivered");
    }
}
