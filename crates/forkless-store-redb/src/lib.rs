//! # forkless-store-redb: the durable embedded store of forkless
//!
//! The shared in-process engine ([`forkless_store::engine::Engine`]) with a write-ahead log and
//! a redb file behind it: the default store of `forkless serve`. It keeps every promise of
//! [`forkless_store::Store`] and passes its conformance suite in both durability modes.
//!
//! Reads and wake-ups are served from memory; every mutation is journaled by one writer
//! thread with group commit: one log entry and one fsync per group (see `wal.rs`), copied
//! into redb by periodic checkpoints (see `journal.rs`). On open, log entries after the last
//! checkpoint are replayed into redb, the file is read back and attachments are dropped (no
//! connection survives a restart). Requests whose handler died are reported in
//! [`Recovery::orphans`]: the server answers them (with their JSON-RPC ids) and completes
//! their streams; this store writes no protocol message of its own.
//!
//! ## Durable before delivery, in both modes
//!
//! An event reaches readers (writers, replays, finished bodies) only once the writer thread
//! has synced the group that holds it. So a crash, or a power failure, can only take back
//! events nobody was sent, and recovery numbers new events above everything that survived:
//! no event id a client has seen ever names other content.
//!
//! | mode | an append returns | readers see an event | lost on power failure |
//! |---|---|---|---|
//! | [`Durability::Immediate`] | after its fsync | after its fsync | nothing that was acknowledged or delivered |
//! | [`Durability::Batched`] | at once (an answer: after its fsync) | after the fsync of its batch window | up to one batch window of appended events, none of them delivered |
//!
//! In batched mode an append waits for nothing, and its event waits at most one batch window
//! for the group's sync. An [`AppendTarget::Answer`] is sent by its caller at once, and a
//! stream's final event (a response) is what a client waits for, so both wait for their
//! sync, and start one at once rather than at the end of the window.
//!
//! A failed write (fsync error, full disk) poisons the store: every later operation returns
//! [`Error::Poisoned`], and nothing written after the failure is ever delivered; the server
//! stops with a log line naming the failure.

mod checkpoint;
mod checkpointer;
mod codec;
mod cold;
mod gather;
mod group;
mod hooks;
mod inbox;
mod journal;
mod logfile;
mod op;
mod open;
mod process;
pub use open::{DEFAULT_CACHE_BYTES, LostFiles, Options};
mod recovery;
mod tasks;
mod wal;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use forkless_core::{AppendTarget, EventId, EventKind, Seq, SessionId, SessionRecord, StreamId, Timestamp};

use self::group::{Ack, Write};
use self::journal::Poison;
use self::op::Op;
use forkless_store::engine::{Effect, Engine, Origin};
use forkless_store::{
    Append, Error, Orphan, Reader, Result, Store, StoredEvent, StreamWatch, Version, Versioned,
};

/// The writer's acknowledgement of one mutation's writes (or of a barrier).
type Durable = tokio::sync::oneshot::Receiver<Result<(), String>>;

async fn durable(done: Durable) -> Result<()> {
    match done.await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(why)) => Err(Error::Poisoned(why)),
        Err(_) => Err(Error::Poisoned("the durable store's writer thread stopped".into())),
    }
}

/// When appends are durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// Every acknowledged write is on disk (one fsync per group of concurrent writes).
    Immediate,
    /// Writes are acknowledged at once and reach disk within `window` (one fsync per window).
    Batched {
        /// The longest an acknowledged write waits for its fsync.
        window: Duration,
    },
}

impl Default for Durability {
    /// Batched with a 5 ms window.
    fn default() -> Self {
        Self::Batched { window: Duration::from_millis(5) }
    }
}

