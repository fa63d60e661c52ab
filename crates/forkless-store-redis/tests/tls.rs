//! The Redis store over TLS (`rediss://`) to a `redis-server` of its own that listens on a
//! TLS port only, with a certificate for `localhost` signed by a CA this test makes (rcgen).
//! The store's conformance suite passes trusting that CA; a certificate from an untrusted
//! root, or not naming the host, is refused unless the host-name check is explicitly turned
//! off; a plaintext `redis://` to the TLS port is refused.
//!
//! Without `redis-server` the tests fail when `CI=true` and are skipped otherwise.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use forkless_store_redis::tls::{RedisTls, Verify};
use forkless_store_redis::{Hints, RedisConfig, RedisStore};

struct Private {
    port: u16,
    ca: PathBuf,
    /// Stops the server (and removes its files) once this process ends.
    _watchdog: std::process::Child,
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

fn start() -> Option<Private> {
    if Command::new("redis-server").arg("--version").stdout(Stdio::null()).status().is_err() {
        forkless_store::skip::skip("no redis-server to start", &"not found");
        return None;
    }
    let dir = tempfile::Builder::new().prefix("forkless-redis-tls").tempdir().unwrap().keep();
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(rcgen::DnType::CommonName, "forkless test CA");
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    let ca = dir.join("ca.crt");
    write(&ca, &ca_cert.pem());
    write(&dir.join("redis.crt"), &cert.pem());
    write(&dir.join("redis.key"), &key.serialize_pem());
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let server = format!(
        "redis-server --port 0 --tls-port {port} --bind 127.0.0.1 --dir {dir} --save '' --appendonly no \
         --tls-cert-file {dir}/redis.crt --tls-key-file {dir}/redis.key --tls-ca-cert-file {dir}/ca.crt \
         --tls-auth-clients no >{dir}/log 2>&1 & r=$!; \
         while [ -e /proc/{me} ]; do sleep 1; done; kill $r; wait $r; rm -rf {dir}",
        dir = dir.display(),
        me = std::process::id(),
    );
    let watchdog = Command::new("sh").args(["-c", &server]).spawn().expect("start redis-server");
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        let log = std::fs::read_to_string(dir.join("log")).unwrap_or_default();
        assert!(Instant::now() < deadline, "the private redis-server did not start within 20 s: {log}");
        std::thread::sleep(Duration::from_millis(20));
    }
    Some(Private { port, ca, _watchdog: watchdog })
}

fn server() -> Option<&'static Private> {
    static SERVER: OnceLock<Option<Private>> = OnceLock::new();
    SERVER.get_or_init(start).as_ref()
}

fn config(p: &Private, scheme_host: &str, tls: RedisTls) -> RedisConfig {
    static N: AtomicU32 = AtomicU32::new(0);
    let mut config = RedisConfig::new(format!("{scheme_host}:{}", p.port));
    config.prefix = format!("tls{}x{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed));
    config.hints = Hints::Off;
    config.tls = tls;
    config
}

fn trusting(p: &Private) -> RedisTls {
    RedisTls { ca_file: Some(p.ca.clone()), ..RedisTls::default() }
}

async fn fresh_store() -> Option<((), RedisStore)> {
    let p = server()?;
    let store = forkless_store_redis::connect(config(p, "rediss://localhost", trusting(p))).await;
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
    let err = refused(config(p, "rediss://localhost", RedisTls::default())).await;
    assert!(err.to_lowercase().contains("certificate"), "{err}");
}

#[tokio::test]
async fn a_certificate_not_naming_the_host_is_refused_unless_verification_is_turned_off() {
    let Some(p) = server() else { return };
    let err = refused(config(p, "rediss://127.0.0.1", trusting(p))).await;
    assert!(err.contains("127.0.0.1") || err.to_lowercase().contains("name"), "{err}");
    let off = RedisTls { verify: Verify::Off, ..RedisTls::default() };
    forkless_store_redis::connect(config(p, "rediss://127.0.0.1", off)).await.expect("asked for explicitly");
}

#[tokio::test]
async fn plaintext_to_the_tls_port_is_refused_and_settings_without_rediss_too() {
    let Some(p) = server() else { return };
    let plain = tokio::time::timeout(
        Duration::from_secs(20),
        forkless_store_redis::connect(config(p, "redis://localhost", RedisTls::default())),
    )
    .await
    .expect("refused, not hung");
    assert!(plain.is_err(), "plaintext to a TLS port connected");
    let err = refused(config(p, "redis://localhost", trusting(p))).await;
    assert!(err.contains("not a rediss:// URL"), "{err}");
}
