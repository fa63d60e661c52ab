//! What a store shared by many nodes asks of its database: the [`Database`] trait and the
//! writes it stores ([`Write`], [`Batch`]), sessions' owners and node leases. It owns the
//! contract, not any implementation.

use core::future::Future;

use bytes::Bytes;

use forkless_core::{Schedule, Seq, SessionId, SessionRecord, Stream, StreamId, TaskId, Timestamp};

use super::LeaseOp;
use crate::{Result, SpendKey, Spent, StoredEvent, Version};

/// A compare-and-set write: `new` replaces `old`, stored at version `expected`.
#[derive(Debug)]
pub struct Write<'a> {
    /// The version `old` is stored at.
    pub expected: Version,
    /// The record as stored.
    pub old: &'a SessionRecord,
    /// The record to store at the next version.
    pub new: &'a SessionRecord,
    /// The hint for other nodes, to deliver only if the write is stored.
    pub hint: Option<String>,
}

/// What a [`Write`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Written {
    /// Stored: the session is at the next version.
    Committed,
    /// Another writer moved the session first; nothing was written.
    Moved,
}

/// One session's part of a batch: from `start` at `version` to `end`, with `appended`
/// events appended (its version moves on by that many).
#[derive(Debug)]
pub struct SessionWrite<'a> {
    /// The version `start` is stored at.
    pub version: Version,
    /// Events appended to it in this batch.
    pub appended: u64,
    /// The record as stored.
    pub start: &'a SessionRecord,
    /// The record after the batch.
    pub end: &'a SessionRecord,
}

/// Consecutive events of one stream that a batch stores, as one row: a chunk, at most
/// [`crate::codec::MAX_CHUNK_EVENTS`] events and, unless one event alone is larger,
/// [`crate::codec::MAX_CHUNK_BYTES`] bytes. It holds the payloads as they were appended;
/// [`Chunk::encode`] writes the row ([`crate::codec::chunk_events`] reads it) straight into
/// whatever a database sends, so a payload is copied once on its way out.
#[derive(Debug)]
pub struct Chunk {
    /// Its session.
    pub session: SessionId,
    /// Its stream.
    pub stream: StreamId,
    /// The seq of its first event.
    pub first: Seq,
    /// The seq of its last event.
    pub last: Seq,
    /// The payloads, in order.
    pub payloads: Vec<Bytes>,
}

impl Chunk {
    /// The length of the row.
    pub fn encoded_len(&self) -> usize {
        self.payloads.iter().map(|p| 4 + p.len()).sum()
    }

    /// Write the row, piece by piece, to `put`.
    pub fn encode(&self, mut put: impl FnMut(&[u8])) {
        for p in &self.payloads {
            put(&u32::try_from(p.len()).unwrap_or(u32::MAX).to_be_bytes());
            put(p);
        }
    }
}

/// A group commit: every session it advances (in one order, by id, so batches on two nodes
/// lock sessions alike), every event in chunks, and the hints for other nodes.
#[derive(Debug)]
pub struct Batch<'a> {
    /// The sessions, sorted by id.
    pub sessions: &'a [SessionWrite<'a>],
    /// The events, in chunks; a stream's chunks in order.
    pub chunks: &'a [Chunk],
    /// One hint per session that changed, if hints are on.
    pub hints: &'a [Hint],
    /// Who writes: a database that keeps tail interest ([`Database::declare`]) sends a
    /// session's hint only if another node declared interest in it or another node owns it
    /// (see [`HintFilter::owner`]); with no filter (`None`), every hint.
    pub filter: Option<HintFilter<'a>>,
}

/// One session's hint in a [`Batch`].
#[derive(Debug)]
pub struct Hint {
    /// The session whose streams changed.
    pub session: SessionId,
    /// The hint, in the hint format.
    pub text: String,
}

/// The writing node, as a batch's hints are filtered by it (see [`Batch::filter`]).
#[derive(Clone, Copy, Debug)]
pub struct HintFilter<'a> {
    /// The writer's name in tail interest (its hint name): its own interest does not count.
    pub node: &'a str,
    /// The writer's node id, if it holds a lease. A session some other node owns always hints
    /// (its owner declares no interest), and so, for a writer with a lease, does a session
    /// nobody owns.
    pub owner: Option<&'a str>,
}

/// What a [`Database::declare`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Declared {
    /// Interest is declared: every later batch of another node writing the session hints.
    Tailing,
    /// The declaring node owns the session: its batches are its own, nothing to declare.
    Owner,
}

/// What a [`Batch`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Committed {
    /// Every session advanced; every event is stored; `hints` hints were sent with it.
    All {
        /// How many of the batch's hints the database sent.
        hints: u64,
    },
    /// This session had moved on (or was gone); nothing of the batch was written.
    Moved(SessionId),
}

