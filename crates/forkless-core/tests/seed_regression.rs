//! The seed's observed failure, replayed against the core.
//!
//! A client received events 1..=41 on the standalone stream, its connection dropped, and it
//! reconnected with `Last-Event-ID: 41` and without the resumption token (its HTTP library
//! dropped the custom header). The forking server minted a new stream and replayed from its own
//! index 0 while a background task kept emitting 42, 43, 44 onto the orphaned stream.
//!
//! Here the same reconnect never yields anything the client could take for a continuation: the
//! bare `41` is `cursor_malformed` (404, session ended) and every later emit, to the old stream
//! id or to "the standalone stream", fails with a typed error and lands nowhere. With a cursor in
//! this contract's form (`<stream>.41`) the dropped header does not matter in compat mode
//! (resume exactly from 42), and is `token_missing` in strict mode.

use forkless_core::EventKind;
use forkless_core::{
    AppendTarget, Config, EndReason, Error, GetOutcome, GetRequest, Grant, Limits, Liveness, NewSession,
    RejectReason, ResumeMode, Revision, SeededEntropy, Seq, SessionId, SessionRecord, StreamId, Timestamp,
};

/// The seed's scenarios are about a connection the server has not seen close: its
/// liveness lapses after grace. They are modelled with connections renewing themselves; under
/// per-node liveness the node's stall watch detaches such a connection after the same grace.
fn cfg() -> Config {
    Config { liveness: Liveness::PerConnection, ..Config::default() }
}

const T0: Timestamp = Timestamp::from_millis(1_000_000);
/// Inside the grace window: the server still counts the dropped connection as live.
const RECONNECT: Timestamp = Timestamp::from_millis(1_000_500);

/// The seed's session: standalone stream attached, events 1..=41 delivered, then the TCP
/// connection drops. `detected` says whether the server noticed (detached) or still counts the
/// old connection as live within its grace window.
fn seed_session(detected: bool) -> (SessionRecord, Grant) {
    let mut entropy = SeededEntropy::new(0x5eed);
    let id = SessionId::generate(&mut entropy);
    // A plain specification-following client: no reset contract.
    let new = NewSession {
        id,
        revision: Revision::V2025_11_25,
        reset_contract: false,
        principal: None,
        client: Default::default(),
    };
    let mut record = SessionRecord::create(new, T0, &mut entropy).unwrap();
    let GetOutcome::Attached(grant) =
        record.on_get(&GetRequest::default(), T0, &cfg(), &mut entropy).unwrap()
    else {
        panic!("the first GET attaches the standalone stream");
    };
    for n in 1..=41 {
        let id = record
            .append(AppendTarget::Standalone, 32, EventKind::Intermediate, T0, &Limits::default())
            .unwrap();
        assert_eq!((id.stream, id.seq), (grant.stream, Seq::new(n)));
    }
    if detected {
        record.on_detach(grant.stream, grant.epoch, T0).unwrap();
    }
    (record, grant)
}

fn get(record: &mut SessionRecord, lei: Option<&str>, token: Option<&str>, cfg: &Config) -> GetOutcome {
    let req = GetRequest { last_event_id: lei, stream_token: token };
    record.on_get(&req, RECONNECT, cfg, &mut SeededEntropy::new(7)).unwrap()
}

/// The background task emits 42, 43, 44: to the old stream id, and to whatever the standalone
/// stream is. Each returns `expected` and nothing is stored anywhere.
fn background_emits_land_nowhere(record: &mut SessionRecord, old: StreamId, expected: Error) {
    let before = record.clone();
    for _n in 42..=44 {
        for target in [AppendTarget::Stream(old), AppendTarget::Standalone] {
            let got = record.append(target, 32, EventKind::Intermediate, RECONNECT, &Limits::default());
            assert_eq!(got, Err(expected), "emit to {target:?}");
        }
    }
    assert_eq!(*record, before, "a refused emit changes nothing");
    assert_eq!(record.stream_count(), 1, "no new stream was minted");
    assert_eq!(record.standalone().id(), old, "the standalone identity never changed");
}

#[test]
fn bare_last_event_id_41_without_token_is_rejected_and_the_session_ends() {
    for detected in [false, true] {
        let (mut record, grant) = seed_session(detected);
        let outcome = get(&mut record, Some("41"), None, &cfg());
        assert_eq!(outcome, GetOutcome::Rejected(RejectReason::CursorMalformed), "detected={detected}");
        assert_eq!(RejectReason::CursorMalformed.as_str(), "cursor_malformed");
        let reason = EndReason::Rejected(RejectReason::CursorMalformed);
        assert_eq!(record.session().ended(), Some(reason));
        let old = record.stream(grant.stream).unwrap();
        assert!(old.is_fenced(), "the orphaned stream is fenced, not left live for a grace window");
        assert_eq!(old.high_water(), Seq::new(41));
        assert_eq!(old.retained_events(), 0, "its stored events are dropped");
        background_emits_land_nowhere(&mut record, grant.stream, Error::SessionEnded { reason });
        // The old connection's writer cannot renew or act either.
        assert_eq!(
            record.on_write_completed(grant.stream, grant.epoch, RECONNECT, &cfg()),
            Err(Error::SessionEnded { reason })
        );
        // Every later reconnect of this session, however well-formed, is refused.
        let lei = format!("{}.41", grant.stream);
        let req = GetRequest { last_event_id: Some(&lei), stream_token: Some("") };
        let again = record.on_get(&req, RECONNECT, &cfg(), &mut SeededEntropy::new(8));
        assert_eq!(again, Err(Error::SessionEnded { reason }));
    }
}

