//! Opening the durable store: the format check (and the migration from formats 3 and 4), replaying
//! the write-ahead log into the data file, and reading every session back.
//!
//! This module owns what a restart finds and how it is made safe to serve: attachments are
//! dropped (no connection survives a restart), and requests whose handler died are reported
//! as [`Recovery::orphans`] for the server to answer; it writes no protocol message itself.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use forkless_core::{Seq, StreamId, Timestamp};
use redb::{Database, ReadableDatabase, ReadableTable};

use super::checkpoint::{self, EVENTS, META, META_LOG_KEY, META_LSN, SESSIONS, STREAMS, TASKS};
use super::{Recovery, RedbStore, backend_err, codec, journal, wal};
use forkless_store::engine::{Effect, OnDisk};
use forkless_store::{Error, Result};

impl RedbStore {
    pub(super) fn recover(&self, db: &Database, now: Timestamp) -> Result<Recovery> {
        let txn = db.begin_read().map_err(backend_err)?;
        let mut recovery = Recovery::default();
        let mut records = Vec::new();
        if let Ok(sessions) = txn.open_table(SESSIONS) {
            let streams = txn.open_table(STREAMS).map_err(backend_err)?;
            for entry in sessions.iter().map_err(backend_err)? {
                let (k, v) = entry.map_err(backend_err)?;
                let mut parts = forkless_store::codec::decode_header(v.value())?;
                let session: &[u8; 16] =
                    k.value().try_into().map_err(|_| Error::Corrupt("session key of wrong length".into()))?;
                let (lo, hi) = checkpoint::session_range::<28>(session);
                for row in streams.range(&lo[..]..=&hi[..]).map_err(backend_err)? {
                    let (_, v) = row.map_err(backend_err)?;
                    parts.streams.push(forkless_store::codec::decode_stream(v.value())?);
                }
                records.push(parts);
            }
        }
        let events_table = txn.open_table(EVENTS).ok();
        for mut parts in records {
            let session = parts.new.id;
            // Sizes only: the events stay in the data file, read through on demand, so
            // opening a store holds none of their payloads in memory.
            let mut logs: HashMap<StreamId, Vec<(Seq, u32)>> = HashMap::new();
            if let Some(events) = &events_table {
                let mut lo = [0u8; 36];
                lo[..16].copy_from_slice(session.as_bytes());
                let mut hi = [0xffu8; 36];
                hi[..16].copy_from_slice(session.as_bytes());
                for entry in events.range(&lo[..]..=&hi[..]).map_err(backend_err)? {
                    let (k, v) = entry.map_err(backend_err)?;
                    let (_, stream, first) = codec::split_event_key(k.value())?;
                    let log = logs.entry(stream).or_default();
                    for (seq, payload) in codec::chunk_events(first, v.value())? {
                        log.push((seq, u32::try_from(payload.len()).unwrap_or(u32::MAX)));
                    }
                }
            }
            // Keep, per stream, the contiguous run that ends at the high-water mark and
            // starts no lower than the low-water mark; anything else (a trim that committed
            // before its record, or the reverse) is treated as evicted.
            let mut on_disk = HashMap::with_capacity(parts.streams.len());
            for s in &mut parts.streams {
                let mut log = logs.remove(&s.id).unwrap_or_default();
                log.retain(|&(seq, _)| seq >= s.low_water && seq <= s.high_water);
                let mut start = log.len();
                while start > 0 && log[start - 1].0.get() + (log.len() - start) as u64 == s.high_water.get() {
                    start -= 1;
                }
                log.drain(..start);
                s.low_water = log.first().map_or(s.high_water.next(), |&(seq, _)| seq);
                s.retained_bytes = log.iter().map(|&(_, size)| u64::from(size)).sum();
                recovery.events += log.len();
                if !log.is_empty() {
                    let sizes = log.iter().map(|&(_, size)| size).collect();
                    on_disk.insert(s.id, OnDisk { first: s.low_water, sizes });
                }
            }
            let mut record = parts.build()?;
            recovery.sessions += 1;
            recovery.detached += record
                .streams()
                .filter(|s| matches!(s.attachment(), Some(forkless_core::Attachment::Attached(_))))
                .count();
            if record.session().ended().is_none() {
                recovery.orphans.extend(record.on_restart(now));
            }
            let mut journal = self.journal();
            journal(Effect::Record(&record));
            journal(Effect::End);
            drop(journal);
            self.inner.engine.restore(record, on_disk)?;
        }
        // Tasks come back as they were stored; what their lost owner means for each is the
        // server's to settle (`TaskStore::open_tasks`), by the task's policy.
        if let Ok(tasks) = txn.open_table(TASKS) {
            for entry in tasks.iter().map_err(backend_err)? {
                let (k, v) = entry.map_err(backend_err)?;
                let task = forkless_store::codec::decode_task(v.value())?;
                if k.value() != task.id().as_bytes() {
                    return Err(Error::Corrupt(format!(
                        "task row {:02x?} holds task {}",
                        k.value(),
                        task.id()
                    )));
                }
                recovery.tasks += 1;
                self.inner.tasks.restore(forkless_store::Versioned {
                    version: forkless_store::Version::INITIAL,
                    value: task,
                });
            }
        }
        Ok(recovery)
    }
}

