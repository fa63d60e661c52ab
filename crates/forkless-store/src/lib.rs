//! # forkless-store: where sessions and event logs live
//!
//! This crate owns the [`Store`] trait and the capabilities a store may add to it
//! ([`capability`]: tasks, spending, publishing, ownership; [`Equipped`] fills in what a store
//! lacks), the promises every backend keeps, the in-memory
//! backend ([`MemoryStore`]), the [`engine`] in-process backends are built on, the conformance
//! suite every backend must pass ([`conformance`], behind the `conformance` feature) and a
//! fault-injecting wrapper ([`FaultyStore`]), and the binary encoding of a record that persisting
//! stores share ([`codec`]). It has no disk dependency: the durable embedded
//! store is the crate `forkless-store-redb`.
//!
//! It does not decide anything: every decision is made by `forkless-core` on a
//! [`SessionRecord`] snapshot, and the store applies the result with compare-and-set
//! ([`transact`]). So the same Rust code decides for every backend, and two writers racing on
//! one session cannot both win.
//!
//! ## The promises
//!
//! 1. **Versioned snapshots.** [`Store::load`] returns a record with its [`Version`];
//!    [`Store::compare_and_set`] replaces it only if the version is unchanged, and bumps it.
//! 2. **Atomic append.** [`Store::append`] runs [`SessionRecord::append`] (the fencing and
//!    ended checks, and `seq = high-water + 1`) and stores the payload in one atomic step, then
//!    applies retention. An append on a fenced stream or ended session returns the typed error
//!    and stores nothing. An append bumps the record's version.
//! 3. **Durable before delivery** (PROTOCOL section 6). Each stream has, beside its appended
//!    high-water mark, a *delivered* mark: the highest seq the store vouches survives a crash
//!    in its durability mode. [`Store::read`] returns nothing above it and
//!    [`StreamSignal::delivered`] never passes it, so no writer, replay or finished body can
//!    send an event that a crash could take back. An append whose target is an
//!    [`AppendTarget::Answer`] returns only once its event is delivered (the caller sends it
//!    at once); other appends may return earlier, and their events reach readers when they
//!    are delivered.
//! 4. **No number is ever reused.** Whatever a crash or restart loses lies above every
//!    delivered mark, and recovery starts new events (the answers to orphaned requests among
//!    them) above what survived. So every event id a client could have received names
//!    byte-identical content for as long as the stream is retained, or a resume from it is
//!    refused (the session or stream is unknown, or the cursor is ahead): never answered
//!    with other content under the same id. [`conformance`] checks this across a simulated
//!    crash for every store that can be crashed.
//! 5. **Reads from any cursor, fenced where the data is read.** [`Store::read`] returns the
//!    events after a cursor in order, without gaps, or [`Error::Evicted`] when retention
//!    dropped some of them. A writer reads as [`Reader::Attached`] with the epoch it was
//!    granted: once another attachment took over or the stream was fenced, the read is
//!    refused with [`forkless_core::Error::StaleEpoch`] or
//!    [`forkless_core::Error::StreamFenced`], whatever the writer has or has not noticed. On a
//!    store shared by many nodes, a node serves its own writers from what it just committed
//!    (its tail), checked against its own copy of the record: a takeover by another node
//!    reaches that copy within [`Ownership::handover`], and a writer that displaced a live
//!    attachment waits that long before it writes, so at most one writer delivers at a time.
//! 6. **Wake-ups without polling.** [`Store::watch`] hands out a [`StreamWatch`] that wakes on
//!    every delivery, attach (epoch change), completion and fence of its stream.
//! 7. **Ended sessions drop their events.** Once a record is written in the ended state its
//!    logs are dropped; the record stays as a tombstone (so the server can answer 404 with the
//!    reason) until [`Store::remove`].
//! 8. **Sweeps cost what is due.** [`Store::due`] returns exactly the sessions whose
//!    [`Wake`](forkless_core::Wake) anchors are due at the given instant, without loading the
//!    others: the in-process engine keeps an ordered index of the anchors, a database an
//!    indexed column per anchor.
//! 9. **A one-time key is spent once.** Of every [`Spending::spend`] of one [`SpendKey`] before
//!    its time passes, across every process sharing the store, at most one returns
//!    [`Spent::Now`]. A key issued before the store's memory of spent keys began (a
//!    process-local [`Ledger`] starts when the store opens; Redis after a restart that may
//!    have lost writes) is [`Spent::Unvouched`], never `Now`: it may have been spent and
//!    forgotten.
//! 10. **Listen notifications reach every node.** What [`Publishing::publish`] sends reaches
//!     every [`Publishing::subscribe`]r on every node sharing the store, this one included, once, while
//!     it is subscribed; best effort (a node whose listener is reconnecting misses it), as the
//!     2026-07-28 listen streams it feeds are not resumable.
//! 11. **A task's record is durable before anyone learns its id.** [`TaskStore::create_task`]
//!     and [`TaskStore::replace_task`] return once the write survives a crash in the store's
//!     mode, and a replace is a compare-and-set on the task's version, so every change to a
//!     task is one transition of the core's [`forkless_core::TaskRecord`] on the version it read.
//!
//! ## One process, many nodes
//!
//! [`MemoryStore`] and the redb store serve one process: their compare-and-set is a lock,
//! their wake-ups are in-process channels, their delivered mark moves when their own writer
//! says so. A store shared by many nodes keeps the same promises across them: compare-and-set
//! linearizable in the database, an append's fencing check and `seq` assignment in the same
//! transaction as its payload, events delivered only once committed, watchers on other nodes
//! woken by a hint and a re-read (a hint may be lost; the re-read may not), and [`Store::due`]
//! answered from indexed columns.