/// What a [`Database::read`] found.
#[derive(Debug)]
pub struct Read {
    /// The stream's stored metadata, as of the read.
    pub meta: Stream,
    /// Its stored events after the cursor, in order, at most the `max` asked for.
    pub events: Vec<StoredEvent>,
}

/// What [`Database::load_since`] found.
#[derive(Debug)]
pub enum Loaded {
    /// No such session.
    Unknown,
    /// The session is still at the version and under the history tag the caller named: the
    /// record it holds is current.
    Unchanged,
    /// The session as stored now.
    Found {
        /// Its version.
        version: Version,
        /// The record.
        record: Box<SessionRecord>,
        /// The history it was read in (see [`Database::load_since`]); `None`: a later
        /// [`Database::load_since`] must read it in full.
        tag: Option<u64>,
    },
}

/// A task's row as a database stores it: the encoded record
/// ([`crate::codec::encode_task`]) and the columns it is found by.
#[derive(Clone, Copy, Debug)]
pub struct TaskRow<'a> {
    /// The task.
    pub id: TaskId,
    /// The encoded record.
    pub record: &'a [u8],
    /// The node running it, if the task is open and names one.
    pub node: Option<&'a str>,
    /// Whether it has not ended yet (found by [`Database::open_tasks`]).
    pub open: bool,
    /// When its time to live ends (found by [`Database::expire_tasks`]).
    pub expires: Timestamp,
}

/// Who owns a session, as the database knows it now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnerFacts {
    /// The owner's node id.
    pub node: String,
    /// The base URL it advertised with its lease, if any.
    pub advertise: Option<String>,
    /// Whether its lease is live (on the database's clock).
    pub live: bool,
}

