//! The Redis store over TLS (`rediss://`) to `redis-server`s of its own ([`PrivateRedis`]
//! with a TLS port and a certificate for `localhost` from a CA the test makes). The store's
//! conformance suite passes trusting that CA; a certificate from an untrusted root, or not
//! naming the host, is refused unless the host-name check is explicitly turned off; a
//! plaintext `redis://` to the TLS port is refused; a Redis that asks for client
//! certificates admits the store with one its CA signed and refuses it without.
//!
//! Without `redis-server` the tests fail when `CI=true` and are skipped otherwise.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use forkless_store::Store as _;
use forkless_store_redis::testing::{ClientCerts, PrivateRedis};
use forkless_store_redis::tls::{RedisTls, Verify};
use forkless_store_redis::{Hints, RedisConfig, RedisStore};
use forkless_tls::testing::TestCa;

/// A TLS Redis asking clients for certificates or not, and its CA; one of each per process.
struct Private {
    redis: PrivateRedis,
    ca: TestCa,
    _dir: tempfile::TempDir,
}

fn start(clients: ClientCerts) -> Option<Private> {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new(dir.path());
    let redis = PrivateRedis::start_tls(&["--save", "", "--appendonly", "no"], &ca, &["localhost"], clients)?;
    Some(Private { redis, ca, _dir: dir })
}

fn server() -> Option<&'static Private> {
    static SERVER: OnceLock<Option<Private>> = OnceLock::new();
    SERVER.get_or_init(|| start(ClientCerts::No)).as_ref()
}

fn config(p: &Private, host: &str, scheme: &str, tls: RedisTls) -> RedisConfig {
    static N: AtomicU32 = AtomicU32::new(0);
    let port = p.redis.tls_port().expect("a TLS port");
    let mut config = RedisConfig::new(format!("{scheme}://{host}:{port}"));
    config.prefix = format!("tls{}x{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed));
    config.hints = Hints::Off;
    config.tls = tls;
    config
}

fn trusting(p: &Private) -> RedisTls {
    RedisTls { ca_file: Some(p.ca.ca_file.clone()), ..RedisTls::default() }
}

async fn fresh_store() -> Option<((), RedisStore)> {
    let p = server()?;
    let store = forkless_store_redis::connect(config(p, "localhost", "rediss", trusting(p))).await;
    Some(((), store.expect("a store over rediss:// trusting the test's CA")))
}

mod conformance_over_tls {
    forkless_store::store_conformance_tests!(maybe super::fresh_store());
}

async fn refused(config: RedisConfig) -> String {
    match forkless_store_redis::connect(config).await {
        Ok(_) => panic!("connected"),
        Err(e) => e.to_string(),
    }
}

#[tokio::test]
async fn a_certificate_from_an_untrusted_root_is_refused() {
    let Some(p) = server() else { return };
    let err = refused(config(p, "localhost", "rediss", RedisTls::default())).await;
    assert!(err.to_lowercase().contains("certificate"), "{err}");
}

#[tokio::test]
async fn a_certificate_not_naming_the_host_is_refused_unless_verification_is_turned_off() {
    let Some(p) = server() else { return };
    let err = refused(config(p, "127.0.0.1", "rediss", trusting(p))).await;
    assert!(err.contains("127.0.0.1") || err.to_lowercase().contains("name"), "{err}");
    let off = RedisTls { verify: Verify::Off, ..RedisTls::default() };
    forkless_store_redis::connect(config(p, "127.0.0.1", "rediss", off)).await.expect("asked for explicitly");
}

#[tokio::test]
async fn plaintext_to_the_tls_port_is_refused_and_settings_without_rediss_too() {
    let Some(p) = server() else { return };
    let plain = tokio::time::timeout(
        Duration::from_secs(20),
        forkless_store_redis::connect(config(p, "localhost", "redis", RedisTls::default())),
    )
    .await
    .expect("refused, not hung");
    assert!(plain.is_err(), "plaintext to a TLS port connected");
    let err = refused(config(p, "localhost", "redis", trusting(p))).await;
    assert!(err.contains("not a rediss:// URL"), "{err}");
}

#[tokio::test]
async fn a_client_certificate_is_presented_where_the_server_asks_for_one() {
    let Some(p) = start(ClientCerts::Required) else { return };
    let dir = tempfile::tempdir().unwrap();
    let client = p.ca.client("forkless", "client");
    let with = RedisTls { client: Some(client), ..trusting(&p) };
    let store = forkless_store_redis::connect(config(&p, "localhost", "rediss", with))
        .await
        .expect("admitted by its certificate");
    // Not only the handshake: the store works over that connection.
    let record = forkless_store::conformance::new_record(7, true);
    store.create(record.clone()).await.expect("create over a client-certified connection");
    assert!(store.load(record.id()).await.expect("read").is_some());

    // Without one, or with one another CA signed, the server ends the handshake.
    let without = refused(config(&p, "localhost", "rediss", trusting(&p))).await;
    let stranger = TestCa::named(dir.path(), "stranger").client("forkless", "stranger-client");
    let foreign = RedisTls { client: Some(stranger.clone()), ..trusting(&p) };
    let foreign = refused(config(&p, "localhost", "rediss", foreign)).await;
    assert!(without.contains("CertificateRequired"), "the server's alert reaches the error: {without}");
    assert!(foreign.contains("UnknownCA"), "the server's alert reaches the error: {foreign}");

    // A key file that holds no key is named before any connection.
    let bad = RedisTls { client: Some((stranger.0.clone(), stranger.0.clone())), ..trusting(&p) };
    let err = refused(config(&p, "localhost", "rediss", bad)).await;
    assert!(err.contains("no usable private key") && err.contains("stranger-client.crt"), "{err}");
}
