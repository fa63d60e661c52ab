//! The state-machine test proper: each step applied to the model and the system, their
//! outcomes compared, and the invariants checked after every step.

use std::collections::HashMap;

use forkless_core::{
    Attachment, EndReason, NewSession, Revision, SeededEntropy, Seq, SessionId, SessionRecord, StreamId,
    StreamKind, StreamState, Timestamp,
};
use proptest_state_machine::StateMachineTest;

use super::*;
use crate::{Error as StoreError, Reader, Store, transact};

pub(super) struct StoreUnderTest<B>(std::marker::PhantomData<B>);

impl<B: Backend> StateMachineTest for StoreUnderTest<B> {
    type SystemUnderTest = Sut<B::S>;
    type Reference = Reference;

    fn init_test(model: &Model) -> Sut<B::S> {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        let now = Timestamp::from_millis(model.now);
        let store = B::open(&rt, now);
        let cfg = config(model.strict, model.max_events, model.stream_ttl, model.idle_ttl);
        assert_eq!(cfg.validate(), Ok(()));
        let mut entropy = SeededEntropy::new(0xf0_4c1e55);
        let mut sessions = Vec::new();
        for session in &model.sessions {
            let id = SessionId::generate(&mut entropy);
            let new = NewSession {
                id,
                revision: Revision::V2025_11_25,
                reset_contract: session.reset_contract,
                principal: None,
                client: Default::default(),
            };
            let record = SessionRecord::create(new, now, &mut entropy).unwrap();
            let standalone = record.standalone().id();
            rt.block_on(store.create(record)).unwrap();
            sessions.push(SutSession { id, streams: vec![standalone], client: Client::default() });
        }
        Sut {
            rt,
            store,
            tally: [0; OUTCOMES],
            seen: seen::<B>(),
            cfg,
            now,
            entropy,
            sessions,
            conns: Vec::new(),
            written: HashMap::new(),
            appends: 0,
        }
    }

    fn apply(mut sut: Sut<B::S>, model: &Model, step: Step) -> Sut<B::S> {
        let got = match step {
            Step::Emit { session, target, complete } => Expect::Emit(sut.emit(session, target, complete)),
            Step::OpenRequest { session } => {
                let id = StreamId::generate(&mut sut.entropy);
                let (now, cfg) = (sut.now, sut.cfg);
                let sid = sut.sessions[session].id;
                let result =
                    sut.rt.block_on(transact(&sut.store, sid, |r| r.open_request_stream(id, now, &cfg)));
                match result {
                    Ok((g, _)) => {
                        let s = &mut sut.sessions[session];
                        s.streams.push(id);
                        s.client.new_stream(id);
                        let stream = s.streams.len() - 1;
                        sut.conns.push(SutConn {
                            session,
                            stream,
                            epoch: g.epoch,
                            cursor: g.after,
                            open: true,
                        });
                        Expect::Open(true)
                    }
                    Err(e) if e.ended().is_some() => Expect::Open(false),
                    Err(e) => panic!("open failed: {e:?}"),
                }
            }
            Step::Deliver { conn, max } => {
                sut.deliver(conn, max);
                Expect::Nothing
            }
            Step::Drop { conn } => Expect::Detach(sut.drop_conn(conn)),
            Step::Get { session, lei, token } => Expect::Get(sut.get(session, lei, token)),
            Step::RacingGets { session, lei, token } => {
                let (a, b) = sut.racing_gets(session, lei, token);
                Expect::Race(a, b)
            }
            Step::Advance { ms } => {
                sut.now = Timestamp::from_millis(sut.now.as_millis().saturating_add_signed(ms));
                Expect::Nothing
            }
            Step::Tick => {
                let (now, cfg) = (sut.now, sut.cfg);
                let mut counts = Vec::new();
                for s in &sut.sessions {
                    let (tick, _) =
                        sut.rt.block_on(transact(&sut.store, s.id, |r| Ok(r.on_tick(now, &cfg)))).unwrap();
                    let c = (tick.detached.len(), tick.evicted.len(), tick.dropped.len(), tick.ended);
                    sut.tally[SEEN_TTL_EVICTED] += c.1 as u64;
                    sut.tally[SEEN_TTL_DROPPED] += c.2 as u64;
                    sut.tally[SEEN_IDLE_ENDED] += u64::from(c.3);
                    counts.push(c);
                }
                Expect::Tick(counts)
            }
            Step::End { session } => {
                let (id, now) = (sut.sessions[session].id, sut.now);
                let result = sut.rt.block_on(transact(&sut.store, id, |r| r.on_end(EndReason::Deleted, now)));
                Expect::End(result.is_ok())
            }
        };
        assert_eq!(got, model.last, "the system and the model disagree on the outcome of {step:?}");
        sut
    }

