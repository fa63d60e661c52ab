//! What one node tells the others through the database's hint channel, typed: [`Hinted`]
//! (who sent it, and what: streams of a session that changed, or a listen notification), and
//! its text form, written and read here only. A database carries the text and never looks
//! inside (PostgreSQL `NOTIFY` payloads are text).
//!
//! The text: `FROM SESSION:STREAM,STREAM,…` (ids in lowercase hex), `FROM SESSION:*` (every
//! stream of the session: it was removed, or more changed than a hint names), `FROM !JSON`
//! (a listen notification). `FROM` is the sending node's name: a node ignores its own.

use forkless_core::{SessionId, StreamId};

/// Hints name at most this many streams; a write that changed more names its session only,
/// and every watched stream of it is re-read.
pub(super) const MAX_STREAMS_PER_HINT: usize = 64;

/// The largest listen notification a hint carries (PostgreSQL's `NOTIFY` payload limit is
/// 8000 bytes; the node's name and the marker fit in the rest).
const MAX_NOTICE_BYTES: usize = 7000;

/// A hint: who sent it, and what it says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Hinted<'p> {
    /// The sending node's name.
    pub(super) from: &'p str,
    pub(super) what: Said<'p>,
}

/// What a hint says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Said<'p> {
    /// These streams of `session` changed; `None`: every one of them may have.
    Changed { session: SessionId, streams: Option<Vec<StreamId>> },
    /// A listen notification, as its JSON text.
    Notice(&'p str),
}

impl<'p> Said<'p> {
    /// The hint carrying listen notification `message` (UTF-8 JSON, at most
    /// [`MAX_NOTICE_BYTES`]); refused otherwise.
    pub(super) fn notice(message: &'p [u8]) -> crate::Result<Self> {
        let text = std::str::from_utf8(message)
            .map_err(|_| crate::Error::Backend("a listen notification must be UTF-8 JSON".into()))?;
        if text.len() > MAX_NOTICE_BYTES {
            let why = format!(
                "a listen notification of {} bytes is above the {MAX_NOTICE_BYTES} a hint carries",
                text.len()
            );
            return Err(crate::Error::Backend(why));
        }
        Ok(Self::Notice(text))
    }

    /// The hint's text, as `from` sends it.
    pub(super) fn encode(&self, from: &str) -> String {
        match self {
            Self::Changed { session, streams } => {
                let named = streams.as_deref().filter(|s| s.len() <= MAX_STREAMS_PER_HINT);
                let mut out = String::with_capacity(from.len() + 34 + 25 * named.map_or(0, <[_]>::len));
                out.push_str(from);
                out.push(' ');
                hex(session.as_bytes(), &mut out);
                out.push(':');
                match named {
                    None => out.push('*'),
                    Some(streams) => {
                        for (i, s) in streams.iter().enumerate() {
                            if i > 0 {
                                out.push(',');
                            }
                            hex(s.as_bytes(), &mut out);
                        }
                    }
                }
                out
            }
            Self::Notice(json) => format!("{from} !{json}"),
        }
    }
}

impl<'p> Hinted<'p> {
    /// A hint read back from its text; `None` if it is malformed.
    pub(super) fn decode(payload: &'p str) -> Option<Self> {
        let (from, rest) = payload.split_once(' ')?;
        if let Some(json) = rest.strip_prefix('!') {
            return Some(Self { from, what: Said::Notice(json) });
        }
        let (session, streams) = rest.split_once(':')?;
        let session = SessionId::from_bytes(unhex(session)?);
        let streams = match streams {
            "*" => None,
            named => Some(
                named.split(',').map(|s| unhex(s).map(StreamId::from_bytes)).collect::<Option<Vec<_>>>()?,
            ),
        };
        Some(Self { from, what: Said::Changed { session, streams } })
    }
}

/// A node's name: its lease's id when it holds one, its name in hints and in tail interest.
/// At most [`NodeName::MAX_LEN`] bytes of visible ASCII without spaces, since a hint is
/// `FROM …` (a name with a space sent hints no other node could read: its writes woke no
/// watcher elsewhere, silently).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct NodeName(String);

