//! Events that left memory: reading them back from the data file, and telling the engine
//! which events each checkpoint put there.
//!
//! This module owns the two ends of the engine's bounded cache on this store: the
//! [`Disk`] the engine reads through (the `events` table, in a read transaction of its own),
//! and the marks a committed checkpoint hands the engine ([`stored_marks`]). Which events
//! leave memory, and when, is the engine's ([`forkless_store::engine`]).

use std::sync::Arc;

use bytes::Bytes;
use forkless_core::{Seq, SessionId, StreamId};
use forkless_store::engine::Disk;
use forkless_store::{Result, StoredEvent};
use redb::{Database, ReadableDatabase};

use super::checkpoint::EVENTS;
use super::op::Op;
use super::{backend_err, codec};

/// The data file, as the engine reads events from it.
#[derive(Clone, Debug)]
pub(crate) struct DataFile(pub(crate) Arc<Database>);

impl Disk for DataFile {
    fn events(
        &self,
        session: SessionId,
        stream: StreamId,
        from: Seq,
        max: usize,
    ) -> Result<Vec<StoredEvent>> {
        let txn = self.0.begin_read().map_err(backend_err)?;
        let table = txn.open_table(EVENTS).map_err(backend_err)?;
        let lo = codec::event_key(session, stream, Seq::PRIMING);
        let at = codec::event_key(session, stream, from);
        let hi = codec::event_key(session, stream, Seq::new(u64::MAX));
        // Rows hold runs of events keyed by their first: the run holding `from` starts at or
        // before it.
        let start = match table.range(&lo[..]..=&at[..]).map_err(backend_err)?.next_back() {
            Some(row) => {
                let (k, _) = row.map_err(backend_err)?;
                let mut key = [0u8; 36];
                key.copy_from_slice(k.value());
                key
            }
            None => at,
        };
        let mut events = Vec::with_capacity(max.min(1024));
        for row in table.range(&start[..]..=&hi[..]).map_err(backend_err)? {
            let (k, v) = row.map_err(backend_err)?;
            let (_, _, first) = codec::split_event_key(k.value())?;
            for (seq, payload) in codec::chunk_events(first, v.value())? {
                if seq < from {
                    continue;
                }
                if events.len() == max {
                    return Ok(events);
                }
                events.push(StoredEvent { seq, payload: Bytes::copy_from_slice(payload) });
            }
        }
        Ok(events)
    }
}

/// The highest event of each stream that `ops`, a committed checkpoint's writes, put into
/// the data file. (An event a checkpoint skipped is below its stream's low-water mark or in
/// a stream that is gone: the engine holds it no longer.)
pub(crate) fn stored_marks(ops: &[Op]) -> Vec<(SessionId, StreamId, Seq)> {
    let mut marks: std::collections::HashMap<[u8; 28], u64, forkless_core::IdHashBuilder> =
        std::collections::HashMap::default();
    for op in ops {
        if let Op::PutEvent { key, .. } = op {
            let mut prefix = [0u8; 28];
            prefix.copy_from_slice(&key[..28]);
            let seq = u64::from_be_bytes(key[28..].try_into().unwrap_or_default());
            let mark = marks.entry(prefix).or_default();
            *mark = (*mark).max(seq);
        }
    }
    marks
        .into_iter()
        .filter_map(|(prefix, seq)| {
            let mut key = [0u8; 36];
            key[..28].copy_from_slice(&prefix);
            let (session, stream, _) = codec::split_event_key(&key).ok()?;
            Some((session, stream, Seq::new(seq)))
        })
        .collect()
}
