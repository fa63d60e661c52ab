//! The writer thread: makes the engine's effects durable in order, with group commit, and
//! checkpoints them into redb.
//!
//! Every mutation's effects arrive as one [`Msg::Ops`] sent while the session lock is held,
//! so the queue is in mutation order and every log entry covers a prefix of it. A
//! [`Msg::Barrier`] is acknowledged once everything queued before it is durable. One thread
//! owns all writes; it drains whatever is queued (or, in batched mode, whatever arrives
//! within the batch window) into one write-ahead log entry and one fsync (see [`super::wal`]).
//! A barrier ends a batch window early: somebody waits, so the group commits at once, with
//! everything queued by then.
//!
//! Only after a group's sync are the group's events delivered (the engine makes them visible
//! to readers and wakes their writers), and only then are the group's waiters acknowledged:
//! durable before delivery, in both modes. A failed write delivers nothing. Both happen in
//! one [`Settled`] handed to the store, which applies it on a task of the async runtime when
//! there is one: a group then costs one wake-up across threads, not one per waiter.
//!
//! The writes since the last checkpoint are also kept in memory; a checkpoint applies them
//! to redb in one transaction, with the LSN of the last log entry in the META table, and the
//! log starts over. It happens when the log is full, [`CHECKPOINT_INTERVAL`] after the oldest
//! write not yet checkpointed, and when the store closes.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use redb::{Database, ReadableTable, TableDefinition};

use super::Durability;
use super::codec;
use super::wal::Log;
use crate::engine::Origin;

/// Longest a write waits in the log before a checkpoint copies it into redb. Bounds the
/// replay after a crash (at most this long's writes) and the memory holding them.
pub(crate) const CHECKPOINT_INTERVAL: Duration = Duration::from_secs(1);

pub(crate) const META: TableDefinition<'_, &str, u64> = TableDefinition::new("meta");
/// META key of the LSN of the last log entry applied to redb.
pub(crate) const META_LSN: &str = "lsn";
/// META key of the random number that ties the log to this data file (see [`super::wal`]).
pub(crate) const META_LOG_KEY: &str = "log_key";
pub(crate) const SESSIONS: TableDefinition<'_, &[u8], &[u8]> = TableDefinition::new("sessions");
pub(crate) const EVENTS: TableDefinition<'_, &[u8], &[u8]> = TableDefinition::new("events");
/// One row per stream, keyed by session and stream id (see [`super::codec`]).
pub(crate) const STREAMS: TableDefinition<'_, &[u8], &[u8]> = TableDefinition::new("streams");

/// One write.
#[derive(Debug)]
pub(crate) enum Op {
    /// Write a session's header row.
    PutHeader {
        session: [u8; 16],
        header: Vec<u8>,
    },
    /// Write one stream's row (`prefix` = session + stream); `origin`: whether the write that
    /// logged it created the stream.
    PutStream {
        prefix: [u8; 28],
        stream: Vec<u8>,
        origin: Origin,
    },
    PutEvent {
        key: [u8; 36],
        payload: Bytes,
    },
    /// Delete events of a stream (`prefix` = session + stream) with seq below `low_water`.
    Trim {
        prefix: [u8; 28],
        low_water: u64,
    },
    /// Delete a stream's row and all its events.
    DropStream {
        prefix: [u8; 28],
    },
    /// Delete a session's header, stream rows and events.
    DropSession {
        session: [u8; 16],
    },
    /// Delete a session's events, keeping its record.
    DropEvents {
        session: [u8; 16],
    },
}

/// Acknowledges a write (or a barrier) once it is durable, or with the failure.
pub(crate) type Ack = tokio::sync::oneshot::Sender<Result<(), String>>;

#[derive(Debug)]
pub(crate) enum Msg {
    /// One mutation's writes, and the events it appended, delivered once they are durable.
    /// `waiter`: somebody waits for exactly these writes (an answer sent at once, or any
    /// write in immediate mode), so the group commits now rather than at the window's end.
    Ops {
        ops: Vec<Op>,
        deliver: Vec<EventId>,
        waiter: Option<Ack>,
    },
    Barrier(Ack),
}

