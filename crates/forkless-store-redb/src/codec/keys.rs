//! Event keys: how rows of consecutive events (chunks, `forkless_store::codec`) are keyed in
//! table `events`.

use forkless_core::{Seq, SessionId, StreamId};
use forkless_store::Error;

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
