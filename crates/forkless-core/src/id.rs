//! Identities and their wire format (PROTOCOL section 2).
//!
//! Each identifier is its own type, parsed in exactly one place ([`core::str::FromStr`]) and
//! printed in exactly one place ([`core::fmt::Display`]); parsing is canonical, so
//! `parse(display(x)) == x` and `display(parse(s)) == s` for every accepted `s`.
//!
//! | type | wire form |
//! |---|---|
//! | [`SessionId`] | 128 random bits, base64url without padding (22 chars) |
//! | [`StreamId`] | 96 random bits, base64url (16 chars) |
//! | [`EventId`] | `<stream id>.<seq>`, seq a decimal `u64` without sign or leading zeros |
//!
//! Randomness comes from an [`EntropySource`]: [`OsEntropy`] (the OS CSPRNG) in production,
//! [`SeededEntropy`] in tests and simulations.

use core::fmt;
use core::str::FromStr;

/// Why a string is not a valid identifier. Every variant is a distinct, assertable reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IdError {
    /// The input is empty.
    #[error("identifier is empty")]
    Empty,
    /// A bare number, such as the `41` of a library that numbers events per connection.
    #[error("a bare number is not an event id; expected <stream>.<seq>")]
    BareNumber,
    /// Leading, trailing or embedded whitespace.
    #[error("identifier contains whitespace")]
    Whitespace,
    /// A byte outside the identifier's alphabet.
    #[error("byte {byte:#04x} at {at} is outside the identifier's alphabet")]
    Alphabet {
        /// Offset of the offending byte.
        at: usize,
        /// The offending byte.
        byte: u8,
    },
    /// Longer than any identifier of this kind.
    #[error("identifier is {len} bytes long; at most {max} allowed")]
    Overlong {
        /// Length of the input.
        len: usize,
        /// The longest accepted form.
        max: usize,
    },
    /// Not the exact length of this kind of identifier.
    #[error("identifier is {len} characters long; expected {expected}")]
    Length {
        /// Length of the input.
        len: usize,
        /// The only accepted length.
        expected: usize,
    },
    /// Unused low bits of the last base64 character are set, so the text is not canonical.
    #[error("identifier is not in canonical base64url form")]
    NonCanonical,
    /// An event id without the `.` between stream and sequence number.
    #[error("event id lacks the '.' separating stream and seq")]
    MissingSeparator,
    /// An event id with more than one `.`.
    #[error("event id has more than one '.'")]
    ExtraSeparator,
    /// The sequence number is empty, signed, has leading zeros or non-digits.
    #[error("sequence number is not a canonical decimal")]
    SeqMalformed,
    /// The sequence number does not fit in 64 bits.
    #[error("sequence number overflows u64")]
    SeqOverflow,
}

/// A source of random bytes for identifiers.
pub trait EntropySource {
    /// Fill `dest` with random bytes.
    fn fill(&mut self, dest: &mut [u8]);
}

impl<E: EntropySource + ?Sized> EntropySource for &mut E {
    fn fill(&mut self, dest: &mut [u8]) {
        (**self).fill(dest);
    }
}

/// The operating system's CSPRNG.
///
/// Every byte comes from the OS, drawn [`OS_DRAW`] bytes at a time into a per-thread pool, so
/// a stream id per request costs no system call (figures: `docs/benchmarks.md`). Each byte is
/// handed out once and then zeroed. A process that forks would share its pool with the child;
/// this server never forks.
///
/// If the OS cannot provide randomness the process aborts through a panic: minting guessable
/// session ids instead would be a security hole, and there is no useful way to continue.
#[cfg(feature = "os-entropy")]
#[derive(Clone, Copy, Debug, Default)]
pub struct OsEntropy;

/// How many bytes [`OsEntropy`] draws from the OS at a time.
#[cfg(feature = "os-entropy")]
pub const OS_DRAW: usize = 4096;

#[cfg(feature = "os-entropy")]
struct Pool {
    bytes: [u8; OS_DRAW],
    /// Bytes before this offset were handed out (and zeroed).
    used: usize,
}