impl Msg {
    /// Whether somebody waits on this message: its group commits at once.
    fn is_urgent(&self) -> bool {
        matches!(self, Self::Barrier(_) | Self::Ops { waiter: Some(_), .. })
    }
}

/// An appended event, by session and id: what the writer delivers once it is durable.
#[derive(Clone, Copy, Debug)]
pub(crate) struct EventId {
    pub(crate) session: forkless_core::SessionId,
    pub(crate) event: forkless_core::EventId,
}

/// The failure that poisoned the store, shared with the store's front.
#[derive(Debug)]
pub(crate) struct Poison {
    poisoned: AtomicBool,
    why: tokio::sync::watch::Sender<Option<String>>,
}

impl Default for Poison {
    fn default() -> Self {
        Self { poisoned: AtomicBool::new(false), why: tokio::sync::watch::Sender::new(None) }
    }
}

impl Poison {
    pub(crate) fn check(&self) -> Result<(), String> {
        if self.poisoned.load(Ordering::Acquire) {
            Err(self.why.borrow().clone().unwrap_or_default())
        } else {
            Ok(())
        }
    }

    fn set(&self, why: String) {
        self.why.send_replace(Some(why));
        self.poisoned.store(true, Ordering::Release);
    }

    /// Resolves with the reason once the store is poisoned.
    pub(crate) async fn failed(&self) -> String {
        let mut rx = self.why.subscribe();
        let why = match rx.wait_for(Option::is_some).await {
            Ok(why) => why.clone(),
            // The sender lives as long as `self`, so this cannot end while we hold `&self`.
            Err(_) => None,
        };
        match why {
            Some(why) => why,
            None => std::future::pending().await,
        }
    }
}

/// Most messages folded into one log entry; bounds commit latency under a flood.
const MAX_BATCH: usize = 8192;

/// What the writer thread owns: redb, the log, and the writes logged since the last
/// checkpoint.
#[derive(Debug)]
pub(crate) struct Writer {
    db: Database,
    log: Log,
    pending: Vec<Op>,
    /// When the oldest pending write was logged.
    pending_since: Option<Instant>,
    crash_hook: CrashHook,
    /// How long a log write and its sync took lately (a moving average): a batch window
    /// closes this much early, so that window and sync together stay within the window.
    sync_time: Duration,
}

/// A test hook for crash tests over real processes: with `FORKLESS_TEST_ABORT_IN_SYNC=N` in
/// the environment, the process aborts while the Nth group is being made durable (its log
/// entry is encoded, nothing of it is delivered, its sync has not returned). Read once at
/// open; without the variable this is a counter nobody reads.
#[derive(Debug, Default)]
struct CrashHook {
    abort_at: Option<u64>,
    groups: u64,
}

impl CrashHook {
    fn from_env() -> Self {
        let abort_at = std::env::var("FORKLESS_TEST_ABORT_IN_SYNC").ok().and_then(|v| v.parse().ok());
        Self { abort_at, groups: 0 }
    }

    fn before_sync(&mut self) {
        self.groups += 1;
        if self.abort_at == Some(self.groups) {
            tracing::error!(group = self.groups, "FORKLESS_TEST_ABORT_IN_SYNC: aborting during a group sync");
            std::process::abort();
        }
    }
}

impl Writer {
    /// A writer over a log whose entries are all checkpointed.
    pub(crate) fn new(db: Database, log: Log) -> Self {
        Self {
            db,
            log,
            pending: Vec::new(),
            pending_since: None,
            crash_hook: CrashHook::from_env(),
            sync_time: Duration::ZERO,
        }
    }

    /// The redb database (read at recovery, before the writer thread starts).
    pub(crate) fn db(&self) -> &Database {
        &self.db
    }

    /// When the pending writes are due for a checkpoint, if there are any.
    fn checkpoint_due(&self) -> Option<Instant> {
        self.pending_since.map(|t| t + CHECKPOINT_INTERVAL)
    }

