//! State shared by the endpoint, the writers and the sweeper, and the wall clock as the core
//! sees it.
//!
//! This module owns the in-process state that cannot live in the store: the live sessions'
//! handler-side state ([`SessionShared`]) and the registry of running writers (the single-process
//! "wait for the displaced writer" rule). It makes no decision about streams.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use forkless_core::{EndReason, Epoch, IdHashBuilder, SessionId, SessionRecord, StreamId, Timestamp};
use forkless_store::Store;
use http::HeaderValue;
use serde_json::Value;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::config::ServerConfig;
use crate::metrics::Metrics;
use crate::session::{Outbox, SessionShared};

/// The wall clock as the core sees it.
pub(crate) fn now() -> Timestamp {
    let ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis());
    Timestamp::from_millis(u64::try_from(ms).unwrap_or(u64::MAX))
}

/// State shared by the endpoint, the writers and the sweeper.
pub(crate) struct Common<S> {
    pub(crate) store: Arc<S>,
    pub(crate) cfg: ServerConfig,
    pub(crate) metrics: Arc<Metrics>,
    /// Cancelled when graceful shutdown starts: every SSE body ends, every handler is told.
    pub(crate) shutdown: CancellationToken,
    pub(crate) sessions: Mutex<HashMap<SessionId, Arc<SessionShared>, IdHashBuilder>>,
    /// The running writer of each stream in this process (its epoch), so that a resume waits
    /// for the displaced writer to stop.
    pub(crate) writers: Mutex<WriterRegistry>,
    pub(crate) outbox: Arc<dyn Outbox>,
    /// `Mcp-Stream-Grace-Ms`, the same on every SSE answer.
    pub(crate) grace_ms: HeaderValue,
    /// Tells the handler a session ended here ([`crate::Handler::session_ended`]).
    pub(crate) on_end: Box<dyn Fn(SessionId, EndReason) + Send + Sync>,
}

/// The epoch of the writer currently running for each stream in this process.
pub(crate) type WriterRegistry = HashMap<(SessionId, StreamId), watch::Sender<Option<Epoch>>, IdHashBuilder>;

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl<S: Store> Common<S> {
    pub(crate) fn lock_writers(&self) -> MutexGuard<'_, WriterRegistry> {
        lock(&self.writers)
    }

    /// The in-process state of an active session (created on first use after a restart, with
    /// what the client said at initialize read back from the record).
    pub(crate) fn live(&self, record: &SessionRecord) -> Arc<SessionShared> {
        let mut sessions = lock(&self.sessions);
        sessions
            .entry(record.id())
            .or_insert_with(|| {
                let client = record.session().client();
                let json = |text: &Option<Arc<str>>| {
                    text.as_deref().and_then(|t| serde_json::from_str(t).ok()).unwrap_or(Value::Null)
                };
                Arc::new(SessionShared::new(
                    record.id(),
                    record.session().revision(),
                    json(&client.capabilities),
                    json(&client.info),
                    Some(self.outbox.clone()),
                    self.shutdown.child_token(),
                ))
            })
            .clone()
    }

    /// Tear down the in-process state of an ended session: cancel its handlers, fail its
    /// pending requests.
    pub(crate) fn end_local(&self, id: SessionId, reason: EndReason) {
        let shared = lock(&self.sessions).remove(&id);
        if let Some(shared) = shared {
            tracing::info!(session = %id, reason = reason.as_str(), "session torn down");
            shared.end(reason);
            (self.on_end)(id, reason);
        }
    }
}

/// Whole milliseconds of `d`, saturating (header values and JSON fields).
pub(crate) fn millis(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
