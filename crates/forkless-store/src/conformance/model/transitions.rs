//! How the reference model generates steps and what each does to it.

use forkless_core::StreamKind;
use proptest::prelude::*;
use proptest::sample::select;
use proptest::strategy::Union;
use proptest_state_machine::ReferenceStateMachine;

use super::*;

pub(super) struct Reference;

/// Steps aimed at the rarest rows, weighted in only when the state makes them reachable, so
/// every outcome occurs in a few percent of the cases (the guard in [`run`] relies on it):
/// writers on open connections (evicted writers, duplicates, completions), the time to live of
/// a finished request stream or of an idle session reached exactly, and a cursor on a fenced
/// stream.
fn aims(state: &Model) -> Vec<(u32, BoxedStrategy<Step>)> {
    let mut aims = Vec::new();
    let open: Vec<usize> = (0..state.conns.len()).filter(|c| state.conns[*c].open).collect();
    if !open.is_empty() {
        aims.push((
            12,
            (select(open.clone()), 1..4u64).prop_map(|(conn, max)| Step::Deliver { conn, max }).boxed(),
        ));
        // A backlog on a stream someone reads: evicted writers when retention is small.
        let busy: Vec<(usize, Target)> =
            open.iter().map(|c| (state.conns[*c].session, Target::Stream(state.conns[*c].stream))).collect();
        let emit = select(busy).prop_map(|(session, target)| Step::Emit { session, target, complete: false });
        aims.push((20, emit.boxed()));
    }
    let live: Vec<(usize, &RSession)> = state.sessions.iter().enumerate().filter(|(_, s)| !s.ended).collect();
    let streams =
        || live.iter().flat_map(|(s, x)| x.streams.iter().enumerate().map(move |(k, st)| (*s, k, x, st)));
    // Finishing a request stream, then its time to live (or an old standalone's after a reset).
    let unfinished: Vec<(usize, usize)> = streams()
        .filter(|(_, _, _, st)| !st.dropped && st.kind == StreamKind::Request && st.life == Life::Open)
        .map(|(s, k, _, _)| (s, k))
        .collect();
    if !unfinished.is_empty() {
        let finish = select(unfinished).prop_map(|(session, k)| Step::Emit {
            session,
            target: Target::Stream(k),
            complete: true,
        });
        aims.push((8, finish.boxed()));
    }
    let lapsing = streams().any(|(_, k, x, st)| {
        let finished = st.kind == StreamKind::Request && st.life == Life::Completed && st.attached.is_none();
        !st.dropped && (finished || (st.life == Life::Fenced && k != x.standalone))
    });
    let idle = live.iter().any(|(_, x)| x.streams.iter().all(|st| st.dropped || !st.live(state.now)));
    if lapsing && state.stream_ttl < STREAM_TTLS[STREAM_TTLS.len() - 1] {
        aims.push((8, Just(Step::Advance { ms: state.stream_ttl as i64 }).boxed()));
        aims.push((8, Just(Step::Tick).boxed()));
    }
    if idle && state.idle_ttl < IDLE_TTLS[IDLE_TTLS.len() - 1] {
        aims.push((2, Just(Step::Advance { ms: state.idle_ttl as i64 }).boxed()));
        aims.push((2, Just(Step::Tick).boxed()));
    }
    // Cursors the decision table refuses in a session that goes on: one on a fenced stream
    // (after a reset, which a contract session's cursor-less GET makes) and one ahead.
    let resettable: Vec<usize> = live
        .iter()
        .filter(|(_, x)| {
            let st = &x.streams[x.standalone];
            x.reset_contract && !st.live(state.now) && st.ever_attached && st.high > 0
        })
        .map(|(s, _)| *s)
        .collect();
    if !resettable.is_empty() {
        let reset = select(resettable).prop_map(|session| Step::Get {
            session,
            lei: Lei::Absent,
            token: Token::Absent,
        });
        aims.push((5, reset.boxed()));
    }
    // A client's own cursors: on a fenced stream, one ahead, and one it already passed (its
    // events come again and are dropped as duplicates).
    let now = state.now;
    let cursors = |pick: &dyn Fn(&RStream, u64) -> Option<u64>| -> Vec<(usize, Lei)> {
        streams()
            .filter(|(_, _, _, st)| !st.dropped)
            .filter_map(|(owner, stream, x, st)| {
                pick(st, x.client[stream]).map(|seq| (owner, Lei::Event { owner, stream, seq }))
            })
            .collect()
    };
    let fenced = cursors(&|st, held| (st.life == Life::Fenced).then_some(held));
    let ahead = cursors(&|st, _| (st.life != Life::Fenced && st.high > 0).then_some(st.high + 1));
    let resumable = |st: &RStream| st.life != Life::Fenced && !st.live(now);
    let passed = cursors(&|st, held| (resumable(st) && held > 1).then(|| held - 1));
    let held = cursors(&|st, held| resumable(st).then_some(held));
    for (weight, cursors, token) in [
        (12, fenced, Token::Matching),
        (2, ahead, Token::Matching),
        (10, passed, Token::Matching),
        (1, held, Token::Garbage),
    ] {
        if !cursors.is_empty() {
            let get = select(cursors).prop_map(move |(session, lei)| Step::Get { session, lei, token });
            aims.push((weight, get.boxed()));
        }
    }
    aims
}