    /// Make a batch durable: one log entry, one sync. A group too large for the log at all
    /// goes straight into redb with the pending writes (a checkpoint).
    fn write(&mut self, batch: &mut [Msg]) -> Result<(), String> {
        let mut group: Vec<Op> = batch
            .iter_mut()
            .filter_map(|m| match m {
                Msg::Ops { ops, .. } => Some(std::mem::take(ops)),
                Msg::Barrier(_) => None,
            })
            .flatten()
            .collect();
        // A batch window of appends to one stream rewrites its header and stream row once
        // per append; only the last of each goes to the log.
        let skip = superseded(&group);
        let mut skip = skip.into_iter();
        group.retain(|_| !skip.next().unwrap_or(false));
        let out = self.log.begin();
        for op in &group {
            codec::encode_op(op, out);
        }
        if self.log.is_empty() {
            return Ok(());
        }
        if !self.log.fits_when_empty() {
            self.pending.extend(group);
            return self.checkpoint();
        }
        if !self.log.fits() {
            self.checkpoint()?;
        }
        self.crash_hook.before_sync();
        let started = Instant::now();
        self.log.append().map_err(|e| format!("writing the write-ahead log: {e}"))?;
        self.sync_time = (self.sync_time * 7 + started.elapsed()) / 8;
        self.pending.extend(group);
        self.pending_since.get_or_insert_with(Instant::now);
        Ok(())
    }

    /// Checkpoint, unless the store is poisoned: then what is pending is dropped here (the log
    /// still holds what was synced, and the next open replays it).
    fn checkpoint_or_poison(&mut self, poison: &Poison) {
        if poison.check().is_ok() {
            fail_on(poison, self.checkpoint());
        }
        if poison.check().is_err() {
            self.pending = Vec::new();
            self.pending_since = None;
        }
    }

    /// Apply the pending writes to redb and start the log over.
    fn checkpoint(&mut self) -> Result<(), String> {
        if self.pending.is_empty() && !self.log.has_entries() {
            return Ok(());
        }
        let started = Instant::now();
        commit(&self.db, &self.pending, self.log.last_lsn())
            .map_err(|e| format!("checkpointing the write-ahead log into redb: {e}"))?;
        tracing::debug!(writes = self.pending.len(), took = ?started.elapsed(), "checkpoint");
        self.pending.clear();
        self.pending_since = None;
        self.log.restart();
        Ok(())
    }
}

pub(crate) fn run(
    mut writer: Writer,
    rx: Receiver<Msg>,
    durability: Durability,
    poison: &Poison,
    settle: &dyn Fn(Settled),
) {
    let window = match durability {
        Durability::Immediate => None,
        Durability::Batched { window } => Some(window),
    };
    // How many waited on the last group: 0, 1, or more (then the next sync waits for company).
    let mut waited_on = 0;
    loop {
        // In immediate mode, an emitter that waits for each append is back within tens of
        // microseconds: catching its next message awake spares this thread a sleep and the
        // wake-up that follows, which on an idle virtual CPU costs about as much as a sync.
        // (Polling after batched groups that had waiters measured no gain: not done.)
        if window.is_none()
            && let Some(msg) = poll_briefly(&rx, IMMEDIATE_POLL)
        {
            waited_on = handle(&mut writer, &rx, msg, window, poison, settle, waited_on > 1);
            continue;
        }
        // Wait for work; with writes pending, no longer than until their checkpoint is due.
        let first = match writer.checkpoint_due() {
            None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
            Some(due) => rx.recv_timeout(due.saturating_duration_since(Instant::now())),
        };
        let first = match first {
            Ok(first) => first,
            Err(RecvTimeoutError::Timeout) => {
                writer.checkpoint_or_poison(poison);
                continue;
            }
            Err(RecvTimeoutError::Disconnected) => break,
        };
        waited_on = handle(&mut writer, &rx, first, window, poison, settle, waited_on > 1);
    }
    // Closing: checkpoint, so the next open has nothing to replay.
    writer.checkpoint_or_poison(poison);
}

/// How long the writer polls for the next message before it sleeps, in immediate mode.
const IMMEDIATE_POLL: Duration = Duration::from_micros(200);

/// The next message if one arrives within `within`. Polls, yielding the CPU between polls,
/// so another thread that wants the core gets it.
fn poll_briefly(rx: &Receiver<Msg>, within: Duration) -> Option<Msg> {
    let until = Instant::now() + within;
    loop {
        match rx.try_recv() {
            Ok(msg) => return Some(msg),
            Err(std::sync::mpsc::TryRecvError::Empty) if Instant::now() < until => std::thread::yield_now(),
            Err(_) => return None,
        }
    }
}

