//! The binary encoding of a session record, shared by every store that persists one: a
//! header (everything but the streams) and one row per stream, so a write rewrites only the
//! streams it changed. Hand-written and explicit so a stored format never depends on a
//! serializer's defaults; integers are big-endian.
//!
//! ```text
//! header  : session standalone[12] client
//! session : id[16] revision:u8 reset_contract:u8 principal:opt_bytes created_at:u64 state
//! client  : capabilities:opt_bytes client_info:opt_bytes   (JSON text; may be absent)
//! state   : 0 last_activity:u64 | 1 at:u64 end_reason
//! end     : 0 deleted | 1 rejected reason:u8 | 2 idle_expired | 3 failed | 4 owner_lost | 5 history_lost | 6 backend_exited
//! stream  : id[12] kind:u8 high:u64 low:u64 bytes:u64 epoch:u64 ever:u8 label:opt_bytes sstate
//! sstate  : 0 attachment | 1 at:u64 attachment | 2 at:u64 cause:u8
//! attach  : 0 since:u64 | 1 deadline:u64
//! opt_bytes: 0 | 1 len:u32 bytes
//! ```
//!
//! Events are kept in chunks of consecutive events of one stream ([`chunk_events`]).
//!
//! It owns the bytes of one header, one stream and one chunk, not where a store keeps them, how it
//! keys events or what format version a store's files carry.

use forkless_core::{
    Active, Attached, Attachment, ClientFacts, Completed, Detached, EndReason, Ended, Epoch, FenceCause,
    Fenced, Label, NewSession, Open, RejectReason, Revision, Seq, SessionId, SessionRecord, SessionState,
    Stream, StreamId, StreamKind, StreamState, Timestamp,
};

use crate::Error;

mod chunk;
mod task;
pub use chunk::{
    MAX_CHUNK_BYTES, MAX_CHUNK_EVENTS, chunk_events, chunk_has_room, chunk_last, push_chunk_events,
    push_chunk_sizes, put_chunk_event,
};
pub use task::{decode_task, encode_task};

fn corrupt(what: &str) -> Error {
    Error::Corrupt(format!("undecodable session record: {what}"))
}

/// Writes the encoding: big-endian integers, length-prefixed bytes, tagged options.
#[derive(Debug, Default)]
pub struct Encoder(pub Vec<u8>);

