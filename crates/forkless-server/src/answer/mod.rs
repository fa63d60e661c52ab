//! The answer path: running a session's requests and putting each answer where its client
//! reads it. One owner, [`Answerer`], for every revision's requests.
//!
//! A POST's requests, top to bottom:
//! 1. [`crate::post`] checks the POST and its session and hands the calls to [`Answerer::json`]
//!    or [`Answerer::sse`];
//! 2. each call runs ([`run`]: the handler, a panic becoming an internal error) detached from
//!    the connection that asked ([`detach`]): a client going away does not cancel it;
//! 3. its answer goes out as JSON, or, over SSE, in one of two ways: a handler done on its
//!    first poll, or within the linger ([`crate::ServerConfig::answer_linger`]), without
//!    sending anything is stored with one append that opens, fills and releases its stream
//!    ([`Answered::Finished`], sent as a finished body), otherwise the request's stream is
//!    opened for the POST ([`Answered::Stream`], served by [`crate::writer`]) and the answer
//!    is its final event when the handler is done.
//!
//! The store is reached through one [`Outbox`]: one way to open a request stream
//! ([`RequestStream::open_in`]), one append taking the event's kind. Turning an
//! [`Answered`] into an HTTP response is [`crate::respond`]'s.

mod detach;
mod run;

use std::sync::Arc;

use bytes::Bytes;
use forkless_core::{AppendTarget, EventId, EventKind, Grant, OsEntropy, StreamId};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::context::Outlet;
use crate::handler::Handler;
use crate::jsonrpc::{self, RpcError};
use crate::listeners::Publish;
use crate::metrics::{Metrics, Opened};
use crate::request_state::RequestStates;
use crate::session::{AppendError, Outbox, RequestStream, SessionShared};
use crate::tasks::TaskTable;

pub(crate) use detach::{Detached, start_detached};
pub(crate) use run::{Call, Polled};

/// Runs requests and delivers their answers (see the module documentation).
pub(crate) struct Answerer<H> {
    pub(crate) handler: Arc<H>,
    pub(crate) outbox: Arc<dyn Outbox>,
    pub(crate) tasks: Arc<TaskTable>,
    pub(crate) request_states: Arc<RequestStates>,
    pub(crate) listeners: Arc<dyn Publish>,
    pub(crate) metrics: Arc<Metrics>,
    /// Cancelled when the server shuts down (a request cancelled then is not withdrawn: it
    /// is answered with an error).
    pub(crate) shutdown: CancellationToken,
    /// [`crate::ServerConfig::answer_linger`].
    pub(crate) linger: std::time::Duration,
}

/// How a POST's requests were answered over SSE.
#[derive(Debug)]
pub(crate) enum Answered {
    /// Done at once: the request's whole stream is this one final event, stored already.
    Finished { stream: StreamId, event: EventId, payload: Bytes },
    /// The request's stream is open and attached to the POST: its writer serves it.
    Stream(Grant),
}

/// How a request run by [`Answerer::run_on_stream`] ended.
enum Finished {
    /// Its handler was done on its first poll: here is its answer (`None`: it was withdrawn),
    /// not yet on any stream.
    AtOnce(Option<Bytes>),
    /// It ran longer, and its answer is on its stream.
    Delivered,
    /// It ran longer, and its answer was handed to the POST, which had not opened the stream.
    HandedOver,
}