/// Gather a group starting with `first`, write it with one sync, deliver its events,
/// acknowledge its waiters, and checkpoint if one is due. `company`: several waited on the
/// last group, so a sync somebody waits for holds back briefly for more. Returns how many
/// waited on this one.
fn handle(
    writer: &mut Writer,
    rx: &Receiver<Msg>,
    first: Msg,
    window: Option<Duration>,
    poison: &Poison,
    settle: &dyn Fn(Settled),
    company: bool,
) -> usize {
    let mut batch = vec![first];
    match window {
        // Batched: gather until the window ends, unless somebody waits.
        Some(window) if !batch[0].is_urgent() => {
            // An event waits for the window, then for the sync and its delivery: the window
            // makes room for both, so an event is delivered within the window of its append.
            let early = (writer.sync_time + DELIVERY_ALLOWANCE).min(window / 2);
            gather_window(rx, &mut batch, window - early);
        }
        // Immediate, or somebody waits: whatever is queued joins this group, and so does what
        // arrives while writes keep coming (that is what makes commits shared).
        _ if company => gather_waiters(rx, &mut batch),
        _ => drain_queued(rx, &mut batch),
    }
    let result = if poison.check().is_err() {
        Err("store is poisoned by an earlier failure".to_owned())
    } else {
        writer.write(&mut batch)
    };
    fail_on(poison, result.clone());
    let events = if result.is_ok() { coalesce(&batch) } else { Vec::new() };
    let acks = batch
        .into_iter()
        .filter_map(|msg| match msg {
            Msg::Barrier(ack) | Msg::Ops { waiter: Some(ack), .. } => Some(ack),
            Msg::Ops { waiter: None, .. } => None,
        })
        .collect::<Vec<_>>();
    let waited_on = acks.len();
    settle(Settled { events, acks, result });
    if writer.checkpoint_due().is_some_and(|due| due <= Instant::now()) {
        writer.checkpoint_or_poison(poison);
    }
    waited_on
}

/// What a batch window keeps free beside the usual sync time: a slow sync (the tail of its
/// latency), the writer thread's sleep overshooting its deadline, and handing the group to
/// the runtime and on to the connections' writers.
const DELIVERY_ALLOWANCE: Duration = Duration::from_micros(800);

/// How often a batched writer drains its queue while a window is open.
const BATCH_POLL: Duration = Duration::from_millis(1);

/// What a group's sync settled: the events to deliver (empty if it failed) and the waiters to
/// acknowledge, with the outcome. The events are delivered before the waiters hear.
#[derive(Debug)]
pub(crate) struct Settled {
    pub(crate) events: Vec<EventId>,
    pub(crate) acks: Vec<Ack>,
    pub(crate) result: Result<(), String>,
}

impl Settled {
    /// Deliver the events through `deliver`, then acknowledge every waiter.
    pub(crate) fn apply(self, deliver: impl Fn(EventId)) {
        self.events.into_iter().for_each(deliver);
        for ack in self.acks {
            let _ = ack.send(self.result.clone());
        }
    }
}

/// A durable group's events to deliver: each stream up to its last event in the group, once
/// (a window of appends to one stream wakes its writer once, not once per event).
fn coalesce(batch: &[Msg]) -> Vec<EventId> {
    let mut last: Vec<EventId> = Vec::new();
    for msg in batch {
        let Msg::Ops { deliver: events, .. } = msg else { continue };
        for e in events {
            let same = |l: &EventId| l.session == e.session && l.event.stream == e.event.stream;
            match last.iter_mut().rev().find(|l| same(l)) {
                Some(l) => l.event = l.event.max(e.event),
                None => last.push(*e),
            }
        }
    }
    last
}

/// The longest a sync somebody waits for is held back for more writes to join it.
const GROUP_GATHER: Duration = Duration::from_micros(400);
/// A group stops gathering once no write arrived for this long.
const GROUP_QUIET: Duration = Duration::from_micros(60);

