//! Retention by stream count (PROTOCOL section 8): at `session_max_streams` a new request
//! stream takes the place of the completed, detached request stream idle the longest; open
//! or attached streams are never dropped, and the session is refused with a typed error
//! when nothing can go.

use forkless_core::{
    AppendTarget, Config, Error, Limits, NewSession, Revision, SeededEntropy, SessionId, SessionRecord,
    StreamId, Timestamp,
};

fn at(ms: u64) -> Timestamp {
    Timestamp::from_millis(1_000_000 + ms)
}

fn cfg() -> Config {
    Config { limits: Limits { session_max_streams: 2, ..Limits::default() }, ..Config::default() }
}

fn session(e: &mut SeededEntropy) -> SessionRecord {
    let new = NewSession {
        id: SessionId::generate(e),
        revision: Revision::V2025_11_25,
        reset_contract: false,
        principal: None,
    };
    SessionRecord::create(new, at(0), e).unwrap()
}

/// Open a request stream at `t`, answer it (final event) and let its connection go.
fn answered(r: &mut SessionRecord, e: &mut SeededEntropy, t: u64) -> StreamId {
    let id = StreamId::generate(e);
    let grant = r.open_request_stream(id, at(t), &cfg()).unwrap();
    r.append(AppendTarget::Stream(id), 10, true, at(t), &cfg().limits).unwrap();
    r.on_detach(id, grant.epoch, at(t + 1)).unwrap();
    id
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
    r.append(AppendTarget::Stream(a), 1, true, at(3), &cfg().limits).unwrap();
    assert_eq!(r.open_request_stream(c, at(4), &cfg()), Err(Error::TooManyStreams { max: 2 }));
}
