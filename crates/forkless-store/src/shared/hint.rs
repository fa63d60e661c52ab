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
}