impl ReferenceStateMachine for Reference {
    type State = Model;
    type Transition = Step;

    fn init_state() -> BoxedStrategy<Model> {
        let limits = (select(vec![2u64, 4, 1000]), select(STREAM_TTLS.to_vec()), select(IDLE_TTLS.to_vec()));
        (prop::collection::vec(any::<bool>(), 2..=3), prop::bool::weighted(0.25), limits)
            .prop_map(|(contracts, strict, (max_events, stream_ttl, idle_ttl))| Model {
                strict,
                max_events,
                stream_ttl,
                idle_ttl,
                now: T0_MS,
                sessions: contracts
                    .into_iter()
                    .map(|reset_contract| RSession {
                        reset_contract,
                        ended: false,
                        standalone: 0,
                        streams: vec![RStream::new(StreamKind::Standalone, T0_MS)],
                        client: vec![0],
                        last_activity: T0_MS,
                    })
                    .collect(),
                conns: Vec::new(),
                last: Expect::Nothing,
            })
            .boxed()
    }

    fn transitions(state: &Model) -> BoxedStrategy<Step> {
        let n = state.sessions.len();
        let targets: Vec<(usize, Target, bool)> = state
            .sessions
            .iter()
            .enumerate()
            .flat_map(|(s, session)| {
                let mut t = vec![(s, Target::Standalone, false), (s, Target::Standalone, false)];
                for (k, st) in session.streams.iter().enumerate() {
                    t.push((s, Target::Stream(k), false));
                    if st.kind == StreamKind::Request {
                        t.push((s, Target::Stream(k), false));
                        t.push((s, Target::Stream(k), true));
                    }
                }
                t
            })
            .collect();
        // Cursors: (is it one the client could legitimately hold, the header).
        let events: Vec<(bool, Lei)> = state
            .sessions
            .iter()
            .enumerate()
            .flat_map(|(owner, session)| {
                (0..session.streams.len()).flat_map(move |stream| {
                    let (cursor, high) = (session.client[stream], session.streams[stream].high);
                    let held = [cursor, cursor, cursor.saturating_sub(1), cursor.saturating_sub(3), 0];
                    let ahead = [high + 1, high + 3];
                    let event = move |seq| Lei::Event { owner, stream, seq };
                    held.into_iter()
                        .map(move |seq| (true, event(seq)))
                        .chain(ahead.into_iter().map(move |seq| (false, event(seq))))
                })
            })
            .collect();
        let own: Vec<Lei> = events.iter().filter(|(held, _)| *held).map(|(_, lei)| *lei).collect();
        let any_event: Vec<Lei> = events.into_iter().map(|(_, lei)| lei).collect();
        let tokens: Vec<Token> = state
            .sessions
            .iter()
            .enumerate()
            .flat_map(|(owner, session)| {
                (0..session.streams.len()).map(move |stream| Token::Stream { owner, stream })
            })
            .chain([
                Token::Absent,
                Token::Absent,
                Token::Matching,
                Token::Matching,
                Token::Matching,
                Token::Garbage,
            ])
            .collect();
        let lei = prop_oneof![
            3 => select(any_event),
            1 => Just(Lei::Absent),
            1 => (0..MALFORMED.len()).prop_map(Lei::Malformed),
        ];
        // Anything at all, including foreign cursors, mismatched and garbage tokens.
        let header = (0..n, lei, select(tokens)).prop_map(|(session, lei, token)| {
            // A cursor-less GET from a client of this contract sends no token either.
            let token = if lei == Lei::Absent && token == Token::Matching { Token::Absent } else { token };
            (session, lei, token)
        });
        // What a client of this contract sends: its own cursor (or an older one), its token
        // (or none, as when a library drops the header).
        let resume = (select(own), select(vec![Token::Matching, Token::Matching, Token::Absent])).prop_map(
            |(lei, token)| match lei {
                Lei::Event { owner, .. } => (owner, lei, token),
                _ => unreachable!("only events"),
            },
        );
        let cursorless = (0..n).prop_map(|session| (session, Lei::Absent, Token::Absent));
        let conns = state.conns.len().max(1);
        let mut steps: Vec<(u32, BoxedStrategy<Step>)> = vec![
            (
                24,
                select(targets)
                    .prop_map(|(session, target, complete)| Step::Emit { session, target, complete })
                    .boxed(),
            ),
            (8, (0..n).prop_map(|session| Step::OpenRequest { session }).boxed()),
            (12, (0..conns, 1..4u64).prop_map(|(conn, max)| Step::Deliver { conn, max }).boxed()),
            (6, (0..conns).prop_map(|conn| Step::Drop { conn }).boxed()),
            (3, header.clone().prop_map(|(session, lei, token)| Step::Get { session, lei, token }).boxed()),
            (12, resume.clone().prop_map(|(session, lei, token)| Step::Get { session, lei, token }).boxed()),
            (
                5,
                cursorless
                    .clone()
                    .prop_map(|(session, lei, token)| Step::Get { session, lei, token })
                    .boxed(),
            ),
            (1, header.prop_map(|(session, lei, token)| Step::RacingGets { session, lei, token }).boxed()),
            (3, resume.prop_map(|(session, lei, token)| Step::RacingGets { session, lei, token }).boxed()),
            (
                2,
                cursorless.prop_map(|(session, lei, token)| Step::RacingGets { session, lei, token }).boxed(),
            ),
            // Mostly whole seconds, so deadlines (grace 10 s, TTLs 20 s and 45 s) are hit exactly.
            (
                7,
                prop_oneof![
                    1 => 1..1_000i64,
                    3 => (1..3i64).prop_map(|s| s * 1_000),
                    3 => (9..12i64).prop_map(|s| s * 1_000),
                    4 => (20..40i64).prop_map(|s| s * 1_000),
                    2 => (-15..0i64).prop_map(|s| s * 1_000),
                ]
                .prop_map(|ms| Step::Advance { ms })
                .boxed(),
            ),
            (8, Just(Step::Tick).boxed()),
            (1, (0..n).prop_map(|session| Step::End { session }).boxed()),
        ];
        steps.extend(aims(state));
        Union::new_weighted(steps).boxed()
    }