pub(super) fn refuse_other_format(found: Option<u64>) -> Result<()> {
    match found {
        Some(v) if v != codec::FORMAT_VERSION && !codec::MIGRATES_FROM.contains(&v) => {
            Err(Error::Corrupt(format!(
                "data file has format version {v}{}; this build reads version {} (and migrates versions {}) only and will not rewrite it",
                match v {
                    1 => " (an earlier build's, without a write-ahead log)",
                    2 => " (an earlier build's, with each session's streams inside its record)",
                    v if v > codec::FORMAT_VERSION => " (written by a newer build)",
                    _ => "",
                },
                codec::FORMAT_VERSION,
                codec::MIGRATES_FROM.map(|v| v.to_string()).join(" and "),
            )))
        }
        _ => Ok(()),
    }
}

/// Refuse a file of another format version; stamp a new one with ours and a new log key.
/// Returns the file's log key.
pub(super) fn check_format(db: &Database) -> Result<u64> {
    let txn = db.begin_write().map_err(backend_err)?;
    let key = {
        let mut meta = txn.open_table(META).map_err(backend_err)?;
        let found = meta.get("format").map_err(backend_err)?.map(|v| v.value());
        refuse_other_format(found)?;
        if let Some(from) = found.filter(|v| codec::MIGRATES_FROM.contains(v)) {
            // Older rows and logs read as they are; only the stamp changes (see `codec`). From
            // here on this file is of this build's format, which an older build refuses.
            meta.insert("format", codec::FORMAT_VERSION).map_err(backend_err)?;
            tracing::info!(from, to = codec::FORMAT_VERSION, "data file migrated");
        }
        match found {
            Some(_) => meta
                .get(META_LOG_KEY)
                .map_err(backend_err)?
                .map(|v| v.value())
                .ok_or_else(|| Error::Corrupt("data file has no write-ahead log key".into()))?,
            None => {
                let sessions = txn.open_table(SESSIONS).map_err(backend_err)?;
                if !checkpoint::is_empty(&sessions).map_err(backend_err)? {
                    return Err(Error::Corrupt("data file holds sessions but no format version".into()));
                }
                drop(sessions);
                txn.open_table(EVENTS).map_err(backend_err)?;
                txn.open_table(STREAMS).map_err(backend_err)?;
                let key = new_log_key();
                meta.insert("format", codec::FORMAT_VERSION).map_err(backend_err)?;
                meta.insert(META_LOG_KEY, key).map_err(backend_err)?;
                meta.insert(META_LSN, 0).map_err(backend_err)?;
                key
            }
        }
    };
    txn.commit().map_err(backend_err)?;
    Ok(key)
}

/// Whether the data file holds anything a lost log could have added to: a checkpoint was
/// taken, or sessions are stored. (A new file's log can be recreated without loss.)
pub(super) fn holds_state(db: &Database) -> Result<bool> {
    let txn = db.begin_read().map_err(backend_err)?;
    let lsn = match txn.open_table(META) {
        Ok(meta) => meta.get(META_LSN).map_err(backend_err)?.map_or(0, |v| v.value()),
        Err(_) => 0,
    };
    let sessions = match txn.open_table(SESSIONS) {
        Ok(sessions) => !checkpoint::is_empty(&sessions).map_err(backend_err)?,
        Err(_) => false,
    };
    Ok(lsn > 0 || sessions)
}

/// A number that differs between data files (64 bits from the OS CSPRNG), so a log is never
/// replayed into a data file it was not written for.
fn new_log_key() -> u64 {
    let mut key = [0u8; 8];
    forkless_core::EntropySource::fill(&mut forkless_core::OsEntropy, &mut key);
    u64::from_be_bytes(key)
}

/// The log's path: the data file's with `.wal` appended (so it never collides with it).
pub(super) fn log_path(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(".wal");
    PathBuf::from(p)
}

/// Open the log and apply what it holds after the last checkpoint to redb, in one durable
/// transaction, so the log can start over; returns the writer that owns both and the number
/// of entries replayed.
pub(super) fn replay(
    db: Database,
    log_key: u64,
    log: impl redb::StorageBackend,
) -> Result<(journal::Writer, usize, wal::Tail)> {
    let checkpoint = {
        let txn = db.begin_read().map_err(backend_err)?;
        let meta = txn.open_table(META).map_err(backend_err)?;
        meta.get(META_LSN).map_err(backend_err)?.map_or(0, |v| v.value())
    };
    let (log, entries, tail) = wal::Log::open(Box::new(log), log_key, checkpoint)
        .map_err(|e| Error::Backend(format!("reading the write-ahead log: {e}")))?;
    if !entries.is_empty() {
        let mut ops = Vec::new();
        for entry in &entries {
            codec::decode_ops(entry, &mut ops)?;
        }
        tracing::info!(entries = entries.len(), writes = ops.len(), "replaying the write-ahead log");
        checkpoint::commit(&db, &ops, log.last_lsn(), &mut checkpoint::Scratch::default())
            .map_err(backend_err)?;
    }
    Ok((journal::Writer::new(db, log), entries.len(), tail))
}
