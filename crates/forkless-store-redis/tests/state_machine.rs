//! The state-machine test of [`forkless_store::conformance::model`] against
//! [`RedisStore`](forkless_store_redis::RedisStore): every case on a store of its own under a
//! fresh key prefix, so no record, cache or watcher outlives its case. One case in 25 of the
//! memory store's count: every step is a round trip to Redis.

use std::sync::Mutex;

use forkless_core::Timestamp;
use forkless_store::conformance::model::{Backend, cases, run};
use forkless_store_redis::testing::{TestPrefix, fresh};
use forkless_store_redis::{Hints, RedisStore};

/// Every case's prefix, their keys deleted when the run ends.
static PREFIXES: Mutex<Vec<TestPrefix>> = Mutex::new(Vec::new());

struct Redis;

impl Backend for Redis {
    type S = RedisStore;
    const NAME: &'static str = "redis (one node, a fresh prefix per case)";
    fn open(rt: &tokio::runtime::Runtime, _: Timestamp) -> RedisStore {
        rt.block_on(async {
            let prefix = fresh().await.expect("redis was reachable when the run started");
            let store = prefix.store(Hints::Off).await;
            PREFIXES.lock().unwrap().push(prefix);
            store
        })
    }
}

#[test]
fn core_and_redis_store_keep_the_invariant_under_random_histories() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    if rt.block_on(fresh()).is_none() {
        return;
    }
    run::<Redis>((cases() / 25).max(1));
    PREFIXES.lock().unwrap().clear();
}

#[test]
fn tasks_written_by_stale_nodes_keep_their_rules_on_redis() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    if rt.block_on(fresh()).is_none() {
        return;
    }
    forkless_store::conformance::model::run_tasks::<Redis>((cases() / 100).max(1));
    PREFIXES.lock().unwrap().clear();
}
