//! The shared stores the many-node tests run on, alike: a fresh PostgreSQL database or a
//! fresh Redis key prefix per test, named as `forkless serve --store` takes it, and the same
//! store reached through another port (a TCP proxy the test can cut). Over TLS, the store is
//! a server of the test process's own (`forkless_store_*::testing`'s private servers, with a
//! CA the test makes) reached with verification on.

use std::any::Any;

/// Which shared store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// The machine's PostgreSQL (`forkless_store_postgres::testing`).
    Postgres,
    /// The machine's Redis (`forkless_store_redis::testing`).
    Redis,
    /// A private PostgreSQL that accepts TLS only, reached with `sslmode=verify-full`.
    PostgresTls,
    /// A private Redis reached over `rediss://`, trusting its CA (`--redis-ca`).
    RedisTls,
}

/// A store of this test's own, dropped (database, keys) when the test ends.
pub struct SharedStore {
    /// `--store` for it.
    pub store: String,
    /// Further `forkless serve` flags it needs (`--redis-ca FILE` over TLS).
    pub flags: Vec<String>,
    /// The server's port in `store`.
    port: u16,
    _guard: Box<dyn Any + Send>,
}

impl SharedStore {
    /// A fresh one, or `None` (skip) without the server outside CI (under `CI=true` a missing
    /// server fails the test).
    pub async fn fresh(backend: Backend) -> Option<Self> {
        Some(match backend {
            Backend::Postgres => {
                let db = forkless_store_postgres::testing::fresh().await?;
                Self { store: db.url.clone(), flags: Vec::new(), port: 5432, _guard: Box::new(db) }
            }
            Backend::Redis => {
                let prefix = forkless_store_redis::testing::fresh().await?;
                let store = format!("{}#{}", prefix.url, prefix.prefix);
                Self { store, flags: Vec::new(), port: 6379, _guard: Box::new(prefix) }
            }
            Backend::PostgresTls => {
                let server = forkless_store_postgres::testing::PrivatePostgres::shared()?;
                let db = server.fresh().await;
                Self { store: db.url, flags: Vec::new(), port: server.port(), _guard: Box::new(()) }
            }
            Backend::RedisTls => {
                use forkless_store_redis::testing::{ClientCerts, PrivateRedis};
                let dir = tempfile::tempdir().expect("a directory for the CA");
                let ca = forkless_tls::testing::TestCa::new(dir.path());
                let flags = ["--save", "", "--appendonly", "no"];
                let redis = PrivateRedis::start_tls(&flags, &ca, &["localhost"], ClientCerts::No)?;
                let port = redis.tls_port().expect("a TLS port");
                let store = format!("{}#tls", redis.tls_url("localhost").expect("a TLS URL"));
                let flags = vec!["--redis-ca".to_owned(), ca.ca_file.display().to_string()];
                Self { store, flags, port, _guard: Box::new((redis, dir)) }
            }
        })
    }

    /// `--store` for the same store reached through 127.0.0.1:`port` instead.
    pub fn via(&self, port: u16) -> String {
        let via = self.store.replacen(&format!(":{}", self.port), &format!(":{port}"), 1);
        assert_ne!(via, self.store, "the store's URL names its port");
        via
    }

    /// The server's port.
    pub fn port(&self) -> u16 {
        self.port
    }
}
