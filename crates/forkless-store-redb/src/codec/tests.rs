//! Unit tests of `codec`.

use forkless_core::Seq;
use proptest::prelude::*;

use super::*;

#[test]
fn event_rows_hold_their_events_in_order() {
    let mut row = Vec::new();
    for p in [&b"a"[..], b"", b"{\"n\":3}"] {
        put_chunk_event(&mut row, p);
    }
    let events = chunk_events(Seq::new(7), &row).unwrap();
    assert_eq!(
        events,
        vec![(Seq::new(7), &b"a"[..]), (Seq::new(8), &b""[..]), (Seq::new(9), &b"{\"n\":3}"[..])]
    );
    assert!(chunk_events(Seq::new(1), &row[..row.len() - 1]).is_err(), "a cut row is corrupt, not short");
}

proptest! {
    /// Whatever the bytes on disk or in the log, decoding returns a value or a typed
    /// error; it never panics.
    #[test]
    fn decoders_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = chunk_events(Seq::new(1), &bytes);
        let _ = decode_ops(&bytes, &mut Vec::new());
        let _ = split_event_key(&bytes);
    }
}
