//! The on-disk encoding of session records, event keys and log entries' writes (format
//! version 4).
//!
//! Hand-written and explicit so the file format does not depend on any serializer's
//! defaults. All integers are big-endian (event keys then sort by seq). A session is stored
//! as a header row (table `sessions`, key: session id) and one row per stream (table
//! `streams`, key: session id and stream id), so a write touches only the streams that
//! changed: a session answering over SSE retains up to 1,024 completed streams.
//!
//! ```text
//! header  : session standalone[12] client
//! session : id[16] revision:u8 reset_contract:u8 principal:opt_bytes created_at:u64 state
//! client  : capabilities:opt_bytes client_info:opt_bytes   (JSON text; absent in format 3)
//! state   : 0 last_activity:u64 | 1 at:u64 end_reason
//! end     : 0 deleted | 1 rejected reason:u8 | 2 idle_expired | 3 failed
//! stream  : id[12] kind:u8 high:u64 low:u64 bytes:u64 epoch:u64 ever:u8 label:opt_bytes sstate
//! sstate  : 0 attachment | 1 at:u64 attachment | 2 at:u64 cause:u8
//! attach  : 0 since:u64 | 1 deadline:u64
//! opt_bytes: 0 | 1 len:u32 bytes
//! ```
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
//! ```

use forkless_core::{
    Active, Attached, Attachment, ClientFacts, Completed, Detached, EndReason, Ended, Epoch, FenceCause,
    Fenced, Label, NewSession, Open, RejectReason, Revision, Seq, SessionId, SessionRecord, SessionState,
    Stream, StreamId, StreamKind, StreamState, Timestamp,
};

use bytes::Bytes;

use super::op::Op;
use forkless_store::Error;
use forkless_store::engine::Origin;

/// The format version this code writes. Version 1 had no write-ahead log; version 2 kept a
/// session's streams inside its record, rewritten whole on every write; version 3 did not keep
/// what the client said at initialize. A version 3 file is read as it is (its sessions'
/// client facts read as unknown) and stamped version 4 on open: [`MIGRATES_FROM`].
pub(crate) const FORMAT_VERSION: u64 = 4;

/// The older format this code migrates on open (the only change: headers gained `client`).
pub(crate) const MIGRATES_FROM: u64 = 3;

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
    let mut r = R(row);
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

fn corrupt(what: &str) -> Error {
    Error::Corrupt(format!("undecodable session record: {what}"))
}

/// Append one write to a log entry's payload.
pub(crate) fn encode_op(op: &Op, out: &mut Vec<u8>) {
    let mut w = W(std::mem::take(out));
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
            w.len_bytes(stream);
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
    }
    *out = w.0;
}

/// Decode a log entry's payload into its writes, appending them to `ops`.
pub(crate) fn decode_ops(bytes: &[u8], ops: &mut Vec<Op>) -> Result<(), Error> {
    let mut r = R(bytes);
    while !r.0.is_empty() {
        ops.push(decode_op(&mut r).map_err(|e| Error::Corrupt(format!("undecodable log entry: {e}")))?);
    }
    Ok(())
}

fn decode_op(r: &mut R<'_>) -> Result<Op, Error> {
    Ok(match r.u8()? {
        0 => Op::PutHeader { session: r.array()?, header: r.len_bytes()?.to_vec() },
        1 => Op::PutEvent { key: r.array()?, payload: Bytes::copy_from_slice(r.len_bytes()?) },
        2 => Op::Trim { prefix: r.array()?, low_water: r.u64()? },
        3 => Op::DropStream { prefix: r.array()? },
        4 => Op::DropSession { session: r.array()? },
        5 => Op::DropEvents { session: r.array()? },
        tag @ (6 | 7) => Op::PutStream {
            prefix: r.array()?,
            stream: r.len_bytes()?.to_vec(),
            origin: if tag == 7 { Origin::New } else { Origin::Existing },
        },
        _ => return Err(Error::Corrupt("bad write tag".into())),
    })
}

struct W(Vec<u8>);

impl W {
    fn len_bytes(&mut self, v: &[u8]) {
        self.0.extend_from_slice(&(v.len() as u32).to_be_bytes());
        self.bytes(v);
    }
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn bytes(&mut self, v: &[u8]) {
        self.0.extend_from_slice(v);
    }
    fn opt(&mut self, v: Option<&[u8]>) {
        match v {
            None => self.u8(0),
            Some(b) => {
                self.u8(1);
                self.len_bytes(b);
            }
        }
    }
    fn ts(&mut self, t: Timestamp) {
        self.u64(t.as_millis());
    }
    fn attachment(&mut self, a: Attachment) {
        match a {
            Attachment::Detached(d) => {
                self.u8(0);
                self.ts(d.since);
            }
            Attachment::Attached(a) => {
                self.u8(1);
                self.ts(a.deadline);
            }
        }
    }
}

