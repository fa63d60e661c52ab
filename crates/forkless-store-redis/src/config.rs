//! What a Redis store is configured with ([`RedisConfig`], [`AfterRestart`]), what the
//! Redis it connects to vouches for ([`Durability`], read with `CONFIG GET`), and whether the
//! data under its prefix is laid out as this build writes it ([`check_layout`]).

use forkless_store::{Error, Result};

use crate::{Hints, Pipeline, TailConfig};

/// How to reach Redis and how to behave on it.
#[derive(Clone, Debug)]
pub struct RedisConfig {
    /// A `redis://` URL.
    pub url: String,
    /// The prefix of every key of this store (default `forkless`): stores with different
    /// prefixes share a Redis without seeing each other.
    pub prefix: String,
    /// Whether to send and receive hints for other nodes (default [`Hints::Notify`]).
    pub hints: Hints,
    /// This node's name in its hints (default: a random one).
    pub node: Option<String>,
    /// What to make of a Redis that restarted (default [`AfterRestart::Verify`]).
    pub after_restart: AfterRestart,
    /// When a notification's append returns (default [`Pipeline::On`]: once its batch is
    /// computed).
    pub pipeline: Pipeline,
    /// How this node serves its own writers what it just committed (default
    /// [`TailConfig::default`]; [`TailConfig::OFF`] reads everything from Redis).
    pub tail: TailConfig,
    /// TLS settings for a `rediss://` URL (default: verify the server against the system's
    /// roots).
    pub tls: crate::tls::RedisTls,
}

/// What a store makes of a Redis that restarted since its history was last vouched for
/// (Redis's `run_id` is new at every start, and every write checks it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AfterRestart {
    /// Trust the restart only if Redis syncs every write (`appendonly yes`, `appendfsync
    /// always`), so it kept everything it acknowledged; otherwise it may have come back with
    /// less than it delivered, and every session ends with reason `history_lost` (404), so
    /// no cursor into a lost suffix is ever continued with other content. The default.
    #[default]
    Verify,
    /// **Negative control only**: trust every restart, as Redis stores without this check do.
    /// A restart from an older snapshot then numbers new events over ones a client received.
    TrustBlindly,
}

impl RedisConfig {
    /// The defaults for `url`; a `#PREFIX` fragment (`redis://host:6379/0#app`) names the key
    /// prefix, else it is `forkless`.
    pub fn new(url: impl Into<String>) -> Self {
        let url = url.into();
        let (url, prefix) = match url.split_once('#') {
            Some((url, prefix)) if !prefix.is_empty() => (url.to_owned(), prefix.to_owned()),
            _ => (url.trim_end_matches('#').to_owned(), "forkless".to_owned()),
        };
        Self {
            url,
            prefix,
            hints: Hints::Notify,
            node: None,
            after_restart: AfterRestart::Verify,
            pipeline: Pipeline::On,
            tail: TailConfig::default(),
            tls: crate::tls::RedisTls::default(),
        }
    }
}

/// What a Redis crash can take back of what was delivered, as Redis is configured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// `appendonly yes`, `appendfsync always`: nothing delivered is lost.
    Always,
    /// `appendfsync everysec`: up to about a second of delivered events.
    EverySecond,
    /// No append-only file (snapshots at most): everything since the last snapshot.
    Volatile,
    /// `CONFIG GET` is not allowed (a managed Redis): unknown.
    Unknown,
}

pub(crate) async fn durability(mut conn: crate::conn::Conn) -> Durability {
    let get = |name: &'static str| redis::cmd("CONFIG").arg("GET").arg(name).clone();
    let aof: redis::RedisResult<Vec<String>> = get("appendonly").query_async(&mut conn).await;
    let fsync: redis::RedisResult<Vec<String>> = get("appendfsync").query_async(&mut conn).await;
    match (aof.ok().and_then(|v| v.get(1).cloned()), fsync.ok().and_then(|v| v.get(1).cloned())) {
        (Some(a), _) if a == "no" => Durability::Volatile,
        (Some(_), Some(f)) if f == "always" => Durability::Always,
        (Some(_), Some(_)) => Durability::EverySecond,
        _ => Durability::Unknown,
    }
}

/// Refuse data under the store's prefix that another layout wrote (an earlier build's: one
/// event per set member, store-wide indexes; or a later build's), naming it, so it is never
/// misread; stamp a store that has none with this build's layout.
pub(crate) async fn check_layout(mut conn: crate::conn::Conn, keys: &crate::keys::Keys) -> Result<()> {
    let earlier: bool = redis::cmd("EXISTS")
        .arg(keys.unbucketed_sessions())
        .query_async(&mut conn)
        .await
        .map_err(crate::backend)?;
    if earlier {
        return Err(Error::Corrupt(
            "redis: the sessions under this prefix were written by an earlier forkless build \
             (sessions not in buckets, events one per set member), which this build does not \
             read; let them end under that build, delete the prefix's keys, or use another prefix"
                .into(),
        ));
    }
    let reply: Vec<redis::Value> = redis::Script::new(crate::scripts::LAYOUT)
        .key(keys.layout())
        .arg(crate::keys::LAYOUT)
        .invoke_async(&mut conn)
        .await
        .map_err(crate::backend)?;
    let code: i64 =
        reply.first().map(redis::from_redis_value_ref).transpose().map_err(crate::parse)?.unwrap_or(-2);
    let found: Option<String> =
        reply.get(1).map(redis::from_redis_value_ref).transpose().map_err(crate::parse)?;
    match code {
        1 => Ok(()),
        _ => Err(Error::Corrupt(format!(
            "redis: the data under this prefix is laid out as \"{}\", not \"{}\" as this build \
             writes it (a later build's?); run that build, or use another prefix",
            found.unwrap_or_default(),
            crate::keys::LAYOUT
        ))),
    }
}