/// Group commit for writes somebody waits on, when several waited on the last sync: take what
/// is queued, then keep taking writes while they arrive within [`GROUP_QUIET`] of each other
/// (at most [`GROUP_GATHER`] in all), yielding the CPU between polls so the threads producing
/// them can run. Concurrent requests then share one sync instead of paying one each (a sync
/// costs the kernel tens of microseconds of CPU). A lone waiter does not wait for company.
fn gather_waiters(rx: &Receiver<Msg>, batch: &mut Vec<Msg>) {
    drain_queued(rx, batch);
    let start = Instant::now();
    let mut last = start;
    while batch.len() < MAX_BATCH {
        match rx.try_recv() {
            Ok(m) => {
                batch.push(m);
                last = Instant::now();
            }
            Err(std::sync::mpsc::TryRecvError::Empty) => {
                let now = Instant::now();
                if now - last >= GROUP_QUIET || now - start >= GROUP_GATHER {
                    return;
                }
                std::thread::yield_now();
            }
            Err(std::sync::mpsc::TryRecvError::Disconnected) => return,
        }
    }
}

/// Move whatever is queued now into `batch` (up to [`MAX_BATCH`]), without waiting.
fn drain_queued(rx: &Receiver<Msg>, batch: &mut Vec<Msg>) {
    while batch.len() < MAX_BATCH
        && let Ok(m) = rx.try_recv()
    {
        batch.push(m);
    }
}

/// Gather messages into `batch` until `window` has passed since now, somebody waits (a
/// barrier, or writes with a waiter) or the batch is full. The thread sleeps between drains
/// instead of waiting on the queue, so an append never wakes it: on a core shared with the
/// server, waking per append cost two context switches per event. A waiter that arrives
/// during a window waits at most [`BATCH_POLL`], and whatever is queued behind it joins the
/// group (concurrent waiters share one sync).
fn gather_window(rx: &Receiver<Msg>, batch: &mut Vec<Msg>, window: Duration) {
    let deadline = Instant::now() + window;
    loop {
        loop {
            match rx.try_recv() {
                Ok(m) if m.is_urgent() => {
                    batch.push(m);
                    drain_queued(rx, batch);
                    return;
                }
                Ok(m) => {
                    batch.push(m);
                    if batch.len() >= MAX_BATCH {
                        return;
                    }
                }
                Err(std::sync::mpsc::TryRecvError::Empty) => break,
                Err(std::sync::mpsc::TryRecvError::Disconnected) => return,
            }
        }
        let now = Instant::now();
        if now >= deadline {
            return;
        }
        std::thread::sleep((deadline - now).min(BATCH_POLL));
    }
}

/// Poison the store on the first failure.
fn fail_on(poison: &Poison, result: Result<(), String>) {
    if let Err(why) = result
        && poison.check().is_ok()
    {
        tracing::error!(error = %why, "durable store write failed; the store is now poisoned and refuses all work");
        poison.set(why);
    }
}

/// Apply `ops` to redb in one durable transaction that also records `lsn` as the last log
/// entry applied.
pub(crate) fn commit(db: &Database, ops: &[Op], lsn: u64) -> Result<(), redb::Error> {
    let mut txn = db.begin_write()?;
    txn.set_durability(redb::Durability::Immediate)?;
    {
        let mut tables = Tables {
            sessions: txn.open_table(SESSIONS)?,
            streams: txn.open_table(STREAMS)?,
            events: txn.open_table(EVENTS)?,
        };
        let mut events = NewEvents::default();
        for (op, skip) in ops.iter().zip(superseded(ops)) {
            if !skip {
                apply(op, &mut tables, &mut events)?;
            }
        }
        events.finish(&mut tables.events)?;
        txn.open_table(META)?.insert(META_LSN, lsn)?;
    }
    txn.commit()?;
    Ok(())
}

