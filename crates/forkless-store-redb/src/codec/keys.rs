//! Event keys and rows of consecutive events: how events are laid out in table `events`.

use forkless_core::{Seq, SessionId, StreamId};
use forkless_store::Error;
use forkless_store::codec::Decoder;

fn corrupt(what: &str) -> Error {
    Error::Corrupt(format!("undecodable event key or row: {what}"))
}

/// Key of one event: session, stream, seq.
pub(crate) fn event_key(session: SessionId, stream: StreamId, seq: Seq) -> [u8; 36] {
    let mut k = [0u8; 36];
    k[..16].copy_from_slice(session.as_bytes());
    k[16..28].copy_from_slice(stream.as_bytes());
    k[28..].copy_from_slice(&seq.get().to_be_bytes());
    k
}

/// Append one event to a stored row of consecutive events (`len:u32 payload`, repeated; the
/// row's key names its first event).
pub(crate) fn put_chunk_event(row: &mut Vec<u8>, payload: &[u8]) {
    row.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    row.extend_from_slice(payload);
}

/// The events of a stored row whose first event has seq `first`.
pub(crate) fn chunk_events(first: Seq, row: &[u8]) -> Result<Vec<(Seq, &[u8])>, Error> {
    let mut r = Decoder(row);
    let mut out = Vec::new();
    while !r.0.is_empty() {
        let seq = Seq::new(first.get() + out.len() as u64);
        out.push((seq, r.len_bytes()?));
    }
    Ok(out)
}

/// Split an event key.
pub(crate) fn split_event_key(k: &[u8]) -> Result<(SessionId, StreamId, Seq), Error> {
    let k: &[u8; 36] = k.try_into().map_err(|_| corrupt("event key of wrong length"))?;
    let mut s = [0u8; 16];
    s.copy_from_slice(&k[..16]);
    let mut t = [0u8; 12];
    t.copy_from_slice(&k[16..28]);
    let mut q = [0u8; 8];
    q.copy_from_slice(&k[28..]);
    Ok((SessionId::from_bytes(s), StreamId::from_bytes(t), Seq::new(u64::from_be_bytes(q))))
}
