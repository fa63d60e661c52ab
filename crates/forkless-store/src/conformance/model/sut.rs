//! The system under test: the core driven through a store as the server drives it, with
//! simulated connections and one simulated client per session.

use std::collections::HashMap;

use bytes::Bytes;
use forkless_core::{
    AppendTarget, Attachment, Config, Epoch, GetOutcome, GetRequest, RejectReason, SeededEntropy, Seq,
    SessionId, SessionRecord, StreamId, Timestamp,
};

use super::*;
use crate::{Append, Error as StoreError, EventKind, Reader, Store, transact};

pub(super) fn seen_index(answer: Answer) -> usize {
    match answer {
        Answer::Reject(r) => RejectReason::ALL.iter().position(|x| *x == r).unwrap_or(0),
        Answer::Gone => 8,
        Answer::Conflict => 9,
        Answer::Resume { .. } => 10,
        Answer::New => 11,
        Answer::Reset => 12,
    }
}
pub(super) const SEEN_DISPLACED: usize = 13;
pub(super) const SEEN_EVICTED_WRITER: usize = 14;
pub(super) const SEEN_DUPLICATES: usize = 15;
pub(super) const SEEN_TTL_EVICTED: usize = 16;
pub(super) const SEEN_TTL_DROPPED: usize = 17;
pub(super) const SEEN_IDLE_ENDED: usize = 18;

/// One client per session (PROTOCOL section 7).
#[derive(Debug, Default)]
pub(super) struct Client {
    pub(super) cursor: HashMap<StreamId, u64>,
    pub(super) accepted: HashMap<StreamId, Vec<u64>>,
    /// The bytes the client accepted under each id: an id names them forever.
    pub(super) bytes: HashMap<(StreamId, u64), Bytes>,
}

impl Client {
    pub(super) fn new_stream(&mut self, stream: StreamId) {
        let seen = self.accepted.get(&stream).map_or(0, Vec::len);
        assert_eq!(
            seen, 0,
            "a 'new' stream reuses identity {stream:?} the client already accepted events on: a fork"
        );
        self.cursor.insert(stream, 0);
    }

    /// Returns whether the event was a duplicate (dropped).
    pub(super) fn receive(&mut self, stream: StreamId, seq: u64, payload: &Bytes) -> bool {
        if let Some(before) = self.bytes.get(&(stream, seq)) {
            assert_eq!(before, payload, "event {stream}.{seq} was delivered again with other bytes");
        }
        let cursor = self.cursor.entry(stream).or_insert(0);
        if seq <= *cursor {
            return true;
        }
        assert_eq!(seq, *cursor + 1, "gap on {stream:?}: client at {cursor}, received {seq}");
        *cursor = seq;
        self.accepted.entry(stream).or_default().push(seq);
        self.bytes.insert((stream, seq), payload.clone());
        false
    }
}

#[derive(Debug)]
pub(super) struct SutSession {
    pub(super) id: SessionId,
    /// Stream ids by the model's index.
    pub(super) streams: Vec<StreamId>,
    pub(super) client: Client,
}

#[derive(Debug)]
pub(super) struct SutConn {
    pub(super) session: usize,
    pub(super) stream: usize,
    pub(super) epoch: Epoch,
    pub(super) cursor: Seq,
    pub(super) open: bool,
}

pub(super) struct Sut<S> {
    pub(super) rt: tokio::runtime::Runtime,
    pub(super) store: S,
    /// How often each outcome occurred in this case, added to the backend's [`Seen`] at the end.
    pub(super) tally: [u64; OUTCOMES],
    pub(super) seen: &'static Seen,
    pub(super) cfg: Config,
    pub(super) now: Timestamp,
    pub(super) entropy: SeededEntropy,
    pub(super) sessions: Vec<SutSession>,
    pub(super) conns: Vec<SutConn>,
    /// The bytes each acknowledged append was given, by the id the store answered with.
    pub(super) written: HashMap<(StreamId, u64), Bytes>,
    /// Appends attempted in this case: each gets distinct content.
    pub(super) appends: u64,
}