/// Which of `ops` a transaction applying them all can skip: a header or stream row written
/// again or deleted by a later op, and events (and trims) of a stream or session whose events
/// a later op deletes. Every append rewrites its session's header and its stream's row, so a
/// checkpoint of many appends writes each once instead of once per append; and a session
/// answering every request over SSE drops its oldest answered streams within the second that
/// opened them (retention by count), so their events are never written at all. The skipped
/// writes change nothing the later ops leave behind, and a group is one log entry, applied
/// whole or not at all, so the log may skip them too. (The remaining event ops apply in order:
/// their effects depend on each other.)
fn superseded(ops: &[Op]) -> Vec<bool> {
    // Keys are CSPRNG ids: no need for SipHash.
    type Set<K> = std::collections::HashSet<K, forkless_core::IdHashBuilder>;
    let (mut sessions, mut streams) = (Set::<[u8; 16]>::default(), Set::<[u8; 28]>::default());
    let (mut gone_sessions, mut gone_streams) = (Set::<[u8; 16]>::default(), Set::<[u8; 28]>::default());
    let gone = |prefix: &[u8], gone_sessions: &Set<[u8; 16]>, gone_streams: &Set<[u8; 28]>| {
        let (session, stream) = (<[u8; 16]>::try_from(&prefix[..16]), <[u8; 28]>::try_from(&prefix[..28]));
        session.is_ok_and(|s| gone_sessions.contains(&s)) || stream.is_ok_and(|s| gone_streams.contains(&s))
    };
    // The last deletion of each stream: a stream created and deleted within `ops` never
    // reaches the store, so its deletion has nothing to delete either.
    let mut drops = std::collections::HashMap::<[u8; 28], usize, forkless_core::IdHashBuilder>::default();
    let mut skip = vec![false; ops.len()];
    for (i, op) in ops.iter().enumerate().rev() {
        match op {
            Op::PutHeader { session, .. } => skip[i] = !sessions.insert(*session),
            Op::PutStream { prefix, origin, .. } => {
                skip[i] = !streams.insert(*prefix);
                if *origin == Origin::New
                    && let Some(&drop) = drops.get(prefix)
                {
                    skip[drop] = true;
                }
            }
            Op::PutEvent { key, .. } => skip[i] = gone(key, &gone_sessions, &gone_streams),
            Op::Trim { prefix, .. } => skip[i] = gone(prefix, &gone_sessions, &gone_streams),
            Op::DropStream { prefix } => {
                streams.insert(*prefix);
                gone_streams.insert(*prefix);
                drops.entry(*prefix).or_insert(i);
            }
            Op::DropSession { session } => {
                sessions.insert(*session);
                gone_sessions.insert(*session);
            }
            Op::DropEvents { session } => {
                gone_sessions.insert(*session);
            }
        }
    }
    skip
}

/// Most events in one stored row.
const CHUNK_EVENTS: usize = 256;
/// Most payload bytes in one stored row (a larger event gets a row of its own).
const CHUNK_BYTES: usize = 64 << 10;

/// A checkpoint's new events, gathered per stream into rows of consecutive events: one B-tree
/// insert per row instead of one per event (inserting each event was most of a checkpoint's
/// cost, and the checkpoint shares the server's CPU).
///
/// Trims wait for the end: they only ever drop events below a low-water mark, and every event
/// appended after a trim is above it, so applying each stream's highest trim last gives the
/// same result and lets a stream's events form one row even while retention evicts one event
/// per append.
#[derive(Default)]
struct NewEvents {
    open: std::collections::HashMap<[u8; 28], Chunk>,
    trims: std::collections::HashMap<[u8; 28], u64>,
}

/// Consecutive events of one stream, keyed by the first one's event key.
struct Chunk {
    key: [u8; 36],
    next_seq: u64,
    count: usize,
    bytes: Vec<u8>,
}

impl NewEvents {
    fn add(
        &mut self,
        key: &[u8; 36],
        payload: &[u8],
        events: &mut redb::Table<'_, &'static [u8], &'static [u8]>,
    ) -> Result<(), redb::Error> {
        let mut prefix = [0u8; 28];
        prefix.copy_from_slice(&key[..28]);
        let seq = u64::from_be_bytes(key[28..].try_into().unwrap_or_default());
        if let Some(chunk) = self.open.get_mut(&prefix) {
            let fits = chunk.count < CHUNK_EVENTS && chunk.bytes.len() + payload.len() <= CHUNK_BYTES;
            if chunk.next_seq == seq && fits {
                codec::put_chunk_event(&mut chunk.bytes, payload);
                chunk.count += 1;
                chunk.next_seq += 1;
                return Ok(());
            }
            if let Some(full) = self.open.remove(&prefix) {
                full.store(events)?;
            }
        }
        let mut bytes = Vec::with_capacity(payload.len() + 4);
        codec::put_chunk_event(&mut bytes, payload);
        self.open.insert(prefix, Chunk { key: *key, next_seq: seq + 1, count: 1, bytes });
        Ok(())
    }