#[cfg(feature = "os-entropy")]
std::thread_local! {
    static POOL: core::cell::RefCell<Pool> = const {
        core::cell::RefCell::new(Pool { bytes: [0; OS_DRAW], used: OS_DRAW })
    };
}

#[cfg(feature = "os-entropy")]
fn os_fill(dest: &mut [u8]) {
    #[allow(clippy::expect_used)] // documented on OsEntropy: no safe fallback exists
    getrandom::fill(dest).expect("the OS CSPRNG failed; refusing to mint predictable ids");
}

#[cfg(feature = "os-entropy")]
impl EntropySource for OsEntropy {
    fn fill(&mut self, dest: &mut [u8]) {
        if dest.len() > OS_DRAW / 4 {
            return os_fill(dest);
        }
        POOL.with_borrow_mut(|pool| {
            if OS_DRAW - pool.used < dest.len() {
                os_fill(&mut pool.bytes);
                pool.used = 0;
            }
            let taken = &mut pool.bytes[pool.used..pool.used + dest.len()];
            dest.copy_from_slice(taken);
            taken.fill(0);
            pool.used += dest.len();
        });
    }
}

/// A deterministic generator (SplitMix64) for tests and simulations. Not for production.
#[derive(Clone, Debug)]
pub struct SeededEntropy {
    state: u64,
}

impl SeededEntropy {
    /// A generator whose output is a pure function of `seed`.
    pub const fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

impl EntropySource for SeededEntropy {
    fn fill(&mut self, dest: &mut [u8]) {
        for chunk in dest.chunks_mut(8) {
            let bytes = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&bytes[..chunk.len()]);
        }
    }
}

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

fn decode_char(at: usize, byte: u8) -> Result<u8, IdError> {
    match byte {
        b'A'..=b'Z' => Ok(byte - b'A'),
        b'a'..=b'z' => Ok(byte - b'a' + 26),
        b'0'..=b'9' => Ok(byte - b'0' + 52),
        b'-' => Ok(62),
        b'_' => Ok(63),
        b' ' | b'\t' | b'\r' | b'\n' | 0x0b | 0x0c => Err(IdError::Whitespace),
        _ => Err(IdError::Alphabet { at, byte }),
    }
}

/// Encode `N` bytes as unpadded base64url into `out`, returning the used prefix.
fn encode<'o, const N: usize>(bytes: &[u8; N], out: &'o mut [u8; 24]) -> &'o str {
    let mut len = 0;
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let chars = chunk.len() + 1;
        for i in 0..chars {
            out[len] = ALPHABET[((n >> (18 - 6 * i)) & 0x3f) as usize];
            len += 1;
        }
    }
    // Only ALPHABET bytes were written, so this is ASCII.
    core::str::from_utf8(&out[..len]).unwrap_or_default()
}

/// An identifier's wire form, held on the stack: what its `Display` writes, for callers
/// that put ids on the wire often enough that the formatting machinery shows (SSE `id:`
/// lines, response headers).
#[derive(Clone, Copy)]
pub struct Wire {
    buf: [u8; EventId::MAX_WIRE_LEN],
    len: usize,
}

impl Wire {
    const fn empty() -> Self {
        Self { buf: [0; EventId::MAX_WIRE_LEN], len: 0 }
    }

    fn push(&mut self, bytes: &[u8]) {
        self.buf[self.len..self.len + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len();
    }

    /// Decimal digits of `n`.
    fn push_u64(&mut self, n: u64) {
        self.push(itoa::Buffer::new().format(n).as_bytes());
    }

    /// The text's bytes (ASCII), without the UTF-8 check [`Self::as_str`] makes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        // Only base64url characters, digits and '.' are ever pushed: ASCII.
        core::str::from_utf8(&self.buf[..self.len]).unwrap_or_default()
    }
}

