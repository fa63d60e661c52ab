//! The state-machine test of [`forkless_store::conformance::model`] against [`PgStore`]: every
//! case on a store connected afresh to an emptied database (this test's own), so no record,
//! cache or watcher outlives its case. One case in 25 of the memory store's count: every step
//! is a round trip to the database.

use forkless_core::Timestamp;
use forkless_store::conformance::model::{Backend, cases, run};
use forkless_store_postgres::testing::{TestDb, fresh};
use forkless_store_postgres::{Hints, PgConfig, PgStore};

static DB: std::sync::Mutex<Option<TestDb>> = std::sync::Mutex::new(None);

struct Postgres;

impl Backend for Postgres {
    type S = PgStore;
    const NAME: &'static str = "postgres (one node, a fresh store per case)";
    fn open(rt: &tokio::runtime::Runtime, _: Timestamp) -> PgStore {
        let url = DB.lock().unwrap().as_ref().expect("the database is made before the run").url.clone();
        let db = &url;
        rt.block_on(async {
            let (client, conn) = tokio_postgres::connect(db, tokio_postgres::NoTls).await.expect("connect");
            let driver = tokio::spawn(conn);
            client.batch_execute("TRUNCATE forkless_sessions CASCADE").await.expect("empty the database");
            drop(client);
            let _ = driver.await;
            let mut cfg = PgConfig::new(db);
            cfg.hints = Hints::Off;
            cfg.pool_size = 2;
            forkless_store_postgres::connect(cfg).await.expect("connect the store")
        })
    }
}

#[test]
fn core_and_postgres_store_keep_the_invariant_under_random_histories() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let Some(db) = rt.block_on(async {
        let db = fresh().await?;
        // Create the schema once, so each case only empties it.
        let _ = db.store(Hints::Off).await;
        Some(db)
    }) else {
        return;
    };
    *DB.lock().unwrap() = Some(db);
    run::<Postgres>((cases() / 25).max(1));
    // The task histories on the same database (their task ids are fresh per case).
    forkless_store::conformance::model::run_tasks::<Postgres>((cases() / 100).max(1));
    drop(DB.lock().unwrap().take());
}
