//! Writes as calls of the `APPLY` script ([`crate::scripts`]): a compare-and-set, an insert
//! and a group commit are each one call, so each is atomic and one round trip.
//!
//! It owns the encoding of a write into the script's keys and arguments, not the script.

use std::collections::HashMap;

use forkless_core::{Seq, SessionId, SessionRecord, StreamChange, StreamId, Wake};
use forkless_store::Version;
use forkless_store::codec::{encode_header, encode_stream};

use crate::keys::{Keys, hex};

/// One call of `APPLY` being built.
#[derive(Debug)]
pub(crate) struct Apply<'k> {
    keys: &'k Keys,
    names: Vec<String>,
    index: HashMap<String, usize>,
    args: Vec<Vec<u8>>,
    /// Which session each block is, in order.
    pub(crate) sessions: Vec<SessionId>,
}

/// What one session's block does besides its header and due indexes, kept by kind so the
/// script applies them in a safe order: rows, drops, events, trims, whole logs, hints.
#[derive(Debug, Default)]
pub(crate) struct Ops {
    puts: Vec<Vec<u8>>,
    drops: Vec<Vec<u8>>,
    events: Vec<Vec<u8>>,
    trims: Vec<Vec<u8>>,
    clears: Vec<Vec<u8>>,
    hints: Vec<Vec<u8>>,
}

fn text(s: impl ToString) -> Vec<u8> {
    s.to_string().into_bytes()
}

fn wake(w: &Wake) -> [Vec<u8>; 4] {
    [w.liveness, w.stream_idle, w.activity, w.ended].map(|t| t.map_or_else(Vec::new, |t| text(t.as_millis())))
}

/// An event's zset member: its seq (so members are unique) and its payload.
pub(crate) fn member(seq: Seq, payload: &[u8]) -> Vec<u8> {
    let mut m = Vec::with_capacity(8 + payload.len());
    m.extend_from_slice(&seq.get().to_be_bytes());
    m.extend_from_slice(payload);
    m
}

impl<'k> Apply<'k> {
    pub(crate) fn new(keys: &'k Keys) -> Self {
        let mut this = Self {
            keys,
            names: Vec::new(),
            index: HashMap::new(),
            // The gate and the session count, set by `under_boot` and `finish`.
            args: vec![Vec::new(), Vec::new()],
            sessions: Vec::new(),
        };
        this.key(keys.sessions());
        for due in keys.due() {
            this.key(due);
        }
        this.key(keys.run());
        this
    }

    /// The 1-based index of `name` among the call's keys.
    fn key(&mut self, name: String) -> usize {
        if let Some(i) = self.index.get(&name) {
            return *i;
        }
        self.names.push(name.clone());
        self.index.insert(name, self.names.len());
        self.names.len()
    }

    fn events_key(&mut self, session: SessionId, stream: StreamId) -> Vec<u8> {
        text(self.key(self.keys.events(session, stream)))
    }

    /// The ops that take `old`'s streams to `new`'s (every stream, for a new session); an
    /// ended `new` drops every log.
    pub(crate) fn changes(&mut self, old: Option<&SessionRecord>, new: &SessionRecord) -> Ops {
        let mut ops = Ops::default();
        let session = new.id();
        let put = |ops: &mut Ops, meta: &forkless_core::Stream| {
            ops.puts.extend([b"U".to_vec(), text(hex(meta.id().as_bytes())), encode_stream(meta)]);
        };
        match old {
            None => new.streams().for_each(|s| put(&mut ops, s)),
            Some(old) => {
                for change in new.changes_since(old) {
                    let (low_before, meta) = match change {
                        StreamChange::Removed(_) => {
                            let key = self.events_key(session, change.id());
                            ops.drops.extend([b"D".to_vec(), text(hex(change.id().as_bytes())), key]);
                            continue;
                        }
                        StreamChange::Added(meta) => (Seq::FIRST, meta),
                        StreamChange::Changed { before, after } => (before.low_water(), after),
                    };
                    put(&mut ops, meta);
                    if meta.low_water() > low_before {
                        let key = self.events_key(session, meta.id());
                        ops.trims.extend([b"T".to_vec(), key, text(meta.low_water().get())]);
                    }
                }
            }
        }
        if new.session().ended().is_some() {
            for stream in new.streams().map(forkless_core::Stream::id) {
                let key = self.events_key(session, stream);
                ops.clears.extend([b"X".to_vec(), key]);
            }
        }
        ops
    }

    /// Add an event to `ops`.
    pub(crate) fn event(
        &mut self,
        ops: &mut Ops,
        session: SessionId,
        stream: StreamId,
        seq: Seq,
        payload: &[u8],
    ) {
        let key = self.events_key(session, stream);
        ops.events.extend([b"E".to_vec(), key, text(seq.get()), member(seq, payload)]);
    }

    /// Make `node` the owner of the session of `ops`.
    pub(crate) fn owner(&mut self, ops: &mut Ops, node: &str) {
        let key = text(self.key(self.keys.owner(node)));
        ops.hints.extend([b"O".to_vec(), key, text(node)]);
    }

    /// Publish `hint` on the store's channel with `ops`.
    pub(crate) fn hint(&self, ops: &mut Ops, hint: &str) {
        ops.hints.extend([b"P".to_vec(), text(self.keys.hints()), text(hint)]);
    }

    /// A session's block: stored at `expected` (`None`: must not exist) and moving to `next`.
    pub(crate) fn session(
        &mut self,
        expected: Option<Version>,
        next: Version,
        record: &SessionRecord,
        ops: Ops,
    ) {
        let id = record.id();
        let rec = text(self.key(self.keys.record(id)));
        let st = text(self.key(self.keys.streams(id)));
        let expected = expected.map_or_else(Vec::new, |v| text(v.get()));
        let ops: Vec<Vec<u8>> = [ops.puts, ops.drops, ops.events, ops.trims, ops.clears, ops.hints].concat();
        self.args.extend([
            rec,
            st,
            expected,
            text(next.get()),
            encode_header(record),
            id.as_bytes().to_vec(),
        ]);
        self.args.extend(wake(&record.wake()));
        self.args.push(text(ops.len()));
        self.args.extend(ops);
        self.sessions.push(id);
    }

    /// A recovery write: allowed under the Redis boot `run` before its history is vouched for.
    pub(crate) fn under_boot(&mut self, run: &str) {
        self.args[0] = text(run);
    }

    /// The call's keys and arguments.
    pub(crate) fn finish(mut self) -> (Vec<String>, Vec<Vec<u8>>, Vec<SessionId>) {
        self.args[1] = text(self.sessions.len());
        (self.names, self.args, self.sessions)
    }
}
