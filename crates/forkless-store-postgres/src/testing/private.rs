//! For tests (feature `testing`): a PostgreSQL of the test process's own that accepts TLS
//! only: a private `initdb` data directory started with `ssl = on`, a certificate for
//! `localhost` (not `127.0.0.1`: a name it does not hold) from a CA the process makes ([`forkless_tls::testing`]), a
//! `pg_hba.conf` that rejects plaintext, and one database, `clientcert`, that admits only a
//! client certificate for the user `postgres` signed by that CA.
//!
//! One server per test process, started on first use and stopped (its files removed) by a
//! watchdog shell once the process ends, however it ends. Needs PostgreSQL's server binaries
//! under `/usr/lib/postgresql/*/bin`: without them the test fails when `CI=true` and is
//! skipped (with a note) otherwise.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use forkless_tls::testing::TestCa;

/// A failure guard: a server that does not start fails the test instead of hanging it.
const GUARD: Duration = Duration::from_secs(30);

/// The database that admits a client certificate only.
pub const CLIENT_CERT_DB: &str = "clientcert";

/// The private server.
#[derive(Debug)]
pub struct PrivatePostgres {
    port: u16,
    ca: TestCa,
    client: (PathBuf, PathBuf),
    /// The shell that stops the server once this process ends.
    _watchdog: std::process::Child,
}

/// A database of a test's own on the private server (left for the server's end to remove).
#[derive(Debug)]
pub struct PrivateDb {
    /// Its name.
    pub name: String,
    /// A URL for it over `sslmode=verify-full`, trusting the server's CA.
    pub url: String,
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

/// `program`, as the `postgres` user when running as root (the server refuses root).
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

fn chown_to_server_user(path: &Path) {
    if is_root() {
        Command::new("chown").args(["-R", "postgres:postgres"]).arg(path).status().expect("chown");
    }
}

impl PrivatePostgres {
    /// This process's private server, started on first use; `None` (skip) without the server
    /// binaries when this is not CI.
    pub fn shared() -> Option<&'static Self> {
        static SERVER: OnceLock<Option<PrivatePostgres>> = OnceLock::new();
        SERVER.get_or_init(Self::start).as_ref()
    }

    fn start() -> Option<Self> {
        let Some(bin) = bin_dir() else {
            forkless_store::skip::skip(
                "no PostgreSQL server binaries (initdb) under /usr/lib/postgresql",
                &"not found",
            );
            return None;
        };
        let dir = std::env::temp_dir().join(format!("forkless-pg-tls-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a directory for the private PostgreSQL");
        let data = dir.join("data");
        chown_to_server_user(&dir);
        let init = as_server_user(&bin.join("initdb"))
            .args(["-A", "trust", "-U", "postgres", "-D"])
            .arg(&data)
            .stdout(Stdio::null())
            .status()
            .expect("run initdb");
        assert!(init.success(), "initdb failed");
        let ca = TestCa::new(&dir);
        let (cert, key) = ca.server(&["localhost"], "server");
        let client = ca.client("postgres", "client");
        write(
            &data.join("pg_hba.conf"),
            &format!(
                "local all all trust\n\
                 hostssl {CLIENT_CERT_DB} all 127.0.0.1/32 cert\n\
                 hostssl all all 127.0.0.1/32 trust\n\
                 hostnossl all all 127.0.0.1/32 reject\n"
            ),
        );
        chown_to_server_user(&dir);
        for private in [&key, &client.1] {
            Command::new("chmod").arg("600").arg(private).status().expect("chmod");
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let server = format!(
            "{postgres} -D {data} -p {port} -c ssl=on -c ssl_cert_file={cert} -c ssl_key_file={key} \
             -c ssl_ca_file={ca} -c listen_addresses=127.0.0.1 -c unix_socket_directories={dir} \
             -c fsync=off -c max_connections=300 >{dir}/log 2>&1 & pg=$!; \
             while [ -e /proc/{me} ]; do sleep 1; done; kill $pg; wait $pg; rm -rf {dir}",
            postgres = bin.join("postgres").display(),
            data = data.display(),
            cert = cert.display(),
            key = key.display(),
            ca = ca.ca_file.display(),
            dir = dir.display(),
            me = std::process::id(),
        );
        let mut command = if is_root() {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--", "sh"]);
            c
        } else {
            Command::new("sh")
        };
        let watchdog = command
            .args(["-c", &server])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start postgres");
        let deadline = Instant::now() + GUARD;
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
        let created = as_server_user(&bin.join("createdb"))
            .args(["-h"])
            .arg(&dir)
            .args(["-p", &port.to_string(), "-U", "postgres", CLIENT_CERT_DB])
            .status()
            .expect("run createdb");
        assert!(created.success(), "createdb {CLIENT_CERT_DB} failed");
        Some(Self { port, ca, client, _watchdog: watchdog })
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The CA that signed its certificate (and the client certificate).
    pub fn ca_file(&self) -> &Path {
        &self.ca.ca_file
    }

    /// A client certificate and key for the user `postgres`, signed by its CA.
    pub fn client_cert(&self) -> &(PathBuf, PathBuf) {
        &self.client
    }

    /// A URL to `db` on it, reached as `host`, with these query parameters.
    pub fn url(&self, host: &str, db: &str, query: &str) -> String {
        format!("postgres://postgres@{host}:{}/{db}?{query}", self.port)
    }

    /// `sslmode=verify-full` trusting its CA.
    pub fn verify_full(&self) -> String {
        format!("sslmode=verify-full&sslrootcert={}", self.ca_file().display())
    }

    /// A new, empty database on it.
    pub async fn fresh(&self) -> PrivateDb {
        static N: AtomicU32 = AtomicU32::new(0);
        let name = format!("tls_{}", N.fetch_add(1, Ordering::Relaxed));
        let (admin, tls) =
            crate::tls::connector_for(&self.url("localhost", "postgres", &self.verify_full())).expect("TLS");
        let (client, conn) = tokio_postgres::connect(&admin, tls).await.expect("admin connection over TLS");
        tokio::spawn(conn);
        client.batch_execute(&format!("CREATE DATABASE {name}")).await.expect("create a database");
        PrivateDb { url: self.url("localhost", &name, &self.verify_full()), name }
    }
}
