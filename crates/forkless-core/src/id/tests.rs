//! Unit tests of `id`.

use super::*;

fn stream(seed: u64) -> StreamId {
    StreamId::generate(&mut SeededEntropy::new(seed))
}

#[test]
fn session_id_is_22_chars_and_round_trips() {
    let id = SessionId::generate(&mut SeededEntropy::new(7));
    let text = id.to_string();
    assert_eq!(text.len(), 22);
    assert_eq!(text.parse::<SessionId>(), Ok(id));
    assert!(text.bytes().all(|b| (0x21..=0x7e).contains(&b)));
}

#[test]
fn stream_id_is_16_chars_and_round_trips() {
    let id = stream(1);
    assert_eq!(id.to_string().len(), 16);
    assert_eq!(id.to_string().parse::<StreamId>(), Ok(id));
}

#[test]
fn event_id_round_trips() {
    let id = EventId::new(stream(2), Seq::new(41));
    let text = id.to_string();
    assert!(text.ends_with(".41"));
    assert_eq!(text.parse::<EventId>(), Ok(id));
}

#[test]
fn event_id_rejections_are_typed() {
    let s = stream(3).to_string();
    let cases: Vec<(String, IdError)> = vec![
        (String::new(), IdError::Empty),
        ("41".into(), IdError::BareNumber),
        (format!(" {s}.1"), IdError::Whitespace),
        (format!("{s}.1 "), IdError::Whitespace),
        (format!("{s}.1.2"), IdError::ExtraSeparator),
        (s.clone(), IdError::MissingSeparator),
        (format!("{s}.18446744073709551616"), IdError::SeqOverflow),
        (format!("{s}.01"), IdError::SeqMalformed),
        (format!("{s}.+1"), IdError::SeqMalformed),
        (format!("{s}."), IdError::Empty),
        (format!("{}*.1", &s[..15]), IdError::Alphabet { at: 15, byte: b'*' }),
        (format!("{s}A.1"), IdError::Overlong { len: 17, max: 16 }),
        (format!("{}.1", &s[..15]), IdError::Length { len: 15, expected: 16 }),
        (format!("{s}{s}{s}.1"), IdError::Overlong { len: 50, max: 37 }),
    ];
    for (input, want) in cases {
        assert_eq!(input.parse::<EventId>(), Err(want), "input {input:?}");
    }
}

#[test]
fn session_id_rejects_non_canonical_trailing_bits() {
    let mut text = SessionId::generate(&mut SeededEntropy::new(9)).to_string();
    // The last character carries 2 data bits and 4 must-be-zero bits.
    text.pop();
    text.push('B');
    assert_eq!(text.parse::<SessionId>(), Err(IdError::NonCanonical));
}

#[test]
fn seeded_entropy_is_deterministic() {
    assert_eq!(stream(5), stream(5));
    assert_ne!(stream(5), stream(6));
}

#[cfg(feature = "os-entropy")]
#[test]
fn os_entropy_hands_out_each_byte_once_across_draws() {
    // Far more than one draw's worth, in sizes that do not divide it, on two threads.
    let ids = |_| (0..2_000).map(|_| StreamId::generate(&mut OsEntropy)).collect::<Vec<_>>();
    let (a, b) = std::thread::scope(|s| {
        let other = s.spawn(|| ids(()));
        (ids(()), other.join().unwrap())
    });
    let all: std::collections::HashSet<_> = a.iter().chain(&b).collect();
    assert_eq!(all.len(), 4_000, "no id repeats");
    let mut big = [0u8; OS_DRAW];
    OsEntropy.fill(&mut big);
    assert!(big.iter().any(|&b| b != 0), "a draw larger than the pool comes straight from the OS");
}

proptest::proptest! {
    #[test]
    fn parse_never_panics_and_is_canonical(s in "\\PC{0,60}") {
        if let Ok(id) = s.parse::<EventId>() {
            proptest::prop_assert_eq!(id.to_string(), s.clone());
        }
        if let Ok(id) = s.parse::<SessionId>() {
            proptest::prop_assert_eq!(id.to_string(), s);
        }
    }

    #[test]
    fn wire_forms_are_what_parses_back(bytes in proptest::array::uniform12(proptest::num::u8::ANY), seq: u64) {
        let id = EventId::new(StreamId::from_bytes(bytes), Seq::new(seq));
        let wire = id.wire();
        proptest::prop_assert_eq!(wire.parse::<EventId>(), Ok(id));
        proptest::prop_assert_eq!(wire.as_bytes(), wire.as_str().as_bytes());
        proptest::prop_assert_eq!(&*wire, format!("{}.{seq}", id.stream.wire().as_str()));
        proptest::prop_assert_eq!(id.stream.wire().parse::<StreamId>(), Ok(id.stream));
    }

    #[test]
    fn ids_order_as_their_bytes(
        a in proptest::array::uniform12(0u8..4),
        b in proptest::array::uniform12(0u8..4),
        c in proptest::array::uniform16(0u8..4),
        d in proptest::array::uniform16(0u8..4),
    ) {
        proptest::prop_assert_eq!(StreamId::from_bytes(a).cmp(&StreamId::from_bytes(b)), a.cmp(&b));
        proptest::prop_assert_eq!(SessionId::from_bytes(c).cmp(&SessionId::from_bytes(d)), c.cmp(&d));
    }

    #[test]
    fn display_parse_round_trip(bytes in proptest::array::uniform12(0u8..), seq in 0u64..) {
        let id = EventId::new(StreamId::from_bytes(bytes), Seq::new(seq));
        proptest::prop_assert_eq!(id.to_string().parse::<EventId>(), Ok(id));
    }
}
