//! The on-disk encoding of event keys and rows and of write-ahead log entries' writes (format
//! version 5). A session is stored as a header row (table `sessions`, key: session id) and one
//! row per stream (table `streams`, key: session id and stream id), each encoded by
//! [`forkless_store::codec`], so a write touches only the streams that changed: a session
//! answering over SSE retains up to 1,024 completed streams.
//!
//! Events are stored in table `events` as rows of consecutive events of one stream, keyed by
//! the first one's `(session, stream, seq)` (a checkpoint writes a stream's new events as one
//! row): `row : (len:u32 payload)*`.
//!
//! A write-ahead log entry's payload is a sequence of [`Op`]s, each a tag and its fields:
//!
//! ```text
//! op : 0 session[16] len:u32 header     (PutHeader)
//!    | 1 key[36] len:u32 payload        (PutEvent)
//!    | 2 prefix[28] low_water:u64       (Trim)
//!    | 3 prefix[28]                     (DropStream: its row and its events)
//!    | 4 session[16]                    (DropSession)
//!    | 5 session[16]                    (DropEvents)
//!    | 6 prefix[28] len:u32 stream      (PutStream, of a stream that existed before)
//!    | 7 prefix[28] len:u32 stream      (PutStream, of a stream the write created)
//!    | 8 task[16] len:u32 record        (PutTask)
//!    | 9 task[16]                       (DropTask)
//! ```
//!
//! Tasks are stored in table `tasks`, one row per task keyed by its id
//! (`forkless_store::codec::encode_task`).

use bytes::Bytes;

use super::op::Op;
use forkless_store::Error;
use forkless_store::codec::{Decoder, Encoder};
use forkless_store::engine::Origin;

/// The format version this code writes. Version 1 had no write-ahead log; version 2 kept a
/// session's streams inside its record, rewritten whole on every write; version 3 did not keep
/// what the client said at initialize; version 4 wrote its log as one chain from its start,
/// where version 5 writes it in two regions (see [`super::wal`]), so a version 4 build would
/// miss entries in the second region; version 5 kept no tasks, and its build would refuse a
/// log holding a task's write. Files of versions 3 to 5 are read as they are (a version 3
/// file's sessions' client facts read as unknown; a single chain is what a later scan reads
/// first; no table of tasks is no task) and stamped version 6 on open: [`MIGRATES_FROM`].
pub(crate) const FORMAT_VERSION: u64 = 6;

/// The older formats this code migrates on open, by stamping the file with [`FORMAT_VERSION`].
pub(crate) const MIGRATES_FROM: [u64; 3] = [3, 4, 5];

mod keys;
pub(crate) use forkless_store::codec::{chunk_events, chunk_last, put_chunk_event};
pub(crate) use keys::{event_key, split_event_key};

/// Append one write to a log entry's payload.
pub(crate) fn encode_op(op: &Op, out: &mut Vec<u8>) {
    let mut w = Encoder(std::mem::take(out));
    match op {
        Op::PutHeader { session, header } => {
            w.u8(0);
            w.bytes(session);
            w.len_bytes(header);
        }
        Op::PutStream { prefix, stream, origin } => {
            w.u8(match origin {
                Origin::Existing => 6,
                Origin::New => 7,
            });
            w.bytes(prefix);
            // `len:u32 stream`, the row encoded in place.
            let at = w.0.len();
            w.0.extend_from_slice(&[0; 4]);
            stream.encode_into(&mut w.0);
            let len = (w.0.len() - at - 4) as u32;
            w.0[at..at + 4].copy_from_slice(&len.to_be_bytes());
        }
        Op::PutEvent { key, payload } => {
            w.u8(1);
            w.bytes(key);
            w.len_bytes(payload);
        }
        Op::Trim { prefix, low_water } => {
            w.u8(2);
            w.bytes(prefix);
            w.u64(*low_water);
        }
        Op::DropStream { prefix } => {
            w.u8(3);
            w.bytes(prefix);
        }
        Op::DropSession { session } => {
            w.u8(4);
            w.bytes(session);
        }
        Op::DropEvents { session } => {
            w.u8(5);
            w.bytes(session);
        }
        Op::PutTask { id, record } => {
            w.u8(8);
            w.bytes(id);
            w.len_bytes(record);
        }
        Op::DropTask { id } => {
            w.u8(9);
            w.bytes(id);
        }
    }
    *out = w.0;
}

/// Decode a log entry's payload into its writes, appending them to `ops`.
pub(crate) fn decode_ops(bytes: &[u8], ops: &mut Vec<Op>) -> Result<(), Error> {
    let mut r = Decoder(bytes);
    while !r.0.is_empty() {
        ops.push(decode_op(&mut r).map_err(|e| Error::Corrupt(format!("undecodable log entry: {e}")))?);
    }
    Ok(())
}

fn decode_op(r: &mut Decoder<'_>) -> Result<Op, Error> {
    Ok(match r.u8()? {
        0 => Op::PutHeader { session: r.array()?, header: r.len_bytes()?.to_vec() },
        1 => Op::PutEvent { key: r.array()?, payload: Bytes::copy_from_slice(r.len_bytes()?) },
        2 => Op::Trim { prefix: r.array()?, low_water: r.u64()? },
        3 => Op::DropStream { prefix: r.array()? },
        4 => Op::DropSession { session: r.array()? },
        5 => Op::DropEvents { session: r.array()? },
        tag @ (6 | 7) => Op::PutStream {
            prefix: r.array()?,
            stream: r.len_bytes()?.to_vec().into(),
            origin: if tag == 7 { Origin::New } else { Origin::Existing },
        },
        8 => Op::PutTask { id: r.array()?, record: r.len_bytes()?.to_vec() },
        9 => Op::DropTask { id: r.array()? },
        _ => return Err(Error::Corrupt("bad write tag".into())),
    })
}

#[cfg(test)]
mod tests;
