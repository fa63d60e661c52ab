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
//! [`PgStore`] is [`forkless_store::shared::SharedStore`] on [`Postgres`]: the cache, the
//! group commit and the watchers are the shared layer's; this crate stores. Every write is
//! one transaction whose first statement moves the session from the version the write was
//! computed on (see [`schema`]); if another node moved it first the database aborts the
//! transaction. A write is sent as one pipeline (one round trip); a group commit of many
//! appends, across sessions and streams, is one transaction and one WAL flush, each stream's
//! events of it one row (a chunk, see [`schema`]).
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

use std::str::FromStr;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use forkless_core::{Schedule, Seq, SessionId, SessionRecord, Stream, StreamId, Timestamp};
use forkless_store::shared::Read;
use forkless_store::shared::{
    Batch, Committed, Database, Declared, LeaseOp, Loaded, OwnerFacts, SharedStore, Write, Written,
};
use forkless_store::{Error, Result, Version};
use tls::MakeTls;

mod batch;
mod interest;
mod listener;
mod log;
mod rows;
pub mod schema;
mod tasks;
#[cfg(feature = "testing")]
pub mod testing;
pub mod tls;

pub use forkless_store::shared::{Hints, Pipeline, TailConfig};
use rows::backend;

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
    /// When a notification's append returns (default [`Pipeline::On`]: once its batch is
    /// computed).
    pub pipeline: Pipeline,
    /// How this node serves its own writers what it just committed (default
    /// [`TailConfig::default`]; [`TailConfig::OFF`] reads everything from the database).
    pub tail: TailConfig,
}

impl PgConfig {
    /// The defaults for `url`.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            pool_size: 16,
            hints: Hints::Notify,
            node: None,
            pipeline: Pipeline::On,
            tail: TailConfig::default(),
        }
    }
}

/// The PostgreSQL store.
pub type PgStore = SharedStore<Postgres>;

/// Connect, migrate the schema (see [`schema`]) and start the hint listener.
pub async fn connect(config: PgConfig) -> Result<PgStore> {
    let (db, pg) = open(&config).await?;
    let node = match config.node {
        Some(name) => {
            forkless_store::shared::NodeName::new(name).map_err(|e| Error::Backend(e.to_string()))?
        }
        None => forkless_store::shared::NodeName::random(),
    };
    let store = SharedStore::new(db, config.hints, node, config.pipeline, config.tail);
    if config.hints == Hints::Notify {
        let (config, tls) = pg;
        let source = listener::Listener { config, tls };
        store.own_task(tokio::spawn(forkless_store::shared::listen(store.hint_sink(), source)));
    }
    Ok(store)
}

/// The database alone, connected and migrated, without a store around it or a hint listener
/// (for a [`SharedStore`] over a wrapper of it, such as a fault-injecting one in tests).
pub async fn database(config: &PgConfig) -> Result<Postgres> {
    Ok(open(config).await?.0)
}

async fn open(config: &PgConfig) -> Result<(Postgres, (tokio_postgres::Config, MakeTls))> {
    let (url, tls) = tls::connector_for(&config.url)?;
    let pg = tokio_postgres::Config::from_str(&url)
        .map_err(|e| Error::Backend(format!("postgres: bad connection string: {e}")))?;
    let (mut client, conn) = pg.connect(tls.clone()).await.map_err(backend)?;
    let driver = tokio::spawn(conn);
    let migrated = schema::migrate(&mut client).await;
    drop(client);
    let _ = driver.await;
    migrated?;
    let manager = Manager::from_config(
        pg.clone(),
        tls.clone(),
        ManagerConfig { recycling_method: RecyclingMethod::Fast },
    );
    let pool = Pool::builder(manager)
        .max_size(config.pool_size.max(1))
        .build()
        .map_err(|e| Error::Backend(format!("postgres pool: {e}")))?;
    Ok((Postgres { pool }, (pg, tls)))
}

/// Sessions and event logs in PostgreSQL tables (see [`schema`]), through a connection pool.
#[derive(Debug)]
pub struct Postgres {
    pool: Pool,
}

impl Postgres {
    async fn client(&self) -> Result<deadpool_postgres::Object> {
        self.pool.get().await.map_err(|e| Error::Backend(format!("postgres pool: {e}")))
    }
}

impl Database for Postgres {
    async fn load(&self, id: SessionId) -> Result<Option<(Version, SessionRecord)>> {
        Ok(match rows::load_since(&*self.client().await?, id, None).await? {
            Loaded::Found { version, record, .. } => Some((version, *record)),
            Loaded::Unknown => None,
            Loaded::Unchanged => {
                return Err(Error::Corrupt("postgres: a load named no version, yet unchanged".into()));
            }
        })
    }