pub(super) fn answer_of(result: Result<(GetOutcome, crate::Version), StoreError>) -> Answer {
    match result {
        Ok((GetOutcome::Conflict(_), _)) => Answer::Conflict,
        Ok((GetOutcome::Rejected(r), _)) => {
            assert!(RejectReason::ALL.contains(&r));
            Answer::Reject(r)
        }
        Ok((GetOutcome::Attached(g), _)) if g.resumed => Answer::Resume { after: g.after.get() },
        Ok((GetOutcome::Attached(g), _)) if g.fenced.is_some() => Answer::Reset,
        Ok((GetOutcome::Attached(_), _)) => Answer::New,
        Err(e) if e.ended().is_some() => Answer::Gone,
        Err(e) => panic!("GET failed with an untyped outcome: {e:?}"),
    }
}

impl<S: Store> Sut<S> {
    pub(super) fn header(&self, session: usize, lei: Lei, token: Token) -> (Option<String>, Option<String>) {
        let standalone = || {
            let id = self.rt.block_on(self.store.load(self.sessions[session].id)).unwrap().unwrap();
            id.value.standalone().id()
        };
        let (lei_text, named) = match lei {
            Lei::Absent => (None, None),
            Lei::Malformed(i) => (Some(MALFORMED[i].replace("{}", &standalone().to_string())), None),
            Lei::Event { owner, stream, seq } => {
                let id = self.sessions[owner].streams[stream];
                (Some(format!("{id}.{seq}")), Some(id))
            }
        };
        let token_text = match token {
            Token::Absent => None,
            Token::Matching => Some(named.unwrap_or_else(standalone).to_string()),
            Token::Stream { owner, stream } => Some(self.sessions[owner].streams[stream].to_string()),
            Token::Garbage => Some("x".to_string()),
        };
        (lei_text, token_text)
    }

    pub(super) fn get(&mut self, session: usize, lei: Lei, token: Token) -> Answer {
        let (l, t) = self.header(session, lei, token);
        let req = GetRequest { last_event_id: l.as_deref(), stream_token: t.as_deref() };
        let id = self.sessions[session].id;
        let (now, cfg) = (self.now, self.cfg);
        let entropy = &mut self.entropy;
        let result =
            self.rt.block_on(transact(&self.store, id, |r| r.on_get(&req, now, &cfg, &mut *entropy)));
        self.granted(session, lei, result)
    }

    /// Two GETs with the same headers both load the record before either writes: the second
    /// compare-and-set must lose and retry, so they are applied one after the other.
    pub(super) fn racing_gets(&mut self, session: usize, lei: Lei, token: Token) -> (Answer, Answer) {
        let (l, t) = self.header(session, lei, token);
        let req = GetRequest { last_event_id: l.as_deref(), stream_token: t.as_deref() };
        let id = self.sessions[session].id;
        let (now, cfg) = (self.now, self.cfg);
        let a = self.rt.block_on(self.store.load(id)).unwrap().unwrap();
        let b = self.rt.block_on(self.store.load(id)).unwrap().unwrap();
        assert_eq!(a.version, b.version);
        let mut first = a.value;
        let first_result = match first.on_get(&req, now, &cfg, &mut self.entropy) {
            Ok(outcome) => {
                let v = self.rt.block_on(self.store.compare_and_set(a.version, first)).unwrap();
                Ok((outcome, v.expect("the first writer wins")))
            }
            Err(e) => Err(StoreError::Core(e)),
        };
        let wrote = first_result.is_ok();
        let first_answer = self.granted(session, lei, first_result);
        let mut second = b.value;
        if second.on_get(&req, now, &cfg, &mut self.entropy).is_ok() && wrote {
            let lost = self.rt.block_on(self.store.compare_and_set(b.version, second)).unwrap();
            assert_eq!(lost, None, "a decision on a stale snapshot must not be written");
        }
        let entropy = &mut self.entropy;
        let result =
            self.rt.block_on(transact(&self.store, id, |r| r.on_get(&req, now, &cfg, &mut *entropy)));
        (first_answer, self.granted(session, lei, result))
    }