impl core::ops::Deref for Wire {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl fmt::Debug for Wire {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

/// Decode canonical unpadded base64url of exactly `N` bytes.
fn decode<const N: usize>(s: &str) -> Result<[u8; N], IdError> {
    let expected = (N * 8).div_ceil(6);
    let input = s.as_bytes();
    check_text(input, expected)?;
    if input.len() != expected {
        return Err(IdError::Length { len: input.len(), expected });
    }
    let mut out = [0u8; N];
    let mut acc: u32 = 0;
    let mut bits = 0;
    let mut o = 0;
    for (at, &byte) in input.iter().enumerate() {
        acc = (acc << 6) | u32::from(decode_char(at, byte)?);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            if o < N {
                out[o] = (acc >> bits) as u8;
                o += 1;
            }
            acc &= (1 << bits) - 1;
        }
    }
    if acc != 0 {
        return Err(IdError::NonCanonical);
    }
    Ok(out)
}

/// Checks shared by every identifier: empty, whitespace, overlong.
fn check_text(input: &[u8], max: usize) -> Result<(), IdError> {
    if input.is_empty() {
        return Err(IdError::Empty);
    }
    if input.iter().any(u8::is_ascii_whitespace) {
        return Err(IdError::Whitespace);
    }
    if input.len() > max {
        return Err(IdError::Overlong { len: input.len(), max });
    }
    Ok(())
}

/// A [`Hasher`](core::hash::Hasher) for maps keyed by identifiers this process generated from
/// the CSPRNG ([`SessionId`], [`StreamId`] and tuples of them).
///
/// Their bytes are already uniformly random, so folding them is a good hash, and SipHash's
/// resistance to chosen keys buys nothing: a peer can look ids up but never choose the ones
/// inserted. Do not use it for keys a peer picks (JSON-RPC request ids, header values).
#[derive(Clone, Copy, Debug, Default)]
pub struct IdHasher(u64);

impl IdHasher {
    const MIX: u64 = 0x9e37_79b9_7f4a_7c15;

    fn mix(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(26) ^ word).wrapping_mul(Self::MIX);
    }
}

impl core::hash::Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.mix(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.mix(u64::from_le_bytes(word));
        }
    }

    fn write_usize(&mut self, n: usize) {
        self.mix(n as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// Builds [`IdHasher`]s: `HashMap<SessionId, V, IdHashBuilder>`.
pub type IdHashBuilder = core::hash::BuildHasherDefault<IdHasher>;

macro_rules! random_id {
    ($(#[$doc:meta])* $name:ident, $bytes:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash)]
        pub struct $name([u8; $bytes]);

        // Byte order, compared as one big-endian integer: sessions keep their streams sorted
        // by id and search them on every decision, and this beats a call to memcmp.
        impl Ord for $name {
            fn cmp(&self, other: &Self) -> core::cmp::Ordering {
                let key = |id: &Self| {
                    let mut wide = [0u8; 16];
                    wide[..$bytes].copy_from_slice(&id.0);
                    u128::from_be_bytes(wide)
                };
                key(self).cmp(&key(other))
            }
        }

        impl PartialOrd for $name {
            fn partial_cmp(&self, other: &Self) -> Option<core::cmp::Ordering> {
                Some(self.cmp(other))
            }
        }

        impl $name {
            /// Length of the wire form in characters.
            pub const WIRE_LEN: usize = ($bytes * 8usize).div_ceil(6);

            /// A fresh identifier from `entropy`.
            pub fn generate(entropy: &mut impl EntropySource) -> Self {
                let mut bytes = [0u8; $bytes];
                entropy.fill(&mut bytes);
                Self(bytes)
            }

            /// The identifier from its raw bytes (for stores that persist them).
            pub const fn from_bytes(bytes: [u8; $bytes]) -> Self {
                Self(bytes)
            }

            /// The raw bytes.
            pub const fn as_bytes(&self) -> &[u8; $bytes] {
                &self.0
            }
        }

        impl $name {
            /// The wire form (what `Display` writes), without the formatting machinery.
            pub fn wire(&self) -> Wire {
                let mut buf = [0u8; 24];
                let mut out = Wire::empty();
                out.push(encode(&self.0, &mut buf).as_bytes());
                out
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.wire())
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!(stringify!($name), "({})"), self)
            }
        }

        impl FromStr for $name {
            type Err = IdError;

            fn from_str(s: &str) -> Result<Self, IdError> {
                decode::<$bytes>(s).map(Self)
            }
        }
    };
}

random_id!(
    /// A session (`Mcp-Session-Id`): 128 bits from the CSPRNG, 22 base64url characters.
    SessionId,
    16
);

random_id!(
    /// One SSE stream of a session, never reused: 96 bits, 16 base64url characters.
    StreamId,
    12
);

/// Position of an event in its stream. Seq 0 is the priming event; content starts at 1.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Seq(u64);

impl Seq {
    /// The priming event, and the cursor of a client that has seen no content.
    pub const PRIMING: Self = Self(0);
    /// The first content event.
    pub const FIRST: Self = Self(1);

    /// The sequence number `n`.
    pub const fn new(n: u64) -> Self {
        Self(n)
    }

    /// The number.
    pub const fn get(self) -> u64 {
        self.0
    }

    /// The next sequence number, saturating (a stream never reaches 2^64 events).
    pub const fn next(self) -> Self {
        Self(self.0.saturating_add(1))
    }
}

impl fmt::Display for Seq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl FromStr for Seq {
    type Err = IdError;

    fn from_str(s: &str) -> Result<Self, IdError> {
        let b = s.as_bytes();
        check_text(b, 20)?;
        if !b.iter().all(u8::is_ascii_digit) || (b.len() > 1 && b[0] == b'0') {
            return Err(IdError::SeqMalformed);
        }
        s.parse::<u64>().map(Self).map_err(|_| IdError::SeqOverflow)
    }
}

/// An SSE event id, `<stream>.<seq>`: the client's cursor and the resumption token in one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EventId {
    /// The stream the event belongs to.
    pub stream: StreamId,
    /// Its position in that stream.
    pub seq: Seq,
}