use core::fmt;
use core::future::Future;

use bytes::Bytes;
pub use forkless_core::EventKind;
use forkless_core::{
    AppendTarget, Epoch, EventId, Limits, Seq, SessionId, SessionRecord, StreamId, StreamState, Timestamp,
};

mod bulletin;
pub mod capability;
pub mod codec;
mod due;
pub mod engine;
mod equipped;
mod error;
mod faulty;
mod memory;
mod owner;
mod read;
pub mod shared;
pub mod skip;
mod spend;
mod tasks;

#[cfg(feature = "conformance")]
pub mod conformance;
#[cfg(feature = "conformance")]
pub mod testing;

pub use bulletin::Bulletin;
pub use capability::{Absent, Ownership, Publishing, Spending};
pub use equipped::Equipped;
pub use error::Error;
pub use faulty::{Fault, FaultyStore};
pub use forkless_core::Orphan;
pub use memory::MemoryStore;
pub use owner::{Advertised, InvalidAdvertised, InvalidNodeName, NodeName, Owner, Takeover};
pub use read::{check_continuation, check_read};
pub use spend::{Ledger, SpendKey, Spent};
pub use tasks::{TaskMap, TaskStore, transact_task};

/// The version of a stored [`SessionRecord`], bumped by every successful write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version(u64);

impl Version {
    /// The version of a freshly created record.
    pub const INITIAL: Self = Self(1);

    /// The version `n`.
    pub const fn new(n: u64) -> Self {
        Self(n)
    }

    /// The number.
    pub const fn get(self) -> u64 {
        self.0
    }

    /// The following version.
    pub const fn next(self) -> Self {
        Self(self.0 + 1)
    }
}

/// A value together with the version it was read at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Versioned<T> {
    /// The version.
    pub version: Version,
    /// The value.
    pub value: T,
}

/// One stored event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredEvent {
    /// Its position in its stream.
    pub seq: Seq,
    /// The serialized JSON-RPC message.
    pub payload: Bytes,
}

/// One event to append, and what the append is judged by: [`Store::append`]'s argument.
#[derive(Clone, Debug)]
pub struct Append<'a> {
    /// The session.
    pub session: SessionId,
    /// Where the event goes (never redirected).
    pub target: AppendTarget,
    /// The serialized JSON-RPC message.
    pub payload: Bytes,
    /// Whether it ends its stream.
    pub kind: EventKind,
    /// When (retention and liveness deadlines count from it).
    pub now: Timestamp,
    /// The retention limits the append is checked against.
    pub limits: &'a Limits,
}

/// How a stream's delivery ends, as seen by a watcher.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StreamEnd {
    /// The final event was appended; deliver up to the high-water mark, then end.
    Completed,
    /// Fenced: stop before the next write.
    Fenced,
}

/// What a writer needs to know about its stream, published on every change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamSignal {
    /// Seq of the last delivered event: the highest the store vouches survives a crash, and
    /// the highest a reader may send (promise 3).
    pub delivered: Seq,
    /// The current attach epoch.
    pub epoch: Epoch,
    /// Whether and how the stream ended.
    pub end: Option<StreamEnd>,
}