#[test]
fn bare_41_is_rejected_in_strict_mode_too() {
    let (mut record, grant) = seed_session(false);
    let strict = Config { mode: ResumeMode::Strict, ..cfg() };
    let outcome = get(&mut record, Some("41"), Some(&grant.stream.to_string()), &strict);
    assert_eq!(outcome, GetOutcome::Rejected(RejectReason::CursorMalformed));
}

#[test]
fn reconnect_without_any_header_conflicts_in_grace_then_is_rejected() {
    // Had the library dropped `Last-Event-ID` as well: 409 while the old connection counts as
    // live (nothing changes), then `cursor_missing` once grace has passed.
    let (mut record, grant) = seed_session(false);
    let before = record.clone();
    let outcome = get(&mut record, None, None, &cfg());
    assert!(matches!(outcome, GetOutcome::Conflict(_)));
    assert_eq!(record, before);
    let after_grace = T0.saturating_add(cfg().grace);
    let req = GetRequest::default();
    let outcome = record.on_get(&req, after_grace, &cfg(), &mut SeededEntropy::new(9)).unwrap();
    assert_eq!(outcome, GetOutcome::Rejected(RejectReason::CursorMissing));
    let reason = EndReason::Rejected(RejectReason::CursorMissing);
    background_emits_land_nowhere(&mut record, grant.stream, Error::SessionEnded { reason });
}

#[test]
fn contract_cursor_with_dropped_header_resumes_exactly_from_42_in_compat_mode() {
    for detected in [false, true] {
        let (mut record, old) = seed_session(detected);
        let lei = format!("{}.41", old.stream);
        let outcome = get(&mut record, Some(&lei), None, &cfg());
        let GetOutcome::Attached(grant) = outcome else { panic!("compat mode resumes: {outcome:?}") };
        assert!(grant.resumed, "Mcp-Stream-Resumed: true");
        assert_eq!((grant.stream, grant.after, grant.fenced), (old.stream, Seq::new(41), None));
        assert_eq!(grant.displaced, !detected, "a connection still live in grace is displaced");
        assert!(grant.epoch > old.epoch);
        // The orphaned writer is fenced by its stale epoch: it stops before its next write.
        assert_eq!(
            record.on_write_completed(old.stream, old.epoch, RECONNECT, &cfg()),
            Err(Error::StaleEpoch { held: old.epoch, current: grant.epoch })
        );
        // The background emits land on the one stream, right after the cursor.
        for n in 42..=44 {
            let id = record
                .append(AppendTarget::Standalone, 32, EventKind::Intermediate, RECONNECT, &Limits::default())
                .unwrap();
            assert_eq!((id.stream, id.seq), (old.stream, Seq::new(n)));
        }
        let s = record.stream(old.stream).unwrap();
        // Delivery reads the log after the cursor: exactly 42..=44, nothing replayed from 0.
        let delivered: Vec<u64> = (grant.after.get() + 1..=s.high_water().get()).collect();
        assert_eq!(delivered, vec![42, 43, 44]);
        assert!(s.low_water() <= Seq::new(42), "nothing after the cursor was evicted");
        assert_eq!(record.stream_count(), 1, "no second stream identity");
        assert_eq!(record.session().ended(), None);
    }
}

#[test]
fn contract_cursor_with_dropped_header_is_token_missing_in_strict_mode() {
    let strict = Config { mode: ResumeMode::Strict, ..cfg() };
    for detected in [false, true] {
        let (mut record, old) = seed_session(detected);
        let lei = format!("{}.41", old.stream);
        let outcome = get(&mut record, Some(&lei), None, &strict);
        assert_eq!(outcome, GetOutcome::Rejected(RejectReason::TokenMissing));
        let reason = EndReason::Rejected(RejectReason::TokenMissing);
        assert_eq!(record.session().ended(), Some(reason));
        background_emits_land_nowhere(&mut record, old.stream, Error::SessionEnded { reason });
    }
    // With the header kept, strict mode resumes from 42 as well.
    let (mut record, old) = seed_session(true);
    let lei = format!("{}.41", old.stream);
    let outcome = get(&mut record, Some(&lei), Some(&old.stream.to_string()), &strict);
    assert!(matches!(outcome, GetOutcome::Attached(g) if g.resumed && g.after == Seq::new(41)));
}