/// What recovery found when the store was opened.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Sessions read back (active and ended).
    pub sessions: usize,
    /// Events read back.
    pub events: usize,
    /// Connections that were attached when the process stopped (now detached).
    pub detached: usize,
    /// Requests whose handler died with the process: their streams are still open, and the
    /// server must answer each with an error carrying its request id and complete it
    /// (`forkless_server::Server::answer_orphans`).
    pub orphans: Vec<Orphan>,
    /// Write-ahead log entries written after the last checkpoint, applied to the data file.
    pub replayed: usize,
    /// Tasks read back (every status). Those not ended are the server's to settle, by each
    /// task's policy: their work died with the process.
    pub tasks: usize,
    /// When the data file was left by an unclean stop (a crash, `kill -9`, a power failure):
    /// how long redb took to repair its own structures (its allocation state, rebuilt from the
    /// last committed transaction; no committed data is changed). `None` after a clean stop.
    pub repaired: Option<Duration>,
    /// How long opening took, from the first read of the files to a running store.
    pub took: Duration,
}

/// The redb-backed [`Store`]. Cheap to clone (shared state).
#[derive(Clone, Debug)]
pub struct RedbStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    engine: Arc<Engine>,
    durability: Durability,
    /// Deliver appended events at once, before they are durable, and acknowledge task writes
    /// before their sync: the rule this store exists to keep, broken on purpose for
    /// negative-control tests only.
    early_delivery: bool,
    /// Spent one-time keys, in memory only: complete from when the store opened (a key
    /// issued before a restart is `Unvouched`).
    spent: forkless_store::Ledger,
    /// Listen notifications: this process is the only node.
    bulletin: forkless_store::Bulletin,
    /// Tasks, served from memory; every write journaled and durable before it returns.
    tasks: forkless_store::TaskMap,
    poison: Arc<Poison>,
    /// The writer thread's queue (closed once closing). Sends happen under the engine's
    /// session lock, in mutation order.
    inbox: Arc<inbox::Inbox>,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Checkpoints committed since the store opened.
    checkpoints: Arc<std::sync::atomic::AtomicU64>,
    /// Where events that left memory are read from.
    disk: cold::DataFile,
}

impl Drop for Inner {
    /// Close the queue and wait for the writer to commit what is queued and release the file.
    fn drop(&mut self) {
        self.inbox.close();
        if let Some(writer) = self.writer.lock().ok().and_then(|mut w| w.take()) {
            let _ = writer.join();
        }
    }
}

