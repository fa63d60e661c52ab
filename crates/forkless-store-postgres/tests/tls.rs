//! The PostgreSQL store over TLS to a server of its own ([`PrivatePostgres`]: `ssl = on`, a
//! certificate for `localhost` from a CA the test process makes, plaintext rejected). The
//! store's conformance suite passes with `sslmode=verify-full`; a certificate that does not
//! name the host, or chains to no trusted root, is refused with an error naming what failed;
//! plaintext is refused; a database that admits client certificates only is reached with
//! `sslcert`/`sslkey` and refused without them, or with a certificate another CA signed.
//!
//! Needs PostgreSQL's server binaries (`initdb`, `postgres`): without them the tests fail
//! when `CI=true` and are skipped otherwise.

use forkless_store::Store as _;
use forkless_store_postgres::testing::{CLIENT_CERT_DB, PrivatePostgres};
use forkless_store_postgres::{PgConfig, PgStore};

/// A fresh database on the private server, and a store on it over `verify-full`.
async fn fresh() -> Option<((), PgStore)> {
    let p = PrivatePostgres::shared()?;
    let db = p.fresh().await;
    let mut config = PgConfig::new(db.url);
    config.pool_size = 4;
    Some(((), forkless_store_postgres::connect(config).await.expect("a store over verify-full")))
}

mod conformance_over_verify_full {
    forkless_store::store_conformance_tests!(maybe super::fresh());
}

async fn refused(url: String) -> String {
    match forkless_store_postgres::connect(PgConfig::new(&url)).await {
        Ok(_) => panic!("connected to {url}"),
        Err(e) => e.to_string(),
    }
}

#[tokio::test]
async fn a_certificate_not_naming_the_host_is_refused_under_verify_full_and_taken_under_verify_ca() {
    let Some(p) = PrivatePostgres::shared() else { return };
    let err = refused(p.url("127.0.0.1", "postgres", &p.verify_full())).await;
    assert!(err.contains("127.0.0.1") && err.contains("not valid for name"), "{err}");
    let ca = format!("sslmode=verify-ca&sslrootcert={}", p.ca_file().display());
    let config = PgConfig::new(p.url("127.0.0.1", "postgres", &ca));
    forkless_store_postgres::connect(config).await.expect("verify-ca checks the chain, not the name");
}

#[tokio::test]
async fn a_certificate_from_no_trusted_root_is_refused() {
    let Some(p) = PrivatePostgres::shared() else { return };
    let err = refused(p.url("localhost", "postgres", "sslmode=verify-full")).await;
    assert!(err.contains("invalid peer certificate") && err.contains("UnknownIssuer"), "{err}");
}

#[tokio::test]
async fn plaintext_to_a_server_that_requires_tls_is_refused() {
    let Some(p) = PrivatePostgres::shared() else { return };
    let err = refused(p.url("localhost", "postgres", "sslmode=disable")).await;
    assert!(err.contains("no encryption"), "{err}");
}

#[tokio::test]
async fn a_client_certificate_is_presented_where_the_server_asks_for_one() {
    let Some(p) = PrivatePostgres::shared() else { return };
    let (cert, key) = p.client_cert();
    let with = format!("{}&sslcert={}&sslkey={}", p.verify_full(), cert.display(), key.display());
    let mut config = PgConfig::new(p.url("localhost", CLIENT_CERT_DB, &with));
    config.pool_size = 1;
    let store = forkless_store_postgres::connect(config).await.expect("admitted by its certificate");
    // Not only the handshake: the store works over that connection.
    let record = forkless_store::conformance::new_record(7, true);
    store.create(record.clone()).await.expect("create over a client-certified connection");
    assert!(store.load(record.id()).await.expect("read").is_some());

    // Without a certificate, the server refuses: the error says what it wants.
    let err = refused(p.url("localhost", CLIENT_CERT_DB, &p.verify_full())).await;
    assert!(err.contains("requires a valid client certificate"), "{err}");

    // A certificate the server's CA did not sign is refused too.
    let dir = tempfile::tempdir().unwrap();
    let stranger = forkless_tls::testing::TestCa::named(dir.path(), "stranger");
    let (cert, key) = stranger.client("postgres", "stranger-client");
    let other = format!("{}&sslcert={}&sslkey={}", p.verify_full(), cert.display(), key.display());
    let err = refused(p.url("localhost", CLIENT_CERT_DB, &other)).await;
    assert!(err.contains("UnknownCA"), "the server's alert reaches the error: {err}");

    // A key file that holds no key is named before any connection.
    let bad = format!("{}&sslcert={}&sslkey={}", p.verify_full(), cert.display(), cert.display());
    let err = refused(p.url("localhost", CLIENT_CERT_DB, &bad)).await;
    assert!(err.contains("sslkey") && err.contains("stranger-client.crt"), "{err}");
}
