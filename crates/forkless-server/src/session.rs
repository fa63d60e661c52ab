//! The in-process state of one session, as the handles reach it: pending server-to-client
//! requests, cancellation tokens, the session's end, and its request streams as they are
//! opened on first use.
//!
//! This module owns that state and the type-erased store operations handles need
//! ([`Outbox`]). It does not own the handler API ([`crate::handler`], [`crate::context`]) nor
//! any decision about streams: every event a handle emits is appended to the store, and the
//! core decides whether that is allowed.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

mod cancel;
mod errors;
mod id_key;
mod request_stream;

pub(crate) use cancel::RequestCancel;
pub(crate) use errors::AppendError;
pub use errors::SendError;
pub(crate) use id_key::{IdKey, id_key};
pub(crate) use request_stream::RequestStream;

use crate::jsonrpc::RpcError;
use bytes::Bytes;
use forkless_core::{
    AppendTarget, EndReason, EventId, EventKind, Grant, Revision, SessionId, StreamId, Timestamp,
};
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

/// A boxed, sendable future (the type-erased store calls handles make).
pub(crate) type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The store operations the answer path and the handles need, erased over the store type so
/// that neither is generic. Implemented by the server for every `S: Store`.
pub(crate) trait Outbox: Send + Sync + 'static {
    /// Append one serialized message; [`EventKind::Final`] makes it the stream's last.
    fn append(
        &self,
        session: SessionId,
        target: AppendTarget,
        payload: Bytes,
        kind: EventKind,
    ) -> BoxFuture<'_, Result<EventId, AppendError>>;
    /// Complete a request stream without a final event (its request was cancelled).
    fn complete(
        &self,
        session: SessionId,
        stream: StreamId,
    ) -> BoxFuture<'_, Result<(), forkless_store::Error>>;
    /// Use up a `requestState`'s key (once, on every node sharing the store).
    fn spend(
        &self,
        key: forkless_store::SpendKey,
        issued: Timestamp,
        until: Timestamp,
        now: Timestamp,
    ) -> BoxFuture<'_, Result<forkless_store::Spent, forkless_store::Error>>;
    /// End the session with `reason` once its client has had the time the resume contract
    /// gives it (`retry_budget`) to read what is on its streams, and tear it down here
    /// (idempotent: a session that ended already keeps its first reason).
    fn end(&self, session: SessionId, reason: EndReason) -> BoxFuture<'_, Result<(), SendError>>;
    /// Open a request stream labelled with its request's id, attached to the POST that asked
    /// (see [`RequestStream`]); `None` if it exists already: opened for this request by a POST
    /// that stopped waiting after the store applied the opening.
    fn open(
        &self,
        session: SessionId,
        stream: &RequestStream,
    ) -> BoxFuture<'_, Result<Option<Grant>, forkless_store::Error>>;
    /// Keep `facts` with the session: what its backend needs to reach it from any node.
    fn remember_backend(&self, session: SessionId, facts: Arc<str>) -> BoxFuture<'_, Result<(), SendError>>;
}

/// The in-process state of one session: what handles reach and what teardown clears.
pub(crate) struct SessionShared {
    pub(crate) id: SessionId,
    pub(crate) revision: Revision,
    pub(crate) client_capabilities: Value,
    pub(crate) client_info: Value,
    /// `None` for a stateless (2026-07-28) request.
    pub(crate) outbox: Option<Arc<dyn Outbox>>,
    /// A stateless request's principal (the tasks it starts are bound to it); `None` for a
    /// session, whose record holds its principal, and when no principal is configured.
    pub(crate) principal: Option<String>,
    /// Cancelled when the session ends here (or the server shuts down); every request's token
    /// is a child of it.
    pub(crate) cancel: CancellationToken,
    ended: OnceLock<EndReason>,
    /// Set when the session is to end once its requests in flight are answered
    /// ([`Self::close`]): new requests are refused with this reason meanwhile.
    closing: OnceLock<EndReason>,
    /// Told whenever the last request in flight finishes.
    drained: tokio::sync::Notify,
    next_outgoing_id: AtomicU64,
    /// Server-to-client requests awaiting the client's response, by JSON id.
    pending: Mutex<HashMap<IdKey, Pending>>,
    /// Client requests in flight, by JSON id, for `notifications/cancelled`.
    in_flight: Mutex<HashMap<IdKey, RequestCancel>>,
    /// Whose share of the sessions this one counts against (`crate::quota`), if anyone's.
    pub(crate) quota_key: OnceLock<Arc<str>>,
    /// When a request last named this session (milliseconds of the wall clock): the
    /// longest-idle session is the one reclaimed at the server's limit.
    pub(crate) last_used: AtomicU64,
    /// The payload bytes this session retained as last seen (counted in its quota key's
    /// share by [`crate::node::LiveSessions::observe_retained`]).
    pub(crate) retained: AtomicU64,
    /// What the backend needs to reach the session from any node, as kept in its record.
    pub(crate) backend: Mutex<Option<Arc<str>>>,
}