struct R<'a>(&'a [u8]);

impl<'a> R<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], Error> {
        if self.0.len() < n {
            return Err(corrupt("truncated"));
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Ok(a)
    }
    fn u8(&mut self) -> Result<u8, Error> {
        Ok(self.take(1)?[0])
    }
    fn u64(&mut self) -> Result<u64, Error> {
        let mut b = [0u8; 8];
        b.copy_from_slice(self.take(8)?);
        Ok(u64::from_be_bytes(b))
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], Error> {
        let mut b = [0u8; N];
        b.copy_from_slice(self.take(N)?);
        Ok(b)
    }
    fn len_bytes(&mut self) -> Result<&'a [u8], Error> {
        let len = u32::from_be_bytes(self.array::<4>()?) as usize;
        self.take(len)
    }
    fn opt(&mut self) -> Result<Option<Vec<u8>>, Error> {
        match self.u8()? {
            0 => Ok(None),
            1 => Ok(Some(self.len_bytes()?.to_vec())),
            _ => Err(corrupt("bad option tag")),
        }
    }
    fn ts(&mut self) -> Result<Timestamp, Error> {
        Ok(Timestamp::from_millis(self.u64()?))
    }
    fn attachment(&mut self) -> Result<Attachment, Error> {
        match self.u8()? {
            0 => Ok(Attachment::Detached(Detached { since: self.ts()? })),
            1 => Ok(Attachment::Attached(Attached { deadline: self.ts()? })),
            _ => Err(corrupt("bad attachment tag")),
        }
    }
}

fn revision_code(r: Revision) -> u8 {
    Revision::ALL.iter().position(|x| *x == r).unwrap_or(0) as u8
}

fn end_reason(w: &mut W, r: EndReason) {
    match r {
        EndReason::Deleted => w.u8(0),
        EndReason::Rejected(reason) => {
            w.u8(1);
            w.u8(RejectReason::ALL.iter().position(|x| *x == reason).unwrap_or(0) as u8);
        }
        EndReason::IdleExpired => w.u8(2),
        EndReason::Failed => w.u8(3),
        EndReason::OwnerLost => w.u8(4),
    }
}

/// Encode a session's header row: everything but its streams.
pub(crate) fn encode_header(record: &SessionRecord) -> Vec<u8> {
    let mut w = W(Vec::with_capacity(64));
    let s = record.session();
    w.bytes(s.id().as_bytes());
    w.u8(revision_code(s.revision()));
    w.u8(u8::from(s.reset_contract()));
    w.opt(s.principal().map(str::as_bytes));
    w.ts(s.created_at());
    match *s.state() {
        SessionState::Active(a) => {
            w.u8(0);
            w.ts(a.last_activity);
        }
        SessionState::Ended(e) => {
            w.u8(1);
            w.ts(e.at);
            end_reason(&mut w, e.reason);
        }
    }
    w.bytes(record.standalone().id().as_bytes());
    let client = s.client();
    w.opt(client.capabilities.as_deref().map(str::as_bytes));
    w.opt(client.info.as_deref().map(str::as_bytes));
    w.0
}

/// Encode one stream's row.
pub(crate) fn encode_stream(st: &Stream) -> Vec<u8> {
    let mut w = W(Vec::with_capacity(80));
    w.bytes(st.id().as_bytes());
    w.u8(match st.kind() {
        StreamKind::Standalone => 0,
        StreamKind::Request => 1,
    });
    w.u64(st.high_water().get());
    w.u64(st.low_water().get());
    w.u64(st.retained_bytes());
    w.u64(st.epoch().get());
    w.u8(u8::from(st.ever_attached()));
    w.opt(st.label().map(Label::as_bytes));
    match *st.state() {
        StreamState::Open(o) => {
            w.u8(0);
            w.attachment(o.attachment);
        }
        StreamState::Completed(c) => {
            w.u8(1);
            w.ts(c.at);
            w.attachment(c.attachment);
        }
        StreamState::Fenced(f) => {
            w.u8(2);
            w.ts(f.at);
            w.u8(match f.cause {
                FenceCause::Reset => 0,
                FenceCause::SessionEnded => 1,
            });
        }
    }
    w.0
}

/// The parts of a decoded stream, before the store checks them against the events on disk.
pub(crate) struct StreamParts {
    pub(crate) id: StreamId,
    pub(crate) kind: StreamKind,
    pub(crate) high_water: Seq,
    pub(crate) low_water: Seq,
    pub(crate) retained_bytes: u64,
    pub(crate) epoch: Epoch,
    pub(crate) ever_attached: bool,
    pub(crate) label: Option<Label>,
    pub(crate) state: StreamState,
}

