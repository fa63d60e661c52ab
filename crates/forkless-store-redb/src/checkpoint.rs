//! Checkpoints: applying a list of logged writes to redb in one transaction.
//!
//! This module owns the tables, the write ops a log entry holds ([`Op`]), which ops a list can
//! skip because later ones delete or rewrite what they write ([`Superseded`]), and how events
//! are stored as rows of consecutive events. It does not decide when to checkpoint (the
//! writer thread, [`super::journal`]) nor encode anything for the log ([`super::codec`]).

use redb::{Database, ReadableTable, TableDefinition};

use super::codec;
use super::op::Op;
use forkless_store::engine::Origin;

pub(crate) const META: TableDefinition<'_, &str, u64> = TableDefinition::new("meta");

/// META key of the LSN of the last log entry applied to redb.
pub(crate) const META_LSN: &str = "lsn";

/// META key of the random number that ties the log to this data file (see [`super::wal`]).
pub(crate) const META_LOG_KEY: &str = "log_key";

pub(crate) const SESSIONS: TableDefinition<'_, &[u8], &[u8]> = TableDefinition::new("sessions");

pub(crate) const EVENTS: TableDefinition<'_, &[u8], &[u8]> = TableDefinition::new("events");

/// One row per stream, keyed by session and stream id (see [`super::codec`]).
pub(crate) const STREAMS: TableDefinition<'_, &[u8], &[u8]> = TableDefinition::new("streams");

/// One row per task, keyed by its id (see [`super::codec`]).
pub(crate) const TASKS: TableDefinition<'_, &[u8], &[u8]> = TableDefinition::new("tasks");

/// Apply `ops` to redb in one durable transaction that also records `lsn` as the last log
/// entry applied, working in `scratch`.
pub(crate) fn commit(db: &Database, ops: &[Op], lsn: u64, scratch: &mut Scratch) -> Result<(), redb::Error> {
    let Scratch { superseded, events } = scratch;
    let mut txn = db.begin_write()?;
    txn.set_durability(redb::Durability::Immediate)?;
    let result = (|| {
        let mut tables = Tables {
            sessions: txn.open_table(SESSIONS)?,
            streams: txn.open_table(STREAMS)?,
            events: txn.open_table(EVENTS)?,
            tasks: txn.open_table(TASKS)?,
        };
        for (op, skip) in ops.iter().zip(superseded.of(ops)) {
            if !skip {
                apply(op, &mut tables, events)?;
            }
        }
        events.finish(&mut tables.events)?;
        txn.open_table(META)?.insert(META_LSN, lsn)?;
        Ok::<_, redb::Error>(())
    })();
    superseded.forget();
    events.forget();
    result?;
    txn.commit()?;
    Ok(())
}

/// What a checkpoint works in, kept from one to the next: a busy store's checkpoint fills
/// tables of tens of thousands of keys, and allocating them afresh every second cost the
/// writer thread page faults on new memory (3 % of the core under SSE echo at 16
/// connections, with as much again rehashing them as they grew).
#[derive(Default)]
pub(crate) struct Scratch {
    superseded: Superseded,
    events: NewEvents,
}

impl std::fmt::Debug for Scratch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scratch").finish_non_exhaustive()
    }
}

/// The most keys a kept table holds on to between uses (a larger one is shrunk back): what
/// about a second of SSE echo at 16 connections touches.
const KEEP: usize = 1 << 15;

/// Keys are CSPRNG ids: no need for SipHash.
type Set<K> = std::collections::HashSet<K, forkless_core::IdHashBuilder>;
type Map<K, V> = std::collections::HashMap<K, V, forkless_core::IdHashBuilder>;

/// Empty `table`, keeping its memory up to [`KEEP`] keys.
fn forget<K: Eq + std::hash::Hash, V>(table: &mut Map<K, V>) {
    table.clear();
    table.shrink_to(KEEP);
}

/// Empty `table`, keeping its memory up to [`KEEP`] keys.
fn forget_set<K: Eq + std::hash::Hash>(table: &mut Set<K>) {
    table.clear();
    table.shrink_to(KEEP);
}

/// Which of `ops` a transaction applying them all can skip: a header or stream row written
/// again or deleted by a later op, events (and trims) of a stream or session whose events
/// a later op deletes, and events below the low-water mark of a later trim of their stream. Every append rewrites its session's header and its stream's row, so a
/// checkpoint of many appends writes each once instead of once per append; and a session
/// answering every request over SSE drops its oldest answered streams within the second that
/// opened them (retention by count), so their events are never written at all. The skipped
/// writes change nothing the later ops leave behind, and a group is one log entry, applied
/// whole or not at all, so the log may skip them too. (The remaining event ops apply in order:
/// their effects depend on each other.)
///
/// Ending a session evicts all its events (a trim of each stream to its high-water mark),
/// and a client that ends its sessions as it goes ends most of them within the second that
/// wrote their events: those events were written into redb by the checkpoint only to be
/// deleted by the same transaction. A trim keeps no event below its mark (recovery ignores
/// them, and every event appended after it is above it), so skipping them changes nothing it
/// leaves behind.
///
/// Its tables are kept for the next use.
#[derive(Default)]
pub(crate) struct Superseded {
    sessions: Set<[u8; 16]>,
    streams: Set<[u8; 28]>,
    gone_sessions: Set<[u8; 16]>,
    gone_streams: Set<[u8; 28]>,
    /// The last deletion of each stream: a stream created and deleted within `ops` never
    /// reaches the store, so its deletion has nothing to delete either.
    drops: Map<[u8; 28], usize>,
    /// The highest low-water mark a later trim sets for each stream.
    trimmed: Map<[u8; 28], u64>,
    skip: Vec<bool>,
}