impl RedbStore {
    /// **Testing only**: the same store making every appended event visible to readers at
    /// once, before it is durable (as this store did before durable-before-delivery; answers
    /// still wait for their sync, so a history still has sync points). Negative-control tests
    /// use it to show that their oracle catches what the rule prevents. Call before the store
    /// is shared.
    #[cfg(feature = "fault-injection")]
    pub fn break_durable_before_delivery_for_negative_control(mut self) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.early_delivery = true;
        }
        self
    }

    /// The durability mode.
    pub fn durability(&self) -> Durability {
        self.inner.durability
    }

    /// Resolves once a write has failed and the store refuses all work, with the reason.
    /// A server stops when this resolves.
    pub async fn failed(&self) -> String {
        self.inner.poison.failed().await
    }

    /// Wait until everything written so far is on disk.
    pub async fn flush(&self) -> Result<()> {
        self.barrier().await
    }

    fn check(&self) -> Result<()> {
        self.inner.poison.check().map_err(Error::Poisoned)
    }

    async fn barrier(&self) -> Result<()> {
        let (ack, done) = tokio::sync::oneshot::channel();
        // A closed inbox (the store is closing) drops the acknowledgement unsent, which
        // `durable` reports.
        let _ = self.inner.inbox.send([], [], Some(ack));
        durable(done).await
    }

    /// A waiter for one mutation's writes when `waits` (see [`Self::journal_for`]), and what to
    /// await for it: [`Self::settled`].
    fn waiter(waits: bool) -> (Option<Ack>, Option<Durable>) {
        if !waits {
            return (None, None);
        }
        let (ack, done) = tokio::sync::oneshot::channel();
        (Some(ack), Some(done))
    }

    /// Whether a record change must be durable before it returns (the mode requires it).
    fn waits_for_records(&self) -> bool {
        matches!(self.inner.durability, Durability::Immediate)
    }

    /// Wait for a mutation's writes when they had a waiter; otherwise only check for poison.
    async fn settled(&self, durable_writes: Option<Durable>) -> Result<()> {
        let Some(done) = durable_writes else { return self.check() };
        match done.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(why)) => Err(Error::Poisoned(why)),
            // Dropped unsent: the mutation wrote nothing (a refused compare-and-set, removing
            // an unknown session), or the writer stopped; a barrier tells which.
            Err(_) => self.barrier().await,
        }
    }

    /// A persist callback that collects one mutation's effects and sends them as one message
    /// (while the engine still holds the session lock).
    fn journal(&self) -> impl FnMut(Effect<'_>) + '_ {
        self.journal_for(None)
    }

    /// [`Self::journal`], with `waiter` acknowledged once the mutation's writes are durable
    /// (it travels with them, so the writer commits their group at once).
    fn journal_for(&self, mut waiter: Option<Ack>) -> impl FnMut(Effect<'_>) + '_ {
        let mut ops = group::Writes::new();
        let mut deliver = smallvec::SmallVec::<[group::EventId; 1]>::new();
        move |effect| match effect {
            Effect::Record(r) => {
                ops.push(put_header(r));
                ops.extend(r.streams().map(|st| put_stream(r.id(), st, Origin::Existing)));
            }
            Effect::Header(r) => ops.push(put_header(r)),
            Effect::Stream { session, meta, origin } => ops.push(put_stream(session, meta, origin)),
            Effect::Event { record, id, payload, origin } => {
                deliver.push(group::EventId { session: record.id(), event: id });
                ops.push(Write::Op(Op::PutEvent {
                    key: codec::event_key(record.id(), id.stream, id.seq),
                    payload: payload.clone(),
                }));
                // An append changes its stream's row, never the session's header (which holds
                // no counters): the header stays as its last write left it.
                if let Some(meta) = record.stream(id.stream) {
                    ops.push(put_stream(record.id(), meta, origin));
                }
                if record.session().ended().is_some() {
                    ops.push(Write::Op(Op::DropEvents { session: *record.id().as_bytes() }));
                }
            }
            Effect::Trim { session, stream, low_water } => {
                ops.push(Write::Op(Op::Trim { prefix: prefix(session, stream), low_water: low_water.get() }))
            }
            Effect::DropStream { session, stream } => {
                ops.push(Write::Op(Op::DropStream { prefix: prefix(session, stream) }))
            }
            Effect::DropSession(session) => {
                ops.push(Write::Op(Op::DropSession { session: *session.as_bytes() }))
            }
            Effect::End => {
                if !ops.is_empty() || waiter.is_some() {
                    // Closed: the store is closing; a waiter dropped unsent then asks a barrier,
                    // which reports it.
                    let _ = self.inner.inbox.send(ops.drain(..), deliver.drain(..), waiter.take());
                }
            }
        }
    }
}

fn put_header(record: &SessionRecord) -> Write {
    Write::Op(Op::PutHeader {
        session: *record.id().as_bytes(),
        header: forkless_store::codec::encode_header(record),
    })
}

fn put_stream(session: SessionId, meta: &forkless_core::Stream, origin: Origin) -> Write {
    Write::Row { prefix: prefix(session, meta.id()), stream: meta.clone(), origin }
}

fn prefix(session: SessionId, stream: StreamId) -> [u8; 28] {
    let mut p = [0u8; 28];
    p[..16].copy_from_slice(session.as_bytes());
    p[16..].copy_from_slice(stream.as_bytes());
    p
}

fn backend_err(e: impl std::fmt::Display) -> Error {
    Error::Backend(e.to_string())
}

impl Store for RedbStore {
    async fn create(&self, record: SessionRecord) -> Result<Version> {
        self.check()?;
        let (waiter, done) = Self::waiter(self.waits_for_records());
        let v = self.inner.engine.create(record, self.journal_for(waiter))?;
        self.settled(done).await?;
        Ok(v)
    }

    async fn load(&self, id: SessionId) -> Result<Option<Versioned<SessionRecord>>> {
        self.check()?;
        self.inner.engine.load(id)
    }

    async fn compare_and_set(&self, expected: Version, record: SessionRecord) -> Result<Option<Version>> {
        self.check()?;
        let (waiter, done) = Self::waiter(self.waits_for_records());
        let v = self.inner.engine.compare_and_set(expected, record, self.journal_for(waiter))?;
        if v.is_some() {
            self.settled(done).await?;
        }
        Ok(v)
    }

    async fn append(&self, event: Append<'_>) -> Result<EventId> {
        self.check()?;
        let visible = self.inner.early_delivery;
        // The writer thread delivers the event after its group's sync. Wait for that in
        // immediate mode (every append is acknowledged durable), for an answer, which its
        // caller sends at once, and for any stream's final event (a response a client is
        // waiting for on an open stream): the waiter travels with the writes, so the writer
        // syncs their group now, not at the end of a window.
        // And when the writer is behind by more than a log region: an emitter faster than the
        // disk then goes at the disk's pace instead of queueing in memory.
        let waits = self.waits_for_records()
            || matches!(event.target, AppendTarget::Answer(_))
            || event.kind == EventKind::Final
            || self.inner.inbox.backlogged();
        let (waiter, done) = Self::waiter(waits);
        let id = self.inner.engine.append(event, visible, self.journal_for(waiter))?;
        self.settled(done).await?;
        Ok(id)
    }

    async fn read(
        &self,
        session: SessionId,
        stream: StreamId,
        after: Seq,
        max: usize,
        reader: Reader,
    ) -> Result<Vec<StoredEvent>> {
        self.check()?;
        let engine = &self.inner.engine;
        if let Some(events) = engine.try_read(session, stream, after, max, reader)? {
            return Ok(events);
        }
        // Some left memory: read them from the data file, off the runtime's threads.
        let (engine, disk) = (Arc::clone(engine), self.inner.disk.clone());
        tokio::task::spawn_blocking(move || engine.read_through(&disk, session, stream, after, max, reader))
            .await
            .map_err(|e| Error::Backend(format!("reading events from the data file: {e}")))?
    }

    async fn watch(&self, session: SessionId, stream: StreamId) -> Result<StreamWatch> {
        self.check()?;
        self.inner.engine.watch(session, stream)
    }

    async fn remove(&self, id: SessionId) -> Result<()> {
        self.check()?;
        let (waiter, done) = Self::waiter(self.waits_for_records());
        self.inner.engine.remove(id, self.journal_for(waiter))?;
        self.settled(done).await
    }

    async fn sessions(&self) -> Result<Vec<SessionId>> {
        self.check()?;
        self.inner.engine.sessions()
    }

    fn usage(&self) -> forkless_store::Usage {
        self.inner.engine.usage()
    }

    fn retained_by(&self, session: SessionId) -> Option<u64> {
        self.inner.engine.retained_by(session)
    }

    fn metrics(&self) -> Vec<forkless_store::StoreMetric> {
        use forkless_store::{MetricKind, StoreMetric};
        vec![
            StoreMetric {
                name: "forkless_store_checkpoints_total",
                help: "Checkpoints of the write-ahead log into the data file committed since the store opened.",
                kind: MetricKind::Counter,
                value: self.inner.checkpoints.load(std::sync::atomic::Ordering::Relaxed),
            },
            StoreMetric {
                name: "forkless_store_cached_bytes",
                help: "Payload bytes of retained events held in memory (the others are read from the data file).",
                kind: MetricKind::Gauge,
                value: self.inner.engine.cached_bytes(),
            },
            StoreMetric {
                name: "forkless_store_spilled_events_total",
                help: "Retained events that left memory for the data file since the store opened.",
                kind: MetricKind::Counter,
                value: self.inner.engine.spilled_events(),
            },
        ]
    }

    async fn health(&self) -> Result<()> {
        self.check()
    }

    async fn due(&self, now: Timestamp, schedule: &forkless_core::Schedule) -> Result<Vec<SessionId>> {
        self.check()?;
        self.inner.engine.due(now, schedule)
    }

    fn tasks(&self) -> Option<&impl forkless_store::TaskStore> {
        Some(self)
    }

    fn spending(&self) -> Option<&impl forkless_store::Spending> {
        Some(self)
    }

    fn publishing(&self) -> Option<&impl forkless_store::Publishing> {
        Some(self)
    }
}