/// Where the nodes' sessions live. Every method is one atomic step of the database.
pub trait Database: Send + Sync + 'static {
    /// How many shards the database's sessions fall in: a [`Self::write_batch`] only ever
    /// holds sessions of one shard (a database that can write any sessions in one atomic step
    /// has one; Redis Cluster, whose scripts see one slot, one per slot its sessions use).
    /// Each shard gets a committer of its own. Default 1.
    fn shards(&self) -> usize {
        1
    }
    /// The shard `session` falls in, below [`Self::shards`]. Default 0.
    fn shard(&self, session: SessionId) -> usize {
        let _ = session;
        0
    }
    /// A session and its version; `None` if unknown.
    fn load(&self, id: SessionId) -> impl Future<Output = Result<Option<(Version, SessionRecord)>>> + Send;
    /// A session as [`Self::load`] reads it, unless it is still at `known`, a version and a
    /// history tag a [`Loaded::Found`] gave (or the tag a record read at an earlier version
    /// of it had, when the caller wrote the later versions itself): then
    /// [`Loaded::Unchanged`], and nothing of the record travels. The tag names the history
    /// a version belongs to, so a version numbered again after the database lost a suffix
    /// (Redis: the boot its data is vouched under) never passes for the record cached
    /// before. Default: always the whole record, never tagged.
    fn load_since(
        &self,
        id: SessionId,
        known: Option<(Version, u64)>,
    ) -> impl Future<Output = Result<Loaded>> + Send {
        let _ = known;
        let load = self.load(id);
        async move {
            Ok(match load.await? {
                None => Loaded::Unknown,
                Some((version, record)) => Loaded::Found { version, record: Box::new(record), tag: None },
            })
        }
    }
    /// Insert a new session at [`Version::INITIAL`]; [`Error::SessionExists`](crate::Error::SessionExists) if taken.
    fn insert(&self, record: &SessionRecord, owner: Option<&str>) -> impl Future<Output = Result<()>> + Send;
    /// Store a compare-and-set write (its logs follow the record: dropped streams lose their
    /// events, trims evict, an ended record loses every event).
    fn write(&self, write: Write<'_>) -> impl Future<Output = Result<Written>> + Send;
    /// Store a batch of appends, all of it or nothing.
    fn write_batch(&self, batch: Batch<'_>) -> impl Future<Output = Result<Committed>> + Send;
    /// Payload sizes of the oldest `n` stored events of a stream from `from` on, oldest first
    /// (a store keeps events in chunks: [`crate::codec::push_chunk_sizes`]).
    fn oldest_sizes(
        &self,
        session: SessionId,
        stream: StreamId,
        from: Seq,
        n: u64,
    ) -> impl Future<Output = Result<Vec<u64>>> + Send;
    /// The stream's stored metadata and up to `max` of its stored events after `after`, read
    /// in one atomic step. Unchecked: whether the reader may read them at all
    /// ([`crate::check_read`]) and whether they continue the cursor
    /// ([`crate::check_continuation`]) the shared layer decides, for every database alike.
    fn read(
        &self,
        session: SessionId,
        stream: StreamId,
        after: Seq,
        max: usize,
    ) -> impl Future<Output = Result<Read>> + Send;
    /// One stream's stored metadata ([`Error::StreamUnknown`](crate::Error::StreamUnknown), [`Error::SessionUnknown`](crate::Error::SessionUnknown)).
    fn stream(&self, session: SessionId, stream: StreamId) -> impl Future<Output = Result<Stream>> + Send;
    /// Forget a session; deliver `hint` with it.
    fn remove(&self, id: SessionId, hint: Option<String>) -> impl Future<Output = Result<()>> + Send;
    /// Every stored session id.
    fn sessions(&self) -> impl Future<Output = Result<Vec<SessionId>>> + Send;
    /// The sessions due at `now` (see [`Store::due`](crate::Store::due)).
    fn due(&self, now: Timestamp, schedule: &Schedule)
    -> impl Future<Output = Result<Vec<SessionId>>> + Send;
    /// Whether the database answers now (see [`Store::health`](crate::Store::health)).
    fn health(&self) -> impl Future<Output = Result<()>> + Send;
    /// The sessions `node` owns.
    fn owned(&self, node: &str) -> impl Future<Output = Result<Vec<SessionId>>> + Send;
    /// The sessions whose owner holds no live lease, with that owner.
    fn ownerless(&self) -> impl Future<Output = Result<Vec<(SessionId, String)>>> + Send;
    /// Who owns `session`, in one round trip; `None` if it is unknown or has no owner.
    fn owner(&self, session: SessionId) -> impl Future<Output = Result<Option<OwnerFacts>>> + Send;
    /// Make `to` the owner of `session` if `from` still owns it; whether it did.
    fn claim(&self, session: SessionId, from: &str, to: &str) -> impl Future<Output = Result<bool>> + Send;
    /// A node lease operation on the database's clock (see [`NodeLease`](super::NodeLease)); whether it took.
    fn lease(&self, op: LeaseOp<'_>) -> impl Future<Output = Result<bool>> + Send;
    /// Store one-time `key` (kept at least until `until`) unless it is stored already, in one
    /// atomic step (see [`crate::Spending::spend`](crate::Spending::spend)). Keys whose time passed before
    /// `now` may be deleted on the way.
    fn spend(
        &self,
        key: SpendKey,
        issued: Timestamp,
        until: Timestamp,
        now: Timestamp,
    ) -> impl Future<Output = Result<Spent>> + Send;
    /// A task's encoded record and its version; `None` if unknown.
    fn task(&self, id: TaskId) -> impl Future<Output = Result<Option<(Version, Vec<u8>)>>> + Send;
    /// Store `row` at [`Version::INITIAL`] if `expected` is `None` and the id is free, else
    /// at the version after `expected` if the task is still stored at it; whether it did.
    /// Durable (committed) when this returns.
    fn put_task(
        &self,
        row: TaskRow<'_>,
        expected: Option<Version>,
    ) -> impl Future<Output = Result<bool>> + Send;
    /// Ids of the open tasks whose row names `node` (`None`: no node).
    fn open_tasks(&self, node: Option<&str>) -> impl Future<Output = Result<Vec<TaskId>>> + Send;
    /// Open tasks whose node holds no live lease, with that node.
    fn lapsed_tasks(&self) -> impl Future<Output = Result<Vec<(TaskId, String)>>> + Send;
    /// Delete every task whose time to live ended before `now`; how many.
    fn expire_tasks(&self, now: Timestamp) -> impl Future<Output = Result<u64>> + Send;
    /// Send `hint` (a listen notification in the hint format) to every node's listener, as
    /// hints travel (best effort).
    fn publish(&self, hint: &str) -> impl Future<Output = Result<()>> + Send;
    /// Whether this database keeps tail interest and filters a batch's hints by it (see
    /// [`Batch::filter`]). Default: no; every hint of every batch is sent.
    fn filters_hints(&self) -> bool {
        false
    }
    /// Declare that `node` tails `session`, unless `owner` (the declaring node's id, if it
    /// holds a lease) owns it. Ordered after every batch that holds the session when it is
    /// called: such a batch is stored before this returns, and every later one sees the
    /// interest (so a stream read after this returns misses no commit without a hint).
    /// `None` if the session is unknown. Default: [`Declared::Tailing`], nothing stored.
    fn declare(
        &self,
        session: SessionId,
        node: &str,
        owner: Option<&str>,
    ) -> impl Future<Output = Result<Option<Declared>>> + Send {
        let _ = (session, node, owner);
        async { Ok(Some(Declared::Tailing)) }
    }
    /// Withdraw `node`'s interest in `sessions`. Default: nothing to withdraw.
    fn withdraw(&self, node: &str, sessions: &[SessionId]) -> impl Future<Output = Result<()>> + Send {
        let _ = (node, sessions);
        async { Ok(()) }
    }
}
