//! # forkless-store-postgres: sessions and event logs in PostgreSQL, shared by many nodes
//!
//! [`PgStore`] keeps the promises of [`forkless_store::Store`] across every node that shares
//! one database: the compare-and-set is linearizable in the database, an append's fencing
//! check and its `seq = high-water + 1` are decided by the core on the version the write
//! commits over, and an event is readable (delivered) once, and only once, its transaction
//! committed. So a client can never receive an event a database crash could take back, and
//! no two nodes can number two events alike.
//!
//! ## How a write works
//!
//! Every write (create, compare-and-set, append) is computed by the core on a record at a
//! known version, and sent as one pipelined transaction whose first statement moves the
//! session from that version on (see [`schema`]); if another node moved it first, the
//! database aborts the transaction and the store retries on a fresh load (appends) or
//! reports the conflict (a compare-and-set). Appends are group-committed: one committer per
//! node stores every append waiting, across sessions and streams, in one transaction (one
//! round trip, one WAL flush). Each node caches the records it wrote, so appends of the node
//! that serves a session cost no read; a stale cache costs one failed attempt and a reload,
//! never a wrong write.
//!
//! ## Wake-ups
//!
//! Watchers on the writing node are woken after its commit; watchers on other nodes by a
//! hint (`NOTIFY`) that makes them re-read ([`Hints`]). Nothing polls.
//!
//! ## What it does not do
//!
//! It does not decide anything (the core does), hold leases or route requests (the cluster
//! layer of `forkless-server` does), or speak TLS to the database yet (use a local socket,
//! a private network or a TLS-terminating proxy).

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use forkless_core::{EventId, IdHashBuilder, Schedule, SessionId, SessionRecord, StreamId, Timestamp};
use forkless_store::{
    Append, Error, Orphan, Reader, Result, Store, StoredEvent, StreamWatch, Usage, Version, Versioned,
    transact,
};
use tokio::sync::mpsc;
use tokio_postgres::NoTls;

mod batch;
mod commit;
mod hub;
mod log;
mod rows;
pub mod schema;
#[cfg(feature = "testing")]
pub mod testing;

pub use hub::Hints;
use hub::Hub;
use rows::{Write, Written, backend};

/// How to reach the database and how to behave on it.
#[derive(Clone, Debug)]
pub struct PgConfig {
    /// A libpq-style connection string or `postgres://` URL.
    pub url: String,
    /// Connections this node keeps open (default 16).
    pub pool_size: usize,
    /// Whether to send and receive hints for other nodes (default [`Hints::Notify`]).
    pub hints: Hints,
    /// This node's name in its hints (default: a random one).
    pub node: Option<String>,
}

impl PgConfig {
    /// The defaults for `url`.
    pub fn new(url: impl Into<String>) -> Self {
        Self { url: url.into(), pool_size: 16, hints: Hints::Notify, node: None }
    }
}

/// The PostgreSQL store. Cheap to clone; clones share the pool, cache and watchers.
#[derive(Clone, Debug)]
pub struct PgStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    pool: Pool,
    /// The records this node last wrote or loaded, with their versions: a write computed on
    /// one whose version moved fails its compare-and-set, so a stale entry costs a retry.
    cache: Mutex<HashMap<SessionId, (Version, SessionRecord), IdHashBuilder>>,
    pub(crate) hub: Hub,
    hints: Hints,
    node: String,
    /// Payload bytes retained, as this node applied them (may differ from the database's
    /// total when other nodes write: `Usage` documents it as this node's view).
    retained: AtomicI64,
    evicted: [AtomicU64; 2],
    /// Group commits and the events they stored (see [`PgStats`]).
    pub(crate) batches: AtomicU64,
    pub(crate) batched_events: AtomicU64,
    listener: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Appends, to the committer (see [`commit`]).
    commits: mpsc::UnboundedSender<commit::Job>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(task) = self.listener.get_mut().ok().and_then(Option::take) {
            task.abort();
        }
    }
}