    /// Apply a GET's outcome to the client and open its connection.
    pub(super) fn granted(
        &mut self,
        session: usize,
        lei: Lei,
        result: Result<(GetOutcome, crate::Version), StoreError>,
    ) -> Answer {
        let grant = match &result {
            Ok((GetOutcome::Attached(g), _)) => Some(*g),
            _ => None,
        };
        let answer = answer_of(result);
        self.tally[seen_index(answer)] += 1;
        let Some(g) = grant else { return answer };
        let sut = &mut self.sessions[session];
        if g.displaced {
            self.tally[SEEN_DISPLACED] += 1;
        }
        if g.resumed {
            // Section 7: a continuation only of the stream and cursor the client asked for.
            let Lei::Event { owner, stream, seq } = lei else { panic!("resumed without a cursor") };
            assert_eq!((owner, sut.streams[stream], g.after.get()), (session, g.stream, seq));
        } else {
            if g.fenced.is_some() {
                sut.streams.push(g.stream);
            }
            sut.client.new_stream(g.stream);
            assert_eq!(g.after, Seq::PRIMING, "a new stream is delivered from its first event");
        }
        let stream =
            sut.streams.iter().position(|s| *s == g.stream).expect("granted a stream of this session");
        self.conns.push(SutConn { session, stream, epoch: g.epoch, cursor: g.after, open: true });
        answer
    }

