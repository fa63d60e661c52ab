//! Writes as calls of the `APPLY` script ([`crate::scripts`]): a compare-and-set, an insert
//! and a group commit are each one call, so each is atomic and one round trip.
//!
//! It owns the encoding of a write into the script's keys and arguments, not the script.
//! A chunk's events are copied once, into the command: an argument borrows them until then.

use std::collections::HashMap;
use std::io::Write as _;

use forkless_core::{Seq, SessionId, SessionRecord, StreamChange, StreamId, Wake};
use forkless_store::Version;
use forkless_store::codec::{encode_header, encode_stream};

use crate::keys::{Keys, bucket, hex};

/// One argument of an `APPLY` call.
#[derive(Debug)]
pub(crate) enum Arg<'a> {
    /// Bytes of its own.
    Bytes(Vec<u8>),
    /// A chunk's set member, written straight into the command: the seq of its first event,
    /// then the chunk.
    Member(&'a forkless_store::shared::Chunk),
}

impl From<Vec<u8>> for Arg<'_> {
    fn from(bytes: Vec<u8>) -> Self {
        Self::Bytes(bytes)
    }
}

impl redis::ToRedisArgs for Arg<'_> {
    fn write_redis_args<W: ?Sized + redis::RedisWrite>(&self, out: &mut W) {
        match self {
            Self::Bytes(b) => out.write_arg(b),
            Self::Member(chunk) => {
                let mut w = out.writer_for_next_arg();
                // Writing to the command's buffer cannot fail.
                let _ = w.write_all(&chunk.first.get().to_be_bytes());
                chunk.encode(|b| {
                    let _ = w.write_all(b);
                });
            }
        }
    }
}

/// One call of `APPLY` being built.
#[derive(Debug)]
pub(crate) struct Apply<'k> {
    keys: &'k Keys,
    names: Vec<String>,
    index: HashMap<String, usize>,
    /// The indexes of each bucket's keys (session set, due indexes, vouched boot), once named.
    buckets: HashMap<crate::keys::Bucket, [usize; 6]>,
    /// The key base of the session whose keys were named last.
    base: Option<(SessionId, String)>,
    args: Vec<Arg<'k>>,
    /// Which session each block is, in order.
    pub(crate) sessions: Vec<SessionId>,
}

/// What one session's block does besides its header and due indexes, kept by kind so the
/// script applies them in a safe order: rows, drops, events, trims, whole logs, hints.
#[derive(Debug, Default)]
pub(crate) struct Ops<'a> {
    puts: Vec<Arg<'a>>,
    drops: Vec<Arg<'a>>,
    events: Vec<Arg<'a>>,
    trims: Vec<Arg<'a>>,
    clears: Vec<Arg<'a>>,
    hints: Vec<Arg<'a>>,
}

fn text<'a>(s: impl ToString) -> Arg<'a> {
    Arg::Bytes(s.to_string().into_bytes())
}

/// A number as the decimal text Redis reads.
fn num<'a>(n: impl itoa::Integer) -> Arg<'a> {
    Arg::Bytes(itoa::Buffer::new().format(n).as_bytes().to_vec())
}

fn word<'a>(w: &[u8]) -> Arg<'a> {
    Arg::Bytes(w.to_vec())
}

fn wake<'a>(w: &Wake) -> [Arg<'a>; 4] {
    [w.liveness, w.stream_idle, w.activity, w.ended]
        .map(|t| t.map_or_else(|| word(b""), |t| num(t.as_millis())))
}

impl<'k> Apply<'k> {
    pub(crate) fn new(keys: &'k Keys) -> Self {
        Self {
            keys,
            names: Vec::new(),
            index: HashMap::new(),
            buckets: HashMap::new(),
            base: None,
            // The gate, the session count and the hint filter (writer's name and node id),
            // set by `under_boot`, `finish` and `filter`.
            args: vec![word(b""), word(b""), word(b""), word(b"")],
            sessions: Vec::new(),
        }
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

    fn events_key(&mut self, session: SessionId, stream: StreamId) -> Arg<'k> {
        let hex = hex(stream.as_bytes());
        num(self.session_key(session, &[":c:", &hex]))
    }

    /// The 1-based index of one of `session`'s keys (its base, then `suffix`), named afresh:
    /// a session's keys are not looked up among the call's (a name twice in `KEYS` is harmless,
    /// and a session's record and streams keys come once per call), and its base is made once
    /// per run of its keys.
    fn session_key(&mut self, session: SessionId, suffix: &[&str]) -> usize {
        if self.base.as_ref().is_none_or(|(s, _)| *s != session) {
            self.base = Some((session, self.keys.session_base(session)));
        }
        let base = self.base.as_ref().map_or("", |(_, b)| b.as_str());
        let mut name = String::with_capacity(base.len() + suffix.iter().map(|s| s.len()).sum::<usize>());
        name.push_str(base);
        suffix.iter().for_each(|s| name.push_str(s));
        self.names.push(name);
        self.names.len()
    }

    /// The indexes of bucket `b`'s keys: its session set, its four due indexes, its vouched
    /// boot (named once per call, however many of its sessions the call writes).
    fn bucket_keys(&mut self, b: crate::keys::Bucket) -> [usize; 6] {
        if let Some(found) = self.buckets.get(&b) {
            return *found;
        }
        let [d0, d1, d2, d3] = self.keys.due(b).map(|due| self.key(due));
        let found = [self.key(self.keys.sessions(b)), d0, d1, d2, d3, self.key(self.keys.run(b))];
        self.buckets.insert(b, found);
        found
    }

