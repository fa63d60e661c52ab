//! Where a session lives in Redis. Sessions fall in [`BUCKETS`] buckets by their id, and every
//! key of a session *and* of its bucket carries the bucket's hash tag (`{NN}`), so they share
//! one Redis Cluster slot: a write touches a session, its bucket's indexes and its bucket's
//! vouched boot in one script, atomically, on a cluster as on one Redis. Only node leases,
//! advertised addresses, the node list and the layout stamp stand alone (each one key).
//!
//! ```text
//! P:layout               the layout this data is in (LAYOUT), checked on connect
//! P:{NN}:s:S:rec         hash  v → version, h → header (forkless_store::codec), o → owner node
//! P:{NN}:s:S:st          hash  <stream hex> → stream row (forkless_store::codec)
//! P:{NN}:s:S:c:<stream>  zset  score last seq, member first seq:u64be ++ chunk (forkless_store::codec)
//! P:{NN}:s:S:i           set   the nodes that declared tail interest in the session (by hint name)
//! P:{NN}:sessions        set   the bucket's session ids
//! P:{NN}:due:<anchor>    zset  score millis, member session id   (liveness, stream_idle, activity, ended)
//! P:{NN}:run             the Redis boot (run_id) under which the bucket's history is vouched for
//! P:{NN}:owner:<name>    set   the bucket's sessions node <name> owns (their rec's `o` names it too)
//! P:{NN}:spent_since     from when the bucket's spent one-time keys are known (milliseconds)
//! P:{NN}:spent:<hex>     a spent one-time key (bucket: the key's first byte)
//! P:{NN}:t:<hex>          hash  v → version, r → a task's record (forkless_store::codec; bucket: the id's first byte)
//! P:{NN}:topen           hash  <task hex> → its node ("" for none), for the bucket's open tasks
//! P:{NN}:texp            zset  score expiry millis, member task hex: every task of the bucket
//! P:node:{<name>}        a node's lease: its holder's token, expiring with the lease
//! P:advertise:{<name>}   the base URL node <name> advertised with its lease (the lease's slot)
//! P:nodes                set   every node that took a lease (where lapsed owners are looked for)
//! P:hints                pub/sub channel of hints
//! ```
//!
//! It owns the names, not what is stored under them.

use forkless_core::{SessionId, StreamId};

/// How many buckets sessions fall in: fixed for a store's life (part of [`LAYOUT`]). A Redis
/// Cluster spreads them over at most this many primaries.
pub(crate) const BUCKETS: usize = 64;

/// The layout this build writes: sessions in [`BUCKETS`] buckets, events in chunks. Data of
/// an earlier layout (one event per set member, store-wide indexes) is refused on connect, see
/// `crate::config::check_layout`.
pub(crate) const LAYOUT: &str = "buckets-64";

/// A bucket.
pub(crate) type Bucket = usize;

/// The bucket `session` falls in (its ids come from the OS CSPRNG: evenly spread).
pub(crate) fn bucket(session: SessionId) -> Bucket {
    usize::from(session.as_bytes()[0]) % BUCKETS
}

/// The bucket a one-time key falls in.
pub(crate) fn key_bucket(key: &[u8]) -> Bucket {
    key.first().map_or(0, |b| usize::from(*b) % BUCKETS)
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    out
}

/// The keys of one store (one prefix).
#[derive(Clone, Debug)]
pub(crate) struct Keys {
    prefix: String,
}

