//! Where a session lives in Redis. Every key of one session carries the session's hash tag
//! (`{<session hex>}`), so they share a slot; the store-wide keys (the session set, the four
//! due indexes and the hint channel) are named by the prefix alone.
//!
//! ```text
//! P:{S}:rec          hash  v → version, h → header (forkless_store::codec)
//! P:{S}:st           hash  <stream hex> → stream row (forkless_store::codec)
//! P:{S}:c:<stream>   zset  score last seq, member first seq:u64be ++ chunk (forkless_store::codec)
//! P:sessions         set   session ids
//! P:due:<anchor>     zset  score millis, member session id   (liveness, stream_idle, activity, ended)
//! P:hints            pub/sub channel of hints
//! P:layout           how this store lays its data out (`LAYOUT`), checked on connect
//! P:run              the Redis boot (run_id) under which the store's history is vouched for
//! P:node:<name>      a node's lease: its holder's token, expiring with the lease
//! P:owner:<name>     set   the sessions node <name> owns (their rec's `o` names it too)
//! P:advertise:<name> the base URL node <name> advertised with its lease
//! ```
//!
//! It owns the names, not what is stored under them.

use forkless_core::{SessionId, StreamId};

/// The keys of one store (one prefix).
#[derive(Clone, Debug)]
pub(crate) struct Keys {
    prefix: String,
}

/// The layout this build writes: events in chunks of consecutive events (before it, one zset
/// member per event under `P:{S}:e:<stream>`, a layout this build refuses, see `crate::connect`).
pub(crate) const LAYOUT: &str = "chunks-1";

pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    out
}

impl Keys {
    pub(crate) fn new(prefix: &str) -> Self {
        Self { prefix: prefix.to_owned() }
    }
    fn tag(&self, session: SessionId) -> String {
        format!("{}:{{{}}}", self.prefix, hex(session.as_bytes()))
    }
    pub(crate) fn record(&self, session: SessionId) -> String {
        format!("{}:rec", self.tag(session))
    }
    pub(crate) fn streams(&self, session: SessionId) -> String {
        format!("{}:st", self.tag(session))
    }
    /// The prefix of a session's event keys (a stream's hex id completes one).
    pub(crate) fn events_base(&self, session: SessionId) -> String {
        format!("{}:c:", self.tag(session))
    }
    pub(crate) fn events(&self, session: SessionId, stream: StreamId) -> String {
        format!("{}{}", self.events_base(session), hex(stream.as_bytes()))
    }
    pub(crate) fn sessions(&self) -> String {
        format!("{}:sessions", self.prefix)
    }
    /// The due indexes, in the order of `Wake`'s fields.
    pub(crate) fn due(&self) -> [String; 4] {
        ["liveness", "stream_idle", "activity", "ended"].map(|a| format!("{}:due:{a}", self.prefix))
    }
    pub(crate) fn layout(&self) -> String {
        format!("{}:layout", self.prefix)
    }
    pub(crate) fn run(&self) -> String {
        format!("{}:run", self.prefix)
    }
    pub(crate) fn node(&self, name: &str) -> String {
        format!("{}:node:{name}", self.prefix)
    }
    /// Where node `name` says other nodes reach it (`--advertise`).
    pub(crate) fn advertise(&self, name: &str) -> String {
        format!("{}:advertise:{name}", self.prefix)
    }
    /// The prefix of the owner sets (a node id completes one).
    pub(crate) fn owner_base(&self) -> String {
        format!("{}:owner:", self.prefix)
    }
    pub(crate) fn owner(&self, node: &str) -> String {
        format!("{}{node}", self.owner_base())
    }
    /// From when the spent one-time keys are known (milliseconds).
    pub(crate) fn spent_since(&self) -> String {
        format!("{}:spent_since", self.prefix)
    }
    /// A spent one-time key (its own slot on a cluster: it belongs to no session).
    pub(crate) fn spent(&self, key: &[u8]) -> String {
        format!("{}:spent:{}", self.prefix, hex(key))
    }
    pub(crate) fn hints(&self) -> String {
        format!("{}:hints", self.prefix)
    }
    /// Every key of this store, for a test's clean-up.
    #[cfg(feature = "testing")]
    pub(crate) fn pattern(&self) -> String {
        format!("{}:*", self.prefix)
    }
}
