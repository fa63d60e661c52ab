//! Test support: run `forkless serve` as a real process and talk MCP to it over HTTP.
//!
//! - [`Serve`] spawns the binary on `127.0.0.1:0`, reads the bound address from its start-up
//!   line, and can send it SIGTERM. Dropping it kills a process still running.
//! - [`Session`] is a minimal MCP client: initialize, requests over POST (SSE or JSON
//!   answers), the standalone GET stream (in `session.rs`).
//! - [`SseReader`] parses an SSE body into events, keeping `id:` and `retry:` (in `sse.rs`).
//!
//! Timeouts here are failure guards only; nothing waits for time to pass. The servers log
//! at `warn`; `FORKLESS_TEST_LOG` (a `RUST_LOG` filter) says otherwise when a test is debugged.

#![allow(dead_code, unreachable_pub)] // each test binary uses a different part of this module

pub mod authorization;
pub mod current;
pub mod gateway;
pub mod haproxy;
pub mod host;
mod peers;
mod procs;
pub mod relay;
pub mod restartable;
mod session;
pub mod shared;
mod sse;
pub mod view;

// Each test binary uses some of these.
#[allow(unused_imports)]
pub use session::{Answer, Session, log_data};
#[allow(unused_imports)]
pub use sse::{SseEvent, SseReader};

// Each test binary uses some of these.
#[allow(unused_imports)]
pub use peers::{peer, peer_passes, peer_passes_with, reference, root};
#[allow(unused_imports)]
pub use procs::{children_of, forkless_output, running};

use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};

/// How long any single step may take before the test fails.
pub const GUARD: Duration = Duration::from_secs(15);

/// The protocol revision the tests speak.
pub const REVISION: &str = "2025-11-25";

/// Await `fut`, failing the test if it takes longer than [`GUARD`].
pub async fn guard<T>(what: &str, fut: impl Future<Output = T>) -> T {
    match tokio::time::timeout(GUARD, fut).await {
        Ok(v) => v,
        Err(_) => panic!("timed out after {GUARD:?}: {what}"),
    }
}

/// Run `forkless <args>` to its end (failing after six guards); its exit code and stdout.
pub async fn forkless(args: &[&str]) -> (Option<i32>, String) {
    forkless_within(args, GUARD * 6).await
}

/// [`forkless`] for a run that lasts `planned` by design (a timed chaos run): it fails only
/// after `planned` and six guards more.
pub async fn forkless_for(args: &[&str], planned: Duration) -> (Option<i32>, String) {
    forkless_within(args, planned + GUARD * 6).await
}

async fn forkless_within(args: &[&str], limit: Duration) -> (Option<i32>, String) {
    let out = tokio::time::timeout(
        limit,
        Command::new(env!("CARGO_BIN_EXE_forkless"))
            .args(args)
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .output(),
    )
    .await
    .unwrap_or_else(|_| panic!("forkless {args:?} did not finish"))
    .expect("run forkless");
    (out.status.code(), String::from_utf8(out.stdout).expect("utf-8 output"))
}

/// A running `forkless serve` process.
pub struct Serve {
    child: Child,
    stdout: Lines<BufReader<ChildStdout>>,
    /// The MCP endpoint, e.g. `http://127.0.0.1:41234/mcp`.
    pub url: String,
    /// The start-up line as printed.
    pub banner: String,
}

impl Serve {
    /// Start `forkless serve --listen 127.0.0.1:0 <extra>` and wait for its start-up line.
    /// Unless `extra` picks a store, the default durable store runs in a fresh temporary
    /// data directory, so tests never share a data file.
    pub async fn start(extra: &[&str]) -> Self {
        Self::start_at("127.0.0.1:0", extra).await
    }

    /// Like [`Self::start`], listening on `listen` (to restart on the same address).
    pub async fn start_at(listen: &str, extra: &[&str]) -> Self {
        Self::start_with_env(listen, extra, &[]).await
    }

    /// Like [`Self::start_at`], with extra environment variables for the process.
    pub async fn start_with_env(listen: &str, extra: &[&str], env: &[(&str, &str)]) -> Self {
        let mut command = Command::new(env!("CARGO_BIN_EXE_forkless"));
        command.arg("serve").args(["--listen", listen]).args(extra);
        Self::spawn(command, extra, env).await
    }