impl<H: Handler> Answerer<H> {
    /// Answer `calls` as one JSON body (an array when the POST was a `batch`). Their own
    /// messages go to the session's standalone stream.
    pub(crate) async fn json(
        self: &Arc<Self>,
        shared: Arc<SessionShared>,
        calls: Vec<Call>,
        batch: bool,
    ) -> Bytes {
        let tasks: Vec<_> = calls
            .into_iter()
            .map(|mut call| {
                let (this, shared) = (self.clone(), shared.clone());
                start_detached(async move {
                    let cancel = shared.begin_request(&call.id);
                    let (out, _) = this.run(shared.clone(), &mut call, cancel, Outlet::Standalone).await;
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
        match (batch, responses.pop()) {
            (true, last) => {
                responses.extend(last);
                jsonrpc::batch_payload(&responses)
            }
            (false, Some(single)) => single,
            // Only if the request's task itself died (its handler's panics are caught).
            (false, None) => {
                jsonrpc::response_payload(&Value::Null, &Err(RpcError::internal("the request failed")))
            }
        }
    }

    /// Answer `calls` over SSE, on one new request stream. `room`: whether the session could
    /// take another request stream when the POST came (refused before any handler runs).
    pub(crate) async fn sse(
        self: &Arc<Self>,
        shared: Arc<SessionShared>,
        room: Result<(), forkless_core::Error>,
        mut calls: Vec<Call>,
    ) -> Result<Answered, forkless_store::Error> {
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
                // Boxed (a rare path) in a statement of its own, so its state is not part of
                // every request's.
                let batch = Box::pin(self.sse_batch(shared, stream, calls));
                return batch.await;
            }
        };
        room.map_err(forkless_store::Error::Core)?;
        let task = start_detached(self.clone().run_on_stream(shared.clone(), single, stream.clone()));
        if let Detached::Done(Finished::AtOnce(Some(payload))) = &task
            && stream.claim_for_answer()
        {
            // The common case: the whole stream is known before its connection is served.
            // One append opens, fills and releases it, and the POST carries it as a finished
            // body: no writer, no wake-up, no detach. A client that loses the body resumes it.
            return self.finished(&shared, &stream, payload.clone()).await;
        }
        // A handler still running after its first poll may hand its answer over while the
        // POST has not opened the stream (the linger): the answer then leaves as a finished
        // body. (Offered only now: a handler done that fast delivers it on the stream itself.)
        let mut handed = match &task {
            Detached::Running(_) if !self.linger.is_zero() => Some(stream.offer_handoff()),
            _ => None,
        };
        if let Some(handed) = &mut handed {
            // Until the answer comes, the handler opens the stream (it sent something: that
            // goes out now), or the linger ends.
            let lingering = async {
                tokio::select! {
                    handed = handed => handed.ok(),
                    () = stream.opened() => None,
                }
            };
            if let Ok(Some(payload)) = tokio::time::timeout(self.linger, lingering).await {
                return self.finished(&shared, &stream, payload).await;
            }
        }
        let opened = match stream.open_in(&*self.outbox, shared.id).await {
            Ok(opened) => opened,
            Err(e) => {
                // The handler's task cannot hand this POST its answer any more; one handed
                // just now goes on the stream (whose opening may have been applied).
                if let Some(mut handed) = handed {
                    handed.close();
                    if let Ok(payload) = handed.try_recv() {
                        tokio::spawn(store_answer(self.outbox.clone(), shared, stream, payload));
                    }
                }
                return Err(e);
            }
        };
        let grant = match opened {
            Some(grant) => grant,
            // Claimed by the handler's task for its answer, just after the linger: it is on
            // its way here.
            None => match handed {
                Some(handed) => match handed.await {
                    Ok(payload) => return self.finished(&shared, &stream, payload).await,
                    Err(_) => return Err(forkless_store::Error::Core(forkless_core::Error::StreamExists)),
                },
                // Open without a grant (only a handler's opening can end so, never this POST's).
                None => return Err(forkless_store::Error::Core(forkless_core::Error::StreamExists)),
            },
        };
        self.metrics.stream_opened(Opened::Request);
        if let Detached::Done(Finished::AtOnce(payload)) = task {
            // Done at once, but on a stream its handler opened to send something first (or
            // withdrawn): the answer goes on the open stream.
            let _ = start_detached(deliver(shared, stream, payload));
        }
        Ok(Answered::Stream(grant))
    }

    /// The whole stream of a request answered with `payload` before its stream was opened:
    /// one append opens, fills and releases it.
    async fn finished(
        &self,
        shared: &SessionShared,
        stream: &RequestStream,
        payload: Bytes,
    ) -> Result<Answered, forkless_store::Error> {
        let target = AppendTarget::Answer(stream.id);
        let event = self
            .outbox
            .append(shared.id, target, payload.clone(), EventKind::Final)
            .await
            .map_err(AppendError::into_store)?;
        self.metrics.stream_opened(Opened::Request);
        Ok(Answered::Finished { stream: stream.id, event, payload })
    }

    /// A batch (2025-03-26) answered over SSE: one stream, opened first, completed by the last
    /// response.
    async fn sse_batch(
        self: &Arc<Self>,
        shared: Arc<SessionShared>,
        stream: Arc<RequestStream>,
        calls: Vec<Call>,
    ) -> Result<Answered, forkless_store::Error> {
        let grant = self.open(&shared, &stream).await?;
        // The last response of the batch completes the stream; the count and the append are
        // one step under this lock, so no response lands after the completing one.
        let remaining = Arc::new(tokio::sync::Mutex::new(calls.len()));
        for mut call in calls {
            let (this, shared, remaining, stream) =
                (self.clone(), shared.clone(), remaining.clone(), stream.clone());
            start_detached(async move {
                let cancel = shared.begin_request(&call.id);
                let outlet = Outlet::Stream(stream.clone());
                let (out, _) = this.run(shared.clone(), &mut call, cancel.clone(), outlet).await;
                // A cancelled request gets no response; its stream still completes.
                let payload =
                    (!this.withdrawn(&shared, &cancel)).then(|| jsonrpc::response_payload(&call.id, &out));
                let mut left = remaining.lock().await;
                *left = left.saturating_sub(1);
                let sent = match (payload, *left == 0) {
                    (payload, true) => shared.finish_stream(stream.id, payload).await,
                    (Some(payload), false) => {
                        let target = AppendTarget::Stream(stream.id);
                        shared.append_payload(target, payload, EventKind::Intermediate).await.map(|_| ())
                    }
                    (None, false) => Ok(()),
                };
                if let Err(e) = sent {
                    tracing::debug!(session = %shared.id, stream = %stream.id, error = %e, "response not delivered");
                }
                // In flight until its answer is on the stream (see `SessionShared::close`).
                shared.finish_request(&call.id);
            });
        }
        Ok(Answered::Stream(grant))
    }

    /// Run one request whose answer goes on `stream`. A handler done on its first poll hands
    /// its answer back (the POST decides how it goes out); one done later hands it to the POST
    /// if the POST offered to take it and nothing opened the stream yet (the POST lingers for
    /// it, or will find it claimed); otherwise the answer is delivered here, on the stream.
    async fn run_on_stream(
        self: Arc<Self>,
        shared: Arc<SessionShared>,
        mut call: Call,
        stream: Arc<RequestStream>,
    ) -> Finished {
        let cancel = shared.begin_request(&call.id);
        let outlet = Outlet::Stream(stream.clone());
        let (out, polled) = self.run(shared.clone(), &mut call, cancel.clone(), outlet).await;
        // A cancelled request gets no response; its stream still completes.
        let payload = (!self.withdrawn(&shared, &cancel)).then(|| jsonrpc::response_payload(&call.id, &out));
        if polled == Polled::AtOnce {
            shared.finish_request(&call.id);
            return Finished::AtOnce(payload);
        }
        if let Some(payload) = &payload
            && let Some(handoff) = stream.take_handoff()
            && stream.claim_for_answer()
        {
            let finished = match handoff.send(payload.clone()) {
                Ok(()) => Finished::HandedOver,
                Err(payload) => {
                    // The POST is gone (its client left during the linger): the answer is
                    // stored as the POST would have, for whoever resumes the stream.
                    store_answer(self.outbox.clone(), shared.clone(), stream, payload).await;
                    Finished::Delivered
                }
            };
            shared.finish_request(&call.id);
            return finished;
        }
        let delivering = Box::pin(deliver(shared.clone(), stream, payload));
        delivering.await;
        // In flight until its answer is on the stream (see `SessionShared::close`).
        shared.finish_request(&call.id);
        Finished::Delivered
    }

    /// Open `stream` for the POST that asked (unless its handler did already): its grant.
    async fn open(
        &self,
        shared: &SessionShared,
        stream: &RequestStream,
    ) -> Result<Grant, forkless_store::Error> {
        let grant = stream
            .open_in(&*self.outbox, shared.id)
            .await?
            // Claimed for an answer (only this POST claims, and then it never opens), or open
            // without a grant (only a handler's opening can end so, never this POST's).
            .ok_or(forkless_store::Error::Core(forkless_core::Error::StreamExists))?;
        self.metrics.stream_opened(Opened::Request);
        Ok(grant)
    }
}

/// Store `payload` as the whole of `stream` when no POST carries it: one append that opens,
/// fills and releases the stream, or, where an opening was applied meanwhile (a POST's that
/// was not confirmed to it), its final event.
async fn store_answer(
    outbox: Arc<dyn Outbox>,
    shared: Arc<SessionShared>,
    stream: Arc<RequestStream>,
    payload: Bytes,
) {
    let target = AppendTarget::Answer(stream.id);
    if outbox.append(shared.id, target, payload.clone(), EventKind::Final).await.is_ok() {
        return;
    }
    if let Err(e) = shared.finish_stream(stream.id, Some(payload)).await {
        tracing::debug!(session = %shared.id, stream = %stream.id, error = %e, "response not stored");
    }
}

/// Put a request's answer on its stream as the final event (or, if it was withdrawn, complete
/// the stream without one), opening the stream if nobody has yet.
async fn deliver(shared: Arc<SessionShared>, stream: Arc<RequestStream>, payload: Option<Bytes>) {
    let sent = match shared.open_stream(&stream).await {
        Err(e) => Err(e),
        Ok(_) => shared.finish_stream(stream.id, payload).await,
    };
    if let Err(e) = sent {
        tracing::debug!(session = %shared.id, stream = %stream.id, error = %e, "response not delivered");
    }
}
