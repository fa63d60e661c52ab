//! Tail interest: the sessions this node watches without owning them, declared to the
//! database, so that another node's group commit carries a hint only when some node may be
//! waiting for it. A hint is not free (PostgreSQL's `NOTIFY` takes a database-wide lock at
//! commit and wakes every listener), and on the usual path nobody waits: a session's
//! handler runs on its owner, whose own watchers are woken without one.
//!
//! The rule that keeps a wake-up from being lost: a watch declares interest in its session
//! *after* registering with the hub and *before* reading its stream, and the database orders a
//! declaration after every batch holding the session (PostgreSQL: a shared lock on the
//! session's row). So a batch of another node either is stored before the stream is read (the
//! read sees it) or sees the interest and sends its hint. A node that owns the session
//! declares nothing: only its own batches write the session while it holds its lease, and a
//! lease once lost is never held again by that store. So a group commit hints a session only
//! if another node declared interest in it or another node owns it (for a writer with a
//! lease, also one nobody owns); on one node nothing is hinted at all. Writes other than
//! appends (compare-and-set, removal) always hint.
//!
//! Declarations are cached per session, so a session costs one declaration per node however
//! many times it is watched; [`sweep`] withdraws those of sessions nobody here watches any
//! more, every [`INTEREST_SWEEP`]. A declaration left behind by a process that died costs only
//! hints nobody needs, until its session is removed (its interest goes with it).
//!
//! It owns the declarations of this node, not how a database stores or applies them.

use std::collections::{HashMap, HashSet};
use std::sync::Weak;
use std::time::Duration;

use forkless_core::{IdHashBuilder, SessionId};

use super::{Database, Declared, Hints, Inner, SharedStore};
use crate::{NodeName, Result};

/// How often a node withdraws the interest it declared in sessions it no longer watches.
pub const INTEREST_SWEEP: Duration = Duration::from_secs(2);

/// The declarations of this node, by session.
#[derive(Debug, Default)]
pub(super) struct Interest {
    /// Held across a declaration's or a sweep's round trip: a sweep never withdraws what a
    /// watch is declaring.
    declared: tokio::sync::Mutex<HashMap<SessionId, Declared, IdHashBuilder>>,
}

impl<D: Database> Inner<D> {
    /// Whether this node declares interest: hints on, on a database that filters by it.
    pub(super) fn keeps_interest(&self) -> bool {
        self.hints == Hints::Notify && self.db.filters_hints()
    }

    /// Declare this node's interest in `session` unless it is declared already (see the
    /// module docs); call after registering a watch and before reading its stream.
    pub(super) async fn declare(&self, session: SessionId) -> Result<()> {
        if !self.keeps_interest() {
            return Ok(());
        }
        let mut declared = self.interest.declared.lock().await;
        if declared.contains_key(&session) {
            return Ok(());
        }
        let owner = self.node_id.get().map(NodeName::as_str);
        // An unknown session declares nothing: the stream's read says it is unknown.
        if let Some(found) = self.db.declare(session, &self.node, owner).await? {
            declared.insert(session, found);
        }
        Ok(())
    }

    /// Withdraw the interest declared in sessions nobody here watches any more; how many
    /// declarations were dropped. A failed withdrawal is tried again at the next sweep.
    pub(super) async fn sweep(&self) -> Result<usize> {
        let mut declared = self.interest.declared.lock().await;
        let watched: HashSet<SessionId> = self.hub.watched(None).into_iter().map(|(s, _)| s).collect();
        let gone: Vec<(SessionId, Declared)> =
            declared.iter().filter(|(s, _)| !watched.contains(s)).map(|(s, d)| (*s, *d)).collect();
        let tailing: Vec<SessionId> =
            gone.iter().filter(|(_, d)| *d == Declared::Tailing).map(|(s, _)| *s).collect();
        if !tailing.is_empty() {
            self.db.withdraw(&self.node, &tailing).await?;
        }
        for (s, _) in &gone {
            declared.remove(s);
        }
        Ok(gone.len())
    }
}

impl<D: Database> SharedStore<D> {
    /// Withdraw now the interest this node declared in sessions it no longer watches (the
    /// store does so every [`INTEREST_SWEEP`]); how many declarations it dropped.
    pub async fn sweep_interest(&self) -> Result<usize> {
        self.inner.sweep().await
    }

    /// How many sessions this node declared interest in (not counting those it owns).
    pub async fn tailing(&self) -> usize {
        let declared = self.inner.interest.declared.lock().await;
        declared.values().filter(|d| **d == Declared::Tailing).count()
    }
}

/// Sweep `inner`'s declarations every `period` while the store lives.
pub(super) async fn sweep_every<D: Database>(inner: Weak<Inner<D>>, period: Duration) {
    loop {
        tokio::time::sleep(period).await;
        let Some(inner) = inner.upgrade() else { return };
        if let Err(e) = inner.sweep().await {
            tracing::warn!(error = %e, "withdrawing tail interest failed; trying again later");
        }
    }
}