    /// Forget gathered rows and trims under `prefix` (a session, or a session and stream) that a
    /// deletion makes moot.
    fn discard(&mut self, prefix: &[u8]) {
        self.open.retain(|p, _| !p.starts_with(prefix));
        self.trims.retain(|p, _| !p.starts_with(prefix));
    }

    fn trim(&mut self, prefix: &[u8; 28], low_water: u64) {
        let low = self.trims.entry(*prefix).or_default();
        *low = (*low).max(low_water);
    }

    /// Store the rows gathered so far.
    fn flush(
        &mut self,
        events: &mut redb::Table<'_, &'static [u8], &'static [u8]>,
    ) -> Result<(), redb::Error> {
        for (_, chunk) in self.open.drain() {
            chunk.store(events)?;
        }
        Ok(())
    }

    /// Store the remaining rows, then apply the trims.
    fn finish(
        mut self,
        events: &mut redb::Table<'_, &'static [u8], &'static [u8]>,
    ) -> Result<(), redb::Error> {
        self.flush(events)?;
        for (prefix, low_water) in self.trims {
            trim_rows(events, &prefix, low_water)?;
        }
        Ok(())
    }
}

/// Drop a stream's stored rows below `low_water`. Rows hold runs of events, so the row that
/// starts last below the mark may still hold retained events: it stays, and the rows before
/// it go. (Recovery ignores events below the low-water mark.)
fn trim_rows(
    events: &mut redb::Table<'_, &'static [u8], &'static [u8]>,
    prefix: &[u8; 28],
    low_water: u64,
) -> Result<(), redb::Error> {
    let (lo, hi) = stream_range(prefix, 0, low_water);
    let straddling = events.range(&lo[..]..&hi[..])?.next_back().transpose()?.map(|(k, _)| {
        let mut key = [0u8; 36];
        key.copy_from_slice(k.value());
        key
    });
    if let Some(last) = straddling {
        events.retain_in(&lo[..]..&last[..], |_, _| false)?;
    }
    Ok(())
}

impl Chunk {
    fn store(self, events: &mut redb::Table<'_, &'static [u8], &'static [u8]>) -> Result<(), redb::Error> {
        events.insert(&self.key[..], &self.bytes[..])?;
        Ok(())
    }
}

/// The tables a checkpoint writes.
struct Tables<'t> {
    sessions: redb::Table<'t, &'static [u8], &'static [u8]>,
    streams: redb::Table<'t, &'static [u8], &'static [u8]>,
    events: redb::Table<'t, &'static [u8], &'static [u8]>,
}

fn apply(op: &Op, t: &mut Tables<'_>, events: &mut NewEvents) -> Result<(), redb::Error> {
    match op {
        Op::PutHeader { session, header } => {
            t.sessions.insert(&session[..], &header[..])?;
        }
        Op::PutStream { prefix, stream, .. } => {
            t.streams.insert(&prefix[..], &stream[..])?;
        }
        Op::PutEvent { key, payload } => events.add(key, payload, &mut t.events)?,
        Op::Trim { prefix, low_water } => events.trim(prefix, *low_water),
        // The deletions below apply to what is stored. No row of what they delete is still
        // gathered (`superseded` skipped those events), so the other streams' rows stay open.
        Op::DropStream { prefix } => {
            events.discard(prefix);
            t.streams.remove(&prefix[..])?;
            let (lo, hi) = stream_range(prefix, 0, u64::MAX);
            t.events.retain_in(&lo[..]..=&hi[..], |_, _| false)?;
        }
        Op::DropSession { session } => {
            events.discard(session);
            t.sessions.remove(&session[..])?;
            let (lo, hi) = session_range::<28>(session);
            t.streams.retain_in(&lo[..]..=&hi[..], |_, _| false)?;
            drop_events(&mut t.events, session)?;
        }
        Op::DropEvents { session } => {
            events.discard(session);
            drop_events(&mut t.events, session)?;
        }
    }
    Ok(())
}

