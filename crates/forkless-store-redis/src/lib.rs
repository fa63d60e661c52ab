//! # forkless-store-redis: sessions and event logs in Redis, shared by many nodes
//!
//! [`RedisStore`] is [`forkless_store::shared::SharedStore`] on [`Redis`]: the cache, the group
//! commit and the watchers are the shared layer's; this crate stores. Every write, a group
//! commit of many appends included, is one call of one server-side script ([`scripts`]) that
//! first checks every session is still at the version the write was computed on and only then
//! writes: a fenced compare-and-set, atomic and one round trip. A read is one script too, so
//! the fence it checks and the events it returns come from one instant. Hints for other
//! nodes' watchers are published by the writing script (so only written writes hint), only
//! for sessions another node tails or owns (tail interest, the `interest` module), and
//! received on one subscription per node (`listener.rs`).
//!
//! ## What Redis vouches for
//!
//! An event is delivered once the script that stored it replied. What survives a crash then
//! depends on Redis's persistence, which [`connect`] reads (`CONFIG GET`) and reports as
//! [`Durability`]: with `appendonly yes` and `appendfsync always`, Redis replies only after
//! the write is on disk, and delivery is durable. With `everysec` up to a second of delivered
//! events, and without persistence everything, dies with a Redis crash; [`Durability`] says
//! which, and `forkless serve` logs it at start.
//!
//! ## A lost suffix is never numbered over
//!
//! Redis's `run_id` is new at every start. Each bucket of sessions (the `keys` module) keeps the
//! boot under which its history is vouched for (`P:{NN}:run`), and every write checks it in its
//! script: after a restart no write to a bucket lands until a node has vouched for the new boot
//! ([`AfterRestart`]): at once if Redis syncs every write (it kept everything it
//! acknowledged), else only after every session of the bucket has ended with reason
//! `history_lost`, so a client whose cursor points into a suffix Redis lost (a restart from an
//! older snapshot, `everysec`'s last second) is refused with a typed 404, never answered with
//! other content under the same id.
//!
//! ## One Redis or a Redis Cluster
//!
//! [`connect`] asks the Redis its URL names whether it runs in cluster mode and, if it does,
//! talks to the whole cluster through it. Sessions fall in 64 buckets; every key of a session
//! and of its bucket (its session set, due indexes, owner sets, vouched boot) shares the
//! bucket's hash tag, so every script touches one slot. On one Redis a group commit is one
//! script call over any sessions; on a cluster one per bucket, each bucket with a committer
//! of its own, spread over the primaries that hold the buckets' slots.
//!
//! ## What it does not do yet
//!
//! Tell a failover to a replica that missed writes from a restart that kept them (a replica
//! that takes over has its own `run_id`, so it is treated as a restart: with `appendfsync
//! always` on the replica it is trusted).

use forkless_core::{Schedule, Seq, SessionId, SessionRecord, Stream, StreamId, Timestamp};
use forkless_store::codec::{decode_header, decode_stream};
use forkless_store::shared::Read;
use forkless_store::shared::{
    Batch, Committed, Database, Declared, LeaseOp, Loaded, SharedStore, Write, Written,
};
use forkless_store::{Error, Result, Version};
use redis::{Script, Value};

mod apply;
mod buckets;
mod config;
mod conn;
mod history;
mod interest;
mod keys;
mod listener;
mod nodes;
mod reads;
pub mod scripts;
mod spent;
mod tasks;
#[cfg(feature = "testing")]
pub mod testing;
pub mod tls;

use apply::Apply;
use config::durability;
pub use config::{AfterRestart, Durability, RedisConfig};
use conn::Conn;
pub use forkless_store::shared::{Hints, Pipeline, TailConfig};
use history::Applied;
use keys::{BUCKETS, Keys, bucket};

/// A read returns at most this many events, whatever it asks for.
const MAX_READ: usize = 1 << 20;

/// The Redis store.
pub type RedisStore = SharedStore<Redis>;

