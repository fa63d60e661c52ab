//! The sweeper: time-driven transitions (liveness expiry, retention, idle ends) for every
//! session whose deadline passed, tombstone removal, and teardown of sessions that vanished.
//!
//! This module owns when and how sweeps run over the store; what time does to a session is
//! the core's [`forkless_core::SessionRecord::on_tick`].

use std::collections::HashSet;

use forkless_core::{EndReason, SessionId, SessionState};
use forkless_store::{Store, transact};

use crate::metrics::Metrics;

use crate::common::{Common, lock, now};

impl<S: Store> Common<S> {
    /// One pass of the sweeper: time-driven transitions for every session whose deadline
    /// passed, tombstone removal, and teardown of sessions that vanished.
    pub(crate) async fn sweep(&self) {
        let ids = match self.store.sessions().await {
            Ok(ids) => ids,
            Err(e) => {
                tracing::warn!(error = %e, "sweep: listing sessions failed");
                return;
            }
        };
        let now = now();
        let cfg = self.cfg.core;
        for &id in &ids {
            let record = match self.store.load(id).await {
                Ok(Some(v)) => v.value,
                Ok(None) => continue,
                Err(e) => {
                    tracing::info!(session = %id, error = %e, "sweep: load failed");
                    continue;
                }
            };
            match record.session().state() {
                SessionState::Ended(ended) => {
                    self.end_local(id, ended.reason);
                    if now.saturating_since(ended.at) >= self.cfg.tombstone_ttl
                        && let Err(e) = self.store.remove(id).await
                    {
                        tracing::info!(session = %id, error = %e, "sweep: removing tombstone failed");
                    }
                }
                SessionState::Active(_) => {
                    if record.next_deadline(&cfg).is_none_or(|d| d > now) {
                        continue;
                    }
                    match transact(&*self.store, id, |r| Ok(r.on_tick(now, &cfg))).await {
                        Ok((tick, _)) => {
                            Metrics::add(&self.metrics.liveness_expired, tick.detached.len() as u64);
                            Metrics::add(&self.metrics.evictions, tick.evicted.len() as u64);
                            if tick.ended {
                                self.metrics.session_ended(EndReason::IdleExpired.as_str());
                                self.end_local(id, EndReason::IdleExpired);
                            }
                        }
                        Err(e) => {
                            if let Some(reason) = e.ended() {
                                self.end_local(id, reason);
                            } else {
                                tracing::info!(session = %id, error = %e, "sweep: tick failed");
                            }
                        }
                    }
                }
            }
        }
        let known: HashSet<SessionId> = ids.into_iter().collect();
        let vanished: Vec<SessionId> =
            lock(&self.sessions).keys().filter(|id| !known.contains(id)).copied().collect();
        for id in vanished {
            self.end_local(id, EndReason::Failed);
        }
    }
}