impl fmt::Debug for SessionShared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionShared")
            .field("id", &self.id)
            .field("revision", &self.revision)
            .field("ended", &self.ended.get())
            .finish_non_exhaustive()
    }
}

/// A server-to-client request awaiting the client's response.
struct Pending {
    /// The stream the request was appended to (known once the append returned).
    stream: Option<StreamId>,
    tx: oneshot::Sender<Result<Value, SendError>>,
}

impl SessionShared {
    pub(crate) fn new(
        id: SessionId,
        revision: Revision,
        client_capabilities: Value,
        client_info: Value,
        outbox: Option<Arc<dyn Outbox>>,
        cancel: CancellationToken,
    ) -> Self {
        Self {
            id,
            revision,
            client_capabilities,
            client_info,
            outbox,
            principal: None,
            cancel,
            ended: OnceLock::new(),
            closing: OnceLock::new(),
            drained: tokio::sync::Notify::new(),
            next_outgoing_id: AtomicU64::new(1),
            pending: Mutex::default(),
            in_flight: Mutex::default(),
            quota_key: OnceLock::new(),
            last_used: AtomicU64::new(crate::clock::now_ms()),
            retained: AtomicU64::new(0),
            backend: Mutex::default(),
        }
    }

    /// The same, for a stateless request from `principal`.
    pub(crate) fn asked_by(self, principal: Option<String>) -> Self {
        Self { principal, ..self }
    }

    /// Why the session ended in this process, if it did.
    pub(crate) fn ended(&self) -> Option<EndReason> {
        self.ended.get().copied()
    }

    /// Tear down: record the reason, cancel every request, fail every pending
    /// server-to-client request. Idempotent; the first reason wins.
    pub(crate) fn end(&self, reason: EndReason) {
        let _ = self.ended.set(reason);
        let reason = self.ended().unwrap_or(reason);
        self.cancel.cancel();
        let pending: Vec<_> = lock(&self.pending).drain().collect();
        for (_, p) in pending {
            let _ = p.tx.send(Err(SendError::SessionEnded { reason }));
        }
        lock(&self.in_flight).clear();
        // Nothing is in flight any more: a `close` waiting for that goes on (and finds the
        // session ended, which keeps its first reason).
        self.drained.notify_waiters();
    }

    /// A client request starts: its cancellation (its token made when first asked for),
    /// registered under its id.
    pub(crate) fn begin_request(&self, id: &Value) -> RequestCancel {
        let cancel = RequestCancel::default();
        lock(&self.in_flight).insert(id_key(id), cancel.clone());
        cancel
    }

    /// A client request finished (its answer is out, or it is withdrawn).
    pub(crate) fn finish_request(&self, id: &Value) {
        let mut in_flight = lock(&self.in_flight);
        in_flight.remove(&id_key(id));
        if in_flight.is_empty() {
            self.drained.notify_waiters();
        }
    }

    /// Why the session is ending, if [`Self::close`] started it.
    pub(crate) fn closing(&self) -> Option<EndReason> {
        self.closing.get().copied()
    }

    /// Refuse new requests from now on with `reason` (what [`Self::close`] starts with), for
    /// a caller that must be sure of it before it answers anything (a backend gone).
    pub(crate) fn refuse_new(&self, reason: EndReason) {
        let _ = self.closing.set(reason);
    }

    /// End the session with `reason`: refuse new requests now, wait for those running to
    /// have their answers on their streams (their handlers are told nothing; a backend that
    /// is gone answers them with errors), leave the streams readable for `retry_budget` so
    /// that a client that lost its connection can resume and read those answers, then end it
    /// in the store and here. The first reason wins.
    pub(crate) async fn close(&self, reason: EndReason) -> Result<(), SendError> {
        let _ = self.closing.set(reason);
        let reason = self.closing().unwrap_or(reason);
        loop {
            let drained = self.drained.notified();
            let mut drained = std::pin::pin!(drained);
            drained.as_mut().enable();
            if lock(&self.in_flight).is_empty() {
                break;
            }
            drained.await;
        }
        match &self.outbox {
            Some(outbox) => outbox.end(self.id, reason).await,
            None => {
                self.end(reason);
                Ok(())
            }
        }
    }

    /// `notifications/cancelled` for `id`; false if no such request is in flight.
    pub(crate) fn cancel_request(&self, id: &Value) -> bool {
        match lock(&self.in_flight).get(&id_key(id)) {
            Some(cancel) => {
                cancel.cancel(&self.cancel);
                true
            }
            None => false,
        }
    }

    /// The client answered a server-to-client request; false if nobody waits for `id`.
    pub(crate) fn resolve(&self, id: &Value, outcome: Result<Value, RpcError>) -> bool {
        let Some(p) = lock(&self.pending).remove(&id_key(id)) else { return false };
        let _ = p.tx.send(outcome.map_err(SendError::Rejected));
        true
    }

