//! What spans every bucket: the store's sessions, the sessions due for a sweep, the sessions a
//! node owns. Each is one command per bucket, all sent at once (one Redis pipelines them on its
//! connection; a cluster routes each to its bucket's primary), so it costs about one round
//! trip per primary whatever the bucket count.
//!
//! It owns these queries, not the keys (`crate::keys`) or what a sweep does with the answer.

use std::time::Duration;

use forkless_core::{Schedule, SessionId, Timestamp};
use forkless_store::Result;

use crate::keys::{BUCKETS, Bucket};
use crate::{Redis, backend, ids};

impl Redis {
    /// The sessions of bucket `b`.
    pub(crate) async fn bucket_sessions(&self, b: Bucket) -> Result<Vec<SessionId>> {
        let members: Vec<Vec<u8>> = redis::cmd("SMEMBERS")
            .arg(self.keys.sessions(b))
            .query_async(&mut self.conn.clone())
            .await
            .map_err(backend)?;
        ids(members)
    }

    /// The session ids the replies to `cmd(b)`, for every bucket `b`, list.
    pub(crate) async fn across_buckets(&self, cmd: impl Fn(Bucket) -> redis::Cmd) -> Result<Vec<SessionId>> {
        self.all_at_once((0..BUCKETS).map(cmd).collect()).await
    }

    /// Send `cmds` at once (each names keys of one slot); the session ids their replies list,
    /// sorted and without repeats.
    async fn all_at_once(&self, cmds: Vec<redis::Cmd>) -> Result<Vec<SessionId>> {
        let replies = cmds.iter().map(|cmd| {
            let mut conn = self.conn.clone();
            async move { cmd.query_async::<Vec<Vec<u8>>>(&mut conn).await }
        });
        let lists = futures::future::try_join_all(replies).await.map_err(backend)?;
        let mut all = ids(lists.into_iter().flatten().collect())?;
        all.sort_by_key(|id| *id.as_bytes());
        all.dedup();
        Ok(all)
    }

    /// Every stored session.
    pub(crate) async fn all_sessions(&self) -> Result<Vec<SessionId>> {
        self.across_buckets(|b| redis::cmd("SMEMBERS").arg(self.keys.sessions(b)).clone()).await
    }

    /// The sessions due at `now` under `schedule`: four range reads per bucket.
    pub(crate) async fn due_sessions(&self, now: Timestamp, schedule: &Schedule) -> Result<Vec<SessionId>> {
        // An anchor `t` is due when `t + ttl <= now`, that is `t <= now - ttl`.
        let now = now.as_millis();
        let before = |ttl: Duration| now.checked_sub(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX));
        let bounds = [
            Some(now),
            before(schedule.stream_ttl),
            before(schedule.session_idle_ttl),
            before(schedule.tombstone_ttl),
        ]
        // `-1` when nothing can be due (the ttl exceeds `now`): no anchor is negative.
        .map(|bound| bound.map_or(-1, |b| i64::try_from(b).unwrap_or(i64::MAX)));
        let mut cmds = Vec::with_capacity(4 * BUCKETS);
        for b in 0..BUCKETS {
            for (key, bound) in self.keys.due(b).iter().zip(bounds) {
                cmds.push(redis::cmd("ZRANGEBYSCORE").arg(key).arg("-inf").arg(bound).clone());
            }
        }
        self.all_at_once(cmds).await
    }

    /// The sessions `node` owns.
    pub(crate) async fn owned_by(&self, node: &str) -> Result<Vec<SessionId>> {
        self.across_buckets(|b| redis::cmd("SMEMBERS").arg(self.keys.owner(b, node)).clone()).await
    }
}
