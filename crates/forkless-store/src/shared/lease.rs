//! Node leases: a node id held by one live process at a time, on the database's clock, and a
//! node that stops serving before its lease can lapse (seed condition 5, across nodes).
//!
//! [`SharedStore::hold_lease`](super::SharedStore::hold_lease) takes the lease (refused while
//! another process holds it unexpired) and renews it every third of its time to live. The node
//! counts its lease as held only until `ttl - margin` after the *start* of its last successful
//! renewal, measured on its own monotonic clock, so it gives up before the database can let
//! the lease lapse, whatever the renewal's latency. Every operation of the store checks that
//! first: a process that was stopped (SIGSTOP, a long pause) and resumes finds its lease
//! expired and refuses everything with [`Error::LeaseLost`] before it could write or deliver.
//!
//! It owns the lease's life on this node, not what holding one entitles a node to (the
//! ownership of sessions: `owners`, and the server's owner routing).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::{Database, Inner, SharedStore};
use crate::{Advertised, Error, NodeName, Result};

impl<D: Database> SharedStore<D> {
    /// Hold `node`'s lease (refused with [`Error::LeaseLost`] while another live process
    /// holds it), renewed until the returned lease is released or dropped. From then on every
    /// operation of this store is refused once the lease may have lapsed.
    /// `advertise` is the base URL other nodes send this node's sessions' requests to.
    pub async fn hold_lease(
        &self,
        node: &NodeName,
        ttl: Duration,
        advertise: Option<&Advertised>,
    ) -> Result<NodeLease<D>> {
        let token = format!("{:016x}", {
            use std::hash::{BuildHasher, RandomState};
            RandomState::new().hash_one((std::process::id(), std::time::SystemTime::now()))
        });
        let started = Instant::now();
        let op = LeaseOp::Acquire {
            node: node.as_str(),
            token: &token,
            ttl,
            advertise: advertise.map(Advertised::as_str),
        };
        if !self.inner.db.lease(op).await? {
            return Err(Error::LeaseLost(format!("node id {node} is held by another live process")));
        }
        let state = Arc::new(LeaseState::new(started + ttl - margin(ttl)));
        if self.inner.lease.set(Arc::clone(&state)).is_err() {
            return Err(Error::LeaseLost("this store already holds a node lease".into()));
        }
        let _ = self.inner.node_id.set(node.clone());
        let keeper = tokio::spawn(keep(
            Arc::downgrade(&self.inner),
            Arc::clone(&state),
            node.to_string(),
            token.clone(),
            ttl,
        ));
        Ok(NodeLease { inner: Arc::clone(&self.inner), state, node: node.to_string(), token, keeper })
    }
}

/// What a lease operation asks of the database, on its own clock.
#[derive(Clone, Copy, Debug)]
pub enum LeaseOp<'a> {
    /// Take `node` for `token` unless another token holds it unexpired.
    Acquire {
        /// The node id.
        node: &'a str,
        /// This process's token.
        token: &'a str,
        /// How long the lease lasts from now.
        ttl: Duration,
        /// The base URL other nodes reach this one at (`--advertise`), if any.
        advertise: Option<&'a str>,
    },
    /// Extend `node`'s lease if `token` still holds it with at least `in_hand` left: a
    /// renewal that reaches the database later than its node still trusts the lease (the node
    /// counts it lapsed `in_hand` before the database does) changes nothing, so a renewal
    /// held back by the network and released after its node gave up cannot push a dead
    /// node's lease out.
    Renew {
        /// The node id.
        node: &'a str,
        /// This process's token.
        token: &'a str,
        /// How long the lease lasts from now.
        ttl: Duration,
        /// How much of the lease must be left, on the database's clock, for it to run.
        in_hand: Duration,
    },
    /// Give `node` up if `token` holds it.
    Release {
        /// The node id.
        node: &'a str,
        /// This process's token.
        token: &'a str,
    },
}

/// The lease as this process sees it.
#[derive(Debug)]
pub(super) struct LeaseState {
    /// Until when the lease is certainly held (conservatively, on this node's clock).
    until: Mutex<Instant>,
    lost: watch::Sender<Option<String>>,
}

impl LeaseState {
    pub(super) fn new(until: Instant) -> Self {
        Self { until: Mutex::new(until), lost: watch::Sender::new(None) }
    }