    /// `stream` was fenced: requests sent on it can never be answered by a client that saw
    /// them, so they fail instead of waiting forever.
    pub(crate) fn fail_pending_on(&self, stream: StreamId) {
        let mut pending = lock(&self.pending);
        let keys: Vec<IdKey> =
            pending.iter().filter(|(_, p)| p.stream == Some(stream)).map(|(k, _)| k.clone()).collect();
        for key in keys {
            if let Some(p) = pending.remove(&key) {
                let _ = p.tx.send(Err(SendError::StreamFenced));
            }
        }
    }

    fn check_open(&self) -> Result<&Arc<dyn Outbox>, SendError> {
        if let Some(reason) = self.ended() {
            return Err(SendError::SessionEnded { reason });
        }
        self.outbox.as_ref().ok_or(SendError::Stateless)
    }

    /// Open `stream` unless that was decided already (see [`RequestStream::open_in`]).
    pub(crate) async fn open_stream(&self, stream: &RequestStream) -> Result<Option<Grant>, SendError> {
        let outbox = self.check_open()?;
        stream.open_in(&**outbox, self.id).await.map_err(|e| self.failed(SendError::from_store(e)))
    }

    /// Append a message, serialized here.
    pub(crate) async fn append(
        &self,
        target: AppendTarget,
        message: &Value,
        kind: EventKind,
    ) -> Result<EventId, SendError> {
        self.append_payload(target, to_payload(message), kind).await
    }

    /// Append an already serialized message.
    pub(crate) async fn append_payload(
        &self,
        target: AppendTarget,
        payload: Bytes,
        kind: EventKind,
    ) -> Result<EventId, SendError> {
        let outbox = self.check_open()?;
        outbox.append(self.id, target, payload, kind).await.map_err(|e| self.failed(e.into()))
    }

    /// Finish a request stream: with `answer` as its final event, or (its request withdrawn)
    /// without one.
    pub(crate) async fn finish_stream(
        &self,
        stream: StreamId,
        answer: Option<Bytes>,
    ) -> Result<(), SendError> {
        let target = AppendTarget::Stream(stream);
        match answer {
            Some(payload) => self.append_payload(target, payload, EventKind::Final).await.map(|_| ()),
            None => {
                let outbox = self.check_open()?;
                outbox.complete(self.id, stream).await.map_err(|e| self.failed(SendError::from_store(e)))
            }
        }
    }

    /// `e`, after ending the session here if it says the session ended.
    fn failed(&self, e: SendError) -> SendError {
        if let SendError::SessionEnded { reason } = &e {
            self.end(*reason);
        }
        e
    }

    /// Send a server-to-client request on `target` and wait for the client's answer (or
    /// `cancel`).
    pub(crate) async fn request(
        &self,
        target: AppendTarget,
        method: &str,
        params: Value,
        cancel: &CancellationToken,
    ) -> Result<Value, SendError> {
        self.check_open()?;
        let id = Value::from(self.next_outgoing_id.fetch_add(1, Ordering::Relaxed));
        let key = id_key(&id);
        let (tx, rx) = oneshot::channel();
        lock(&self.pending).insert(key.clone(), Pending { stream: None, tx });
        // Registered before the append: the client may answer before the append returns.
        let message = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
        match self.append(target, &message, EventKind::Intermediate).await {
            Ok(event) => {
                if let Some(p) = lock(&self.pending).get_mut(&key) {
                    p.stream = Some(event.stream);
                }
            }
            Err(e) => {
                lock(&self.pending).remove(&key);
                return Err(e);
            }
        }
        tokio::select! {
            outcome = rx => outcome.unwrap_or_else(|_| Err(self.ended_error())),
            () = cancel.cancelled() => {
                lock(&self.pending).remove(&key);
                Err(self.ended().map_or(SendError::Cancelled, |reason| SendError::SessionEnded { reason }))
            }
        }
    }

    fn ended_error(&self) -> SendError {
        self.ended().map_or(SendError::Cancelled, |reason| SendError::SessionEnded { reason })
    }
}

/// A poisoned map only means another task panicked mid-insert; the map itself is still sound.
pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A message as an event payload (`serde_json::to_vec` skips the `fmt` machinery that
/// `Value`'s `Display` goes through).
pub(crate) fn to_payload(message: &Value) -> Bytes {
    Bytes::from(serde_json::to_vec(message).unwrap_or_else(|_| message.to_string().into_bytes()))
}

/// `{"jsonrpc":"2.0","method":<method>,"params":<params>}`, serialized in one buffer.
pub(crate) fn notification_payload(method: &str, params: &Value) -> Bytes {
    let mut out = Vec::with_capacity(64 + method.len());
    out.extend_from_slice(br#"{"jsonrpc":"2.0","method":"#);
    // Serializing a str or a Value into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut out, method);
    out.extend_from_slice(br#","params":"#);
    let _ = serde_json::to_writer(&mut out, params);
    out.push(b'}');
    Bytes::from(out)
}