impl std::fmt::Debug for Superseded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Superseded").finish_non_exhaustive()
    }
}

impl Superseded {
    /// Which of `ops` can be skipped (`true`), in the tables kept from the last call.
    pub(crate) fn of(&mut self, ops: &[Op]) -> &[bool] {
        self.forget();
        let Self { sessions, streams, gone_sessions, gone_streams, drops, trimmed, skip } = self;
        let gone = |prefix: &[u8], gone_sessions: &Set<[u8; 16]>, gone_streams: &Set<[u8; 28]>| {
            let (session, stream) =
                (<[u8; 16]>::try_from(&prefix[..16]), <[u8; 28]>::try_from(&prefix[..28]));
            session.is_ok_and(|s| gone_sessions.contains(&s))
                || stream.is_ok_and(|s| gone_streams.contains(&s))
        };
        skip.resize(ops.len(), false);
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
                Op::PutEvent { key, .. } => {
                    skip[i] = gone(key, gone_sessions, gone_streams) || below_trim(key, trimmed)
                }
                Op::Trim { prefix, low_water } => {
                    skip[i] = gone(prefix, gone_sessions, gone_streams);
                    let mark = trimmed.entry(*prefix).or_default();
                    *mark = (*mark).max(*low_water);
                }
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
                // Few and small: every one is written, in order.
                Op::PutTask { .. } | Op::DropTask { .. } => {}
            }
        }
        skip
    }

    /// Empty the tables, keeping their memory up to [`KEEP`] keys each.
    fn forget(&mut self) {
        forget_set(&mut self.sessions);
        forget_set(&mut self.streams);
        forget_set(&mut self.gone_sessions);
        forget_set(&mut self.gone_streams);
        forget(&mut self.drops);
        forget(&mut self.trimmed);
        self.skip.clear();
        self.skip.shrink_to(KEEP);
    }
}

/// Whether the event under `key` is below the mark a later trim of its stream sets.
fn below_trim(key: &[u8; 36], trimmed: &Map<[u8; 28], u64>) -> bool {
    let (prefix, seq) = key.split_at(28);
    let seq = u64::from_be_bytes(seq.try_into().unwrap_or_default());
    <[u8; 28]>::try_from(prefix).is_ok_and(|p| trimmed.get(&p).is_some_and(|&low| seq < low))
}

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
    // Keyed by session and stream id.
    open: Map<[u8; 28], Chunk>,
    trims: Map<[u8; 28], u64>,
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
            let fits = forkless_store::codec::chunk_has_room(chunk.count, chunk.bytes.len(), payload.len());
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
        &mut self,
        events: &mut redb::Table<'_, &'static [u8], &'static [u8]>,
    ) -> Result<(), redb::Error> {
        self.flush(events)?;
        for (prefix, low_water) in self.trims.drain() {
            trim_rows(events, &prefix, low_water)?;
        }
        Ok(())
    }

    /// Empty the tables (also after a failed checkpoint), keeping their memory up to [`KEEP`]
    /// keys each.
    fn forget(&mut self) {
        forget(&mut self.open);
        forget(&mut self.trims);
    }
}

/// Drop a stream's stored rows below `low_water`. Rows hold runs of events, so the row that
/// starts last below the mark may still hold retained events: it stays, unless its last event
/// is below the mark too, and the rows before it go. (Recovery ignores events below the
/// low-water mark.) Keeping that row whatever it held left a whole row behind for every stream
/// whose events were all evicted, an ended session's above all, for as long as the session's
/// tombstone: the data file grew by 25 MB/s under `notify-many`.
fn trim_rows(
    events: &mut redb::Table<'_, &'static [u8], &'static [u8]>,
    prefix: &[u8; 28],
    low_water: u64,
) -> Result<(), redb::Error> {
    let (lo, hi) = stream_range(prefix, 0, low_water);
    let straddling = events.range(&lo[..]..&hi[..])?.next_back().transpose()?.map(|(k, v)| {
        let mut key = [0u8; 36];
        key.copy_from_slice(k.value());
        let first = forkless_core::Seq::new(u64::from_be_bytes(key[28..].try_into().unwrap_or_default()));
        // An unreadable row stays, for recovery to report.
        let spent = codec::chunk_last(first, v.value()).is_ok_and(|last| last.get() < low_water);
        (key, spent)
    });
    match straddling {
        Some((last, true)) => events.retain_in(&lo[..]..=&last[..], |_, _| false)?,
        Some((last, false)) => events.retain_in(&lo[..]..&last[..], |_, _| false)?,
        None => {}
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
    tasks: redb::Table<'t, &'static [u8], &'static [u8]>,
}

fn apply(op: &Op, t: &mut Tables<'_>, events: &mut NewEvents) -> Result<(), redb::Error> {
    match op {
        Op::PutHeader { session, header } => {
            t.sessions.insert(&session[..], &header[..])?;
        }
        Op::PutStream { prefix, stream, .. } => {
            let mut row = Vec::with_capacity(80);
            stream.encode_into(&mut row);
            t.streams.insert(&prefix[..], &row[..])?;
        }
        Op::PutEvent { key, payload } => events.add(key, payload, &mut t.events)?,
        Op::Trim { prefix, low_water } => events.trim(prefix, *low_water),
        // The deletions below apply to what is stored. No row of what they delete is still
        // gathered (`Superseded` skipped those events), so the other streams' rows stay open.
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
        Op::PutTask { id, record } => {
            t.tasks.insert(&id[..], &record[..])?;
        }
        Op::DropTask { id } => {
            t.tasks.remove(&id[..])?;
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
mod tests;