    /// `forkless gateway --listen 127.0.0.1:0 <extra> -- <child>`, up to its start-up line.
    pub async fn gateway(extra: &[&str], child: &[String]) -> Self {
        Self::gateway_at("127.0.0.1:0", extra, child).await
    }

    /// Like [`Self::gateway`], listening on `listen` (to restart on the same address).
    pub async fn gateway_at(listen: &str, extra: &[&str], child: &[String]) -> Self {
        let mut command = Command::new(env!("CARGO_BIN_EXE_forkless"));
        command.arg("gateway").args(["--listen", listen]).args(extra).arg("--").args(child);
        Self::spawn(command, extra, &[]).await
    }

    /// `forkless gateway --listen 127.0.0.1:0 --upstream URL <extra>`, up to its start-up line.
    pub async fn gateway_upstream(upstream: &str, extra: &[&str]) -> Self {
        Self::gateway_upstream_at("127.0.0.1:0", upstream, extra).await
    }

    /// Like [`Self::gateway_upstream`], listening on `listen`.
    pub async fn gateway_upstream_at(listen: &str, upstream: &str, extra: &[&str]) -> Self {
        let mut command = Command::new(env!("CARGO_BIN_EXE_forkless"));
        command.arg("gateway").args(["--listen", listen, "--upstream", upstream]).args(extra);
        Self::spawn(command, extra, &[]).await
    }

    /// Like [`Self::gateway_upstream`], with `env` set (test hooks).
    pub async fn gateway_upstream_env(upstream: &str, extra: &[&str], env: &[(&str, &str)]) -> Self {
        let mut command = Command::new(env!("CARGO_BIN_EXE_forkless"));
        command.arg("gateway").args(["--listen", "127.0.0.1:0", "--upstream", upstream]).args(extra);
        Self::spawn(command, extra, env).await
    }

    /// The process ids of its children now (from `/proc`).
    pub fn children(&self) -> Vec<u32> {
        children_of(self.child.id().expect("process still running"))
    }

    /// Like [`Self::start`], in a process whose open-file limit (soft and hard) is `nofile`.
    pub async fn start_with_file_limit(nofile: u64, extra: &[&str]) -> Self {
        let mut command = Command::new("sh");
        command
            .args([
                "-c",
                &format!("ulimit -n {nofile} && exec \"$0\" \"$@\""),
                env!("CARGO_BIN_EXE_forkless"),
            ])
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(extra);
        Self::spawn(command, extra, &[]).await
    }

    async fn spawn(mut command: Command, extra: &[&str], env: &[(&str, &str)]) -> Self {
        command.envs(env.iter().copied());
        if !extra.iter().any(|a| *a == "--store" || *a == "--data-dir") {
            // Before a gateway's `--`, which is last.
            let args: Vec<_> = command.as_std().get_args().map(ToOwned::to_owned).collect();
            let split = args.iter().position(|a| a == "--").unwrap_or(args.len());
            let mut fresh = Command::new(command.as_std().get_program());
            fresh.args(&args[..split]).arg("--data-dir").arg(fresh_data_dir()).args(&args[split..]);
            command = fresh;
        }
        let mut child = command
            .env("RUST_LOG", std::env::var("FORKLESS_TEST_LOG").unwrap_or_else(|_| "warn".into()))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn forkless serve");
        let mut stdout = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
        let banner = guard("start-up line", stdout.next_line())
            .await
            .expect("read stdout")
            .expect("forkless serve exited before printing its start-up line");
        let url = banner
            .strip_prefix("forkless serve: listening on ")
            .or_else(|| banner.strip_prefix("forkless gateway: listening on "))
            .and_then(|rest| rest.split(' ').next())
            .unwrap_or_else(|| panic!("unexpected start-up line: {banner}"))
            .to_owned();
        Self { child, stdout, url, banner }
    }

    /// The `host:port` the server listens on.
    pub fn addr(&self) -> String {
        self.url.trim_start_matches("http://").split('/').next().unwrap_or_default().to_owned()
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id().expect("process still running")
    }

    /// Send SIGTERM.
    pub fn terminate(&self) {
        self.signal("TERM");
    }

