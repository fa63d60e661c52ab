//! For tests (feature `testing`): a fresh database per test on the machine's PostgreSQL (`FORKLESS_TEST_POSTGRES`, default
//! `postgres://postgres@127.0.0.1:5432/postgres`), dropped when the test ends. Without a
//! server the test fails when `CI=true` and is skipped (with a note) otherwise. And a
//! PostgreSQL of a test's own that speaks TLS only ([`PrivatePostgres`]).

use std::sync::atomic::{AtomicU32, Ordering};

use crate::{Hints, PgConfig, PgStore};

mod private;
pub use private::{CLIENT_CERT_DB, PrivateDb, PrivatePostgres};

fn base() -> String {
    std::env::var("FORKLESS_TEST_POSTGRES")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
}

/// A database that exists for as long as this value.
#[derive(Debug)]
pub struct TestDb {
    /// The database's name.
    pub name: String,
    /// A connection URL for it.
    pub url: String,
}

impl TestDb {
    /// Drop the database now, under the feet of whoever uses it (its connections are
    /// terminated): a database that is gone.
    pub async fn drop_now(&self) {
        let client = admin().await.expect("the server is reachable");
        client
            .batch_execute(&format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name))
            .await
            .expect("drop");
    }

    /// Apply the schema's migrations up to `version` only: the database as a build of that
    /// schema version left it.
    pub async fn migrate_to(&self, version: i32) {
        let (mut client, conn) =
            tokio_postgres::connect(&self.url, tokio_postgres::NoTls).await.expect("connect");
        tokio::spawn(conn);
        crate::schema::migrate_to(&mut client, version).await.expect("migrate");
    }

    /// A store on this database (hints off unless asked: one node).
    pub async fn store(&self, hints: Hints) -> PgStore {
        let mut cfg = PgConfig::new(&self.url);
        cfg.hints = hints;
        cfg.pool_size = 4;
        crate::connect(cfg).await.expect("connect to the test database")
    }
}

async fn admin() -> Option<tokio_postgres::Client> {
    match tokio_postgres::connect(&base(), tokio_postgres::NoTls).await {
        Ok((client, conn)) => {
            tokio::spawn(conn);
            Some(client)
        }
        Err(e) => {
            forkless_store::skip::skip(&format!("no PostgreSQL at {}", base()), &e);
            None
        }
    }
}

/// A new, empty database, or `None` (skip) when there is no server and this is not CI.
pub async fn fresh() -> Option<TestDb> {
    static N: AtomicU32 = AtomicU32::new(0);
    let client = admin().await?;
    drop_abandoned(&client).await;
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
    let name = format!("forkless_t_{}_{}_{nanos}", std::process::id(), N.fetch_add(1, Ordering::Relaxed));
    client.batch_execute(&format!("CREATE DATABASE {name}")).await.expect("create a test database");
    let url = match base().rsplit_once('/') {
        Some((server, _)) => format!("{server}/{name}"),
        None => panic!("FORKLESS_TEST_POSTGRES must end in /DATABASE"),
    };
    Some(TestDb { name, url })
}

/// Drop the test databases of processes that are gone (a test that panicked, or was killed,
/// before its guard could drop them).
async fn drop_abandoned(client: &tokio_postgres::Client) {
    let Ok(rows) =
        client.query("SELECT datname FROM pg_database WHERE datname LIKE 'forkless\\_t\\_%'", &[]).await
    else {
        return;
    };
    for row in rows {
        let name: String = row.get(0);
        let pid = name.split('_').nth(2).and_then(|p| p.parse::<u32>().ok());
        if pid.is_some_and(|pid| !std::path::Path::new(&format!("/proc/{pid}")).exists()) {
            let _ = client.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await;
        }
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let name = self.name.clone();
        // Dropping needs a connection of its own, outside the test's runtime.
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
            rt.block_on(async {
                if let Ok((client, conn)) = tokio_postgres::connect(&base(), tokio_postgres::NoTls).await {
                    tokio::spawn(conn);
                    let _ =
                        client.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await;
                }
            });
        })
        .join();
    }
}