/// The first and last keys of `N` bytes that start with `session`.
pub(crate) fn session_range<const N: usize>(session: &[u8; 16]) -> ([u8; N], [u8; N]) {
    let mut lo = [0u8; N];
    lo[..16].copy_from_slice(session);
    let mut hi = [0xffu8; N];
    hi[..16].copy_from_slice(session);
    (lo, hi)
}

fn drop_events(events: &mut redb::Table<'_, &[u8], &[u8]>, session: &[u8; 16]) -> Result<(), redb::Error> {
    let (lo, hi) = session_range::<36>(session);
    events.retain_in(&lo[..]..=&hi[..], |_, _| false)?;
    Ok(())
}

fn stream_range(prefix: &[u8; 28], from: u64, to: u64) -> ([u8; 36], [u8; 36]) {
    let mut lo = [0u8; 36];
    lo[..28].copy_from_slice(prefix);
    lo[28..].copy_from_slice(&from.to_be_bytes());
    let mut hi = lo;
    hi[28..].copy_from_slice(&to.to_be_bytes());
    (lo, hi)
}

/// Whether a table is empty (used to tell a new data file from one of an unknown format).
pub(crate) fn is_empty(
    table: &impl ReadableTable<&'static [u8], &'static [u8]>,
) -> Result<bool, redb::Error> {
    Ok(table.first()?.is_none())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(session: u8, stream: u8, seq: u64) -> [u8; 36] {
        let mut k = [0u8; 36];
        k[0] = session;
        k[16] = stream;
        k[28..].copy_from_slice(&seq.to_be_bytes());
        k
    }

    fn prefix(session: u8, stream: u8) -> [u8; 28] {
        let mut p = [0u8; 28];
        p.copy_from_slice(&key(session, stream, 0)[..28]);
        p
    }

    fn event(session: u8, stream: u8, seq: u64) -> Op {
        Op::PutEvent { key: key(session, stream, seq), payload: Bytes::from_static(b"{}") }
    }

    /// Writes a later op deletes are skipped; everything else applies.
    #[test]
    fn superseded_skips_only_what_a_later_op_deletes() {
        let mut session_one = [0u8; 16];
        session_one[0] = 1;
        let ops = vec![
            event(1, 1, 1),                                  // 0: its stream is dropped below
            Op::Trim { prefix: prefix(1, 1), low_water: 1 }, // 1: likewise
            event(1, 2, 1),                                  // 2: kept: stream 2 stays
            Op::PutStream { prefix: prefix(1, 1), stream: vec![1], origin: Origin::Existing }, // 3: dropped below
            Op::DropStream { prefix: prefix(1, 1) },                                           // 4
            event(2, 1, 1), // 5: its session's events go below
            Op::DropEvents {
                session: {
                    let mut s = [0u8; 16];
                    s[0] = 2;
                    s
                },
            }, // 6
            event(2, 1, 2), // 7: after the drop: kept
            Op::PutHeader { session: session_one, header: vec![1] }, // 8: rewritten below
            Op::PutHeader { session: session_one, header: vec![2] }, // 9
        ];
        let skip = superseded(&ops);
        assert_eq!(skip, [true, true, false, true, false, true, false, false, true, false]);
    }

    /// A stream created and deleted within one list of writes never reaches the store: its
    /// deletion is skipped too. One that existed before keeps its deletion.
    #[test]
    fn a_stream_created_and_dropped_in_one_checkpoint_is_never_stored() {
        let put = |stream, origin| Op::PutStream { prefix: prefix(1, stream), stream: vec![0], origin };
        let ops = vec![
            put(1, Origin::New),
            event(1, 1, 1),
            Op::DropStream { prefix: prefix(1, 1) },
            put(2, Origin::Existing),
            Op::DropStream { prefix: prefix(1, 2) },
        ];
        assert_eq!(superseded(&ops), [true, true, true, true, false]);
    }
}
