//! Retention by stream count (PROTOCOL section 8): at `session_max_streams` a new request
//! stream takes the place of the completed, detached request streams idle the longest (down
//! to seven eighths of the limit at once); open or attached streams are never dropped, and
//! the session is refused with a typed error when nothing can go.

use forkless_core::EventKind;
use forkless_core::{AppendTarget, Config, Error, Limits, SeededEntropy, SessionRecord, StreamId};

mod support;
use support::{at, session};

fn cfg() -> Config {
    cfg_max(2)
}

fn cfg_max(session_max_streams: usize) -> Config {
    Config { limits: Limits { session_max_streams, ..Limits::default() }, ..Config::default() }
}

/// Open a request stream at `t`, answer it (final event) and let its connection go.
fn answered(r: &mut SessionRecord, e: &mut SeededEntropy, t: u64) -> StreamId {
    answered_under(r, e, t, &cfg())
}

fn answered_under(r: &mut SessionRecord, e: &mut SeededEntropy, t: u64, cfg: &Config) -> StreamId {
    let id = StreamId::generate(e);
    let grant = r.open_request_stream(id, at(t), cfg).unwrap();
    r.append(AppendTarget::Stream(id), 10, EventKind::Final, at(t), &cfg.limits).unwrap();
    r.on_detach(id, grant.epoch, at(t + 1)).unwrap();
    id
}

#[test]
fn room_is_made_an_eighth_at_a_time_oldest_first() {
    let mut e = SeededEntropy::new(3);
    let mut r = session(&mut e);
    let cfg = cfg_max(64);
    // The standalone stream plus 64 answered ones: full.
    let answered: Vec<StreamId> = (0..64).map(|i| answered_under(&mut r, &mut e, 10 * i, &cfg)).collect();
    assert_eq!(r.stream_count(), 65);
    let next = StreamId::generate(&mut e);
    r.open_request_stream(next, at(10_000), &cfg).expect("room is made");
    // Down to 56 (seven eighths of 64) before the new one: the 9 idle the longest went.
    assert_eq!(r.stream_count(), 57);
    assert!(answered[..9].iter().all(|id| r.stream(*id).is_none()), "the oldest went first");
    assert!(answered[9..].iter().all(|id| r.stream(*id).is_some()), "younger ones stay");
    assert_eq!(r.retained_bytes(), 55 * 10);
    // The next seven requests need no room.
    for i in 0..7 {
        answered_under(&mut r, &mut e, 20_000 + i, &cfg);
    }
    assert!(answered[9..].iter().all(|id| r.stream(*id).is_some()));
}

#[test]
fn the_completed_detached_stream_idle_longest_makes_room() {
    let mut e = SeededEntropy::new(1);
    let mut r = session(&mut e);
    let oldest = answered(&mut r, &mut e, 10);
    let newer = answered(&mut r, &mut e, 20);
    let third = StreamId::generate(&mut e);
    r.open_request_stream(third, at(30), &cfg()).expect("room is made");
    assert!(r.stream(oldest).is_none(), "the oldest answered stream was dropped");
    assert!(r.stream(newer).is_some() && r.stream(third).is_some());
    assert_eq!(r.retained_bytes(), 10, "its bytes left with it");
}

#[test]
fn open_or_attached_streams_are_never_dropped() {
    let mut e = SeededEntropy::new(2);
    let mut r = session(&mut e);
    let (a, b) = (StreamId::generate(&mut e), StreamId::generate(&mut e));
    r.open_request_stream(a, at(0), &cfg()).unwrap();
    r.open_request_stream(b, at(1), &cfg()).unwrap();
    let c = StreamId::generate(&mut e);
    assert_eq!(r.open_request_stream(c, at(2), &cfg()), Err(Error::TooManyStreams { max: 2 }));
    assert!(r.stream(a).is_some() && r.stream(b).is_some() && r.stream(c).is_none());
    // A completed stream whose client is still attached is not dropped either.
    r.append(AppendTarget::Stream(a), 1, EventKind::Final, at(3), &cfg().limits).unwrap();
    assert_eq!(r.open_request_stream(c, at(4), &cfg()), Err(Error::TooManyStreams { max: 2 }));
}

/// Retention by size is planned by the core: given the oldest events' sizes it says how many
/// go (and applies that to the metadata); a store drops exactly those.
#[test]
fn the_core_plans_retention_by_count_and_by_bytes() {
    use forkless_core::{EvictedBy, Eviction};
    let mut record = session(&mut SeededEntropy::new(11));
    let s = record.standalone().id();
    let limits = Limits { stream_max_events: 3, stream_max_bytes: 100, ..Default::default() };
    let sizes = [10u64, 20, 30, 40, 50];
    for &size in &sizes {
        record.append(AppendTarget::Standalone, size, EventKind::Intermediate, at(0), &limits).unwrap();
    }
    // Five events of 150 bytes against three events and 100 bytes: by count two go (10, 20),
    // leaving 120 bytes; by bytes one more (30), leaving 90.
    let plan = record.on_retention(s, sizes, &limits).unwrap();
    assert_eq!(plan, Eviction { events: 3, bytes: 60, by: Some(EvictedBy::StreamMaxEvents) });
    let meta = record.stream(s).unwrap();
    assert_eq!((meta.low_water().get(), meta.retained_bytes()), (4, 90));
    assert_eq!(record.retained_bytes(), 90);
    // Within limits: nothing to do.
    assert_eq!(record.on_retention(s, [40, 50], &limits).unwrap(), Eviction::default());
}

#[test]
fn an_attached_stream_keeps_a_session_unless_only_requests_count() {
    use forkless_core::IdleClock;
    for (clock, ends) in [(IdleClock::RequestsAndStreams, false), (IdleClock::Requests, true)] {
        let mut e = SeededEntropy::new(5);
        let mut r = session(&mut e);
        let limits = Limits {
            session_idle_ttl: core::time::Duration::from_secs(60),
            idle_clock: clock,
            ..Limits::default()
        };
        let cfg = Config { limits, ..Config::default() };
        // A stream attached to its connection all along, and no request for over a minute.
        let id = StreamId::generate(&mut e);
        r.open_request_stream(id, at(0), &cfg).unwrap();
        assert!(r.stream(id).unwrap().is_live(at(61_000)));
        r.on_tick(at(61_000), &cfg);
        assert_eq!(r.session().ended().is_some(), ends, "{clock:?}");
    }
}
