//! The PostgreSQL store over TLS to a server of its own: a private `initdb` data directory
//! started with `ssl = on` and a certificate for `localhost` made by this test (rcgen), whose
//! `pg_hba.conf` refuses any connection without TLS. The store's conformance suite passes
//! with `sslmode=verify-full`; a certificate that does not name the host, or chains to no
//! trusted root, is refused with an error naming what failed; plaintext is refused.
//!
//! Needs PostgreSQL's server binaries (`initdb`, `postgres`): without them the tests fail
//! when `CI=true` and are skipped otherwise.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use forkless_store_postgres::{PgConfig, PgStore};

/// The private server: its port and the CA file that signed its certificate.
struct Private {
    port: u16,
    ca: PathBuf,
    /// The shell that stops the server (and removes its files) once this process ends.
    _watchdog: std::process::Child,
}

fn bin_dir() -> Option<PathBuf> {
    let mut dirs: Vec<_> =
        std::fs::read_dir("/usr/lib/postgresql").ok()?.flatten().map(|e| e.path().join("bin")).collect();
    dirs.sort();
    dirs.into_iter().rev().find(|d| d.join("initdb").exists())
}

fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.starts_with(b"0\n"))
}

/// `program args…`, as the `postgres` user when running as root (the server refuses root).
fn as_server_user(program: &Path) -> Command {
    if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(program);
        c
    } else {
        Command::new(program)
    }
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

fn start() -> Option<Private> {
    let Some(bin) = bin_dir() else {
        forkless_store::skip::skip(
            "no PostgreSQL server binaries (initdb) under /usr/lib/postgresql",
            &"not found",
        );
        return None;
    };
    let dir = tempfile::Builder::new().prefix("forkless-pg-tls").tempdir().unwrap().keep();
    let data = dir.join("data");
    if is_root() {
        Command::new("chown").args(["postgres:postgres"]).arg(&dir).status().unwrap();
    }
    let init = as_server_user(&bin.join("initdb"))
        .args(["-A", "trust", "-U", "postgres", "-D"])
        .arg(&data)
        .stdout(Stdio::null())
        .status()
        .expect("run initdb");
    assert!(init.success(), "initdb failed");
    // A CA, and a server certificate it signs for `localhost` only.
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(rcgen::DnType::CommonName, "forkless test CA");
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let server_key = rcgen::KeyPair::generate().unwrap();
    let server_cert = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .signed_by(&server_key, &issuer)
        .unwrap();
    let ca = dir.join("ca.crt");
    write(&ca, &ca_cert.pem());
    write(&data.join("server.crt"), &server_cert.pem());
    write(&data.join("server.key"), &server_key.serialize_pem());
    write(
        &data.join("pg_hba.conf"),
        "local all all trust\nhostssl all all 127.0.0.1/32 trust\nhostnossl all all 127.0.0.1/32 reject\n",
    );
    if is_root() {
        Command::new("chown").args(["-R", "postgres:postgres"]).arg(&dir).status().unwrap();
    }
    Command::new("chmod").arg("600").arg(data.join("server.key")).status().unwrap();
    let port = free_port();
    // Stopped when this test process ends: the watchdog shell polls it.
    let server = format!(
        "{postgres} -D {data} -p {port} -c ssl=on -c listen_addresses=127.0.0.1 -c unix_socket_directories={dir} -c fsync=off >{dir}/log 2>&1 & pg=$!; \
         while [ -e /proc/{me} ]; do sleep 1; done; kill $pg; wait $pg; rm -rf {dir}",
        postgres = bin.join("postgres").display(),
        data = data.display(),
        dir = dir.display(),
        me = std::process::id(),
    );
    let shell = if is_root() { "runuser" } else { "sh" };
    let mut command = Command::new(shell);
    if is_root() {
        command.args(["-u", "postgres", "--", "sh"]);
    }
    let watchdog = command
        .args(["-c", &server])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start postgres");
    let deadline = Instant::now() + Duration::from_secs(30);
    // Accepting connections, not only listening (a starting server refuses them).
    let ready = || {
        Command::new(bin.join("pg_isready"))
            .args(["-q", "-h", "127.0.0.1", "-p", &port.to_string()])
            .status()
            .is_ok_and(|s| s.success())
    };
    while !ready() {
        let log = std::fs::read_to_string(dir.join("log")).unwrap_or_default();
        assert!(Instant::now() < deadline, "the private PostgreSQL did not start within 30 s: {log}");
        std::thread::sleep(Duration::from_millis(20));
    }
    Some(Private { port, ca, _watchdog: watchdog })
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn server() -> Option<&'static Private> {
    static SERVER: OnceLock<Option<Private>> = OnceLock::new();
    SERVER.get_or_init(start).as_ref()
}

/// A URL to `db` on the private server, as `host`, with these query parameters.
fn url(p: &Private, host: &str, db: &str, query: &str) -> String {
    format!("postgres://postgres@{host}:{}/{db}?{query}", p.port)
}

fn verify_full(p: &Private) -> String {
    format!("sslmode=verify-full&sslrootcert={}", p.ca.display())
}

/// A fresh database on the private server, and a store on it over `verify-full`.
async fn fresh() -> Option<((), PgStore)> {
    let p = server()?;
    static N: AtomicU32 = AtomicU32::new(0);
    let name = format!("tls_{}_{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed));
    let (admin, tls) =
        forkless_store_postgres::tls::connector_for(&url(p, "localhost", "postgres", &verify_full(p)))
            .unwrap();
    let (client, conn) = tokio_postgres::connect(&admin, tls).await.expect("admin connection over TLS");
    tokio::spawn(conn);
    client.batch_execute(&format!("CREATE DATABASE {name}")).await.expect("create database");
    let mut config = PgConfig::new(url(p, "localhost", &name, &verify_full(p)));
    config.pool_size = 4;
    Some(((), forkless_store_postgres::connect(config).await.expect("a store over verify-full")))
}

mod conformance_over_verify_full {
    forkless_store::store_conformance_tests!(maybe super::fresh());
}

async fn refused(query: &str, host: &str) -> String {
    let p = server().expect("the private server");
    let config = PgConfig::new(url(p, host, "postgres", query));
    match forkless_store_postgres::connect(config).await {
        Ok(_) => panic!("connected with {query} to {host}"),
        Err(e) => e.to_string(),
    }
}

#[tokio::test]
async fn a_certificate_not_naming_the_host_is_refused_under_verify_full_and_taken_under_verify_ca() {
    let Some(p) = server() else { return };
    let err = refused(&verify_full(p), "127.0.0.1").await;
    assert!(err.contains("127.0.0.1") && err.contains("not valid for name"), "{err}");
    let ca = format!("sslmode=verify-ca&sslrootcert={}", p.ca.display());
    let config = PgConfig::new(url(p, "127.0.0.1", "postgres", &ca));
    forkless_store_postgres::connect(config).await.expect("verify-ca checks the chain, not the name");
}

#[tokio::test]
async fn a_certificate_from_no_trusted_root_is_refused() {
    if server().is_none() {
        return;
    }
    let err = refused("sslmode=verify-full", "localhost").await;
    assert!(err.contains("invalid peer certificate") && err.contains("UnknownIssuer"), "{err}");
}

#[tokio::test]
async fn plaintext_to_a_server_that_requires_tls_is_refused() {
    if server().is_none() {
        return;
    }
    let err = refused("sslmode=disable", "localhost").await;
    assert!(err.contains("no encryption"), "{err}");
}
