//! Tail interest in Redis: a set per session (`P:{NN}:s:S:i`) of the nodes that watch it
//! without owning it, which a group commit's `APPLY` consults before it publishes the session's
//! hint (see `forkless_store::shared`'s tail interest for the rule it keeps). Scripts run one at
//! a time, so a declaration falls wholly before or wholly after any write of its session: no
//! lock is needed for a write never to miss a watcher. The set goes with its session
//! (`REMOVE`).
//!
//! It owns these commands, not when a node declares or withdraws.

use std::sync::LazyLock;

use forkless_core::SessionId;
use forkless_store::Result;
use forkless_store::shared::Declared;
use redis::Script;

use crate::{Redis, backend};

static DECLARE: LazyLock<Script> = LazyLock::new(|| Script::new(crate::scripts::DECLARE));

impl Redis {
    /// Declare that `node` tails `session` unless `owner` (its node id) owns it; `None` if the
    /// session is unknown.
    pub(crate) async fn declare_interest(
        &self,
        session: SessionId,
        node: &str,
        owner: Option<&str>,
    ) -> Result<Option<Declared>> {
        let mut invocation = DECLARE.key(self.keys.record(session));
        invocation.key(self.keys.interest(session)).arg(node).arg(owner.unwrap_or(""));
        let found: i64 = invocation.invoke_async(&mut self.conn.clone()).await.map_err(backend)?;
        Ok(match found {
            1 => Some(Declared::Tailing),
            2 => Some(Declared::Owner),
            _ => None,
        })
    }

    /// Withdraw `node`'s interest in `sessions` (a command each: on a cluster they lie in
    /// different slots; the connection sends them together).
    pub(crate) async fn withdraw_interest(&self, node: &str, sessions: &[SessionId]) -> Result<()> {
        let removals = sessions.iter().map(|s| {
            let mut conn = self.conn.clone();
            let cmd = redis::cmd("SREM").arg(self.keys.interest(*s)).arg(node).to_owned();
            async move { cmd.query_async::<i64>(&mut conn).await }
        });
        futures::future::try_join_all(removals).await.map_err(backend)?;
        Ok(())
    }
}
