//! Processes as the tests see them: a process's children and whether one runs (from
//! `/proc`), and `forkless` run to its end under a guard.

use std::process::Stdio;

use tokio::process::Command;

use super::guard;

/// Run `forkless <args>` (with `RUST_LOG=off` unless `env` says otherwise) to its end, its
/// output captured; one that does not end within [`GUARD`] (a start that should have been
/// refused) is killed and fails the test rather than hanging it.
pub async fn forkless_output(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let run = Command::new(env!("CARGO_BIN_EXE_forkless"))
        .args(args)
        .env("RUST_LOG", "off")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    guard(&format!("forkless {args:?} to end"), run).await.expect("run forkless")
}

/// The children of process `pid`, from `/proc/<pid>/task/*/children`.
pub fn children_of(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return Vec::new() };
    let mut out = Vec::new();
    for task in tasks.flatten() {
        if let Ok(text) = std::fs::read_to_string(task.path().join("children")) {
            out.extend(text.split_whitespace().filter_map(|p| p.parse::<u32>().ok()));
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// Whether process `pid` exists and is not a zombie.
pub fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| stat.rsplit_once(") ").map(|(_, rest)| !rest.starts_with('Z')))
        .unwrap_or(false)
}