    async fn load_since(&self, id: SessionId, known: Option<(Version, u64)>) -> Result<Loaded> {
        rows::load_since(&*self.client().await?, id, known.map(|(v, _)| v)).await
    }

    async fn insert(&self, record: &SessionRecord, owner: Option<&str>) -> Result<()> {
        rows::insert(&*self.client().await?, record, owner).await
    }

    async fn write(&self, write: Write<'_>) -> Result<Written> {
        rows::write(&*self.client().await?, write).await
    }

    async fn write_batch(&self, batch: Batch<'_>) -> Result<Committed> {
        batch::write(&*self.client().await?, batch).await
    }

    async fn oldest_sizes(
        &self,
        session: SessionId,
        stream: StreamId,
        from: Seq,
        n: u64,
    ) -> Result<Vec<u64>> {
        log::oldest_sizes(&*self.client().await?, session, stream, from, n).await
    }

    async fn read(&self, session: SessionId, stream: StreamId, after: Seq, max: usize) -> Result<Read> {
        log::read(&*self.client().await?, session, stream, after, max).await
    }

    async fn stream(&self, session: SessionId, stream: StreamId) -> Result<Stream> {
        log::stream(&*self.client().await?, session, stream).await
    }

    async fn remove(&self, id: SessionId, hint: Option<String>) -> Result<()> {
        rows::remove(&*self.client().await?, id, hint).await
    }

    async fn sessions(&self) -> Result<Vec<SessionId>> {
        log::sessions(&*self.client().await?).await
    }

    async fn due(&self, now: Timestamp, schedule: &Schedule) -> Result<Vec<SessionId>> {
        log::due(&*self.client().await?, now, schedule).await
    }

    async fn health(&self) -> Result<()> {
        self.client().await?.batch_execute("SELECT 1").await.map_err(backend)
    }

    async fn lease(&self, op: LeaseOp<'_>) -> Result<bool> {
        rows::lease(&*self.client().await?, op).await
    }

    async fn owned(&self, node: &str) -> Result<Vec<SessionId>> {
        rows::owned(&*self.client().await?, node).await
    }

    async fn ownerless(&self) -> Result<Vec<(SessionId, String)>> {
        rows::ownerless(&*self.client().await?).await
    }

    async fn owner(&self, session: SessionId) -> Result<Option<OwnerFacts>> {
        rows::owner(&*self.client().await?, session).await
    }

    async fn claim(&self, session: SessionId, from: &str, to: &str) -> Result<bool> {
        rows::claim(&*self.client().await?, session, from, to).await
    }

    async fn publish(&self, hint: &str) -> Result<()> {
        rows::notify(&*self.client().await?, hint).await
    }

    fn filters_hints(&self) -> bool {
        true
    }

    async fn declare(&self, session: SessionId, node: &str, owner: Option<&str>) -> Result<Option<Declared>> {
        interest::declare(&*self.client().await?, session, node, owner).await
    }

    async fn withdraw(&self, node: &str, sessions: &[SessionId]) -> Result<()> {
        interest::withdraw(&*self.client().await?, node, sessions).await
    }

    async fn task(&self, id: forkless_core::TaskId) -> Result<Option<(Version, Vec<u8>)>> {
        tasks::load(&*self.client().await?, id).await
    }

    async fn put_task(
        &self,
        row: forkless_store::shared::TaskRow<'_>,
        expected: Option<Version>,
    ) -> Result<bool> {
        tasks::put(&*self.client().await?, row, expected).await
    }

    async fn open_tasks(&self, node: Option<&str>) -> Result<Vec<forkless_core::TaskId>> {
        tasks::open(&*self.client().await?, node).await
    }

    async fn lapsed_tasks(&self) -> Result<Vec<(forkless_core::TaskId, String)>> {
        tasks::lapsed(&*self.client().await?).await
    }

    async fn expire_tasks(&self, now: Timestamp) -> Result<u64> {
        tasks::expire(&*self.client().await?, now).await
    }

    /// PostgreSQL keeps every committed key: nothing is ever unvouched.
    async fn spend(
        &self,
        key: forkless_store::SpendKey,
        _issued: Timestamp,
        until: Timestamp,
        now: Timestamp,
    ) -> Result<forkless_store::Spent> {
        let stored = rows::spend(&*self.client().await?, key, until, now).await?;
        Ok(if stored { forkless_store::Spent::Now } else { forkless_store::Spent::Before })
    }
}