/// Connect, read what Redis vouches for, and start the hint listener.
pub async fn connect(config: RedisConfig) -> Result<RedisStore> {
    let url = tls::prepare(&config.url, &config.tls)?;
    let client = url.client()?;
    let conn = Conn::open(client.clone(), &url).await.map_err(backend)?;
    let durability = durability(conn.clone()).await;
    if durability != Durability::Always {
        tracing::warn!(
            ?durability,
            "redis does not sync every write: a redis crash can lose delivered events"
        );
    }
    let keys = Keys::new(&config.prefix);
    config::check_layout(conn.clone(), &keys).await?;
    let redis = Redis {
        conn,
        keys: keys.clone(),
        durability,
        apply: Script::new(scripts::APPLY),
        load: Script::new(scripts::LOAD),
        read: Script::new(scripts::READ),
        remove: Script::new(scripts::REMOVE),
        vouch: Script::new(scripts::VOUCH),
        confirm: Script::new(scripts::CONFIRM),
        lease: Script::new(scripts::LEASE),
        claim: Script::new(scripts::CLAIM),
        after_restart: config.after_restart,
    };
    redis.vouch_all().await?;
    let node = match config.node {
        Some(name) => {
            forkless_store::shared::NodeName::new(name).map_err(|e| Error::Backend(e.to_string()))?
        }
        None => forkless_store::shared::NodeName::random(),
    };
    let store = SharedStore::new(redis, config.hints, node, config.pipeline, config.tail);
    if config.hints == Hints::Notify {
        let source = listener::Listener { client, channel: keys.hints() };
        store.own_task(tokio::spawn(forkless_store::shared::listen(store.hint_sink(), source)));
    }
    Ok(store)
}

pub(crate) fn backend(e: redis::RedisError) -> Error {
    Error::Backend(format!("redis: {e}"))
}

pub(crate) fn parse(e: impl std::fmt::Display) -> Error {
    Error::Backend(format!("redis: unexpected reply: {e}"))
}

/// Sessions and event logs in Redis keys (laid out as the `keys` module documents), through one
/// multiplexed connection that reconnects by itself, or a cluster connection.
#[derive(Debug)]
pub struct Redis {
    conn: Conn,
    keys: Keys,
    durability: Durability,
    apply: Script,
    load: Script,
    read: Script,
    remove: Script,
    vouch: Script,
    confirm: Script,
    lease: Script,
    claim: Script,
    after_restart: AfterRestart,
}

impl Redis {
    /// What a Redis crash can take back, as Redis was configured at connect.
    pub fn durability(&self) -> Durability {
        self.durability
    }

    async fn absent(&self, session: SessionId) -> Error {
        let exists: redis::RedisResult<bool> =
            redis::cmd("EXISTS").arg(self.keys.record(session)).query_async(&mut self.conn.clone()).await;
        match exists {
            Ok(true) => Error::StreamUnknown,
            Ok(false) => Error::SessionUnknown,
            Err(e) => backend(e),
        }
    }
}

pub(crate) fn ids(members: Vec<Vec<u8>>) -> Result<Vec<SessionId>> {
    members
        .into_iter()
        .map(|m| {
            <[u8; 16]>::try_from(m.as_slice())
                .map(SessionId::from_bytes)
                .map_err(|_| Error::Corrupt("session id of wrong length".into()))
        })
        .collect()
}

impl Database for Redis {
    /// On a cluster a script sees one slot: one committer per bucket. One Redis: one.
    fn shards(&self) -> usize {
        if self.conn.is_cluster() { BUCKETS } else { 1 }
    }

    fn shard(&self, session: SessionId) -> usize {
        if self.conn.is_cluster() { bucket(session) } else { 0 }
    }

    async fn load(&self, id: SessionId) -> Result<Option<(Version, SessionRecord)>> {
        match self.load_since(id, None).await? {
            Loaded::Found { version, record, .. } => Ok(Some((version, *record))),
            Loaded::Unknown => Ok(None),
            Loaded::Unchanged => Err(Error::Corrupt("redis: a load named no version, yet unchanged".into())),
        }
    }