    pub(super) fn emit(&mut self, session: usize, target: Target, complete: bool) -> Result<u64, EmitError> {
        let sut = &self.sessions[session];
        let target = match target {
            Target::Standalone => AppendTarget::Standalone,
            Target::Stream(k) => AppendTarget::Stream(sut.streams[k]),
        };
        let before = self.rt.block_on(self.store.load(sut.id)).unwrap().unwrap();
        // Distinct content per append, so a store that hands an id to other bytes is seen.
        self.appends += 1;
        let payload = Bytes::from(format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progress":{},"session":{session}}}}}"#,
            self.appends
        ));
        let result = self.rt.block_on(self.store.append(Append {
            session: sut.id,
            target,
            payload: payload.clone(),
            kind: EventKind::ending_if(complete),
            now: self.now,
            limits: &self.cfg.limits,
        }));
        match result {
            Ok(id) => {
                if let AppendTarget::Stream(s) = target {
                    assert_eq!(id.stream, s, "never redirected");
                }
                let before = self.written.insert((id.stream, id.seq.get()), payload);
                assert_eq!(before, None, "the store answered an append with an id it had given before");
                Ok(id.seq.get())
            }
            Err(e) => {
                let after = self.rt.block_on(self.store.load(sut.id)).unwrap().unwrap();
                assert_eq!(after.value, before.value, "a refused emit lands nowhere");
                match e {
                    _ if e.ended().is_some() => Err(EmitError::Ended),
                    StoreError::Core(forkless_core::Error::StreamFenced) => Err(EmitError::Fenced),
                    StoreError::Core(forkless_core::Error::StreamCompleted) => Err(EmitError::Completed),
                    StoreError::Core(forkless_core::Error::StreamUnknown) | StoreError::StreamUnknown => {
                        Err(EmitError::Unknown)
                    }
                    other => panic!("untyped emit failure: {other:?}"),
                }
            }
        }
    }

    pub(super) fn deliver(&mut self, c: usize, max: u64) {
        let (now, cfg) = (self.now, self.cfg);
        let conn = &self.conns[c];
        if !conn.open {
            return;
        }
        let sut = &self.sessions[conn.session];
        let (id, stream) = (sut.id, sut.streams[conn.stream]);
        let record =
            self.rt.block_on(self.store.load(id)).unwrap().expect("sessions are never removed here").value;
        let meta = record.stream(stream).cloned();
        let current = record.session().ended().is_none()
            && meta.as_ref().is_some_and(|m| {
                !m.is_fenced()
                    && m.epoch() == conn.epoch
                    && matches!(m.attachment(), Some(Attachment::Attached(_)))
            });
        if !current {
            // Fenced, displaced, detached by liveness, or the session ended: stop writing.
            self.conns[c].open = false;
            return;
        }
        let meta = meta.expect("checked");
        let epoch = conn.epoch;
        let max = usize::try_from(max).unwrap_or(usize::MAX);
        match self.rt.block_on(self.store.read(id, stream, conn.cursor, max, Reader::Attached(epoch))) {
            Err(StoreError::Evicted { .. }) => {
                self.tally[SEEN_EVICTED_WRITER] += 1;
                self.rt.block_on(transact(&self.store, id, |r| r.on_detach(stream, epoch, now))).unwrap();
                self.conns[c].open = false;
            }
            Err(e) => panic!("read failed: {e:?}"),
            Ok(events) => {
                let conn = &mut self.conns[c];
                let client = &mut self.sessions[conn.session].client;
                for e in events {
                    assert_eq!(e.seq, conn.cursor.next(), "the store returns the log in order, gap-free");
                    assert!(e.seq <= meta.high_water());
                    let written = self.written.get(&(stream, e.seq.get()));
                    assert_eq!(written, Some(&e.payload), "event {stream}.{} read with other bytes", e.seq);
                    conn.cursor = e.seq;
                    if client.receive(stream, e.seq.get(), &e.payload) {
                        self.tally[SEEN_DUPLICATES] += 1;
                    }
                }
                if meta.is_completed() && conn.cursor == meta.high_water() {
                    conn.open = false;
                    self.rt.block_on(transact(&self.store, id, |r| r.on_detach(stream, epoch, now))).unwrap();
                } else {
                    let renew = |r: &mut SessionRecord| r.on_write_completed(stream, epoch, now, &cfg);
                    self.rt.block_on(transact(&self.store, id, renew)).unwrap();
                }
            }
        }
    }

    /// Every id the store still serves on `stream` names the bytes it was appended with, and
    /// every id the client accepted that is still retained names the bytes the client has.
    pub(super) fn check_content(&self, session: &SutSession, stream: StreamId, low: Seq) {
        let after = Seq::new(low.get().saturating_sub(1));
        let read = self.store.read(session.id, stream, after, 10_000, Reader::Inspector);
        let events = match self.rt.block_on(read) {
            Ok(events) => events,
            // Retention moved on between the record and the read: nothing to compare.
            Err(StoreError::Evicted { .. }) => return,
            Err(e) => panic!("read of stream {stream}: {e:?}"),
        };
        for e in events {
            let key = (stream, e.seq.get());
            assert_eq!(
                self.written.get(&key),
                Some(&e.payload),
                "event {stream}.{} now names other bytes",
                e.seq
            );
            if let Some(accepted) = session.client.bytes.get(&key) {
                assert_eq!(
                    accepted, &e.payload,
                    "event {stream}.{} differs from what the client accepted",
                    e.seq
                );
            }
        }
    }

    pub(super) fn drop_conn(&mut self, c: usize) -> bool {
        let conn = &mut self.conns[c];
        if !conn.open {
            return false;
        }
        conn.open = false;
        let sut = &self.sessions[conn.session];
        let (id, stream, epoch, now) = (sut.id, sut.streams[conn.stream], conn.epoch, self.now);
        self.rt.block_on(transact(&self.store, id, |r| r.on_detach(stream, epoch, now))).is_ok()
    }
}