impl Encoder {
    /// `len:u32` then the bytes.
    pub fn len_bytes(&mut self, v: &[u8]) {
        self.0.extend_from_slice(&(v.len() as u32).to_be_bytes());
        self.bytes(v);
    }
    /// One byte.
    pub fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    /// A big-endian `u64`.
    pub fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    /// The bytes as they are (fixed-size fields).
    pub fn bytes(&mut self, v: &[u8]) {
        self.0.extend_from_slice(v);
    }
    /// `0` for none, else `1` and length-prefixed bytes.
    pub fn opt(&mut self, v: Option<&[u8]>) {
        match v {
            None => self.u8(0),
            Some(b) => {
                self.u8(1);
                self.len_bytes(b);
            }
        }
    }
    /// A timestamp in milliseconds.
    pub fn ts(&mut self, t: Timestamp) {
        self.u64(t.as_millis());
    }
    /// A stream's attachment: `0 since` or `1 deadline`.
    pub fn attachment(&mut self, a: Attachment) {
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

/// Reads what an [`Encoder`] wrote; every method fails with [`Error::Corrupt`] on short or
/// malformed input, never panics.
#[derive(Debug)]
pub struct Decoder<'a>(pub &'a [u8]);

impl<'a> Decoder<'a> {
    /// The next `n` bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], Error> {
        if self.0.len() < n {
            return Err(corrupt("truncated"));
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Ok(a)
    }
    /// One byte.
    pub fn u8(&mut self) -> Result<u8, Error> {
        Ok(self.take(1)?[0])
    }
    /// A big-endian `u64`.
    pub fn u64(&mut self) -> Result<u64, Error> {
        let mut b = [0u8; 8];
        b.copy_from_slice(self.take(8)?);
        Ok(u64::from_be_bytes(b))
    }
    /// A fixed-size field.
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], Error> {
        let mut b = [0u8; N];
        b.copy_from_slice(self.take(N)?);
        Ok(b)
    }
    /// Length-prefixed bytes.
    pub fn len_bytes(&mut self) -> Result<&'a [u8], Error> {
        let len = u32::from_be_bytes(self.array::<4>()?) as usize;
        self.take(len)
    }
    /// A tagged option of length-prefixed bytes.
    pub fn opt(&mut self) -> Result<Option<Vec<u8>>, Error> {
        match self.u8()? {
            0 => Ok(None),
            1 => Ok(Some(self.len_bytes()?.to_vec())),
            _ => Err(corrupt("bad option tag")),
        }
    }
    /// A timestamp in milliseconds.
    pub fn ts(&mut self) -> Result<Timestamp, Error> {
        Ok(Timestamp::from_millis(self.u64()?))
    }
    /// A stream's attachment.
    pub fn attachment(&mut self) -> Result<Attachment, Error> {
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

fn end_reason(w: &mut Encoder, r: EndReason) {
    match r {
        EndReason::Deleted => w.u8(0),
        EndReason::Rejected(reason) => {
            w.u8(1);
            w.u8(RejectReason::ALL.iter().position(|x| *x == reason).unwrap_or(0) as u8);
        }
        EndReason::IdleExpired => w.u8(2),
        EndReason::Failed => w.u8(3),
        EndReason::OwnerLost => w.u8(4),
        EndReason::HistoryLost => w.u8(5),
        EndReason::BackendExited => w.u8(6),
        EndReason::Reclaimed => w.u8(7),
        EndReason::UpstreamSessionLost => w.u8(8),
    }
}

/// Encode a session's header row: everything but its streams.
pub fn encode_header(record: &SessionRecord) -> Vec<u8> {
    let mut w = Encoder(Vec::with_capacity(64));
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
    // What the backend needs to reach the session, only when it said: a header without it
    // is byte for byte what builds before it wrote and read (a rolling upgrade's older nodes
    // read every session but those of an HTTP upstream gateway).
    if let Some(backend) = s.backend() {
        w.opt(Some(backend.as_bytes()));
    }
    w.0
}

/// Encode one stream's row.
pub fn encode_stream(st: &Stream) -> Vec<u8> {
    let mut out = Vec::with_capacity(80);
    encode_stream_into(st, &mut out);
    out
}

/// Encode one stream's row at the end of `out` (a store that writes many rows into one
/// buffer, without a vector per row).
pub fn encode_stream_into(st: &Stream, out: &mut Vec<u8>) {
    let mut w = Encoder(std::mem::take(out));
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
    *out = w.0;
}

/// The parts of a decoded stream, before the store checks them against the events it holds.
#[derive(Debug)]
pub struct StreamParts {
    /// The stream id.
    pub id: StreamId,
    /// Its kind.
    pub kind: StreamKind,
    /// Its high-water mark.
    pub high_water: Seq,
    /// Its low-water mark.
    pub low_water: Seq,
    /// Payload bytes it retains.
    pub retained_bytes: u64,
    /// Its epoch.
    pub epoch: Epoch,
    /// Whether it was ever attached.
    pub ever_attached: bool,
    /// Its label.
    pub label: Option<Label>,
    /// Its state.
    pub state: StreamState,
}

impl StreamParts {
    /// The stream.
    pub fn build(&self) -> Stream {
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
#[derive(Debug)]
pub struct RecordParts {
    /// What the session was created with.
    pub new: NewSession,
    /// When it was created.
    pub created_at: Timestamp,
    /// Its state.
    pub state: SessionState,
    /// Its standalone stream.
    pub standalone: StreamId,
    /// What its backend needs to reach it again ([`SessionRecord::on_backend`]).
    pub backend: Option<std::sync::Arc<str>>,
    /// Its streams, added by the caller from their rows.
    pub streams: Vec<StreamParts>,
}

impl RecordParts {
    /// The record, checked by the core.
    pub fn build(self) -> Result<SessionRecord, Error> {
        let streams = self.streams.iter().map(StreamParts::build);
        let mut record =
            SessionRecord::restore(self.new, self.created_at, self.state, self.standalone, streams)
                .map_err(Error::Core)?;
        record.restore_backend(self.backend);
        Ok(record)
    }
}

/// Decode a header row; its streams come from their own rows ([`decode_stream`]).
pub fn decode_header(bytes: &[u8]) -> Result<RecordParts, Error> {
    let mut r = Decoder(bytes);
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
                5 => EndReason::HistoryLost,
                6 => EndReason::BackendExited,
                7 => EndReason::Reclaimed,
                8 => EndReason::UpstreamSessionLost,
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
    // Present only when the backend said (see `encode_header`).
    let backend = if r.0.is_empty() {
        None
    } else {
        r.opt()?
            .map(|b| String::from_utf8(b).map(Into::into).map_err(|_| corrupt("backend facts are not UTF-8")))
            .transpose()?
    };
    if !r.0.is_empty() {
        return Err(corrupt("trailing bytes in a session header"));
    }
    let new = NewSession { id, revision, reset_contract, principal, client };
    Ok(RecordParts { new, created_at, state, standalone, backend, streams: Vec::new() })
}

/// Decode a stream row.
pub fn decode_stream(bytes: &[u8]) -> Result<StreamParts, Error> {
    let mut r = Decoder(bytes);
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
