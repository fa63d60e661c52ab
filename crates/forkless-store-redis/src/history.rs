//! Writes, and the history they are vouched under: every write is one call of `APPLY`,
//! refused while Redis runs a boot under which the history of a bucket it writes is not
//! vouched for; then the node vouches for that bucket (at once if nothing can have been lost,
//! else after ending every session of it with `history_lost`) and writes again. See the crate
//! docs, "A lost suffix is never numbered over".
//!
//! It owns that sequence, not the scripts (`crate::scripts`) or the encoding (`crate::apply`).

use forkless_core::{SessionId, Timestamp};
use forkless_store::shared::Database as _;
use forkless_store::{Error, Result};
use redis::Value;

use crate::apply::Apply;
use crate::keys::{BUCKETS, Bucket};
use crate::{AfterRestart, Durability, Redis, backend, durability, parse};

/// An `APPLY` reply: `{1, h}` (applied, `h` hints published), `{0, i}` (session i moved or
/// exists), `{-1, i}` (unknown), `{-3, i}` (session i's bucket is not vouched for under this
/// boot of Redis).
pub(crate) enum Applied {
    All { hints: u64 },
    Moved(SessionId),
    Unknown(SessionId),
    Unvouched,
}

fn wall_clock() -> Timestamp {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    Timestamp::from_millis(u64::try_from(since.as_millis()).unwrap_or(u64::MAX))
}