    async fn load_since(&self, id: SessionId, known: Option<(Version, u64)>) -> Result<Loaded> {
        let mut invocation = self.load.key(self.keys.record(id));
        invocation.key(self.keys.streams(id)).key(self.keys.run(bucket(id)));
        match known {
            Some((version, tag)) => invocation.arg(version.get()).arg(format!("{tag:016x}")),
            None => invocation.arg("").arg(""),
        };
        let reply: Option<Vec<Value>> =
            invocation.invoke_async(&mut self.conn.clone()).await.map_err(backend)?;
        let Some(mut items) = reply else { return Ok(Loaded::Unknown) };
        fn field<T: redis::FromRedisValue>(items: &mut [Value], i: usize) -> Result<T> {
            let value = items.get_mut(i).ok_or_else(|| Error::Corrupt("redis: a short load reply".into()))?;
            redis::from_redis_value(std::mem::replace(value, Value::Nil)).map_err(parse)
        }
        let (version, run): (String, String) = (field(&mut items, 0)?, field(&mut items, 1)?);
        if items.len() == 2 {
            return Ok(Loaded::Unchanged);
        }
        let (header, rows): (Vec<u8>, Vec<Vec<u8>>) = (field(&mut items, 2)?, field(&mut items, 3)?);
        let version = version.parse::<u64>().map_err(|_| Error::Corrupt("bad version".into()))?;
        let mut parts = decode_header(&header)?;
        for row in &rows {
            parts.streams.push(decode_stream(row)?);
        }
        let mut record = parts.build()?;
        record.mark_clean();
        // The tag: the boot the bucket is vouched under (none yet: never taken as unchanged).
        let tag = run.get(..16).and_then(|t| u64::from_str_radix(t, 16).ok());
        Ok(Loaded::Found { version: Version::new(version), record: Box::new(record), tag })
    }

    async fn insert(&self, record: &SessionRecord, owner: Option<&str>) -> Result<()> {
        let build = || {
            let mut apply = Apply::new(&self.keys);
            let mut ops = apply.changes(None, record);
            if let Some(node) = owner {
                apply.owner(&mut ops, record.id(), node);
            }
            apply.session(None, Version::INITIAL, None, record, ops);
            apply
        };
        match self.call(build).await? {
            Applied::All { .. } => Ok(()),
            Applied::Moved(_) | Applied::Unknown(_) | Applied::Unvouched => Err(Error::SessionExists),
        }
    }

    async fn write(&self, write: Write<'_>) -> Result<Written> {
        let build = || {
            let mut apply = Apply::new(&self.keys);
            let mut ops = apply.changes(Some(write.old), write.new);
            if let Some(hint) = &write.hint {
                apply.hint(&mut ops, write.new.id(), hint);
            }
            apply.session(Some(write.expected), write.expected.next(), Some(write.old), write.new, ops);
            apply
        };
        match self.call(build).await? {
            Applied::All { .. } => Ok(Written::Committed),
            Applied::Moved(_) => Ok(Written::Moved),
            Applied::Unknown(_) | Applied::Unvouched => Err(Error::SessionUnknown),
        }
    }

    async fn write_batch(&self, batch: Batch<'_>) -> Result<Committed> {
        let build = || {
            let mut apply = Apply::new(&self.keys);
            if let Some(filter) = batch.filter {
                apply.filter(filter);
            }
            for (i, w) in batch.sessions.iter().enumerate() {
                let id = w.end.id();
                let mut ops = apply.changes(Some(w.start), w.end);
                for chunk in batch.chunks.iter().filter(|c| c.session == id) {
                    apply.chunk(&mut ops, chunk);
                }
                if let Some(hint) = batch.hints.get(i) {
                    apply.hint(&mut ops, id, &hint.text);
                }
                apply.session(
                    Some(w.version),
                    Version::new(w.version.get() + w.appended),
                    Some(w.start),
                    w.end,
                    ops,
                );
            }
            apply
        };
        match self.call(build).await? {
            Applied::All { hints } => Ok(Committed::All { hints }),
            Applied::Moved(id) | Applied::Unknown(id) => Ok(Committed::Moved(id)),
            Applied::Unvouched => Err(Error::Backend("redis: history not vouched for".into())),
        }
    }

