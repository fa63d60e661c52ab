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
//! | [`TaskId`] | 128 random bits, base64url without padding (22 chars) |
//! | [`EventId`] | `<stream id>.<seq>`, seq a decimal `u64` without sign or leading zeros |
//!
//! Randomness comes from an [`EntropySource`]: [`OsEntropy`] (the OS CSPRNG) in production,
//! [`SeededEntropy`] in tests and simulations.

use core::fmt;
use core::str::FromStr;

pub use crate::entropy::{EntropySource, SeededEntropy};
#[cfg(feature = "os-entropy")]
pub use crate::entropy::{OS_DRAW, OsEntropy};
pub use crate::id_hash::{IdHashBuilder, IdHasher};

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

random_id!(
    /// A task of the tasks extension (`taskId`): 128 bits from the CSPRNG, 22 base64url
    /// characters, unguessable because a task id is all a client needs to read the task.
    TaskId,
    16
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
mod tests;