impl StreamSignal {
    /// The signal of a stream's metadata when everything appended to it is delivered.
    /// A completed stream reads as completed only once its final event is delivered.
    pub fn of(stream: &forkless_core::Stream, delivered: Seq) -> Self {
        let delivered = delivered.min(stream.high_water());
        let end = match stream.state() {
            StreamState::Open(_) => None,
            StreamState::Completed(_) if delivered < stream.high_water() => None,
            StreamState::Completed(_) => Some(StreamEnd::Completed),
            StreamState::Fenced(_) => Some(StreamEnd::Fenced),
        };
        Self { delivered, epoch: stream.epoch(), end }
    }
}

/// A subscription to one stream's [`StreamSignal`]. Wakes without polling.
#[derive(Debug)]
pub struct StreamWatch {
    rx: tokio::sync::watch::Receiver<StreamSignal>,
}

impl StreamWatch {
    /// A watch over a channel a store publishes to.
    pub fn new(rx: tokio::sync::watch::Receiver<StreamSignal>) -> Self {
        Self { rx }
    }

    /// The latest signal.
    pub fn current(&self) -> StreamSignal {
        *self.rx.borrow()
    }

    /// Wait for the next change and return it. If the store dropped the stream, this returns
    /// a fenced signal, so a writer always stops.
    pub async fn changed(&mut self) -> StreamSignal {
        match self.rx.changed().await {
            Ok(()) => *self.rx.borrow_and_update(),
            Err(_) => StreamSignal { end: Some(StreamEnd::Fenced), ..*self.rx.borrow() },
        }
    }

    /// Mark the current value as seen.
    pub fn mark_seen(&mut self) -> StreamSignal {
        *self.rx.borrow_and_update()
    }
}

/// Who reads a stream's log (promise 5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reader {
    /// A writer serving the attachment granted with this epoch: refused once the stream's
    /// epoch moved on or the stream was fenced.
    Attached(Epoch),
    /// An inspection that delivers nothing to a client (tests, tools, verification): reads
    /// whatever is delivered, whoever is attached.
    Inspector,
}

/// What a store holds and what retention dropped: for server-wide limits and `/metrics`.
/// Counted where the store applies the core's plans; a shared store counts what this node
/// applied.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Payload bytes of retained events, across every session.
    pub retained_bytes: u64,
    /// Events evicted by [`Limits::stream_max_events`] since the store opened.
    pub evicted_by_events: u64,
    /// Events evicted by [`Limits::stream_max_bytes`] since the store opened.
    pub evicted_by_bytes: u64,
}

/// Whether a [`StoreMetric`] only grows or goes up and down.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetricKind {
    /// A count since the store opened.
    Counter,
    /// A value now.
    Gauge,
}

/// One figure a store reports for `/metrics`, beyond [`Usage`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreMetric {
    /// The Prometheus name.
    pub name: &'static str,
    /// Its help text.
    pub help: &'static str,
    /// Counter or gauge.
    pub kind: MetricKind,
    /// The value.
    pub value: u64,
}

/// The result type of store operations.
pub type Result<T, E = Error> = core::result::Result<T, E>;

