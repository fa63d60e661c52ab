//! For tests (feature `testing`): a `redis-server` of a test's own, for what the machine's
//! shared Redis cannot do (persistence settings, a crash and a restart, every client killed,
//! TLS). Without `redis-server` the test fails when `CI=true` and is skipped (with a note)
//! otherwise.
//!
//! With TLS ([`PrivateRedis::start_tls`]) it listens on a TLS port too, with a certificate
//! from a CA the test makes; its plaintext port stays for the
//! test's own administration (readiness, forming a cluster), never for a store.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A failure guard: a server that does not start fails the test instead of hanging it.
const GUARD: Duration = Duration::from_secs(20);

/// A `redis-server` of a test's own, on a free port, its files in a directory of its own;
/// killed and its files removed when dropped.
#[derive(Debug)]
pub struct PrivateRedis {
    child: Option<Child>,
    port: u16,
    dir: PathBuf,
    flags: Vec<String>,
    tls: Option<Tls>,
}

/// A TLS port and the files behind it.
#[derive(Debug)]
struct Tls {
    port: u16,
    ca_file: PathBuf,
}

/// Whether a TLS Redis asks its clients for a certificate (`tls-auth-clients`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientCerts {
    /// It does not.
    No,
    /// It refuses a client without one its CA signed.
    Required,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free local port for a private redis-server")
        .port()
}

impl PrivateRedis {
    /// Started with `flags`, or `None` (skip) when there is no `redis-server` and this is not CI.
    pub fn start(flags: &[&str]) -> Option<Self> {
        let port = free_port();
        let dir = Self::dir(port);
        Self::spawned(port, dir, flags.iter().map(|f| (*f).to_owned()).collect(), None)
    }

    /// Started with `flags` and a TLS port whose certificate for `names` `ca` signs (written
    /// beside `ca`'s own), asking clients for certificates or not.
    pub fn start_tls(
        flags: &[&str],
        ca: &forkless_tls::testing::TestCa,
        names: &[&str],
        clients: ClientCerts,
    ) -> Option<Self> {
        let port = free_port();
        let tls_port = free_port();
        let dir = Self::dir(port);
        let (cert, key) = ca.server(names, &format!("redis-{port}"));
        let mut all: Vec<String> = flags.iter().map(|f| (*f).to_owned()).collect();
        let auth = match clients {
            ClientCerts::No => "no",
            ClientCerts::Required => "yes",
        };
        for (flag, value) in [
            ("--tls-port", tls_port.to_string()),
            ("--tls-cert-file", cert.display().to_string()),
            ("--tls-key-file", key.display().to_string()),
            ("--tls-ca-cert-file", ca.ca_file.display().to_string()),
            ("--tls-auth-clients", auth.to_owned()),
        ] {
            all.extend([flag.to_owned(), value]);
        }
        let tls = Tls { port: tls_port, ca_file: ca.ca_file.clone() };
        Self::spawned(port, dir, all, Some(tls))
    }

    fn dir(port: u16) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("forkless-redis-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a directory for redis");
        dir
    }

    fn spawned(port: u16, dir: PathBuf, flags: Vec<String>, tls: Option<Tls>) -> Option<Self> {
        let mut this = Self { child: None, port, dir, flags, tls };
        match this.spawn() {
            Ok(()) => Some(this),
            Err(e) => {
                forkless_store::skip::skip("no redis-server to start", &e);
                None
            }
        }
    }

    fn spawn(&mut self) -> std::io::Result<()> {
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1", "--dir"])
            .arg(&self.dir)
            .args(&self.flags)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        self.child = Some(child);
        // Ready once it answers PING (the signal that it loaded its files).
        let deadline = std::time::Instant::now() + GUARD;
        loop {
            if let Ok(mut conn) = redis::Client::open(self.url()).and_then(|c| c.get_connection())
                && redis::cmd("PING").query::<String>(&mut conn).is_ok()
            {
                return Ok(());
            }
            assert!(std::time::Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Its `redis://` URL.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Its TLS port, if started with TLS.
    pub fn tls_port(&self) -> Option<u16> {
        self.tls.as_ref().map(|t| t.port)
    }

    /// Its `rediss://` URL naming `host`, if started with TLS.
    pub fn tls_url(&self, host: &str) -> Option<String> {
        self.tls.as_ref().map(|t| format!("rediss://{host}:{}", t.port))
    }

    /// The CA that signed its certificate, if started with TLS.
    pub fn ca_file(&self) -> Option<&std::path::Path> {
        self.tls.as_ref().map(|t| t.ca_file.as_path())
    }

    /// Run one command (`args[0]` and its arguments) on a connection of its own; its reply.
    pub fn command(&self, args: &[&str]) -> redis::Value {
        let mut conn = redis::Client::open(self.url()).expect("redis URL").get_connection().expect("connect");
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        cmd.query(&mut conn).expect("redis command")
    }

    /// Kill every client of `kind` (`normal`, `pubsub`, ...) but the connection asking; how
    /// many were killed.
    pub fn kill_clients(&self, kind: &str) -> i64 {
        match self.command(&["CLIENT", "KILL", "TYPE", kind, "SKIPME", "yes"]) {
            redis::Value::Int(n) => n,
            other => panic!("CLIENT KILL answered {other:?}"),
        }
    }

    /// SIGKILL.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGKILL, then start again on the same port and files.
    pub fn crash_and_restart(&mut self) {
        self.kill();
        self.spawn().expect("restart redis-server");
    }
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
