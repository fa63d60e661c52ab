//! Chunks: consecutive events of one stream kept as one stored row, the way every persisting
//! store keeps payloads (redb's `events` table, PostgreSQL's `forkless_chunks`, Redis's event
//! sets). Events written together are stored together, so a store pays one row (one B-tree
//! insert, one index entry, one set member) per chunk instead of one per event, and a reader
//! gets many events from one row.
//!
//! ```text
//! chunk : (len:u32 payload)+     the seq of its first event is kept beside it (a key or a column)
//! ```
//!
//! A chunk holds at most [`MAX_CHUNK_EVENTS`] events and, unless one event alone is larger,
//! [`MAX_CHUNK_BYTES`] bytes, so reading a few events never drags a large row along.
//!
//! It owns the bytes of a chunk and the limits on its size, not where a store keeps chunks,
//! how it keys them, or which events go in one (a store's writer decides).

use bytes::Bytes;
use forkless_core::Seq;

use super::Decoder;
use crate::{Error, StoredEvent};

/// At most this many events in one chunk.
pub const MAX_CHUNK_EVENTS: usize = 256;

/// A chunk grows past this many bytes only to hold a single event larger than it.
pub const MAX_CHUNK_BYTES: usize = 64 << 10;

/// Append one event to a chunk.
pub fn put_chunk_event(chunk: &mut Vec<u8>, payload: &[u8]) {
    let len = u32::try_from(payload.len()).unwrap_or(u32::MAX);
    chunk.extend_from_slice(&len.to_be_bytes());
    chunk.extend_from_slice(payload);
}

/// Whether a chunk of `events` events and `bytes` bytes has room for a `payload`-byte event.
pub fn chunk_has_room(events: usize, bytes: usize, payload: usize) -> bool {
    events == 0 || (events < MAX_CHUNK_EVENTS && bytes + 4 + payload <= MAX_CHUNK_BYTES)
}

/// The events of a chunk whose first event has seq `first`, in order.
pub fn chunk_events(first: Seq, chunk: &[u8]) -> Result<Vec<(Seq, &[u8])>, Error> {
    let mut r = Decoder(chunk);
    let mut out = Vec::new();
    while !r.0.is_empty() {
        let seq = Seq::new(first.get() + out.len() as u64);
        out.push((seq, r.len_bytes().map_err(|_| corrupt())?));
    }
    Ok(out)
}

/// The seq of a chunk's last event, given its first: what a store keys a chunk by when it
/// looks chunks up by the events they end with.
pub fn chunk_last(first: Seq, chunk: &[u8]) -> Result<Seq, Error> {
    let n = chunk_events(first, chunk)?.len() as u64;
    if n == 0 {
        return Err(corrupt());
    }
    Ok(Seq::new(first.get() + n - 1))
}

/// Push the events of chunk `chunk` (first event `first`) with seq greater than `after` onto
/// `out` until it holds `max`, each payload a slice of `chunk` (no copy).
pub fn push_chunk_events(
    first: Seq,
    chunk: &Bytes,
    after: Seq,
    max: usize,
    out: &mut Vec<StoredEvent>,
) -> Result<(), Error> {
    let mut r = Decoder(chunk);
    let mut seq = first;
    while !r.0.is_empty() && out.len() < max {
        let payload = r.len_bytes().map_err(|_| corrupt())?;
        if seq > after {
            out.push(StoredEvent { seq, payload: chunk.slice_ref(payload) });
        }
        seq = seq.next();
    }
    Ok(())
}

/// The payload sizes of a chunk's events from seq `from` on (first event `first`), pushed onto
/// `out` until it holds `max`.
pub fn push_chunk_sizes(
    first: Seq,
    chunk: &[u8],
    from: Seq,
    max: usize,
    out: &mut Vec<u64>,
) -> Result<(), Error> {
    for (seq, payload) in chunk_events(first, chunk)? {
        if out.len() == max {
            break;
        }
        if seq >= from {
            out.push(payload.len() as u64);
        }
    }
    Ok(())
}

fn corrupt() -> Error {
    Error::Corrupt("undecodable chunk of events: truncated".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(payloads: &[&[u8]]) -> Bytes {
        let mut c = Vec::new();
        for p in payloads {
            put_chunk_event(&mut c, p);
        }
        Bytes::from(c)
    }

    #[test]
    fn a_chunk_holds_its_events_in_order() {
        let c = chunk(&[b"a", b"", b"{\"n\":3}"]);
        let events = chunk_events(Seq::new(7), &c).unwrap();
        assert_eq!(
            events,
            vec![(Seq::new(7), &b"a"[..]), (Seq::new(8), &b""[..]), (Seq::new(9), &b"{\"n\":3}"[..])]
        );
        assert_eq!(chunk_last(Seq::new(7), &c).unwrap(), Seq::new(9));
        assert!(chunk_events(Seq::new(1), &c[..c.len() - 1]).is_err(), "a cut chunk is corrupt, not short");
        assert!(chunk_last(Seq::new(1), &[]).is_err(), "an empty chunk is corrupt");
    }

    #[test]
    fn events_after_a_cursor_are_slices_of_the_chunk_up_to_max() {
        let c = chunk(&[b"a", b"bb", b"ccc", b"dddd"]);
        let mut out = Vec::new();
        push_chunk_events(Seq::new(10), &c, Seq::new(10), 2, &mut out).unwrap();
        assert_eq!(
            out.iter().map(|e| (e.seq.get(), &e.payload[..])).collect::<Vec<_>>(),
            [(11, &b"bb"[..]), (12, &b"ccc"[..])]
        );
        let within = c.as_ptr_range();
        assert!(within.contains(&out[0].payload.as_ptr()), "a payload is a slice of the chunk, not a copy");
        let mut sizes = Vec::new();
        push_chunk_sizes(Seq::new(10), &c, Seq::new(12), 10, &mut sizes).unwrap();
        assert_eq!(sizes, [3, 4]);
    }

    #[test]
    fn room_is_bounded_by_events_and_bytes_but_one_event_always_fits() {
        assert!(chunk_has_room(0, 0, 10 * MAX_CHUNK_BYTES), "an empty chunk takes any one event");
        assert!(!chunk_has_room(MAX_CHUNK_EVENTS, 0, 1));
        assert!(!chunk_has_room(1, MAX_CHUNK_BYTES - 4, 1));
        assert!(chunk_has_room(1, MAX_CHUNK_BYTES - 5, 1));
    }

    proptest::proptest! {
        /// Whatever the stored bytes, decoding returns events or a typed error; it never panics.
        #[test]
        fn decoding_never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300)) {
            let _ = chunk_events(Seq::new(1), &bytes);
            let _ = chunk_last(Seq::new(1), &bytes);
            let _ = push_chunk_events(Seq::new(1), &Bytes::from(bytes.clone()), Seq::PRIMING, 100, &mut Vec::new());
            let _ = push_chunk_sizes(Seq::new(1), &bytes, Seq::new(2), 100, &mut Vec::new());
        }
    }
}