/// A backend for sessions and event logs, with the capabilities it has beyond them
/// ([`capability`]: tasks, spending, publishing, ownership). See the crate docs for the
/// promises every method keeps; [`conformance::run_all`] checks them.
pub trait Store: Send + Sync + 'static {
    /// Insert a new record (version [`Version::INITIAL`]). [`Error::SessionExists`] if taken.
    fn create(&self, record: SessionRecord) -> impl Future<Output = Result<Version>> + Send;

    /// The record and its version; `None` if unknown or removed. Ended records are returned.
    fn load(&self, id: SessionId) -> impl Future<Output = Result<Option<Versioned<SessionRecord>>>> + Send;

    /// Replace the record if its stored version is still `expected`. Returns the new version,
    /// or `None` when another writer got there first (nothing written). Logs of streams the
    /// new record no longer holds are dropped, as are all logs of an ended record; watchers
    /// of changed streams are woken.
    fn compare_and_set(
        &self,
        expected: Version,
        record: SessionRecord,
    ) -> impl Future<Output = Result<Option<Version>>> + Send;

    /// Append one event (see promise 2); a [`EventKind::Final`] one completes its stream.
    /// The id of an [`EventKind::Intermediate`] event returned before it is delivered is the
    /// one it will be delivered under, except on a store shared by many nodes, where a write
    /// by another node may renumber it before it is stored (never after: promise 4).
    fn append(&self, event: Append<'_>) -> impl Future<Output = Result<EventId>> + Send;

    /// Up to `max` delivered events of `stream` with seq greater than `after`, in order, as
    /// `reader` (see promises 3 and 5).
    fn read(
        &self,
        session: SessionId,
        stream: StreamId,
        after: Seq,
        max: usize,
        reader: Reader,
    ) -> impl Future<Output = Result<Vec<StoredEvent>>> + Send;

    /// Subscribe to `stream`'s signal.
    fn watch(&self, session: SessionId, stream: StreamId)
    -> impl Future<Output = Result<StreamWatch>> + Send;

    /// Forget a session and everything it holds.
    fn remove(&self, id: SessionId) -> impl Future<Output = Result<()>> + Send;

    /// Ids of every stored session (for recovery and tools; a sweep asks [`Self::due`]).
    fn sessions(&self) -> impl Future<Output = Result<Vec<SessionId>>> + Send;

    /// What the store holds and has evicted (cheap: no I/O).
    fn usage(&self) -> Usage;

    /// The payload bytes `session` retains, as this process last saw its record (cheap: no
    /// I/O); `None` if it has not seen it. What per-principal shares are counted from.
    fn retained_by(&self, session: SessionId) -> Option<u64> {
        let _ = session;
        None
    }

    /// What this store reports for `/metrics` beyond [`Usage`] (cheap: no I/O). Default: none.
    fn metrics(&self) -> Vec<StoreMetric> {
        Vec::new()
    }

    /// Whether the store can serve now: a database answers, a durable store has not refused
    /// work after a failed write. What `/healthz` reports; at most one round trip.
    fn health(&self) -> impl Future<Output = Result<()>> + Send {
        async { Ok(()) }
    }

    /// Ids of exactly the sessions due for a sweep at `now`: those whose record's
    /// [`Wake`](forkless_core::Wake) anchors are due under `schedule` (see promise 8). It
    /// costs what is due, not what is stored.
    fn due(
        &self,
        now: Timestamp,
        schedule: &forkless_core::Schedule,
    ) -> impl Future<Output = Result<Vec<SessionId>>> + Send;

    /// Where this store keeps tasks ([`TaskStore`], promise 11); `None`: the process keeps
    /// them ([`Equipped`]). Default: none.
    fn tasks(&self) -> Option<&impl TaskStore> {
        None::<&Absent>
    }

    /// How this store spends one-time keys across every process sharing it ([`Spending`],
    /// promise 9); `None`: the process keeps its own [`Ledger`]. Default: none.
    fn spending(&self) -> Option<&impl Spending> {
        None::<&Absent>
    }

    /// How this store carries listen notifications to other nodes ([`Publishing`], promise
    /// 10); `None`: the process hands them to its own subscribers ([`Bulletin`]). Default:
    /// none.
    fn publishing(&self) -> Option<&impl Publishing> {
        None::<&Absent>
    }

    /// Which node serves each session ([`Ownership`]), on a store shared by many nodes;
    /// `None`: every session is served here. Default: none.
    fn ownership(&self) -> Option<&impl Ownership> {
        None::<&Absent>
    }
}

/// How many times [`transact`] retries a lost compare-and-set before giving up.
pub const MAX_CAS_ATTEMPTS: u32 = 64;

/// Load `id`, run `f` on the snapshot, and write the result back by compare-and-set,
/// retrying on conflict. `f` must be a pure function of the record (it may run several
/// times). If `f` fails, nothing is written. Returns `f`'s value and the new version.
pub async fn transact<S, R, F>(store: &S, id: SessionId, mut f: F) -> Result<(R, Version)>
where
    S: Store + ?Sized,
    F: FnMut(&mut SessionRecord) -> Result<R, forkless_core::Error> + Send,
    R: Send,
{
    for _ in 0..MAX_CAS_ATTEMPTS {
        let Some(Versioned { version, mut value }) = store.load(id).await? else {
            return Err(Error::SessionUnknown);
        };
        let out = f(&mut value)?;
        if let Some(v) = store.compare_and_set(version, value).await? {
            return Ok((out, v));
        }
    }
    Err(Error::Contended { attempts: MAX_CAS_ATTEMPTS })
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{}", self.0)
    }
}
