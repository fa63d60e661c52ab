//! Unit tests of `codec`.

use proptest::prelude::*;

use super::*;

proptest! {
    /// Whatever the bytes on disk or in the log, decoding returns a value or a typed
    /// error; it never panics.
    #[test]
    fn decoders_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = decode_ops(&bytes, &mut Vec::new());
        let _ = split_event_key(&bytes);
    }
}

/// A stream row logged as the write saw the stream is the same bytes as the row encoded
/// beforehand, so recovery reads back what the store would have written either way.
#[test]
fn a_stream_row_encoded_in_the_log_reads_back_as_the_row() {
    use forkless_core::{EventKind, Label, SeededEntropy, StreamId, StreamKind, Timestamp};

    let mut stream = forkless_core::Stream::new(
        StreamId::generate(&mut SeededEntropy::new(3)),
        StreamKind::Request,
        Timestamp::from_millis(5),
    )
    .with_label(Some(Label::new(br#""a request id that is longer than the inline label bytes""#)));
    stream.on_append(10, EventKind::Intermediate, Timestamp::from_millis(6)).unwrap();
    let row = forkless_store::codec::encode_stream(&stream);
    let prefix = [7u8; 28];
    let mut log = Vec::new();
    for (origin, stream) in [
        (Origin::Existing, crate::op::StreamRow::Seen(Box::new(stream))),
        (Origin::New, crate::op::StreamRow::Encoded(row.clone())),
    ] {
        encode_op(&Op::PutStream { prefix, stream, origin }, &mut log);
    }
    let mut ops = Vec::new();
    decode_ops(&log, &mut ops).unwrap();
    assert_eq!(ops.len(), 2);
    for (op, want) in ops.iter().zip([Origin::Existing, Origin::New]) {
        let Op::PutStream { prefix: p, stream: crate::op::StreamRow::Encoded(read), origin } = op else {
            panic!("read back {op:?}");
        };
        assert_eq!((p, read, *origin), (&prefix, &row, want));
    }
}
