//! Tasks in Redis (keys in [`crate::keys`]): a task's record in a hash with its version, and
//! per bucket an index of the open tasks by node and one of every task by expiry, each write
//! one script ([`crate::scripts::PUT_TASK`]) that checks the version and moves the indexes
//! with the record, atomically, on a cluster as on one Redis (a task's keys share its
//! bucket's slot).
//!
//! Reads and writes are refused while Redis runs a boot under which the bucket is not vouched
//! for (then every bucket is vouched for and the call tried once more): after a restart that
//! may have lost writes, a bucket's tasks are deleted before it is vouched for (see
//! `crate::history`), so a task never reads back older than a client saw it; it reads as
//! unknown instead.
//!
//! It owns these calls, not the encoding (`forkless_store::codec`) nor what a task is.

use std::sync::LazyLock;

use forkless_core::{TaskId, Timestamp};
use forkless_store::shared::TaskRow;
use forkless_store::{Error, Result, Version};
use redis::{Script, Value};

use crate::keys::{BUCKETS, Bucket, hex, key_bucket};
use crate::{Redis, backend, parse, scripts};

static LOAD_TASK: LazyLock<Script> = LazyLock::new(|| Script::new(scripts::LOAD_TASK));
static PUT_TASK: LazyLock<Script> = LazyLock::new(|| Script::new(scripts::PUT_TASK));
static DROP_TASK: LazyLock<Script> = LazyLock::new(|| Script::new(scripts::DROP_TASK));

fn restarted() -> Error {
    Error::Backend("redis: restarted again while its history was checked".into())
}

fn task_id(text: &str) -> Result<TaskId> {
    let bytes = forkless_store::shared::unhex::<16>(text)
        .ok_or_else(|| Error::Corrupt(format!("a task id `{text}`")))?;
    Ok(TaskId::from_bytes(bytes))
}

impl Redis {
    pub(crate) async fn load_task(&self, id: TaskId) -> Result<Option<(Version, Vec<u8>)>> {
        let b = key_bucket(id.as_bytes());
        for _ in 0..2 {
            let reply: Vec<Value> = LOAD_TASK
                .key(self.keys.run(b))
                .key(self.keys.task(id.as_bytes()))
                .invoke_async(&mut self.conn.clone())
                .await
                .map_err(backend)?;
            let code: i64 =
                reply.first().map(redis::from_redis_value_ref).transpose().map_err(parse)?.unwrap_or(-1);
            match code {
                1 => {
                    let v: u64 = reply
                        .get(1)
                        .map(redis::from_redis_value_ref)
                        .transpose()
                        .map_err(parse)?
                        .unwrap_or(0);
                    let r: Vec<u8> = reply
                        .get(2)
                        .map(redis::from_redis_value_ref)
                        .transpose()
                        .map_err(parse)?
                        .unwrap_or_default();
                    return Ok(Some((Version::new(v), r)));
                }
                0 => return Ok(None),
                -3 => self.vouch_all().await?,
                other => {
                    return Err(Error::Backend(format!("redis: unexpected reply {other} reading a task")));
                }
            }
        }
        Err(restarted())
    }

    pub(crate) async fn put_task(&self, row: TaskRow<'_>, expected: Option<Version>) -> Result<bool> {
        let id = row.id.as_bytes();
        let b = key_bucket(id);
        for _ in 0..2 {
            let code: i64 = PUT_TASK
                .key(self.keys.run(b))
                .key(self.keys.task(id))
                .key(self.keys.open_tasks(b))
                .key(self.keys.task_expiry(b))
                .arg(expected.map(|v| v.get().to_string()).unwrap_or_default())
                .arg(row.record)
                .arg(row.node.unwrap_or(""))
                .arg(if row.open { "1" } else { "0" })
                .arg(row.expires.as_millis())
                .arg(hex(id))
                .invoke_async(&mut self.conn.clone())
                .await
                .map_err(backend)?;
            match code {
                1 => return Ok(true),
                0 => return Ok(false),
                -3 => self.vouch_all().await?,
                other => {
                    return Err(Error::Backend(format!("redis: unexpected reply {other} writing a task")));
                }
            }
        }
        Err(restarted())
    }

    /// Every open task of every bucket, with its node (`""`: none).
    async fn all_open_tasks(&self) -> Result<Vec<(TaskId, String)>> {
        let reads = (0..BUCKETS).map(|b| {
            let mut cmd = redis::cmd("HGETALL");
            cmd.arg(self.keys.open_tasks(b));
            let mut conn = self.conn.clone();
            async move { cmd.query_async::<Vec<(String, String)>>(&mut conn).await }
        });
        let buckets = futures::future::try_join_all(reads).await.map_err(backend)?;
        buckets.into_iter().flatten().map(|(id, node)| Ok((task_id(&id)?, node))).collect()
    }

    pub(crate) async fn open_tasks_of(&self, node: Option<&str>) -> Result<Vec<TaskId>> {
        let node = node.unwrap_or("");
        Ok(self.all_open_tasks().await?.into_iter().filter(|(_, n)| n == node).map(|(id, _)| id).collect())
    }

    /// Open tasks whose node holds no live lease.
    pub(crate) async fn lapsed_tasks_now(&self) -> Result<Vec<(TaskId, String)>> {
        let open = self.all_open_tasks().await?;
        let mut nodes: Vec<&str> = open.iter().map(|(_, n)| n.as_str()).filter(|n| !n.is_empty()).collect();
        nodes.sort_unstable();
        nodes.dedup();
        let mut lapsed = Vec::new();
        let mut conn = self.conn.clone();
        for node in nodes {
            let alive: bool = redis::cmd("EXISTS")
                .arg(self.keys.node(node))
                .query_async(&mut conn)
                .await
                .map_err(backend)?;
            if !alive {
                lapsed.push(node.to_owned());
            }
        }
        Ok(open.into_iter().filter(|(_, n)| lapsed.iter().any(|l| l == n)).collect())
    }

    pub(crate) async fn expire_tasks_now(&self, now: Timestamp) -> Result<u64> {
        let mut removed = 0;
        for b in 0..BUCKETS {
            removed += self.drop_tasks(b, Some(now)).await?;
        }
        Ok(removed)
    }

    /// Delete bucket `b`'s tasks that expired before `before`, or every one of them (`None`).
    pub(crate) async fn drop_tasks(&self, b: Bucket, before: Option<Timestamp>) -> Result<u64> {
        let mut conn = self.conn.clone();
        let max = before.map_or_else(|| "+inf".to_owned(), |t| format!("({}", t.as_millis()));
        let due: Vec<String> = redis::cmd("ZRANGEBYSCORE")
            .arg(self.keys.task_expiry(b))
            .arg("-inf")
            .arg(max)
            .query_async(&mut conn)
            .await
            .map_err(backend)?;
        let until = before.map_or(u64::MAX, |t| t.as_millis());
        let mut removed = 0;
        for text in due {
            let id = task_id(&text)?;
            let n: i64 = DROP_TASK
                .key(self.keys.task(id.as_bytes()))
                .key(self.keys.open_tasks(b))
                .key(self.keys.task_expiry(b))
                .arg(&text)
                .arg(until)
                .invoke_async(&mut conn)
                .await
                .map_err(backend)?;
            removed += u64::try_from(n).unwrap_or(0);
        }
        Ok(removed)
    }
}