impl Redis {
    /// Run a write; if Redis restarted since the history of a bucket it writes was vouched
    /// for, vouch for every bucket (a restart is one server's, and it holds many buckets;
    /// ending the sessions of any that cannot be vouched for) and try once more. `build` makes
    /// the write afresh each time.
    pub(crate) async fn call<'k>(&'k self, build: impl Fn() -> Apply<'k>) -> Result<Applied> {
        match self.call_once(build()).await? {
            Applied::Unvouched => {
                self.vouch_all().await?;
                match self.call_once(build()).await? {
                    Applied::Unvouched => {
                        Err(Error::Backend("redis: restarted again while its history was checked".into()))
                    }
                    applied => Ok(applied),
                }
            }
            applied => Ok(applied),
        }
    }

    async fn call_once(&self, apply: Apply<'_>) -> Result<Applied> {
        let (names, args, sessions) = apply.finish();
        // The command is built here rather than through a script invocation, which would copy
        // every argument twice more on its way to the connection.
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(self.apply.get_hash()).arg(names.len()).arg(&names);
        for arg in &args {
            cmd.arg(arg);
        }
        let mut conn = self.conn.clone();
        let reply: redis::RedisResult<(i64, usize)> = match cmd.query_async(&mut conn).await {
            Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) => {
                self.apply.load_async(&mut conn).await.map_err(backend)?;
                cmd.query_async(&mut conn).await
            }
            reply => reply,
        };
        let (code, at) = reply.map_err(backend)?;
        let session = |at: usize| sessions.get(at.wrapping_sub(1)).copied();
        match (code, session(at)) {
            (1, _) => Ok(Applied::All { hints: at as u64 }),
            (0, Some(id)) => Ok(Applied::Moved(id)),
            (-1, Some(id)) => Ok(Applied::Unknown(id)),
            (-3, _) => Ok(Applied::Unvouched),
            _ => Err(Error::Backend(format!("redis: unexpected reply {code} {at} from the write script"))),
        }
    }

    /// Vouch for every bucket, as on connect: every check sent at once (whole scripts, so none
    /// needs loading first), then the slow way for the buckets that cannot be vouched for at
    /// once.
    pub(crate) async fn vouch_all(&self) -> Result<()> {
        let trust = self.trusted().await;
        let now = wall_clock().as_millis();
        let checks = (0..BUCKETS).map(|b| {
            let mut cmd = redis::cmd("EVAL");
            cmd.arg(crate::scripts::VOUCH)
                .arg(3)
                .arg(self.keys.run(b))
                .arg(self.keys.sessions(b))
                .arg(self.keys.spent_since(b))
                .arg(if trust { "trust" } else { "" })
                .arg(now);
            let mut conn = self.conn.clone();
            async move { cmd.query_async::<Vec<Value>>(&mut conn).await }
        });
        let replies = futures::future::try_join_all(checks).await.map_err(backend)?;
        for (b, reply) in replies.iter().enumerate() {
            let code: i64 =
                reply.first().map(redis::from_redis_value_ref).transpose().map_err(parse)?.unwrap_or(-1);
            if code == 2 {
                self.vouch(b).await?;
            }
        }
        Ok(())
    }

    /// Whether a restart of this Redis kept everything it acknowledged.
    async fn trusted(&self) -> bool {
        match self.after_restart {
            AfterRestart::TrustBlindly => true,
            AfterRestart::Verify => durability(self.conn.clone()).await == Durability::Always,
        }
    }

    /// Vouch for bucket `b`'s history under this boot of Redis (on a cluster, the boot of the
    /// primary holding its slot): at once if nothing can have been lost (an empty bucket, or
    /// Redis syncs every write), else after ending every session of it with reason
    /// `history_lost` (writes under this boot only), so a suffix Redis lost is never numbered
    /// over.
    pub(crate) async fn vouch(&self, b: Bucket) -> Result<()> {
        for _ in 0..8 {
            let trust = self.trusted().await;
            let mut invocation = self.vouch.key(self.keys.run(b));
            invocation.key(self.keys.sessions(b)).key(self.keys.spent_since(b));
            invocation.arg(if trust { "trust" } else { "" }).arg(wall_clock().as_millis());
            let reply: Vec<Value> = invocation.invoke_async(&mut self.conn.clone()).await.map_err(backend)?;
            let code: i64 =
                reply.first().map(redis::from_redis_value_ref).transpose().map_err(parse)?.unwrap_or(-1);
            if code != 2 {
                return Ok(());
            }
            let run: String =
                reply.get(1).map(redis::from_redis_value_ref).transpose().map_err(parse)?.unwrap_or_default();
            let sessions = self.bucket_sessions(b).await?;
            tracing::warn!(sessions = sessions.len(), bucket = b, %run, "redis restarted and may have lost delivered events: ending every session of the bucket (history_lost)");
            for id in sessions {
                self.end_lost(id, &run).await?;
            }
            // A task may have lost its last writes: it would read back older than a client saw
            // it. It reads as unknown instead.
            let tasks = self.drop_tasks(b, None).await?;
            if tasks > 0 {
                tracing::warn!(
                    tasks,
                    bucket = b,
                    "redis restarted and may have lost task writes: the bucket's tasks are forgotten"
                );
            }
            let confirmed: i64 = self
                .confirm
                .key(self.keys.run(b))
                .key(self.keys.spent_since(b))
                .arg(&run)
                .arg(wall_clock().as_millis())
                .invoke_async(&mut self.conn.clone())
                .await
                .map_err(backend)?;
            if confirmed == 1 {
                return Ok(());
            }
        }
        Err(Error::Backend("redis: kept restarting while its history was checked".into()))
    }

    /// End one session with reason `history_lost`, writing under the Redis boot `run`.
    async fn end_lost(&self, id: SessionId, run: &str) -> Result<()> {
        for _ in 0..forkless_store::MAX_CAS_ATTEMPTS {
            let Some((version, old)) = self.load(id).await? else { return Ok(()) };
            if old.session().ended().is_some() {
                return Ok(());
            }
            let mut new = old.clone();
            new.on_end(forkless_core::EndReason::HistoryLost, wall_clock())?;
            let mut apply = Apply::new(&self.keys);
            apply.under_boot(run);
            let ops = apply.changes(Some(&old), &new);
            apply.session(Some(version), version.next(), Some(&old), &new, ops);
            match self.call_once(apply).await? {
                Applied::Moved(_) => continue,
                Applied::Unvouched => {
                    return Err(Error::Backend(
                        "redis: restarted again while its history was checked".into(),
                    ));
                }
                Applied::All { .. } | Applied::Unknown(_) => return Ok(()),
            }
        }
        Err(Error::Contended { attempts: forkless_store::MAX_CAS_ATTEMPTS })
    }
}
