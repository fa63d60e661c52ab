//! The store conformance suite against [`PgStore`], each check on a database of its own.

use forkless_store_postgres::Hints;
use forkless_store_postgres::testing as support;

/// A store on a database of its own, dropped with the guard when the check ends.
async fn fresh_store() -> Option<(support::TestDb, forkless_store_postgres::PgStore)> {
    let db = support::fresh().await?;
    let store = db.store(Hints::Off).await;
    Some((db, store))
}

forkless_store::store_conformance_tests!(maybe fresh_store());

/// Promise 4 across a restart: the database keeps what it committed, so every id a client
/// received still names the same bytes after the node's process is gone and a new one
/// connects (and nothing new reuses one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_never_renames_a_delivered_event() {
    let Some(db) = support::fresh().await else { return };
    let store = db.store(Hints::Off).await;
    let db = &db;
    let report = forkless_store::conformance::crash_keeps_every_delivered_id(store, |store| async move {
        drop(store);
        db.store(Hints::Off).await
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(report.received > 0 && report.still_named == report.received, "{report:?}");
}

/// `health` (what `/healthz` reports) is a typed error once the database is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_is_an_error_once_the_database_is_gone() {
    use forkless_store::Store as _;
    let Some(db) = support::fresh().await else { return };
    let store = db.store(Hints::Off).await;
    store.health().await.expect("a reachable database is healthy");
    db.drop_now().await;
    let down = store.health().await;
    assert!(matches!(down, Err(forkless_store::Error::Backend(_))), "{down:?}");
}

/// Promise 11 across a node's restart: every acknowledged task was committed, so every one
/// reads back exactly as last acknowledged when a new process connects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_keeps_every_acknowledged_task() {
    let Some(db) = support::fresh().await else { return };
    let store = db.store(Hints::Off).await;
    let db = &db;
    let report =
        forkless_store::conformance::crash_keeps_every_acknowledged_task(store, |store| async move {
            drop(store);
            db.store(Hints::Off).await
        })
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(report.acknowledged > 0 && report.kept == report.acknowledged, "{report:?}");
}