impl Keys {
    pub(crate) fn new(prefix: &str) -> Self {
        Self { prefix: prefix.to_owned() }
    }
    /// `P:{NN}`: what every key of bucket `b` starts with.
    fn bucket_base(&self, b: Bucket) -> String {
        format!("{}:{{{b:02x}}}", self.prefix)
    }
    /// The base of every key of `session` (its keys add a suffix: `:rec`, `:st`, `:c:<stream>`).
    pub(crate) fn session_base(&self, session: SessionId) -> String {
        format!("{}:s:{}", self.bucket_base(bucket(session)), hex(session.as_bytes()))
    }
    pub(crate) fn record(&self, session: SessionId) -> String {
        format!("{}:rec", self.session_base(session))
    }
    pub(crate) fn streams(&self, session: SessionId) -> String {
        format!("{}:st", self.session_base(session))
    }
    /// The prefix of a session's event keys (a stream's hex id completes one).
    pub(crate) fn events_base(&self, session: SessionId) -> String {
        format!("{}:c:", self.session_base(session))
    }
    /// The nodes that tail `session` (see `forkless_store::shared`'s tail interest).
    pub(crate) fn interest(&self, session: SessionId) -> String {
        format!("{}:i", self.session_base(session))
    }
    pub(crate) fn events(&self, session: SessionId, stream: StreamId) -> String {
        format!("{}{}", self.events_base(session), hex(stream.as_bytes()))
    }
    /// The session set of bucket `b`.
    pub(crate) fn sessions(&self, b: Bucket) -> String {
        format!("{}:sessions", self.bucket_base(b))
    }
    /// The due indexes of bucket `b`, in the order of `Wake`'s fields.
    pub(crate) fn due(&self, b: Bucket) -> [String; 4] {
        let base = self.bucket_base(b);
        ["liveness", "stream_idle", "activity", "ended"].map(|a| format!("{base}:due:{a}"))
    }
    /// The boot bucket `b`'s history is vouched for under.
    pub(crate) fn run(&self, b: Bucket) -> String {
        format!("{}:run", self.bucket_base(b))
    }
    /// The prefix of bucket `b`'s owner sets (a node id completes one).
    pub(crate) fn owner_base(&self, b: Bucket) -> String {
        format!("{}:owner:", self.bucket_base(b))
    }
    pub(crate) fn owner(&self, b: Bucket, node: &str) -> String {
        format!("{}{node}", self.owner_base(b))
    }
    /// From when bucket `b`'s spent one-time keys are known (milliseconds).
    pub(crate) fn spent_since(&self, b: Bucket) -> String {
        format!("{}:spent_since", self.bucket_base(b))
    }
    /// A spent one-time key, in its bucket.
    pub(crate) fn spent(&self, key: &[u8]) -> String {
        format!("{}:spent:{}", self.bucket_base(key_bucket(key)), hex(key))
    }
    /// A task's record, in the bucket of its id's first byte.
    pub(crate) fn task(&self, id: &[u8]) -> String {
        format!("{}:t:{}", self.bucket_base(key_bucket(id)), hex(id))
    }
    /// Bucket `b`'s open tasks, by their node.
    pub(crate) fn open_tasks(&self, b: Bucket) -> String {
        format!("{}:topen", self.bucket_base(b))
    }
    /// Bucket `b`'s tasks, by expiry.
    pub(crate) fn task_expiry(&self, b: Bucket) -> String {
        format!("{}:texp", self.bucket_base(b))
    }
    pub(crate) fn layout(&self) -> String {
        format!("{}:layout", self.prefix)
    }
    /// The store-wide session set of the layouts before buckets (its presence marks their data).
    pub(crate) fn unbucketed_sessions(&self) -> String {
        format!("{}:sessions", self.prefix)
    }
    pub(crate) fn node(&self, name: &str) -> String {
        format!("{}:node:{{{name}}}", self.prefix)
    }
    /// Where node `name` says other nodes reach it (`--advertise`).
    pub(crate) fn advertise(&self, name: &str) -> String {
        format!("{}:advertise:{{{name}}}", self.prefix)
    }
    /// Every node that took a lease.
    pub(crate) fn nodes(&self) -> String {
        format!("{}:nodes", self.prefix)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The hash tag Redis Cluster hashes: what lies between the first `{` and the next `}`.
    fn tag(key: &str) -> &str {
        let open = key.find('{').expect("a hash tag");
        let close = key[open..].find('}').expect("a closed hash tag") + open;
        &key[open + 1..close]
    }

    #[test]
    fn a_sessions_keys_share_its_buckets_slot() {
        let keys = Keys::new("app");
        let session = SessionId::from_bytes([0x47; 16]);
        let stream = StreamId::from_bytes([9; 12]);
        let b = bucket(session);
        assert_eq!(b, 0x47 % BUCKETS);
        let all = [
            keys.record(session),
            keys.streams(session),
            keys.events(session, stream),
            keys.interest(session),
            keys.sessions(b),
            keys.run(b),
            keys.owner(b, "n1"),
            keys.spent_since(b),
            keys.open_tasks(b),
            keys.task_expiry(b),
        ];
        for k in all.iter().chain(keys.due(b).iter()) {
            assert_eq!(tag(k), format!("{b:02x}"), "{k}");
        }
        assert_eq!(tag(&keys.spent(&[0x47, 1, 2])), tag(&keys.run(b)), "a key spends in its bucket");
        assert_eq!(tag(&keys.task(&[0x47; 16])), tag(&keys.run(b)), "a task lives in its bucket");
        assert_eq!(tag(&keys.node("n1")), tag(&keys.advertise("n1")), "a lease and its address share a slot");
        assert!(!keys.layout().contains('{') && !keys.nodes().contains('{'), "one-key items stand alone");
    }
}
