//! For tests (feature `testing`): a `redis-server` of a test's own, for what the machine's
//! shared Redis cannot do (persistence settings, a crash and a restart, every client killed).
//! Without `redis-server` the test fails when `CI=true` and is skipped (with a note) otherwise.

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
}

impl PrivateRedis {
    /// Started with `flags`, or `None` (skip) when there is no `redis-server` and this is not CI.
    pub fn start(flags: &[&str]) -> Option<Self> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free local port for a private redis-server")
            .port();
        let dir = std::env::temp_dir().join(format!("forkless-redis-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a directory for redis");
        let mut this =
            Self { child: None, port, dir, flags: flags.iter().map(|f| (*f).to_owned()).collect() };
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