impl PgStore {
    /// Connect, migrate the schema (see [`schema`]) and start the hint listener.
    pub async fn connect(config: PgConfig) -> Result<Self> {
        let pg = tokio_postgres::Config::from_str(&config.url)
            .map_err(|e| Error::Backend(format!("postgres: bad connection string: {e}")))?;
        let (mut client, conn) = pg.connect(NoTls).await.map_err(backend)?;
        let driver = tokio::spawn(conn);
        let migrated = schema::migrate(&mut client).await;
        drop(client);
        let _ = driver.await;
        migrated?;
        let manager = Manager::from_config(
            pg.clone(),
            NoTls,
            ManagerConfig { recycling_method: RecyclingMethod::Fast },
        );
        let pool = Pool::builder(manager)
            .max_size(config.pool_size.max(1))
            .build()
            .map_err(|e| Error::Backend(format!("postgres pool: {e}")))?;
        let node = config.node.unwrap_or_else(random_node);
        let (commits, queue) = mpsc::unbounded_channel();
        let inner = Arc::new(Inner {
            pool,
            cache: Mutex::default(),
            hub: Hub::default(),
            hints: config.hints,
            node: node.clone(),
            retained: AtomicI64::new(0),
            evicted: Default::default(),
            batches: AtomicU64::new(0),
            batched_events: AtomicU64::new(0),
            listener: Mutex::new(None),
            commits,
        });
        tokio::spawn(commit::run(Arc::downgrade(&inner), queue));
        if config.hints == Hints::Notify {
            let task = tokio::spawn(hub::listen(Arc::downgrade(&inner), pg, node));
            *inner.listener.lock().unwrap_or_else(|p| p.into_inner()) = Some(task);
        }
        Ok(Self { inner })
    }
}

impl PgStore {
    /// Start after this node's previous process ended, when it is the only node on the
    /// database: every attachment is detached and every open request stream is an orphan
    /// (its handler died with the process), returned for the server to answer with an error
    /// carrying the request's id. Many nodes need leases to tell whose requests died; until
    /// the cluster layer provides them, run one node per database.
    pub async fn restart_alone(&self, now: Timestamp) -> Result<Vec<Orphan>> {
        let mut orphans = Vec::new();
        for id in self.sessions().await? {
            match transact(self, id, |r| Ok(r.on_restart(now))).await {
                Ok((found, _)) => orphans.extend(found),
                Err(Error::SessionUnknown) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(orphans)
    }
}

/// What this node's store did, for `/metrics` and benchmarks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PgStats {
    /// Group commits (transactions that stored appends).
    pub batches: u64,
    /// Events those commits stored.
    pub batched_events: u64,
}

impl PgStore {
    /// This node's counters.
    pub fn stats(&self) -> PgStats {
        PgStats {
            batches: self.inner.batches.load(Ordering::Relaxed),
            batched_events: self.inner.batched_events.load(Ordering::Relaxed),
        }
    }
}

fn random_node() -> String {
    use std::hash::{BuildHasher, RandomState};
    format!("{:016x}", RandomState::new().hash_one(std::time::SystemTime::now()))
}

impl Inner {
    async fn client(&self) -> Result<deadpool_postgres::Object> {
        self.pool.get().await.map_err(|e| Error::Backend(format!("postgres pool: {e}")))
    }

    fn cached(&self, id: SessionId) -> Option<(Version, SessionRecord)> {
        self.cache.lock().unwrap_or_else(|p| p.into_inner()).get(&id).cloned()
    }

    fn remember(&self, version: Version, record: &SessionRecord) {
        let mut record = record.clone();
        record.mark_clean();
        self.cache.lock().unwrap_or_else(|p| p.into_inner()).insert(record.id(), (version, record));
    }

    fn forget(&self, id: SessionId) {
        self.cache.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
    }

    fn retain(&self, before: u64, after: u64) {
        self.retained.fetch_add(after as i64 - before as i64, Ordering::Relaxed);
    }

    /// The hint of a write from `old` to `new`, if hints are on and a stream changed.
    fn hint(&self, old: &SessionRecord, new: &SessionRecord) -> Option<String> {
        if self.hints == Hints::Off {
            return None;
        }
        let streams: Vec<StreamId> = new.changes_since(old).map(|c| c.id()).collect();
        (!streams.is_empty()).then(|| hub::hint(&self.node, new.id(), &streams))
    }

    /// After a commit from `old` to `new`: cache it and wake this node's watchers.
    fn committed(&self, version: Version, old: &SessionRecord, new: &SessionRecord) {
        self.retain(old.retained_bytes(), new.retained_bytes());
        for change in new.changes_since(old) {
            match change {
                forkless_core::StreamChange::Removed(s) => self.hub.dropped(new.id(), s.id()),
                forkless_core::StreamChange::Added(s)
                | forkless_core::StreamChange::Changed { after: s, .. } => self.hub.announce(new.id(), s),
            }
        }
        self.remember(version, new);
    }

    /// Re-read `keys` and wake their watchers (hints, and after the listener reconnects).
    pub(crate) async fn refresh(&self, keys: Vec<(SessionId, StreamId)>) {
        if keys.is_empty() {
            return;
        }
        let Ok(client) = self.client().await else { return };
        for (session, stream) in keys {
            match log::stream(&client, session, stream).await {
                Ok(meta) => self.hub.announce(session, &meta),
                Err(Error::StreamUnknown | Error::SessionUnknown) => self.hub.dropped(session, stream),
                Err(e) => tracing::warn!(error = %e, "postgres re-read after a hint failed"),
            }
        }
    }

