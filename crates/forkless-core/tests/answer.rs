//! A request answered at once ([`AppendTarget::Answer`]): the request stream is opened,
//! attached, given its final event and released in one transition. What comes out must be
//! indistinguishable, for every later decision, from the long way round (open, attach,
//! append, complete, detach), and a refused answer must leave the record untouched.

use forkless_core::EventKind;
use forkless_core::{
    AppendTarget, Attachment, Config, Decision, Epoch, Error, EventId, GetOutcome, GetRequest, Limits,
    SeededEntropy, Seq, SessionRecord, StreamId, StreamKind, decide_get,
};
use proptest::prelude::*;

mod support;
use support::{at, session};

fn cfg_max(session_max_streams: usize) -> Config {
    Config { limits: Limits { session_max_streams, ..Limits::default() }, ..Config::default() }
}

/// The long way round: open (attached), final event, detach.
fn answered_long_way(r: &mut SessionRecord, id: StreamId, size: u64, t: u64, cfg: &Config) {
    let grant = r.open_request_stream(id, at(t), cfg).unwrap();
    r.append(AppendTarget::Stream(id), size, EventKind::Final, at(t), &cfg.limits).unwrap();
    r.on_detach(id, grant.epoch, at(t)).unwrap();
}

#[test]
fn an_answer_equals_open_append_complete_detach() {
    let cfg = Config::default();
    let mut e = SeededEntropy::new(7);
    let base = session(&mut e);
    let id = StreamId::generate(&mut e);

    let mut short = base.clone();
    let event = short.append(AppendTarget::Answer(id), 42, EventKind::Final, at(5), &cfg.limits).unwrap();
    let mut long = base;
    answered_long_way(&mut long, id, 42, 5, &cfg);

    assert_eq!(event, EventId::new(id, Seq::FIRST));
    assert_eq!(short, long, "the same record either way");
    let s = short.stream(id).unwrap();
    assert_eq!(s.kind(), StreamKind::Request);
    assert!(s.is_completed());
    assert_eq!(s.epoch(), Epoch::NONE.next(), "the asking connection's attachment is counted");
    assert!(matches!(s.attachment(), Some(Attachment::Detached(_))), "and already released");
    assert_eq!(short.retained_bytes(), 42);
}

#[test]
fn a_lost_answer_is_resumed_from_the_priming_event() {
    let cfg = Config::default();
    let mut e = SeededEntropy::new(8);
    let mut r = session(&mut e);
    let id = StreamId::generate(&mut e);
    r.append(AppendTarget::Answer(id), 10, EventKind::Final, at(1), &cfg.limits).unwrap();

    let cursor = EventId::new(id, Seq::PRIMING).to_string();
    let token = id.to_string();
    let req = GetRequest { last_event_id: Some(&cursor), stream_token: Some(&token) };
    assert_eq!(decide_get(&r, &req, at(2), &cfg), Decision::Resume { stream: id, after: Seq::PRIMING });
    let GetOutcome::Attached(grant) = r.on_get(&req, at(2), &cfg, &mut e).unwrap() else {
        panic!("the answered stream resumes")
    };
    assert_eq!(grant.stream, id);
    assert_eq!(grant.after, Seq::PRIMING);
    assert!(grant.resumed);
    assert!(!grant.displaced, "nobody holds an answered stream");
    assert_eq!(grant.epoch, Epoch::NONE.next().next());
}

#[test]
fn a_refused_answer_changes_nothing() {
    let cfg = cfg_max(1);
    let mut e = SeededEntropy::new(9);
    let mut r = session(&mut e);
    let taken = StreamId::generate(&mut e);
    r.open_request_stream(taken, at(1), &cfg).unwrap();
    let before = r.clone();
    let fresh = StreamId::generate(&mut e);
    let limits = &cfg.limits;

    let cases: [(AppendTarget, u64, bool, Error); 4] = [
        (AppendTarget::Answer(fresh), 1, false, Error::AnswerNotFinal),
        (AppendTarget::Answer(taken), 1, true, Error::StreamExists),
        (
            AppendTarget::Answer(fresh),
            limits.stream_max_bytes + 1,
            true,
            Error::EventTooLarge { size: limits.stream_max_bytes + 1, max: limits.stream_max_bytes },
        ),
        // The one request stream allowed is open: nothing can make room.
        (AppendTarget::Answer(fresh), 1, true, Error::TooManyStreams { max: 1 }),
    ];
    for (target, size, complete, why) in cases {
        if let AppendTarget::Answer(stream) = target {
            // A store making room first is refused alike.
            let mut ahead = r.clone();
            let made = ahead.make_room_for_answer(stream, size, EventKind::ending_if(complete), limits);
            assert_eq!(made.map(|_| ()), Err(why));
            assert_eq!(ahead, before);
        }
        assert_eq!(r.append(target, size, EventKind::ending_if(complete), at(2), limits), Err(why));
        assert_eq!(r, before, "refused with {why}, and nothing changed");
    }

    r.on_end(forkless_core::EndReason::Deleted, at(3)).unwrap();
    let ended = r.clone();
    assert!(matches!(
        r.append(AppendTarget::Answer(fresh), 1, EventKind::Final, at(4), limits),
        Err(Error::SessionEnded { .. })
    ));
    assert_eq!(r, ended);
}