    fn preconditions(state: &Model, step: &Step) -> bool {
        let stream_ok = |s: usize, k: usize| state.sessions.get(s).is_some_and(|x| k < x.streams.len());
        let lei_ok = |lei: &Lei| match *lei {
            Lei::Event { owner, stream, .. } => stream_ok(owner, stream),
            Lei::Absent | Lei::Malformed(_) => true,
        };
        let token_ok = |t: &Token| match *t {
            Token::Stream { owner, stream } => stream_ok(owner, stream),
            _ => true,
        };
        match step {
            Step::Emit { session, target, complete } => match *target {
                Target::Standalone => *session < state.sessions.len() && !complete,
                Target::Stream(k) => {
                    stream_ok(*session, k)
                        && (!complete || state.sessions[*session].streams[k].kind == StreamKind::Request)
                }
            },
            Step::OpenRequest { session } | Step::End { session } => *session < state.sessions.len(),
            Step::Deliver { conn, .. } | Step::Drop { conn } => *conn < state.conns.len(),
            Step::Get { session, lei, token } | Step::RacingGets { session, lei, token } => {
                *session < state.sessions.len() && lei_ok(lei) && token_ok(token)
            }
            Step::Advance { .. } | Step::Tick => true,
        }
    }

    fn apply(mut state: Model, step: &Step) -> Model {
        state.last = match *step {
            Step::Emit { session, target, complete } => Expect::Emit(state.emit(session, target, complete)),
            Step::OpenRequest { session } => {
                let ok = !state.sessions[session].ended;
                if ok {
                    let now = state.now;
                    let x = &mut state.sessions[session];
                    let mut st = RStream::new(StreamKind::Request, now);
                    st.attach(now);
                    x.touch(now);
                    let epoch = st.epoch;
                    x.streams.push(st);
                    x.client.push(0);
                    let stream = x.streams.len() - 1;
                    state.conns.push(RConn { session, stream, epoch, cursor: 0, open: true });
                }
                Expect::Open(ok)
            }
            Step::Deliver { conn, max } => {
                state.deliver(conn, max);
                Expect::Nothing
            }
            Step::Drop { conn } => Expect::Detach(state.drop_conn(conn)),
            Step::Get { session, lei, token } => Expect::Get(state.get(session, lei, token)),
            Step::RacingGets { session, lei, token } => {
                let first = state.get(session, lei, token);
                Expect::Race(first, state.get(session, lei, token))
            }
            Step::Advance { ms } => {
                state.now = state.now.saturating_add_signed(ms);
                Expect::Nothing
            }
            Step::Tick => Expect::Tick(state.tick()),
            Step::End { session } => {
                let ok = !state.sessions[session].ended;
                if ok {
                    state.end(session);
                }
                Expect::End(ok)
            }
        };
        state
    }
}
