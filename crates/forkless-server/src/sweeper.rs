//! The sweeper: time-driven transitions (retention, idle ends, per-connection liveness expiry)
//! for the sessions the store says are due, tombstone removal, the node's stall watch, and
//! teardown of live sessions that ended or vanished elsewhere.
//!
//! This module owns when and how sweeps run. What time does to a session is the core's
//! ([`forkless_core::SessionRecord::on_tick`]); which sessions are due is the store's
//! ([`Store::due`]), so a sweep costs what is due, not what exists.

use forkless_core::{EndReason, Schedule, SessionState};
use forkless_store::{Store, transact};
use tokio::time::Instant;

use crate::clock::now;
use crate::common::Common;
use crate::metrics::Metrics;

/// Live sessions are checked against the store (ended or removed elsewhere) every this many
/// sweeps: the only part of a sweep that costs what exists on this node.
const LIVE_CHECK_EVERY: u64 = 16;

impl<S: Store> Common<S> {
    /// One pass of the sweeper (`round` counts passes, for the less frequent checks).
    pub(crate) async fn sweep(&self, round: u64) {
        self.detach_stalled().await;
        let schedule = Schedule::of(&self.cfg.core, self.cfg.tombstone_ttl);
        let now = now();
        self.tasks.sweep(now, round).await;
        let due = match self.store.due(now, &schedule).await {
            Ok(ids) => ids,
            Err(e) => {
                tracing::warn!(error = %e, "sweep: listing due sessions failed");
                return;
            }
        };
        let cfg = self.cfg.core;
        for id in due {
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
                    if record.wake().due(now, &schedule)
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
                            Metrics::add(&self.metrics.evictions, tick.evicted_events);
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
        if round.is_multiple_of(LIVE_CHECK_EVERY) {
            self.check_live().await;
        }
        self.log_evictions();
    }

    /// Log what retention evicted since the last line, at most every ten seconds (PROTOCOL
    /// section 8: evictions are counted in `/metrics` and logged).
    fn log_evictions(&self) {
        let usage = self.store.usage();
        let ttl = self.metrics.evictions.load(std::sync::atomic::Ordering::Relaxed);
        let now = (usage.evicted_by_events, usage.evicted_by_bytes, ttl);
        let mut last = self.evictions_logged.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if now != *last && self.eviction_log.due() {
            tracing::info!(
                stream_max_events = now.0 - last.0,
                stream_max_bytes = now.1 - last.1,
                stream_ttl = now.2 - last.2,
                "events evicted by retention since the last report"
            );
            *last = now;
        }
    }

    /// The node's stall watch: every attachment served here that made no progress for
    /// `grace` is detached through the core (its writer ends on its own).
    async fn detach_stalled(&self) {
        let Some(since) = Instant::now().checked_sub(self.cfg.core.grace) else { return };
        for held in self.attachments.stalled(since) {
            let out =
                transact(&*self.store, held.session, |r| r.on_detach(held.stream, held.epoch, now())).await;
            match out {
                Ok(_) => {
                    Metrics::inc(&self.metrics.liveness_expired);
                    tracing::info!(session = %held.session, stream = %held.stream, "stalled connection detached");
                }
                // Displaced, fenced, ended or detached meanwhile: nothing to undo.
                Err(forkless_store::Error::Core(_) | forkless_store::Error::SessionUnknown) => {}
                Err(e) => {
                    tracing::info!(session = %held.session, error = %e, "detaching a stalled connection failed")
                }
            }
        }
    }

    /// Tear down the live sessions here whose record ended or vanished.
    async fn check_live(&self) {
        for id in self.sessions.ids() {
            match self.store.load(id).await {
                Ok(Some(v)) => {
                    if let Some(reason) = v.value.session().ended() {
                        self.end_local(id, reason);
                    }
                }
                Ok(None) => self.end_local(id, EndReason::Failed),
                Err(e) => tracing::info!(session = %id, error = %e, "sweep: checking a live session failed"),
            }
        }
    }
}
