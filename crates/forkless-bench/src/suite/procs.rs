//! The server processes under test: how each is started (its [`ServerSpec`]), started fresh
//! and pinned, its address read from its start-up line, and stopped with its peak memory and
//! its data files removed. It owns the processes, not what loads they face.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;

use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, Command};

use super::Options;
use crate::Error;
use crate::load::{Endpoint, Probe};
use crate::procstat;
use crate::servers::STARTUP_TIMEOUT;

/// One server under test: a name and how to start it.
#[derive(Clone, Debug)]
pub struct ServerSpec {
    /// e.g. `forkless/memory/sse`.
    pub name: String,
    /// The program.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// Whether it answers requests over SSE.
    pub sse: bool,
    /// A data file to remove after the run.
    pub data: Option<PathBuf>,
}

pub(super) struct Running {
    child: Child,
    pid: u32,
    pub(super) endpoint: Endpoint,
    data: Option<PathBuf>,
}

impl Running {
    pub(super) fn probe(&self) -> Probe {
        let pid = self.pid;
        Arc::new(move || procstat::sample(pid))
    }

    pub(super) async fn stop(mut self) -> Option<u64> {
        let peak = procstat::sample(self.pid).map(|s| s.hwm_kib);
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
        if let Some(data) = &self.data {
            remove_store_files(data);
        }
        peak
    }
}

/// Remove a durable store's data file and its write-ahead log (the store refuses to start on
/// a log whose data file is gone, so neither may outlive the other).
fn remove_store_files(data: &Path) {
    let _ = std::fs::remove_file(data);
    let mut wal = data.as_os_str().to_owned();
    wal.push(".wal");
    let _ = std::fs::remove_file(PathBuf::from(wal));
}

pub(super) async fn start(spec: &ServerSpec, pin: bool) -> Result<Running, Error> {
    let mut cmd = if pin {
        let mut c = Command::new("taskset");
        c.arg("-c").arg("0").arg(&spec.program);
        c
    } else {
        Command::new(&spec.program)
    };
    cmd.args(&spec.args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::null()).kill_on_drop(true);
    if let Some(data) = &spec.data {
        remove_store_files(data);
    }
    let mut child = cmd.spawn().map_err(|e| Error::Server(format!("{}: {e}", spec.program.display())))?;
    let pid = child.id().ok_or_else(|| Error::Server(format!("{} exited at once", spec.name)))?;
    let stdout = child.stdout.take().ok_or_else(|| Error::Server("no stdout".into()))?;
    let mut lines = BufReader::new(stdout).lines();
    let endpoint = tokio::time::timeout(STARTUP_TIMEOUT, async {
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(url) = line.split_whitespace().find(|w| w.starts_with("http://"))
                && let Some(ep) = Endpoint::from_url(url)
            {
                return Some(ep);
            }
        }
        None
    })
    .await
    .ok()
    .flatten()
    .ok_or_else(|| Error::Server(format!("{} did not announce its address", spec.name)))?;
    // Keep reading stdout so the server never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok(Running { child, pid, endpoint, data: spec.data.clone() })
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|&x| x.to_owned()).collect()
}

impl Options {
    pub(super) fn bench(&self, name: &str, args: &[&str], sse: bool) -> ServerSpec {
        let mut a = s(&["serve", "--listen", "127.0.0.1:0"]);
        a.extend(s(args));
        ServerSpec { name: name.into(), program: self.exe.clone(), args: a, sse, data: None }
    }

    pub(super) fn forkless_redb(&self, durability: &str) -> ServerSpec {
        let path = self.scratch.join(format!("bench-{durability}.redb"));
        let store = format!("redb:{}", path.display());
        let mut spec = self.bench(
            &format!("forkless/redb-{durability}/sse"),
            &["--target", "forkless", "--answer", "sse", "--store", &store, "--durability", durability],
            true,
        );
        spec.data = Some(path);
        spec
    }

    pub(super) fn rmcp(&self, mode: &str, sse: bool) -> Option<ServerSpec> {
        let program = self.rmcp.clone()?;
        Some(ServerSpec {
            name: format!("rmcp/{mode}/{}", if sse { "sse" } else { "json" }),
            program,
            args: s(&["--listen", "127.0.0.1:0", "--mode", mode]),
            sse,
            data: None,
        })
    }

    pub(super) fn peer(&self, which: &str, json: bool) -> Option<ServerSpec> {
        let root = self.peers.as_ref()?;
        let (program, script) = match which {
            "ts" => (root.join(".peers/node22/bin/node"), root.join("tests/interop/ts/reference_server.mjs")),
            _ => (root.join(".peers/py/bin/python"), root.join("tests/interop/python/reference_server.py")),
        };
        if !program.exists() || !script.exists() {
            return None;
        }
        let mut args = vec![script.display().to_string(), "--port".into(), "0".into()];
        if json {
            args.push("--json-response".into());
        }
        Some(ServerSpec {
            name: format!("{which}-sdk-v1/{}", if json { "json" } else { "sse" }),
            program,
            args,
            sse: !json,
            data: None,
        })
    }
}