    /// Refuse if the lease is lost or may have lapsed.
    pub(super) fn check(&self) -> Result<()> {
        if let Some(why) = self.lost.borrow().clone() {
            return Err(Error::LeaseLost(why));
        }
        let until = *self.until.lock().unwrap_or_else(|p| p.into_inner());
        if Instant::now() >= until {
            self.lose("not renewed in time (the process was paused, or the database did not answer)");
            return Err(Error::LeaseLost(self.lost.borrow().clone().unwrap_or_default()));
        }
        Ok(())
    }

    pub(super) fn extend(&self, until: Instant) {
        let mut held = self.until.lock().unwrap_or_else(|p| p.into_inner());
        *held = (*held).max(until);
    }

    pub(super) fn lose(&self, why: &str) {
        self.lost.send_if_modified(|lost| {
            if lost.is_some() {
                return false;
            }
            tracing::error!(why, "node lease lost: serving nothing more");
            *lost = Some(why.to_owned());
            true
        });
    }
}

/// A held lease. Dropping it stops renewing (the lease then lapses); [`NodeLease::release`]
/// gives it up at once.
#[derive(Debug)]
pub struct NodeLease<D> {
    pub(super) inner: Arc<Inner<D>>,
    pub(super) state: Arc<LeaseState>,
    pub(super) node: String,
    pub(super) token: String,
    pub(super) keeper: tokio::task::JoinHandle<()>,
}

impl<D: Database> NodeLease<D> {
    /// Resolves once the lease is lost, with why (a server stops then): given up, taken, or
    /// not renewed by the time this node stops trusting it, at that very moment (not when
    /// something next checks it: a node cut off from its database knows at once).
    pub async fn lost(&self) -> String {
        let mut rx = self.state.lost.subscribe();
        loop {
            if let Some(why) = rx.borrow_and_update().clone() {
                return why;
            }
            let until = self.held_until();
            tokio::select! {
                changed = rx.changed() => {
                    if changed.is_err() {
                        return "the lease keeper stopped".into();
                    }
                }
                // At the lapse, `check` records the loss (unless a renewal moved it on).
                () = tokio::time::sleep_until(until.into()) => drop(self.state.check()),
            }
        }
    }

    /// Until when this node counts the lease as held, on its monotonic clock: moved on by
    /// each renewal (the signal that one landed).
    pub fn held_until(&self) -> Instant {
        *self.state.until.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the lease is held now.
    pub fn check(&self) -> Result<()> {
        self.state.check()
    }

    /// Stop renewing and give the lease up, so the node id is free at once.
    pub async fn release(self) -> Result<()> {
        self.keeper.abort();
        self.state.lose("released");
        self.inner.db.lease(LeaseOp::Release { node: &self.node, token: &self.token }).await.map(drop)
    }
}

impl<D> Drop for NodeLease<D> {
    fn drop(&mut self) {
        self.keeper.abort();
    }
}

/// Renew every third of `ttl` until the lease is lost or the store is dropped.
pub(super) async fn keep<D: Database>(
    inner: std::sync::Weak<Inner<D>>,
    state: Arc<LeaseState>,
    node: String,
    token: String,
    ttl: Duration,
) {
    loop {
        tokio::time::sleep(ttl / 3).await;
        if state.check().is_err() {
            return;
        }
        let Some(store) = inner.upgrade() else { return };
        let started = Instant::now();
        let renewed = tokio::time::timeout(
            ttl / 3,
            store.db.lease(LeaseOp::Renew { node: &node, token: &token, ttl, in_hand: margin(ttl) }),
        )
        .await;
        match renewed {
            Ok(Ok(true)) => state.extend(started + ttl - margin(ttl)),
            Ok(Ok(false)) => {
                state.lose("the lease lapsed and was taken, or removed");
                return;
            }
            Ok(Err(e)) => tracing::warn!(error = %e, "node lease renewal failed; retrying"),
            Err(_) => tracing::warn!("node lease renewal timed out; retrying"),
        }
    }
}

/// How much of a lease's time to live the node keeps in hand: it counts its lease as lapsed
/// this much before the database would.
pub(super) fn margin(ttl: Duration) -> Duration {
    ttl / 5
}
