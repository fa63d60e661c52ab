//! Which node owns a session, and what happens to its sessions when a node is gone.
//!
//! A session created by a store holding a node lease is owned by that node (its handler runs
//! there). When a node's process restarts under the same id, [`SharedStore::restart`] answers
//! the requests its previous process left, in its own sessions only. When a node's lease
//! lapses, another node's [`SharedStore::take_over`] claims its sessions one by one by
//! compare-and-set on the owner (so two nodes never both take one), and either restores them
//! (their requests in flight become orphans to answer with errors carrying their ids) or ends
//! them with reason `owner_lost` (a handler whose state died with its node). Never a silent
//! re-creation under the old id.
//!
//! It owns these procedures, not the leases (`lease`) or the routing of requests to owners
//! (the server's `node::route`; this module is the shared store's [`Ownership`]).

use forkless_core::{EndReason, SessionId, TaskId, Timestamp};

use super::{Database, SharedStore};
use crate::{Advertised, Error, NodeName, Orphan, Owner, Ownership, Result, Store, Takeover, transact};

impl<D: Database> Ownership for SharedStore<D> {
    fn node(&self) -> Option<NodeName> {
        self.inner.node_id.get().cloned()
    }

    fn handover(&self) -> std::time::Duration {
        self.inner.tails.lease()
    }

    async fn owner(&self, session: SessionId) -> Result<Owner> {
        self.inner.fence()?;
        self.owner_of(session).await
    }

    async fn adopt(&self, session: SessionId, what: Takeover, now: Timestamp) -> Result<Option<Vec<Orphan>>> {
        self.adopt_now(session, what, now).await
    }

    async fn lapsed_tasks(&self) -> Result<Vec<(TaskId, NodeName)>> {
        self.inner.fence()?;
        let lapsed = self.inner.db.lapsed_tasks().await?;
        lapsed.into_iter().map(|(id, node)| Ok((id, named(node)?))).collect()
    }
}

/// A node name the database returned: one the store wrote, or the row is corrupt.
fn named(node: String) -> Result<NodeName> {
    NodeName::new(node).map_err(|e| Error::Corrupt(format!("a stored owner: {e}")))
}

/// A stored advertised address, read back: refused as corrupt if no node could have leased it.
fn address(url: Option<String>) -> Result<Option<Advertised>> {
    url.map(|url| Advertised::new(url).map_err(|e| Error::Corrupt(format!("a stored node address: {e}"))))
        .transpose()
}

impl<D: Database> SharedStore<D> {
    /// Start after this node's previous process ended: every attachment of its sessions is
    /// detached and every open request stream of them is an orphan (its handler died with the
    /// process), returned for the server to answer with an error carrying the request's id.
    /// With a node lease, only the sessions this node owns; without one the store is taken to
    /// be this node's alone, and every session is.
    pub async fn restart(&self, now: Timestamp) -> Result<Vec<Orphan>> {
        let ids = match self.inner.node_id.get() {
            Some(node) => self.inner.db.owned(node.as_str()).await?,
            None => self.sessions().await?,
        };
        let mut orphans = Vec::new();
        for id in ids {
            match transact(self, id, |r| Ok(r.on_restart(now))).await {
                Ok((found, _)) => orphans.extend(found),
                Err(Error::SessionUnknown) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(orphans)
    }

    /// Claim every session whose owner's lease lapsed, and restore or end each as `what`
    /// says; the orphans of the restored ones, to answer. Needs this store's own lease.
    pub async fn take_over(&self, now: Timestamp, what: Takeover) -> Result<Vec<Orphan>> {
        let Some(me) = self.inner.node_id.get() else {
            return Err(Error::LeaseLost("taking sessions over needs a node lease".into()));
        };
        self.inner.fence()?;
        let mut orphans = Vec::new();
        for (id, owner) in self.inner.db.ownerless().await? {
            if owner != me.as_str()
                && let Some(found) = self.take(id, &owner, me, what, now).await?
            {
                orphans.extend(found);
            }
        }
        Ok(orphans)
    }

    /// Which node serves `session` (see [`crate::Ownership::owner`]): without a node lease this store is
    /// the database's only node, and owns everything.
    pub(super) async fn owner_of(&self, session: SessionId) -> Result<Owner> {
        let Some(me) = self.inner.node_id.get() else { return Ok(Owner::Here) };
        Ok(match self.inner.db.owner(session).await? {
            None => Owner::Here,
            Some(facts) if facts.node == me.as_str() => Owner::Here,
            Some(facts) if facts.live => {
                Owner::Node { node: named(facts.node)?, advertise: address(facts.advertise)? }
            }
            Some(facts) => Owner::Lapsed { node: named(facts.node)? },
        })
    }

    /// Take `session` over now if its owner's lease lapsed (see [`crate::Ownership::adopt`]).
    pub(super) async fn adopt_now(
        &self,
        session: SessionId,
        what: Takeover,
        now: Timestamp,
    ) -> Result<Option<Vec<Orphan>>> {
        let Some(me) = self.inner.node_id.get() else { return Ok(None) };
        self.inner.fence()?;
        match self.inner.db.owner(session).await? {
            Some(facts) if !facts.live && facts.node != me.as_str() => {
                self.take(session, &facts.node, me, what, now).await
            }
            _ => Ok(None),
        }
    }

    /// Claim `id` from `owner` for `me` by compare-and-set, then restore or end it: its
    /// orphans, or `None` if another node claimed it first.
    async fn take(
        &self,
        id: SessionId,
        owner: &str,
        me: &NodeName,
        what: Takeover,
        now: Timestamp,
    ) -> Result<Option<Vec<Orphan>>> {
        if !self.inner.db.claim(id, owner, me.as_str()).await? {
            return Ok(None);
        }
        tracing::warn!(session = %id, from = %owner, ?what, "took over a session of a lost node");
        self.inner.takeovers.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let outcome = match what {
            Takeover::Restore => transact(self, id, |r| Ok(r.on_restart(now))).await.map(|(o, _)| o),
            Takeover::End => transact(self, id, |r| r.on_end(EndReason::OwnerLost, now).map(|()| Vec::new()))
                .await
                .map(|(o, _)| o),
        };
        match outcome {
            Ok(found) => Ok(Some(found)),
            // Already ended, or removed meanwhile: nothing to answer.
            Err(Error::SessionUnknown | Error::Core(_)) => Ok(Some(Vec::new())),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_owner_read_back_is_checked_as_a_lease_would_have_been() {
        assert_eq!(named("n1".into()).expect("a name").to_string(), "n1");
        assert!(matches!(named("a b".into()), Err(Error::Corrupt(_))));
        assert!(matches!(address(None), Ok(None)));
        let good = address(Some("http://10.0.0.1:8080".into())).expect("an address");
        assert_eq!(good.map(|a| a.to_string()), Some("http://10.0.0.1:8080".to_owned()));
        // Another node would send this session's requests to a path or a scheme it never
        // advertised: refused as corrupt instead.
        for bad in ["http://10.0.0.1:8080/mcp", "https://10.0.0.1:8080", "garbage"] {
            assert!(matches!(address(Some(bad.into())), Err(Error::Corrupt(_))), "{bad}");
        }
    }
}