    /// Send a signal by name (`TERM`, `INT`, ...).
    pub fn signal(&self, name: &str) {
        let pid = self.child.id().expect("process still running");
        let status = std::process::Command::new("kill")
            .args([&format!("-{name}"), &pid.to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{name} {pid} failed");
    }

    /// Wait for the process to exit; returns its status and the rest of its stdout.
    pub async fn wait(mut self) -> (ExitStatus, Vec<String>) {
        let mut rest = Vec::new();
        while let Some(line) = guard("stdout", self.stdout.next_line()).await.expect("read stdout") {
            rest.push(line);
        }
        let status = guard("process exit", self.child.wait()).await.expect("wait for child");
        (status, rest)
    }
}

/// A new, empty directory under the system temp dir, unique to this process and call.
pub fn fresh_data_dir() -> std::path::PathBuf {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    static SWEPT: std::sync::Once = std::sync::Once::new();
    SWEPT.call_once(sweep_dead_data_dirs);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("forkless-test-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create data dir");
    dir
}

/// Remove the data directories of test processes that are gone (`forkless-test-<pid>-<n>`
/// whose pid is not alive): a test keeps its directories while it runs (its servers may be
/// killed and restarted on them), and nothing else would remove them, so a machine that
/// runs the suite again and again (CI) would gather about 370 MB a run. A live process's
/// are never touched, whoever it is.
fn sweep_dead_data_dirs() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let pid = name
            .to_str()
            .and_then(|n| n.strip_prefix("forkless-test-"))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok());
        let Some(pid) = pid else { continue };
        if pid != std::process::id() && !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// A free `127.0.0.1:PORT` to listen on (for a node that must name its address before it
/// starts, as `--advertise` does).
pub fn free_addr() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("local address").to_string()
}

/// `/metrics` of the node serving `url`.
pub async fn metrics(url: &str) -> String {
    let url = url.replace("/mcp", "/metrics");
    guard("GET /metrics", async { reqwest::get(url).await.unwrap().text().await.unwrap() }).await
}

/// The value of the counter line `name` in a `/metrics` text (0 if absent).
pub fn counter(metrics: &str, name: &str) -> u64 {
    metrics.lines().find_map(|l| l.strip_prefix(name).and_then(|v| v.trim().parse().ok())).unwrap_or(0)
}

/// The test issuers' signing key (Ed25519) and its public half.
const ED25519_KEY: &str = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIADk8JAut6UlYHtTzERAm92OfFLaO4wqsGN4P4gKoewV\n-----END PRIVATE KEY-----\n";
const ED25519_X: &str = "jTvnchwpVTeRAyQJl5YyuQUQ55iEI7F3Mao9I4dhbq4";

/// A JWKS file with the test issuers' key (`kid` `k1`).
pub fn jwks_file() -> std::path::PathBuf {
    let dir = fresh_data_dir();
    let jwks = dir.join("jwks.json");
    let doc = serde_json::json!({ "keys": [{ "kty": "OKP", "crv": "Ed25519", "x": ED25519_X, "kid": "k1", "alg": "EdDSA" }] });
    std::fs::write(&jwks, doc.to_string()).expect("write the JWKS");
    jwks
}

/// `claims` as a JWT signed with the test issuers' key.
pub fn sign(claims: &Value) -> String {
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::EdDSA);
    header.kid = Some("k1".into());
    let key = jsonwebtoken::EncodingKey::from_ed_pem(ED25519_KEY.as_bytes()).expect("the test key");
    jsonwebtoken::encode(&header, claims, &key).expect("sign")
}

/// `forkless serve` requiring OAuth tokens (a JWKS file, an Ed25519 key), and a token for
/// `alice` signed with it: the arguments and the token.
pub fn oauth_setup() -> (Vec<String>, String) {
    let jwks = jwks_file();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let claims = serde_json::json!({ "iss": "https://issuer.test", "aud": "https://mcp.test/mcp", "sub": "alice", "exp": now + 3600 });
    let token = sign(&claims);
    let args = [
        "--store",
        "memory",
        "--auth-issuer",
        "https://issuer.test",
        "--auth-audience",
        "https://mcp.test/mcp",
        "--auth-jwks",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .chain([jwks.display().to_string()])
    .collect();
    (args, token)
}
