//! Unit tests of `codec`.

use forkless_core::{AppendTarget, Config, EventKind, GetRequest, SeededEntropy};
use proptest::prelude::*;

use super::*;

/// A record with streams in several states: open and attached, completed, a labeled
/// request, and one with evicted events.
fn varied_record() -> SessionRecord {
    let mut e = SeededEntropy::new(9);
    let t = Timestamp::from_millis(1_000);
    let new = NewSession {
        id: SessionId::generate(&mut e),
        revision: Revision::V2025_11_25,
        reset_contract: true,
        principal: Some("bob".into()),
        client: Default::default(),
    };
    let mut r = SessionRecord::create(new, t, &mut e).unwrap();
    let cfg = Config::default();
    r.on_get(&GetRequest::default(), t, &cfg, &mut e).unwrap();
    let limits = forkless_core::Limits { stream_max_events: 2, ..cfg.limits };
    for n in 0..5 {
        r.append(AppendTarget::Standalone, 10 + n, EventKind::Intermediate, t, &limits).unwrap();
        let s = r.standalone().id();
        r.on_retention(s, [10 + n.saturating_sub(2)], &limits).unwrap();
    }
    let answered = StreamId::generate(&mut e);
    r.open_labeled_request_stream(answered, Some(Label::new(b"\"req-7\"")), t, &cfg).unwrap();
    r.append(AppendTarget::Stream(answered), 5, EventKind::Final, t, &cfg.limits).unwrap();
    let open = StreamId::generate(&mut e);
    r.open_request_stream(open, t, &cfg).unwrap();
    r
}

#[test]
fn a_record_survives_its_rows() {
    let r = varied_record();
    let mut parts = decode_header(&encode_header(&r)).unwrap();
    for s in r.streams() {
        parts.streams.push(decode_stream(&encode_stream(s)).unwrap());
    }
    let back = parts.build().unwrap();
    assert_eq!(back, r);
    // The record exercised what the rows encode.
    assert!(r.streams().any(|s| matches!(s.state(), StreamState::Completed(_))));
    assert!(r.streams().any(|s| matches!(s.state(), StreamState::Open(_))));
    assert!(r.streams().any(|s| s.label().is_some()));
    assert!(r.streams().any(|s| s.low_water() > Seq::FIRST), "one stream had events evicted");
}

#[test]
fn backend_facts_survive_the_header_and_a_header_from_before_them_reads_without() {
    let mut r = varied_record();
    r.on_backend("{\"session\":\"up-1\"}".into()).unwrap();
    let header = encode_header(&r);
    let parts = decode_header(&header).unwrap();
    assert_eq!(parts.backend.as_deref(), Some("{\"session\":\"up-1\"}"));
    let mut rebuilt = parts;
    for s in r.streams() {
        rebuilt.streams.push(decode_stream(&encode_stream(s)).unwrap());
    }
    assert_eq!(rebuilt.build().unwrap(), r);
    // Without backend facts the header is what builds before them wrote: it ends with the
    // client's facts (two empty options here), and reads back without.
    let plain = varied_record();
    let before = encode_header(&plain);
    assert_eq!(&before[before.len() - 2..], &[0, 0], "nothing after the client's facts");
    assert_eq!(header.len(), before.len() + 1 + 4 + "{\"session\":\"up-1\"}".len(), "one option more");
    assert_eq!(decode_header(&before).unwrap().backend, None);
}

proptest! {
    /// Whatever the bytes stored, decoding returns a value or a typed error; it never panics.
    #[test]
    fn decoders_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = decode_header(&bytes);
        let _ = decode_stream(&bytes);
    }

    /// Valid rows with bytes flipped decode or fail cleanly, never panic.
    #[test]
    fn damaged_rows_never_panic(at in 0usize..400, bit in 0u8..8) {
        let r = varied_record();
        let mut header = encode_header(&r);
        let i = at % header.len();
        header[i] ^= 1 << bit;
        let _ = decode_header(&header);
        for s in r.streams() {
            let mut row = encode_stream(s);
            let i = at % row.len();
            row[i] ^= 1 << bit;
            let _ = decode_stream(&row);
        }
    }
}
