//! The writer thread: applies the engine's effects to redb in order, with group commit.
//!
//! Every mutation's effects arrive as one [`Msg::Ops`] sent while the session lock is held,
//! so the queue is in mutation order and every commit covers a prefix of it. A
//! [`Msg::Barrier`] is acknowledged once everything queued before it is durable. Redb has a
//! single writer, so one thread owns all writes; it drains whatever is queued (or, in batched
//! mode, whatever arrives within the batch window) into one transaction and one fsync.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;
use std::time::Instant;

use bytes::Bytes;
use redb::{Database, ReadableTable, TableDefinition};

use super::Durability;

pub(crate) const META: TableDefinition<'_, &str, u64> = TableDefinition::new("meta");
pub(crate) const SESSIONS: TableDefinition<'_, &[u8], &[u8]> = TableDefinition::new("sessions");
pub(crate) const EVENTS: TableDefinition<'_, &[u8], &[u8]> = TableDefinition::new("events");

/// One write.
#[derive(Debug)]
pub(crate) enum Op {
    PutRecord {
        session: [u8; 16],
        record: Vec<u8>,
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
    /// Delete all events of a stream.
    DropStream {
        prefix: [u8; 28],
    },
    /// Delete a session's record and events.
    DropSession {
        session: [u8; 16],
    },
    /// Delete a session's events, keeping its record.
    DropEvents {
        session: [u8; 16],
    },
}

#[derive(Debug)]
pub(crate) enum Msg {
    Ops(Vec<Op>),
    Barrier(tokio::sync::oneshot::Sender<Result<(), String>>),
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

/// Most messages folded into one transaction; bounds commit latency under a flood.
const MAX_BATCH: usize = 8192;

pub(crate) fn run(db: Arc<Database>, rx: Receiver<Msg>, durability: Durability, poison: Arc<Poison>) {
    let window = match durability {
        Durability::Immediate => None,
        Durability::Batched { window } => Some(window),
    };
    while let Ok(first) = rx.recv() {
        let deadline = window.map(|w| Instant::now() + w);
        let flush_now = deadline.is_some() && matches!(first, Msg::Barrier(_));
        let mut batch = vec![first];
        while !flush_now && batch.len() < MAX_BATCH {
            let next = match deadline {
                None => rx.try_recv().ok(),
                Some(d) => rx.recv_timeout(d.saturating_duration_since(Instant::now())).ok(),
            };
            match next {
                // In batched mode a barrier is an explicit flush: commit now rather than at
                // the end of the window. (In immediate mode every append sends one, and
                // draining past them is what makes commits shared.)
                Some(m @ Msg::Barrier(_)) if deadline.is_some() => {
                    batch.push(m);
                    break;
                }
                Some(m) => batch.push(m),
                None => break,
            }
        }
        let result = if poison.check().is_err() {
            Err("store is poisoned by an earlier failure".to_owned())
        } else {
            commit(&db, &batch).map_err(|e| e.to_string())
        };
        if let Err(why) = &result
            && poison.check().is_ok()
        {
            tracing::error!(error = %why, "durable store write failed; the store is now poisoned and refuses all work");
            poison.set(why.clone());
        }
        for msg in batch {
            if let Msg::Barrier(ack) = msg {
                let _ = ack.send(result.clone());
            }
        }
    }
}

fn commit(db: &Database, batch: &[Msg]) -> Result<(), redb::Error> {
    let mut txn = db.begin_write()?;
    txn.set_durability(redb::Durability::Immediate)?;
    {
        let mut sessions = txn.open_table(SESSIONS)?;
        let mut events = txn.open_table(EVENTS)?;
        for msg in batch {
            let Msg::Ops(ops) = msg else { continue };
            for op in ops {
                apply(op, &mut sessions, &mut events)?;
            }
        }
    }
    txn.commit()?;
    Ok(())
}

fn apply(
    op: &Op,
    sessions: &mut redb::Table<'_, &[u8], &[u8]>,
    events: &mut redb::Table<'_, &[u8], &[u8]>,
) -> Result<(), redb::Error> {
    match op {
        Op::PutRecord { session, record } => {
            sessions.insert(&session[..], &record[..])?;
        }
        Op::PutEvent { key, payload } => {
            events.insert(&key[..], &payload[..])?;
        }
        Op::Trim { prefix, low_water } => {
            let (lo, hi) = stream_range(prefix, 0, *low_water);
            events.retain_in(&lo[..]..&hi[..], |_, _| false)?;
        }
        Op::DropStream { prefix } => {
            let (lo, hi) = stream_range(prefix, 0, u64::MAX);
            events.retain_in(&lo[..]..=&hi[..], |_, _| false)?;
        }
        Op::DropSession { session } => {
            sessions.remove(&session[..])?;
            drop_events(events, session)?;
        }
        Op::DropEvents { session } => drop_events(events, session)?,
    }
    Ok(())
}

fn drop_events(events: &mut redb::Table<'_, &[u8], &[u8]>, session: &[u8; 16]) -> Result<(), redb::Error> {
    let mut lo = [0u8; 36];
    lo[..16].copy_from_slice(session);
    let mut hi = [0xffu8; 36];
    hi[..16].copy_from_slice(session);
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