    fn teardown(sut: Sut<B::S>, _: Model) {
        sut.seen.add(&sut.tally);
    }

    fn check_invariants(sut: &Sut<B::S>, model: &Model) {
        let now = sut.now;
        assert_eq!(now.as_millis(), model.now);
        let mut records = Vec::new();
        for (s, (session, m)) in sut.sessions.iter().zip(&model.sessions).enumerate() {
            let record = sut.rt.block_on(sut.store.load(session.id)).unwrap().expect("kept").value;
            assert_eq!(record.session().ended().is_some(), m.ended, "session {s} ended");
            assert_eq!(session.streams.len(), m.streams.len());
            let kept = m.streams.iter().filter(|r| !r.dropped).count();
            assert_eq!(record.stream_count(), kept, "no stream appears or vanishes unexpectedly");
            // At most one non-fenced standalone stream, and it is the model's.
            let standalones: Vec<StreamId> = record
                .streams()
                .filter(|x| x.kind() == StreamKind::Standalone && !x.is_fenced())
                .map(|x| x.id())
                .collect();
            assert!(standalones.len() <= 1, "session {s} has {} open standalone streams", standalones.len());
            if !m.ended {
                assert_eq!(standalones, vec![session.streams[m.standalone]]);
            }
            for (k, (id, r)) in session.streams.iter().zip(&m.streams).enumerate() {
                if r.dropped {
                    assert_eq!(record.stream(*id), None, "stream {k} of session {s} outlived its retention");
                    continue;
                }
                let st = record.stream(*id).unwrap_or_else(|| panic!("stream {k} of session {s} missing"));
                let life = match st.state() {
                    StreamState::Open(_) => Life::Open,
                    StreamState::Completed(_) => Life::Completed,
                    StreamState::Fenced(_) => Life::Fenced,
                };
                let attached = match st.attachment() {
                    Some(Attachment::Attached(a)) => Some(a.deadline.as_millis()),
                    _ => None,
                };
                let got = (
                    st.kind(),
                    st.high_water().get(),
                    st.low_water().get(),
                    st.epoch().get(),
                    life,
                    attached,
                );
                let want = (r.kind, r.high, r.low, r.epoch, r.life, r.attached);
                assert_eq!(got, want, "stream {k} of session {s}: (kind, high, low, epoch, life, deadline)");
                assert_eq!(st.ever_attached(), r.ever_attached);
                if !st.is_fenced() {
                    sut.check_content(session, *id, st.low_water());
                }
                if st.is_fenced() {
                    // Nothing can be delivered from a fenced stream.
                    match sut.rt.block_on(sut.store.read(
                        session.id,
                        *id,
                        Seq::PRIMING,
                        100,
                        Reader::Inspector,
                    )) {
                        Ok(events) => assert!(events.is_empty(), "a fenced stream still serves events"),
                        Err(StoreError::Evicted { .. }) => {}
                        Err(e) => panic!("read of a fenced stream: {e:?}"),
                    }
                }
            }
            // The client: per stream identity, exactly 1, 2, ..., n; cursors as the model says.
            for (id, accepted) in &session.client.accepted {
                assert!(session.streams.contains(id), "client accepted events of another session's stream");
                assert!(
                    accepted.iter().copied().eq(1..=accepted.len() as u64),
                    "not a gap-free continuation"
                );
            }
            for (k, id) in session.streams.iter().enumerate() {
                assert_eq!(session.client.cursor.get(id).copied().unwrap_or(0), m.client[k], "client cursor");
            }
            records.push(record);
        }
        // At most one attached (current-epoch, live) connection per stream.
        let mut holders: HashMap<StreamId, usize> = HashMap::new();
        assert_eq!(sut.conns.len(), model.conns.len());
        for (c, (conn, m)) in sut.conns.iter().zip(&model.conns).enumerate() {
            let got = (conn.session, conn.stream, conn.epoch.get(), conn.cursor.get(), conn.open);
            assert_eq!(got, (m.session, m.stream, m.epoch, m.cursor, m.open), "connection {c}");
            let id = sut.sessions[conn.session].streams[conn.stream];
            let current =
                records[conn.session].stream(id).is_some_and(|s| s.epoch() == conn.epoch && s.is_live(now));
            if conn.open && current {
                *holders.entry(id).or_default() += 1;
            }
        }
        assert!(holders.values().all(|n| *n <= 1), "two live connections hold one stream: {holders:?}");
    }
}
