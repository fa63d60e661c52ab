//! The store conformance suite against [`RedisStore`](forkless_store_redis::RedisStore), each
//! check under a key prefix of its own.

use forkless_store_redis::Hints;
use forkless_store_redis::testing::{TestPrefix, fresh};

/// A store under a prefix of its own, whose keys go with the guard when the check ends.
async fn fresh_store() -> Option<(TestPrefix, forkless_store_redis::RedisStore)> {
    let prefix = fresh().await?;
    let store = prefix.store(Hints::Off).await;
    Some((prefix, store))
}

forkless_store::store_conformance_tests!(maybe fresh_store());

/// Promise 4 across a node's restart: Redis keeps what it stored, so every id a client
/// received still names the same bytes after the node's process is gone and a new one
/// connects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_restart_never_renames_a_delivered_event() {
    let Some(prefix) = fresh().await else { return };
    let store = prefix.store(Hints::Off).await;
    let prefix = &prefix;
    let report = forkless_store::conformance::crash_keeps_every_delivered_id(store, |store| async move {
        drop(store);
        prefix.store(Hints::Off).await
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(report.received > 0 && report.still_named == report.received, "{report:?}");
}

/// Promise 11 across a node's restart: every acknowledged task was stored by its script, so
/// every one reads back exactly as last acknowledged when a new process connects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_restart_keeps_every_acknowledged_task() {
    let Some(prefix) = fresh().await else { return };
    let store = prefix.store(Hints::Off).await;
    let prefix = &prefix;
    let report =
        forkless_store::conformance::crash_keeps_every_acknowledged_task(store, |store| async move {
            drop(store);
            prefix.store(Hints::Off).await
        })
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(report.acknowledged > 0 && report.kept == report.acknowledged, "{report:?}");
}
