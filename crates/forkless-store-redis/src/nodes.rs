//! Node leases and session owners in Redis: `SET … NX PX` and compare-and-renew for a node's
//! lease (on Redis's clock), an owner set per node and bucket, and claiming a session by
//! compare-and-set on its owner. It owns these commands, not what leases and owners mean (see
//! `forkless_store::shared`).

use std::time::Duration;

use forkless_core::SessionId;
use forkless_store::Result;
use forkless_store::shared::{LeaseOp, OwnerFacts};

use crate::keys::bucket;
use crate::{Redis, backend};

impl Redis {
    /// The sessions whose owner holds no live lease, with that owner: the owner sets, in every
    /// bucket, of every node that ever took a lease and holds none now.
    pub(crate) async fn lapsed_owners(&self) -> Result<Vec<(SessionId, String)>> {
        let mut conn = self.conn.clone();
        let nodes: Vec<String> =
            redis::cmd("SMEMBERS").arg(self.keys.nodes()).query_async(&mut conn).await.map_err(backend)?;
        let mut lost = Vec::new();
        for node in nodes {
            let alive: bool = redis::cmd("EXISTS")
                .arg(self.keys.node(&node))
                .query_async(&mut conn)
                .await
                .map_err(backend)?;
            if !alive {
                lost.extend(self.owned_by(&node).await?.into_iter().map(|id| (id, node.clone())));
            }
        }
        Ok(lost)
    }

    /// Who owns `session`: the record's `o`, then that node's lease and advertised address
    /// (other keys, so other slots on a cluster: a second round trip).
    pub(crate) async fn owner_of(&self, session: SessionId) -> Result<Option<OwnerFacts>> {
        let mut conn = self.conn.clone();
        let owner: Option<String> = redis::cmd("HGET")
            .arg(self.keys.record(session))
            .arg("o")
            .query_async(&mut conn)
            .await
            .map_err(backend)?;
        let Some(node) = owner else { return Ok(None) };
        let (live, advertise): (bool, Option<String>) = redis::pipe()
            .cmd("EXISTS")
            .arg(self.keys.node(&node))
            .cmd("GET")
            .arg(self.keys.advertise(&node))
            .query_async(&mut conn)
            .await
            .map_err(backend)?;
        Ok(Some(OwnerFacts { node, advertise, live }))
    }

    pub(crate) async fn claim_session(&self, session: SessionId, from: &str, to: &str) -> Result<bool> {
        let b = bucket(session);
        let mut invocation = self.claim.key(self.keys.record(session));
        invocation.key(self.keys.owner(b, from)).key(self.keys.owner(b, to));
        invocation.arg(session.as_bytes().as_slice()).arg(from).arg(to);
        let n: i64 = invocation.invoke_async(&mut self.conn.clone()).await.map_err(backend)?;
        Ok(n == 1)
    }

    pub(crate) async fn lease_op(&self, op: LeaseOp<'_>) -> Result<bool> {
        let ms = |ttl: Duration| u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1);
        let mut conn = self.conn.clone();
        match op {
            LeaseOp::Acquire { node, token, ttl, advertise } => {
                let set: Option<String> = redis::cmd("SET")
                    .arg(self.keys.node(node))
                    .arg(token)
                    .arg("NX")
                    .arg("PX")
                    .arg(ms(ttl))
                    .query_async(&mut conn)
                    .await
                    .map_err(backend)?;
                if set.is_some() {
                    // Where lapsed owners are looked for (`lapsed_owners`).
                    let () = redis::cmd("SADD")
                        .arg(self.keys.nodes())
                        .arg(node)
                        .query_async::<i64>(&mut conn)
                        .await
                        .map(drop)
                        .map_err(backend)?;
                    // Written only by the process that holds the lease, so it names that one.
                    let key = self.keys.advertise(node);
                    let cmd = match advertise {
                        Some(url) => redis::cmd("SET").arg(key).arg(url).clone(),
                        None => redis::cmd("DEL").arg(key).clone(),
                    };
                    let () = cmd.query_async(&mut conn).await.map_err(backend)?;
                }
                Ok(set.is_some())
            }
            LeaseOp::Renew { node, token, ttl, in_hand } => {
                let n: i64 = self
                    .lease
                    .key(self.keys.node(node))
                    .arg(token)
                    .arg(ms(ttl))
                    .arg(ms(in_hand))
                    .invoke_async(&mut conn)
                    .await
                    .map_err(backend)?;
                Ok(n == 1)
            }
            LeaseOp::Release { node, token } => {
                let n: i64 = self
                    .lease
                    .key(self.keys.node(node))
                    .arg(token)
                    .invoke_async(&mut conn)
                    .await
                    .map_err(backend)?;
                Ok(n == 1)
            }
        }
    }
}