/// Why a node name was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid node name {name:?}: {why}")]
pub struct InvalidNodeName {
    name: String,
    why: &'static str,
}

impl NodeName {
    /// The longest name.
    pub const MAX_LEN: usize = 128;

    /// `name`, checked.
    pub fn new(name: impl Into<String>) -> Result<Self, InvalidNodeName> {
        let name = name.into();
        let why = if name.is_empty() {
            "it is empty"
        } else if name.len() > Self::MAX_LEN {
            "it is longer than 128 bytes"
        } else if !name.bytes().all(|b| b.is_ascii_graphic()) {
            "only visible ASCII without spaces may name a node"
        } else {
            return Ok(Self(name));
        };
        Err(InvalidNodeName { name, why })
    }

    /// A name for a node that was given none: 64 random bits in hex.
    pub fn random() -> Self {
        use std::hash::{BuildHasher, RandomState};
        Self(format!("{:016x}", RandomState::new().hash_one(std::time::SystemTime::now())))
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::str::FromStr for NodeName {
    type Err = InvalidNodeName;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::new(s)
    }
}

impl std::fmt::Display for NodeName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn hex(bytes: &[u8], out: &mut String) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 15)] as char);
    }
}

/// The bytes of `N`-byte lowercase or uppercase hex, as in hints.
pub fn unhex<const N: usize>(s: &str) -> Option<[u8; N]> {
    let s = s.as_bytes();
    if s.len() != 2 * N {
        return None;
    }
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let mut out = [0u8; N];
    for (i, pair) in s.chunks(2).enumerate() {
        out[i] = digit(pair[0])? << 4 | digit(pair[1])?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn changed(session: SessionId, streams: Option<Vec<StreamId>>) -> Said<'static> {
        Said::Changed { session, streams }
    }

    #[test]
    fn a_hint_reads_back_as_written() {
        let session = SessionId::from_bytes([7; 16]);
        let streams = vec![StreamId::from_bytes([1; 12]), StreamId::from_bytes([0xab; 12])];
        let text = changed(session, Some(streams.clone())).encode("n1");
        let read = Hinted::decode(&text).expect("well formed");
        assert_eq!(read, Hinted { from: "n1", what: changed(session, Some(streams)) });
        let many: Vec<_> = (0..=MAX_STREAMS_PER_HINT as u8).map(|i| StreamId::from_bytes([i; 12])).collect();
        let text = changed(session, Some(many)).encode("n1");
        assert_eq!(
            Hinted::decode(&text).map(|h| h.what),
            Some(changed(session, None)),
            "too many: the session"
        );
        let text = changed(session, None).encode("n1");
        assert_eq!(Hinted::decode(&text).map(|h| h.what), Some(changed(session, None)));
        let text = Said::Notice(r#"{"method":"m"}"#).encode("n1");
        assert_eq!(
            Hinted::decode(&text),
            Some(Hinted { from: "n1", what: Said::Notice(r#"{"method":"m"}"#) })
        );
        for bad in ["n1 zz:", "n1", "n1 0707:*", ""] {
            assert_eq!(Hinted::decode(bad), None, "{bad:?} is malformed");
        }
    }

    #[test]
    fn a_node_name_is_one_word_of_visible_ascii() {
        for good in ["a", "node-1", "eu-west.b:2", &"x".repeat(NodeName::MAX_LEN)] {
            assert_eq!(NodeName::new(good).map(|n| n.to_string()), Ok(good.to_owned()));
        }
        for bad in ["", "a b", "a\tb", "caf\u{e9}", &"x".repeat(NodeName::MAX_LEN + 1)] {
            assert!(NodeName::new(bad).is_err(), "{bad:?} is refused");
        }
        let random = NodeName::random();
        assert_eq!(NodeName::new(random.as_str()), Ok(random));
    }
}
