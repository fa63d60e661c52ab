//! State shared by the endpoint, the writers and the sweeper.
//!
//! This module owns where the node's state is reached from: the live sessions' handler-side
//! state ([`SessionShared`], through [`LiveSessions`]), the node's [`Attachments`] and its
//! [`Inbox`] (see [`crate::node`] for those interfaces). It makes no decision about streams.

use std::sync::Arc;

use forkless_core::{AppendTarget, EventKind};
use forkless_core::{EndReason, SessionId, SessionRecord};
use forkless_store::{Append, Store};

use crate::jsonrpc::{self, RpcError};
use http::HeaderValue;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::handler::Restorable;
use crate::node::{Attachments, Forwarder, Inbox, LiveSessions, Routes};

use crate::clock::{RateLimit, now};
use crate::config::ServerConfig;
use crate::error::Error;
use crate::metrics::Metrics;
use crate::session::{Outbox, SessionShared};

/// What a client refused at capacity is told to wait.
const CAPACITY_RETRY_AFTER: std::time::Duration = std::time::Duration::from_secs(5);

/// State shared by the endpoint, the writers and the sweeper.
pub(crate) struct Common<S> {
    /// The store, with the process's stand-ins for what it lacks.
    pub(crate) store: Arc<forkless_store::Equipped<S>>,
    pub(crate) cfg: ServerConfig,
    pub(crate) metrics: Arc<Metrics>,
    /// Cancelled when graceful shutdown starts: every SSE body ends, every handler is told.
    pub(crate) shutdown: CancellationToken,
    /// Set when this node may no longer serve: every request is refused at once.
    pub(crate) stopped: Arc<crate::stopped::Stopped>,
    /// The tasks of this node (the tasks extension, 2026-07-28).
    pub(crate) tasks: Arc<crate::tasks::TaskTable>,
    /// Where listen notifications are announced: the store.
    pub(crate) listeners: Arc<dyn crate::listeners::Publish>,
    /// Seals and opens `requestState` (2026-07-28).
    pub(crate) request_states: Arc<crate::request_state::RequestStates>,
    /// The sessions live on this node (also its [`Self::inbox`] in one process).
    pub(crate) sessions: Arc<LiveSessions>,
    /// Who serves each attached stream on this node.
    pub(crate) attachments: Arc<dyn Attachments>,
    /// Where client responses and cancellations go.
    pub(crate) inbox: Arc<dyn Inbox>,
    /// Whether the handler's sessions survive the process that created them.
    pub(crate) restorable: Restorable,
    /// The revisions offered: the operator's choice, within what the handler serves.
    pub(crate) served: forkless_core::RevisionSet,
    /// The connections held (for `max_connections` and `/metrics`).
    pub(crate) connections: Arc<crate::listener::Registry>,
    /// Capacity refusals are logged at most this often.
    pub(crate) capacity_log: RateLimit,
    /// Eviction totals last logged (the sweeper logs what changed, at most every ten seconds).
    pub(crate) evictions_logged: std::sync::Mutex<(u64, u64, u64)>,
    pub(crate) eviction_log: RateLimit,
    pub(crate) outbox: Arc<dyn Outbox>,
    /// `Mcp-Stream-Grace-Ms`, the same on every SSE answer.
    pub(crate) grace_ms: HeaderValue,
    /// Where sessions owned by other nodes were last found, and the hop to them.
    pub(crate) routes: Routes,
    pub(crate) forwarder: Forwarder,
}

/// What took a request's handler away, as its answer names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lost {
    /// This node's previous process stopped (a crash, `kill -9`, a restart).
    Restart,
    /// Another node lost its lease and this one took the session over.
    Takeover,
}

impl Lost {
    fn error(self) -> RpcError {
        match self {
            Self::Restart => RpcError::internal("the server restarted while handling this request; it was lost")
                .with_data(serde_json::json!({ "reason": "restarted" })),
            Self::Takeover => RpcError::internal(
                "the node handling this request was lost and another node took its session over; the request was lost",
            )
            .with_data(serde_json::json!({ "reason": "owner_lost" })),
        }
    }
}

impl<S: Store> Common<S> {
    /// Answer requests whose handler died with an earlier process or node (see
    /// [`crate::Server::answer_orphans`]), each with an error naming `lost`; how many were
    /// answered.
    pub(crate) async fn answer_orphans(&self, orphans: &[forkless_store::Orphan], lost: Lost) -> usize {
        // The answer must land even in a session at its byte budget: it is the last event.
        let limits = forkless_core::Limits {
            stream_max_bytes: u64::MAX,
            session_max_bytes: u64::MAX,
            ..self.cfg.core.limits
        };
        let mut answered = 0;
        for orphan in orphans {
            let id = jsonrpc::label_id(orphan.label.as_ref());
            let error = lost.error();
            let payload = jsonrpc::response_payload(&id, &Err(error));
            let append = Append {
                session: orphan.session,
                target: AppendTarget::Stream(orphan.stream),
                payload,
                kind: EventKind::Final,
                now: now(),
                limits: &limits,
            };
            match self.store.append(append).await {
                Ok(event) => {
                    answered += 1;
                    tracing::info!(session = %orphan.session, %event, request = %id, "lost request answered");
                }
                Err(e) => {
                    tracing::info!(session = %orphan.session, stream = %orphan.stream, error = %e, "lost request not answered");
                }
            }
        }
        answered
    }

