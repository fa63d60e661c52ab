//! The counter example's setup as a user runs it (`examples/counter`, on the durable default
//! store), as a real process that a shell command kills with SIGKILL and starts again on the same
//! address and data: every `forkless check` scenario passes, the crash-restart one included
//! (a resume after the restart continues or ends with the lost call's answer, and every id
//! the client saw still names the same bytes).

#[path = "../examples/counter/service.rs"]
mod service;
#[allow(dead_code)]
#[path = "../examples/counter/setup.rs"]
mod setup;

use std::path::PathBuf;
use std::time::Duration;

use forkless::check::{CheckArgs, Verdict, probe};

/// Set in the process the restart script starts: `LISTEN DATA_DIR`.
const SERVE: &str = "FORKLESS_RMCP_EXAMPLE_SERVE";

/// Not a check: the example's process. This test binary, run with [`SERVE`] set and this
/// test's name, serves the example's setup (`examples/counter/setup.rs`, the lines its
/// `main` runs) until it is killed; without [`SERVE`] it does nothing. (`cargo test
/// --all-targets` builds the example itself as a test harness, not as the program.)
#[test]
fn example_process() {
    let Ok(spec) = std::env::var(SERVE) else { return };
    let (listen, dir) = spec.split_once(' ').expect("LISTEN DATA_DIR");
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    runtime
        .block_on(setup::run(
            listen,
            setup::Keep::Durable(std::path::Path::new(dir)),
            forkless_server::Restorable::No,
            std::future::pending(),
        ))
        .expect("the example serves");
}

/// A fresh directory for the example's data, its restart script and its output.
fn fresh_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("forkless-rmcp-example-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create the test directory");
    dir
}

/// Kills the example the script last started; then, unless the test failed (its output is
/// worth reading then), removes the test's directory.
struct Running(PathBuf);

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(pid) = std::fs::read_to_string(self.0.join("pid")) {
            let _ = std::process::Command::new("kill").args(["-9", pid.trim()]).status();
        }
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// Shell, after `kill -9 "$old"`: wait until that process is gone (or a zombie, whose files
/// and sockets are closed), at most 10 s, so the restarted server never races the killed one
/// for its port and its data files.
const WAIT_GONE: &str = "for _ in $(seq 1000); do if [ ! -e /proc/$old ] || grep -q ') Z' /proc/$old/stat 2>/dev/null; then break; fi; sleep 0.01; done";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_passes_every_check_scenario_across_a_kill_and_restart() {
    let (bin, dir) = (std::env::current_exe().expect("this test binary"), fresh_dir());
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let script = dir.join("restart.sh");
    std::fs::write(
        &script,
        format!(
            "#!/usr/bin/env bash\n# kill -9 the running example (if any), then start it again on the same address and data.\n\
             set -u\ncd \"{dir}\"\nif [ -f pid ]; then old=\"$(cat pid)\"; kill -9 \"$old\" 2>/dev/null || true; {WAIT_GONE}; fi\n\
             {SERVE}=\"127.0.0.1:{port} {dir}/data\" \"{bin}\" --exact example_process --nocapture >>out 2>>err </dev/null &\n\
             echo $! > pid\n",
            dir = dir.display(),
            bin = bin.display(),
        ),
    )
    .unwrap();
    let _running = Running(dir.clone());
    let command = format!("bash {}", script.display());
    assert!(std::process::Command::new("bash").arg(&script).status().unwrap().success());
    let up = async {
        while !std::fs::read_to_string(dir.join("out")).is_ok_and(|s| s.contains("listening on")) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(15), up).await.expect("the example starts");

    let url = format!("http://127.0.0.1:{port}/mcp");
    let args = CheckArgs { progress: true, json: true, restart_cmd: Some(command), ..CheckArgs::new(url) };
    let report = probe(&args).await.expect("the example can be probed");
    let verdicts: Vec<_> = report.scenarios.iter().map(|s| (s.name, s.verdict)).collect();
    let failed: Vec<_> = report
        .scenarios
        .iter()
        .filter(|s| s.verdict != Verdict::Pass)
        .map(|s| (s.name, &s.evidence))
        .collect();
    let err = std::fs::read_to_string(dir.join("err")).unwrap_or_default();
    assert_eq!(
        (report.passed, report.failed),
        (11, 0),
        "{verdicts:?}; evidence of the others: {failed:#?}; the example's stderr: {err}"
    );
}
