//! For tests (feature `testing`): a key prefix of its own per test on the machine's Redis
//! (`FORKLESS_TEST_REDIS`, default `redis://127.0.0.1:6379`), its keys deleted when the test
//! ends. Without a server the test fails when `CI=true` and is skipped (with a note) otherwise.
//! And a `redis-server` of a test's own ([`PrivateRedis`]), or a Redis Cluster of three
//! ([`PrivateRedisCluster`]).

use std::sync::atomic::{AtomicU32, Ordering};

use crate::{Hints, RedisConfig, RedisStore};

mod cluster;
mod private;
pub use cluster::PrivateRedisCluster;
pub use private::{ClientCerts, PrivateRedis};

fn url() -> String {
    std::env::var("FORKLESS_TEST_REDIS").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

/// A key prefix that is this test's for as long as this value lives.
#[derive(Debug)]
pub struct TestPrefix {
    /// The prefix.
    pub prefix: String,
    /// The Redis it is on.
    pub url: String,
}

impl TestPrefix {
    /// A store under this prefix (hints off unless asked: one node).
    pub async fn store(&self, hints: Hints) -> RedisStore {
        let mut cfg = RedisConfig::new(&self.url);
        cfg.prefix = self.prefix.clone();
        cfg.hints = hints;
        crate::connect(cfg).await.expect("connect to the test redis")
    }

    /// The same, with a node name of its own.
    pub async fn node(&self, name: &str, hints: Hints) -> RedisStore {
        let mut cfg = RedisConfig::new(&self.url);
        cfg.prefix = self.prefix.clone();
        cfg.hints = hints;
        cfg.node = Some(name.to_owned());
        crate::connect(cfg).await.expect("connect to the test redis")
    }
}

/// A fresh prefix, or `None` (skip) when there is no server and this is not CI.
pub async fn fresh() -> Option<TestPrefix> {
    static N: AtomicU32 = AtomicU32::new(0);
    let reachable = async {
        let client = redis::Client::open(url())?;
        let mut conn = client.get_multiplexed_async_connection().await?;
        redis::cmd("PING").query_async::<String>(&mut conn).await
    };
    match reachable.await {
        Ok(_) => {}
        Err(e) => {
            forkless_store::skip::skip(&format!("no Redis at {}", url()), &e);
            return None;
        }
    }
    static SWEPT: std::sync::Once = std::sync::Once::new();
    SWEPT.call_once(|| {
        let url = url();
        let _ = std::thread::spawn(move || drop_abandoned(&url)).join();
    });
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().subsec_nanos();
    let prefix = format!("forkless_t_{}_{}_{nanos}", std::process::id(), N.fetch_add(1, Ordering::Relaxed));
    Some(TestPrefix { prefix, url: url() })
}

/// Delete the keys of test processes that are gone: a test that panicked or was killed before
/// its guard ran, or a write of a store's background task that landed after its guard deleted
/// the prefix (its request was on the wire already). Once per test process.
fn drop_abandoned(url: &str) {
    let Ok(client) = redis::Client::open(url) else { return };
    let Ok(mut conn) = client.get_connection() else { return };
    let keys: Vec<String> = match redis::cmd("KEYS").arg("forkless_t_*").query(&mut conn) {
        Ok(keys) => keys,
        Err(_) => return,
    };
    let gone = |key: &String| {
        let pid = key.split('_').nth(2).and_then(|p| p.parse::<u32>().ok());
        pid.is_some_and(|pid| !std::path::Path::new(&format!("/proc/{pid}")).exists())
    };
    let abandoned: Vec<String> = keys.into_iter().filter(gone).collect();
    for chunk in abandoned.chunks(500) {
        let _: redis::RedisResult<i64> = redis::cmd("DEL").arg(chunk).query(&mut conn);
    }
}

impl Drop for TestPrefix {
    fn drop(&mut self) {
        let (url, pattern) = (self.url.clone(), crate::keys::Keys::new(&self.prefix).pattern());
        // Deleting needs a connection of its own, outside the test's runtime.
        let _ = std::thread::spawn(move || {
            let Ok(client) = redis::Client::open(url) else { return };
            let Ok(mut conn) = client.get_connection() else { return };
            let keys: Vec<String> = redis::cmd("KEYS").arg(&pattern).query(&mut conn).unwrap_or_default();
            for chunk in keys.chunks(500) {
                let _: redis::RedisResult<i64> = redis::cmd("DEL").arg(chunk).query(&mut conn);
            }
        })
        .join();
    }
}