    async fn oldest_sizes(
        &self,
        session: SessionId,
        stream: StreamId,
        from: Seq,
        n: u64,
    ) -> Result<Vec<u64>> {
        self.oldest_event_sizes(session, stream, from, n).await
    }

    async fn read(&self, session: SessionId, stream: StreamId, after: Seq, max: usize) -> Result<Read> {
        self.read_events(session, stream, after, max).await
    }

    async fn stream(&self, session: SessionId, stream: StreamId) -> Result<Stream> {
        self.stream_row(session, stream).await
    }

    async fn remove(&self, id: SessionId, hint: Option<String>) -> Result<()> {
        let b = bucket(id);
        let mut invocation = self.remove.key(self.keys.record(id));
        invocation.key(self.keys.streams(id)).key(self.keys.sessions(b));
        for due in self.keys.due(b) {
            invocation.key(due);
        }
        invocation
            .key(self.keys.interest(id))
            .arg(id.as_bytes().as_slice())
            .arg(self.keys.events_base(id))
            .arg(self.keys.hints())
            .arg(hint.unwrap_or_default())
            .arg(self.keys.owner_base(b));
        let _: i64 = invocation.invoke_async(&mut self.conn.clone()).await.map_err(backend)?;
        Ok(())
    }

    async fn sessions(&self) -> Result<Vec<SessionId>> {
        self.all_sessions().await
    }

    async fn due(&self, now: Timestamp, schedule: &Schedule) -> Result<Vec<SessionId>> {
        self.due_sessions(now, schedule).await
    }

    async fn health(&self) -> Result<()> {
        redis::cmd("PING").query_async::<String>(&mut self.conn.clone()).await.map(drop).map_err(backend)
    }

    async fn owned(&self, node: &str) -> Result<Vec<SessionId>> {
        self.owned_by(node).await
    }

    async fn owner(&self, session: SessionId) -> Result<Option<forkless_store::shared::OwnerFacts>> {
        self.owner_of(session).await
    }

    async fn ownerless(&self) -> Result<Vec<(SessionId, String)>> {
        self.lapsed_owners().await
    }

    async fn claim(&self, session: SessionId, from: &str, to: &str) -> Result<bool> {
        self.claim_session(session, from, to).await
    }

    async fn lease(&self, op: LeaseOp<'_>) -> Result<bool> {
        self.lease_op(op).await
    }

    fn filters_hints(&self) -> bool {
        true
    }

    async fn declare(&self, session: SessionId, node: &str, owner: Option<&str>) -> Result<Option<Declared>> {
        self.declare_interest(session, node, owner).await
    }

    async fn withdraw(&self, node: &str, sessions: &[SessionId]) -> Result<()> {
        self.withdraw_interest(node, sessions).await
    }

    async fn publish(&self, hint: &str) -> Result<()> {
        let _: i64 = redis::cmd("PUBLISH")
            .arg(self.keys.hints())
            .arg(hint)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(backend)?;
        Ok(())
    }

    async fn task(&self, id: forkless_core::TaskId) -> Result<Option<(Version, Vec<u8>)>> {
        self.load_task(id).await
    }

    async fn put_task(
        &self,
        row: forkless_store::shared::TaskRow<'_>,
        expected: Option<Version>,
    ) -> Result<bool> {
        Redis::put_task(self, row, expected).await
    }

    async fn open_tasks(&self, node: Option<&str>) -> Result<Vec<forkless_core::TaskId>> {
        self.open_tasks_of(node).await
    }

    async fn lapsed_tasks(&self) -> Result<Vec<(forkless_core::TaskId, String)>> {
        self.lapsed_tasks_now().await
    }

    async fn expire_tasks(&self, now: Timestamp) -> Result<u64> {
        self.expire_tasks_now(now).await
    }

    async fn spend(
        &self,
        key: forkless_store::SpendKey,
        issued: Timestamp,
        until: Timestamp,
        now: Timestamp,
    ) -> Result<forkless_store::Spent> {
        self.spend_key(key, issued, until, now).await
    }
}