    /// The ops that take `old`'s streams to `new`'s (every stream, for a new session); an
    /// ended `new` drops every log.
    pub(crate) fn changes(&mut self, old: Option<&SessionRecord>, new: &SessionRecord) -> Ops<'k> {
        let mut ops = Ops::default();
        let session = new.id();
        let put = |ops: &mut Ops, meta: &forkless_core::Stream| {
            ops.puts.extend([word(b"U"), text(hex(meta.id().as_bytes())), encode_stream(meta).into()]);
        };
        match old {
            None => new.streams().for_each(|s| put(&mut ops, s)),
            Some(old) => {
                for change in new.changes_since(old) {
                    let (low_before, meta) = match change {
                        StreamChange::Removed(_) => {
                            let key = self.events_key(session, change.id());
                            ops.drops.extend([word(b"D"), text(hex(change.id().as_bytes())), key]);
                            continue;
                        }
                        StreamChange::Added(meta) => (Seq::FIRST, meta),
                        StreamChange::Changed { before, after } => (before.low_water(), after),
                    };
                    put(&mut ops, meta);
                    if meta.low_water() > low_before {
                        let key = self.events_key(session, meta.id());
                        ops.trims.extend([word(b"T"), key, num(meta.low_water().get())]);
                    }
                }
            }
        }
        if new.session().ended().is_some() {
            for stream in new.streams().map(forkless_core::Stream::id) {
                let key = self.events_key(session, stream);
                ops.clears.extend([word(b"X"), key]);
            }
        }
        ops
    }

    /// Add a chunk of events to `ops`, scored by its last event.
    pub(crate) fn chunk(&mut self, ops: &mut Ops<'k>, chunk: &'k forkless_store::shared::Chunk) {
        let key = self.events_key(chunk.session, chunk.stream);
        ops.events.extend([word(b"E"), key, num(chunk.last.get()), Arg::Member(chunk)]);
    }

    /// Make `node` the owner of `session`, whose ops `ops` are.
    pub(crate) fn owner(&mut self, ops: &mut Ops<'k>, session: SessionId, node: &str) {
        let key = num(self.key(self.keys.owner(bucket(session), node)));
        ops.hints.extend([word(b"O"), key, text(node)]);
    }

    /// Publish `hint` about `session` on the store's channel with `ops`: always, or, if the
    /// call has a [`filter`](Self::filter), only if another node tails or owns the session.
    pub(crate) fn hint(&mut self, ops: &mut Ops<'k>, session: SessionId, hint: &str) {
        let interest = num(self.session_key(session, &[":i"]));
        ops.hints.extend([word(b"P"), interest, text(self.keys.hints()), text(hint)]);
    }

    /// Filter the call's hints by tail interest, `filter` writing (see `Batch::filter`).
    pub(crate) fn filter(&mut self, filter: forkless_store::shared::HintFilter<'_>) {
        self.args[2] = text(filter.node);
        self.args[3] = text(filter.owner.unwrap_or(""));
    }

    /// A session's block: stored at `expected` (`None`: must not exist) as `old`, and moving
    /// to `next` as `record`. Its header is written only if it changed (appends never change
    /// it): the script keeps the stored one when it is passed empty.
    pub(crate) fn session(
        &mut self,
        expected: Option<Version>,
        next: Version,
        old: Option<&SessionRecord>,
        record: &SessionRecord,
        ops: Ops<'k>,
    ) {
        let id = record.id();
        let rec = num(self.session_key(id, &[":rec"]));
        let st = num(self.session_key(id, &[":st"]));
        let [set, d0, d1, d2, d3, run] = self.bucket_keys(bucket(id)).map(num);
        let expected = expected.map_or_else(|| word(b""), |v| num(v.get()));
        let Ops { puts, drops, events, trims, clears, hints } = ops;
        let count = [&puts, &drops, &events, &trims, &clears, &hints].iter().map(|o| o.len()).sum::<usize>();
        let header = match old {
            Some(old) if !record.header_changed_since(old) => word(b""),
            _ => encode_header(record).into(),
        };
        self.args.extend([rec, st, set, d0, d1, d2, d3, run]);
        self.args.extend([expected, num(next.get()), header, word(id.as_bytes())]);
        self.args.extend(wake(&record.wake()));
        self.args.push(num(count));
        for op in [puts, drops, events, trims, clears, hints] {
            self.args.extend(op);
        }
        self.sessions.push(id);
    }

    /// A recovery write: allowed under the Redis boot `run` before its history is vouched for.
    pub(crate) fn under_boot(&mut self, run: &str) {
        self.args[0] = text(run);
    }

    /// The call's keys and arguments.
    pub(crate) fn finish(mut self) -> (Vec<String>, Vec<Arg<'k>>, Vec<SessionId>) {
        self.args[1] = num(self.sessions.len());
        (self.names, self.args, self.sessions)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The keys a call names are the keys the reads use.
    #[test]
    fn a_calls_session_keys_are_the_stores_keys() {
        let keys = Keys::new("fk_test");
        let (a, b) = (SessionId::from_bytes([7; 16]), SessionId::from_bytes([200; 16]));
        let stream = StreamId::from_bytes([3; 12]);
        let mut apply = Apply::new(&keys);
        let indexes = [
            apply.session_key(a, &[":rec"]),
            apply.session_key(a, &[":st"]),
            apply.session_key(b, &[":rec"]),
            apply.session_key(a, &[":st"]),
        ];
        let _ = apply.events_key(b, stream);
        let (names, _, _) = apply.finish();
        assert_eq!(indexes, [1, 2, 3, 4]);
        let expected =
            [keys.record(a), keys.streams(a), keys.record(b), keys.streams(a), keys.events(b, stream)];
        assert_eq!(names, expected);
    }
}
