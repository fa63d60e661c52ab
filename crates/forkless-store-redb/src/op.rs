//! One write a log entry holds and a checkpoint applies: the unit the durable store's journal
//! is made of. Its encoding is [`super::codec`]'s; applying it is [`super::checkpoint`]'s.

use bytes::Bytes;

use forkless_store::engine::Origin;

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
