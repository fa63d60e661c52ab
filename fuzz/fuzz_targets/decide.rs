//! The GET decision on arbitrary `Last-Event-ID` / `Mcp-Stream-Id` headers against a session
//! with a live stream: never panics, and never resumes a stream from a cursor that does not
//! name it exactly.
#![no_main]

use forkless_core::{
    AppendTarget, Config, Decision, EventId, EventKind, GetRequest, Limits, NewSession, Revision, SeededEntropy,
    SessionId, SessionRecord, Timestamp,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    let (lei, token) = s.split_once('\n').map_or((Some(s), None), |(a, b)| (Some(a), Some(b)));
    let mut e = SeededEntropy::new(1);
    let new = NewSession { id: SessionId::generate(&mut e), revision: Revision::V2025_11_25, reset_contract: true, principal: None, client: Default::default() };
    let t = Timestamp::from_millis(1);
    let mut record = SessionRecord::create(new, t, &mut e).expect("create");
    for _ in 0..3 {
        record
            .append(AppendTarget::Standalone, 1, EventKind::Intermediate, t, &Limits::default())
            .expect("append");
    }
    let req = GetRequest { last_event_id: lei, stream_token: token };
    if let Decision::Resume { stream, after } = forkless_core::decide_get(&record, &req, t, &Config::default()) {
        let cursor: EventId = lei.expect("a resume needs a cursor").parse().expect("a resume needs a valid cursor");
        assert_eq!((cursor.stream, cursor.seq), (stream, after));
        assert!(after <= record.stream(stream).expect("own stream").high_water());
    }
});
