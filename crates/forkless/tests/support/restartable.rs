//! A `forkless` process a shell command can `kill -9` and start again on the same address and
//! data: what `forkless check --restart-cmd` needs.

/// Shell, after `kill -9 "$old"`: wait until that process is gone (or a zombie, whose files
/// and sockets are closed), at most 10 s, so the restarted server never races the killed one
/// for its port and its data files.
const WAIT_GONE: &str = "for _ in $(seq 1000); do if [ ! -e /proc/$old ] || grep -q ') Z' /proc/$old/stat 2>/dev/null; then break; fi; sleep 0.01; done";

/// A `forkless serve` on the durable default that a shell command can `kill -9` and start
/// again on the same address and data: what `--restart-cmd` needs. Dropping it kills the
/// server the command last started.
pub struct Restartable {
    dir: std::path::PathBuf,
    pub url: String,
    pub command: String,
}

impl Restartable {
    pub async fn start(durability: &str) -> Self {
        let dir = super::fresh_data_dir();
        Self::start_on(
            dir.clone(),
            &format!("--data-dir \"{}/data\" --durability {durability}", dir.display()),
        )
        .await
    }

    /// Started with these store flags (a shell fragment).
    pub async fn start_on(dir: std::path::PathBuf, store: &str) -> Self {
        Self::start_as(dir, "serve", &format!("--revisions all {store}")).await
    }

    /// `forkless SUBCOMMAND --listen … FLAGS` (FLAGS a shell fragment), restartable the same
    /// way: for example a gateway on its durable store.
    pub async fn start_as(dir: std::path::PathBuf, subcommand: &str, flags: &str) -> Self {
        let port =
            std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
        let script = dir.join("restart.sh");
        std::fs::write(
            &script,
            format!(
                r#"#!/usr/bin/env bash
# kill -9 the running process (if any), then start it again on the same address and data.
set -u
cd "{dir}"
if [ -f pid ]; then
  old="$(cat pid)"
  kill -9 "$old" 2>/dev/null || true
  {WAIT_GONE}
fi
RUST_LOG=warn "{bin}" {subcommand} --listen 127.0.0.1:{port} {flags} >>out 2>>err </dev/null &
echo $! > pid
"#,
                dir = dir.display(),
                bin = env!("CARGO_BIN_EXE_forkless"),
            ),
        )
        .expect("write restart script");
        let command = format!("bash {}", script.display());
        let status = std::process::Command::new("bash").arg(&script).status().expect("run restart script");
        assert!(status.success());
        let this = Self { dir, url: format!("http://127.0.0.1:{port}/mcp"), command };
        this.wait_until_up().await;
        this
    }

    pub async fn wait_until_up(&self) {
        let out = self.dir.join("out");
        super::guard("server start-up line", async {
            while !std::fs::read_to_string(&out).is_ok_and(|s| s.contains("listening on")) {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        })
        .await;
    }
}

impl Drop for Restartable {
    fn drop(&mut self) {
        if let Ok(pid) = std::fs::read_to_string(self.dir.join("pid")) {
            let _ = std::process::Command::new("kill").args(["-9", pid.trim()]).status();
        }
    }
}