    /// The in-process state of an active session (created on first use after a restart, with
    /// what the client said at initialize read back from the record); `None` if the session
    /// was not created here and the handler's sessions cannot be restored.
    pub(crate) fn live(&self, record: &SessionRecord) -> Option<Arc<SessionShared>> {
        if let Some(shared) = self.sessions.get(record.id()) {
            return Some(shared);
        }
        if self.restorable == Restorable::No {
            return None;
        }
        Some(self.sessions.get_or_insert(record.id(), || {
            let client = record.session().client();
            let json = |text: &Option<Arc<str>>| {
                text.as_deref().and_then(|t| serde_json::from_str(t).ok()).unwrap_or(Value::Null)
            };
            let shared = Arc::new(SessionShared::new(
                record.id(),
                record.session().revision(),
                json(&client.capabilities),
                json(&client.info),
                Some(self.outbox.clone()),
                self.shutdown.child_token(),
            ));
            *crate::session::lock(&shared.backend) = record.session().backend().cloned();
            // Back after a restart: it counts against its principal's share again (an
            // address-keyed one is not recorded, so it counts against nobody's).
            if let Some(principal) = record.session().principal() {
                let _ = shared.quota_key.set(Arc::from(format!("principal:{principal}")));
            }
            shared
        }))
    }

    /// Room for one more session of `key`'s (see [`crate::quota`]): below its share
    /// ([`Error::QuotaExceeded`], 429, otherwise), below `max_sessions` live here (at it, the
    /// longest-idle session of the principal holding the most is ended `reclaimed` to make
    /// room, when [`crate::quota::AtCapacity::Reclaim`]) and below `max_retained_bytes`
    /// retained in the store; [`Error::AtCapacity`] (503, `Retry-After`) otherwise, counted
    /// and logged (at most once every ten seconds).
    pub(crate) async fn admit_session(&self, key: Option<&str>) -> Result<(), Error> {
        let quotas = &self.cfg.quotas;
        if let Some(key) = key
            && self.sessions.held_by(key) >= quotas.max_sessions_per_principal
        {
            self.metrics.capacity_refused("max_sessions_per_principal");
            return Err(Error::QuotaExceeded {
                quota: "max_sessions_per_principal",
                retry_after: CAPACITY_RETRY_AFTER,
            });
        }
        if let Some(key) = key
            && self.sessions.retained_by(key) >= quotas.max_retained_bytes_per_principal
        {
            self.metrics.capacity_refused("max_retained_bytes_per_principal");
            return Err(Error::QuotaExceeded {
                quota: "max_retained_bytes_per_principal",
                retry_after: CAPACITY_RETRY_AFTER,
            });
        }
        if self.sessions.len() >= self.cfg.max_sessions
            && quotas.at_capacity == crate::quota::AtCapacity::Reclaim
            && let Some(id) = self.sessions.reclaimable(key)
        {
            let reason = EndReason::Reclaimed;
            let _ = forkless_store::transact(&*self.store, id, |r| r.on_end(reason, now())).await;
            self.end_local(id, reason);
            self.metrics.session_ended(reason.as_str());
            tracing::info!(session = %id, "session reclaimed to make room at max_sessions");
        }
        let limit = if self.sessions.len() >= self.cfg.max_sessions {
            "max_sessions"
        } else if self.store.usage().retained_bytes >= self.cfg.max_retained_bytes {
            "max_retained_bytes"
        } else {
            return Ok(());
        };
        self.metrics.capacity_refused(limit);
        if self.capacity_log.due() {
            tracing::warn!(limit, sessions = self.sessions.len(), "initialize refused: server at capacity");
        }
        Err(Error::AtCapacity { limit, retry_after: CAPACITY_RETRY_AFTER })
    }

    /// The Prometheus text of `/metrics`: the counters, what the store (and the handler,
    /// `extra`) reports, and the gauges of what is held now.
    pub(crate) fn render_metrics(&self, extra: Vec<forkless_store::StoreMetric>) -> String {
        let usage = self.store.usage();
        let mut out = self.metrics.render();
        self.metrics.render_evictions(&mut out, &usage);
        let gauges: [(&str, &str, u64); 3] = [
            ("forkless_sessions_live", "Sessions live on this node.", self.sessions.len() as u64),
            ("forkless_connections_open", "Connections held.", self.connections.len() as u64),
            ("forkless_retained_bytes", "Payload bytes of retained events.", usage.retained_bytes),
        ];
        for (name, help, v) in gauges {
            use std::fmt::Write as _;
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {v}");
        }
        for m in self.store.metrics().into_iter().chain(extra) {
            use std::fmt::Write as _;
            let kind = match m.kind {
                forkless_store::MetricKind::Counter => "counter",
                forkless_store::MetricKind::Gauge => "gauge",
            };
            let _ = writeln!(
                out,
                "# HELP {} {}\n# TYPE {} {kind}\n{} {}",
                m.name, m.help, m.name, m.name, m.value
            );
        }
        out
    }

    /// Tear down the in-process state of an ended session: cancel its handlers, fail its
    /// pending requests.
    pub(crate) fn end_local(&self, id: SessionId, reason: EndReason) {
        self.sessions.end(id, reason);
    }
}