#[test]
fn answers_take_the_place_of_old_answers_at_the_limit() {
    let cfg = cfg_max(8);
    let mut e = SeededEntropy::new(10);
    let mut r = session(&mut e);
    let first: Vec<StreamId> = (0..8)
        .map(|i| {
            let id = StreamId::generate(&mut e);
            r.append(AppendTarget::Answer(id), 1, EventKind::Final, at(i), &cfg.limits).unwrap();
            id
        })
        .collect();
    assert_eq!(r.stream_count(), 9, "standalone plus eight answers: full");
    let next = StreamId::generate(&mut e);
    r.append(AppendTarget::Answer(next), 1, EventKind::Final, at(100), &cfg.limits).unwrap();
    assert!(r.stream(first[0]).is_none(), "the oldest answer made room");
    assert!(r.stream(next).is_some());
}

#[derive(Clone, Debug)]
enum Step {
    Open,
    Answer,
    /// Complete and release the `n`th open stream (modulo how many there are).
    Finish(usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![Just(Step::Open), Just(Step::Answer), any::<usize>().prop_map(Step::Finish)]
}

proptest! {
    /// `check_request_stream_room` says exactly what opening a request stream would say, for
    /// any mix of open, answered and finished streams around the limit.
    #[test]
    fn the_room_check_agrees_with_opening(max in 1usize..6, steps in proptest::collection::vec(step(), 0..40)) {
        let cfg = cfg_max(max);
        let mut e = SeededEntropy::new(11);
        let mut r = session(&mut e);
        let mut open: Vec<(StreamId, Epoch)> = Vec::new();
        for (i, s) in steps.into_iter().enumerate() {
            let t = 10 * i as u64;
            let predicted = r.check_request_stream_room(&cfg.limits);
            let id = StreamId::generate(&mut e);
            match s {
                Step::Open => {
                    let got = r.open_request_stream(id, at(t), &cfg);
                    prop_assert_eq!(predicted, got.map(|_| ()));
                    if let Ok(g) = got {
                        open.push((id, g.epoch));
                    }
                }
                Step::Answer => {
                    // A store's way round: the room made first (the streams it drops named),
                    // then the answer.
                    let before = r.clone();
                    let mut ahead = r.clone();
                    let made = ahead.make_room_for_answer(id, 1, EventKind::Final, &cfg.limits);
                    let got = r.append(AppendTarget::Answer(id), 1, EventKind::Final, at(t), &cfg.limits);
                    prop_assert_eq!(predicted, got.map(|_| ()));
                    match made {
                        Ok(gone) => {
                            let answered = ahead.append(AppendTarget::Answer(id), 1, EventKind::Final, at(t), &cfg.limits);
                            prop_assert_eq!(answered, got);
                            prop_assert_eq!(&ahead, &r, "the same record either way");
                            for s in &gone {
                                prop_assert!(before.stream(s.id()).is_some() && r.stream(s.id()).is_none());
                            }
                            prop_assert_eq!(before.stream_count() + 1 - gone.len(), r.stream_count());
                        }
                        Err(why) => {
                            prop_assert_eq!(Err(why), predicted);
                            prop_assert_eq!(&ahead, &before, "refused, and nothing changed");
                        }
                    }
                }
                Step::Finish(n) if !open.is_empty() => {
                    let (id, epoch) = open.remove(n % open.len());
                    r.append(AppendTarget::Stream(id), 1, EventKind::Final, at(t), &cfg.limits).unwrap();
                    r.on_detach(id, epoch, at(t)).unwrap();
                }
                Step::Finish(_) => {}
            }
        }
    }
}