impl StreamParts {
    pub(crate) fn build(&self) -> Stream {
        Stream::restore(
            self.id,
            self.kind,
            self.high_water,
            self.low_water,
            self.retained_bytes,
            self.epoch,
            self.ever_attached,
            self.state,
        )
        .with_label(self.label.clone())
    }
}

/// A decoded record, in parts.
pub(crate) struct RecordParts {
    pub(crate) new: NewSession,
    pub(crate) created_at: Timestamp,
    pub(crate) state: SessionState,
    pub(crate) standalone: StreamId,
    pub(crate) streams: Vec<StreamParts>,
}

impl RecordParts {
    pub(crate) fn build(self) -> Result<SessionRecord, Error> {
        let streams = self.streams.iter().map(StreamParts::build);
        SessionRecord::restore(self.new, self.created_at, self.state, self.standalone, streams)
            .map_err(Error::Core)
    }
}

/// Decode a header row; its streams come from their own rows ([`decode_stream`]).
pub(crate) fn decode_header(bytes: &[u8]) -> Result<RecordParts, Error> {
    let mut r = R(bytes);
    let id = SessionId::from_bytes(r.array()?);
    let revision = *Revision::ALL.get(usize::from(r.u8()?)).ok_or_else(|| corrupt("bad revision"))?;
    let reset_contract = r.u8()? != 0;
    let principal = match r.opt()? {
        Some(b) => Some(String::from_utf8(b).map_err(|_| corrupt("principal is not UTF-8"))?),
        None => None,
    };
    let created_at = r.ts()?;
    let state = match r.u8()? {
        0 => SessionState::Active(Active { last_activity: r.ts()? }),
        1 => {
            let at = r.ts()?;
            let reason = match r.u8()? {
                0 => EndReason::Deleted,
                1 => EndReason::Rejected(
                    *RejectReason::ALL
                        .get(usize::from(r.u8()?))
                        .ok_or_else(|| corrupt("bad reject reason"))?,
                ),
                2 => EndReason::IdleExpired,
                3 => EndReason::Failed,
                4 => EndReason::OwnerLost,
                _ => return Err(corrupt("bad end reason")),
            };
            SessionState::Ended(Ended { at, reason })
        }
        _ => return Err(corrupt("bad session state")),
    };
    let standalone = StreamId::from_bytes(r.array()?);
    // A format 3 header ends here: its client facts are unknown.
    let client = if r.0.is_empty() {
        ClientFacts::default()
    } else {
        let mut text = |what| -> Result<Option<std::sync::Arc<str>>, Error> {
            r.opt()?.map(|b| String::from_utf8(b).map(Into::into).map_err(|_| corrupt(what))).transpose()
        };
        ClientFacts {
            capabilities: text("client capabilities are not UTF-8")?,
            info: text("clientInfo is not UTF-8")?,
        }
    };
    if !r.0.is_empty() {
        return Err(corrupt("trailing bytes in a session header"));
    }
    let new = NewSession { id, revision, reset_contract, principal, client };
    Ok(RecordParts { new, created_at, state, standalone, streams: Vec::new() })
}

/// Decode a stream row.
pub(crate) fn decode_stream(bytes: &[u8]) -> Result<StreamParts, Error> {
    let mut r = R(bytes);
    let id = StreamId::from_bytes(r.array()?);
    let kind = match r.u8()? {
        0 => StreamKind::Standalone,
        1 => StreamKind::Request,
        _ => return Err(corrupt("bad stream kind")),
    };
    let high_water = Seq::new(r.u64()?);
    let low_water = Seq::new(r.u64()?);
    let retained_bytes = r.u64()?;
    let epoch = Epoch::new(r.u64()?);
    let ever_attached = r.u8()? != 0;
    let label = r.opt()?.map(|b| Label::new(&b));
    let state = match r.u8()? {
        0 => StreamState::Open(Open { attachment: r.attachment()? }),
        1 => {
            let at = r.ts()?;
            StreamState::Completed(Completed { at, attachment: r.attachment()? })
        }
        2 => {
            let at = r.ts()?;
            let cause = match r.u8()? {
                0 => FenceCause::Reset,
                1 => FenceCause::SessionEnded,
                _ => return Err(corrupt("bad fence cause")),
            };
            StreamState::Fenced(Fenced { at, cause })
        }
        _ => return Err(corrupt("bad stream state")),
    };
    if !r.0.is_empty() {
        return Err(corrupt("trailing bytes in a stream row"));
    }
    Ok(StreamParts { id, kind, high_water, low_water, retained_bytes, epoch, ever_attached, label, state })
}

#[cfg(test)]
mod tests;
