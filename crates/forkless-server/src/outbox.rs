//! The store-facing outbox: the store operations the answer path and a handler's handles
//! need, for one concrete store (neither is generic; they reach the store through
//! [`Outbox`]). Every event a request's answer or a handle puts on a stream is appended here,
//! so the server-wide budgets, the metrics and the per-principal share see each one.

use forkless_core::EventKind;
use forkless_store::Append;
use std::sync::{Arc, Weak};

use bytes::Bytes;
use forkless_core::{AppendTarget, EndReason, EventId, Grant, SessionId, SessionRecord, StreamId, Timestamp};
use forkless_store::{Spent, Store, transact};

use crate::metrics::Metrics;
use crate::session::SendError;
use crate::session::{AppendError, BoxFuture, Outbox, RequestStream};

use crate::clock::now;
use crate::node::LiveSessions;

/// The store operations handles need, for one concrete store.
pub(crate) struct StoreOutbox<S> {
    pub(crate) store: Arc<S>,
    pub(crate) cfg: forkless_core::Config,
    pub(crate) metrics: Arc<Metrics>,
    /// [`crate::ServerConfig::max_retained_bytes`].
    pub(crate) max_retained_bytes: u64,
    /// [`crate::Quotas::max_retained_bytes_per_principal`].
    pub(crate) max_retained_bytes_per_principal: u64,
    /// Where a session ended through a handle is torn down. Weak: the registry holds the
    /// sessions, which hold this outbox, and a cycle would keep the store (and its final
    /// checkpoint at shutdown) from ever being dropped.
    pub(crate) sessions: Weak<LiveSessions>,
}

impl<S: Store + forkless_store::Spending> Outbox for StoreOutbox<S> {
    fn append(
        &self,
        session: SessionId,
        target: AppendTarget,
        payload: Bytes,
        kind: EventKind,
    ) -> BoxFuture<'_, Result<EventId, AppendError>> {
        Box::pin(async move {
            // The server-wide budget holds back notifications, never a response: a request
            // always gets its answer (its session's own budget bounds that).
            let notification = kind == EventKind::Intermediate;
            if notification && self.store.usage().retained_bytes >= self.max_retained_bytes {
                self.metrics.capacity_refused("max_retained_bytes");
                return Err(AppendError::AtCapacity { limit: "max_retained_bytes" });
            }
            // So does its principal's share: one principal filling the budget would hold back
            // everyone's notifications.
            let sessions = self.sessions.upgrade();
            if notification
                && sessions.as_ref().and_then(|s| s.share_of(session))
                    >= Some(self.max_retained_bytes_per_principal)
            {
                self.metrics.capacity_refused("max_retained_bytes_per_principal");
                return Err(AppendError::AtCapacity { limit: "max_retained_bytes_per_principal" });
            }
            let id = self
                .store
                .append(Append { session, target, payload, kind, now: now(), limits: &self.cfg.limits })
                .await
                .map_err(AppendError::Store)?;
            Metrics::inc(&self.metrics.events_appended);
            if let (Some(sessions), Some(bytes)) = (sessions, self.store.retained_by(session)) {
                sessions.observe_retained(session, bytes);
            }
            Ok(id)
        })
    }

    fn remember_backend(&self, session: SessionId, facts: Arc<str>) -> BoxFuture<'_, Result<(), SendError>> {
        Box::pin(async move {
            transact(&*self.store, session, |r| r.on_backend(facts.clone()))
                .await
                .map(|_| ())
                .map_err(SendError::from_store)
        })
    }

    fn complete(
        &self,
        session: SessionId,
        stream: StreamId,
    ) -> BoxFuture<'_, Result<(), forkless_store::Error>> {
        Box::pin(async move {
            transact(&*self.store, session, |r| r.on_complete(stream, now())).await.map(|_| ())
        })
    }

    fn spend(
        &self,
        key: forkless_store::SpendKey,
        issued: Timestamp,
        until: Timestamp,
        now: Timestamp,
    ) -> BoxFuture<'_, Result<Spent, forkless_store::Error>> {
        Box::pin(forkless_store::Spending::spend(&*self.store, key, issued, until, now))
    }

    fn end(&self, session: SessionId, reason: EndReason) -> BoxFuture<'_, Result<(), SendError>> {
        Box::pin(async move {
            // Not a stand-in for a signal: the contract's own deadline (the client was told
            // `retryBudgetMs` at initialize), after which its streams need not be kept.
            tokio::time::sleep(self.cfg.retry_budget).await;
            let ended = transact(&*self.store, session, |r| r.on_end(reason, now())).await;
            match ended {
                Ok(_) => self.metrics.session_ended(reason.as_str()),
                // Ended already (for another reason, which stays): torn down all the same.
                Err(ref e) if e.ended().is_some() => {}
                Err(e) => return Err(SendError::from_store(e)),
            }
            if let Some(sessions) = self.sessions.upgrade() {
                sessions.end(session, reason);
            }
            Ok(())
        })
    }

    fn open(
        &self,
        session: SessionId,
        stream: &RequestStream,
    ) -> BoxFuture<'_, Result<Option<Grant>, forkless_store::Error>> {
        let (id, label) = (stream.id, stream.label.clone());
        Box::pin(async move {
            let cfg = &self.cfg;
            let open = |r: &mut SessionRecord| r.open_labeled_request_stream(id, label.clone(), now(), cfg);
            match transact(&*self.store, session, open).await {
                Ok((grant, _)) => Ok(Some(grant)),
                // Stream ids are 96 random bits: an existing stream with this id was opened for
                // this very request, by a POST that stopped waiting (its client went away)
                // after the store had applied the opening. The answer still belongs on it, or
                // the stream would stay open, counting against the session's limit, forever.
                Err(forkless_store::Error::Core(forkless_core::Error::StreamExists)) => Ok(None),
                Err(e) => Err(e),
            }
        })
    }
}