    /// The record at its version: from the cache when `prefer_cache`, else from the database.
    async fn current(
        &self,
        client: &deadpool_postgres::ClientWrapper,
        id: SessionId,
        prefer_cache: bool,
    ) -> Result<(Version, SessionRecord)> {
        if prefer_cache && let Some(hit) = self.cached(id) {
            return Ok(hit);
        }
        match rows::load(client, id).await? {
            Some((version, record)) => {
                self.remember(version, &record);
                Ok((version, record))
            }
            None => {
                self.forget(id);
                Err(Error::SessionUnknown)
            }
        }
    }
}

impl Store for PgStore {
    async fn create(&self, record: SessionRecord) -> Result<Version> {
        let client = self.inner.client().await?;
        rows::insert(&client, &record).await?;
        self.inner.retain(0, record.retained_bytes());
        self.inner.remember(Version::INITIAL, &record);
        Ok(Version::INITIAL)
    }

    async fn load(&self, id: SessionId) -> Result<Option<Versioned<SessionRecord>>> {
        let client = self.inner.client().await?;
        match self.inner.current(&client, id, false).await {
            Ok((version, value)) => Ok(Some(Versioned { version, value })),
            Err(Error::SessionUnknown) => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn compare_and_set(&self, expected: Version, record: SessionRecord) -> Result<Option<Version>> {
        let inner = &self.inner;
        let client = inner.client().await?;
        let id = record.id();
        let old = match inner.cached(id) {
            Some((version, old)) if version == expected => old,
            _ => {
                let (version, old) = inner.current(&client, id, false).await?;
                if version != expected {
                    return Ok(None);
                }
                old
            }
        };
        let hint = inner.hint(&old, &record);
        match rows::write(&client, Write { expected, old: &old, new: &record, hint }).await {
            Ok(Written::Committed) => {
                inner.committed(expected.next(), &old, &record);
                Ok(Some(expected.next()))
            }
            Ok(Written::Moved) => {
                inner.forget(id);
                Ok(None)
            }
            Err(e) => {
                inner.forget(id);
                Err(e)
            }
        }
    }

    async fn append(&self, event: Append<'_>) -> Result<EventId> {
        let Append { session, target, payload, kind, now, limits } = event;
        let (reply, answer) = tokio::sync::oneshot::channel();
        let job = commit::Job { session, target, payload, kind, now, limits: *limits, reply };
        self.inner.commits.send(job).map_err(|_| Error::Poisoned("the postgres committer stopped".into()))?;
        answer.await.map_err(|_| Error::Poisoned("the postgres committer stopped".into()))?
    }

    async fn read(
        &self,
        session: SessionId,
        stream: StreamId,
        after: forkless_core::Seq,
        max: usize,
        reader: Reader,
    ) -> Result<Vec<StoredEvent>> {
        let client = self.inner.client().await?;
        log::read(&client, session, stream, after, max, reader).await
    }

    async fn watch(&self, session: SessionId, stream: StreamId) -> Result<StreamWatch> {
        let client = self.inner.client().await?;
        let meta = log::stream(&client, session, stream).await?;
        Ok(self.inner.hub.watch(session, &meta))
    }

    async fn remove(&self, id: SessionId) -> Result<()> {
        let client = self.inner.client().await?;
        let stmt =
            client.prepare_cached("DELETE FROM forkless_sessions WHERE id = $1").await.map_err(backend)?;
        client.execute(&stmt, &[&id.as_bytes().as_slice()]).await.map_err(backend)?;
        if self.inner.hints == Hints::Notify {
            // Other nodes' watchers re-read, find the session gone and stop.
            let notify = client.prepare_cached("SELECT pg_notify('forkless', $1)").await.map_err(backend)?;
            let hint = hub::session_hint(&self.inner.node, id);
            client.execute(&notify, &[&hint]).await.map_err(backend)?;
        }
        if let Some((_, record)) = self.inner.cached(id) {
            self.inner.retain(record.retained_bytes(), 0);
        }
        self.inner.forget(id);
        self.inner.hub.session_dropped(id);
        Ok(())
    }

    async fn sessions(&self) -> Result<Vec<SessionId>> {
        let client = self.inner.client().await?;
        log::sessions(&client).await
    }

    fn usage(&self) -> Usage {
        Usage {
            retained_bytes: self.inner.retained.load(Ordering::Relaxed).max(0) as u64,
            evicted_by_events: self.inner.evicted[0].load(Ordering::Relaxed),
            evicted_by_bytes: self.inner.evicted[1].load(Ordering::Relaxed),
        }
    }

    async fn due(&self, now: Timestamp, schedule: &Schedule) -> Result<Vec<SessionId>> {
        let client = self.inner.client().await?;
        log::due(&client, now, schedule).await
    }
}
