//! One write a log entry holds and a checkpoint applies: the unit the durable store's journal
//! is made of. Its encoding is [`super::codec`]'s; applying it is [`super::checkpoint`]'s.

use bytes::Bytes;

use forkless_store::engine::Origin;

/// One write. Every append's event travels as one through the inbox, the group and the
/// checkpoint's list, so it is kept small: a stream's row, the one large write, is boxed (and
/// written into the queued group once per stream, see [`super::group::Group::add`]).
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
        stream: StreamRow,
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
    /// Write a task's record (`forkless_store::codec::encode_task`), keyed by its id.
    PutTask {
        id: [u8; 16],
        record: Vec<u8>,
    },
    /// Delete a task (its time to live ended).
    DropTask {
        id: [u8; 16],
    },
}

/// A stream's row in a write: the stream as the write left it, encoded only when the row is
/// written (so the rows that a later write of the same group rewrites, one per append, are
/// never encoded), or the encoded row as a log entry holds it (read back at recovery).
#[derive(Debug)]
pub(crate) enum StreamRow {
    Seen(Box<forkless_core::Stream>),
    Encoded(Vec<u8>),
}

// An event's write (its key and payload) is the largest unboxed one.
const _: () = assert!(size_of::<Op>() <= 72);

impl StreamRow {
    /// Append the encoded row to `out`.
    pub(crate) fn encode_into(&self, out: &mut Vec<u8>) {
        match self {
            Self::Seen(stream) => forkless_store::codec::encode_stream_into(stream, out),
            Self::Encoded(row) => out.extend_from_slice(row),
        }
    }
}

impl From<Vec<u8>> for StreamRow {
    fn from(row: Vec<u8>) -> Self {
        Self::Encoded(row)
    }
}