impl EventId {
    /// Longest wire form: 16 characters, a dot, 20 digits.
    pub const MAX_WIRE_LEN: usize = StreamId::WIRE_LEN + 1 + 20;

    /// The event `seq` of `stream`.
    pub const fn new(stream: StreamId, seq: Seq) -> Self {
        Self { stream, seq }
    }
}

impl EventId {
    /// The wire form, `<stream>.<seq>` (what `Display` writes), without the formatting
    /// machinery.
    pub fn wire(&self) -> Wire {
        let mut out = self.stream.wire();
        out.push(b".");
        out.push_u64(self.seq.get());
        out
    }
}

impl fmt::Display for EventId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.wire())
    }
}

impl FromStr for EventId {
    type Err = IdError;

    fn from_str(s: &str) -> Result<Self, IdError> {
        let b = s.as_bytes();
        check_text(b, Self::MAX_WIRE_LEN)?;
        let Some(dot) = s.find('.') else {
            return Err(if b.iter().all(u8::is_ascii_digit) {
                IdError::BareNumber
            } else {
                IdError::MissingSeparator
            });
        };
        let (stream, seq) = (&s[..dot], &s[dot + 1..]);
        if seq.contains('.') {
            return Err(IdError::ExtraSeparator);
        }
        Ok(Self { stream: stream.parse()?, seq: seq.parse()? })
    }
}

/// The attach epoch of a stream: bumped by every attachment, so a writer holding an older
/// epoch knows it has been fenced.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Epoch(u64);

impl Epoch {
    /// The epoch of a stream nobody has attached to yet.
    pub const NONE: Self = Self(0);

    /// The epoch `n`.
    pub const fn new(n: u64) -> Self {
        Self(n)
    }

    /// The number.
    pub const fn get(self) -> u64 {
        self.0
    }

    /// The epoch after this one.
    pub const fn next(self) -> Self {
        Self(self.0.saturating_add(1))
    }
}

impl fmt::Display for Epoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

#[cfg(test)]
mod tests {
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
}
