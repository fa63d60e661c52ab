//! The official MCP peers the tests run (installed into `.peers/` by
//! `scripts/peers/install.sh`): where they are, and running one of their scripts.

use std::process::Stdio;

use tokio::process::Command;

use super::GUARD;

/// The workspace root.
pub fn root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("workspace root")
}

/// The peer at `rel` (relative to the workspace root), or `None` to skip outside CI; under
/// `CI=true` a missing peer fails the test (CI must install the peers).
pub fn peer(rel: &str) -> Option<std::path::PathBuf> {
    let path = root().join(rel);
    if path.exists() {
        return Some(path);
    }
    forkless_store::skip::skip(
        &format!("no {rel}"),
        &"run scripts/peers/install.sh (CI must install the peers)",
    );
    None
}

/// Run the peer `script` with `program` against `url`; it must end with `PASS`.
pub async fn peer_passes(program: &std::path::Path, script: &str, url: &str, env: &[(&str, &str)]) {
    peer_passes_with(program, script, url, &[], env).await;
}

/// [`peer_passes`], with arguments after the URL.
pub async fn peer_passes_with(
    program: &std::path::Path,
    script: &str,
    url: &str,
    args: &[&str],
    env: &[(&str, &str)],
) {
    let out = tokio::time::timeout(
        GUARD * 8,
        Command::new(program)
            .arg(root().join(script))
            .arg(url)
            .args(args)
            .envs(env.iter().copied())
            .kill_on_drop(true)
            .current_dir(root())
            .stdin(Stdio::null())
            .output(),
    )
    .await
    .unwrap_or_else(|_| panic!("{script} did not finish"))
    .expect("run peer");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.lines().last().is_some_and(|l| l.starts_with("PASS")),
        "{script} against {url} failed ({})\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
}

/// An SDK reference server started on a free port: the process and its URL.
pub async fn reference(program: &std::path::Path, script: &str) -> (tokio::process::Child, String) {
    let mut child = Command::new(program)
        .arg(root().join(script))
        .args(["--port", "0"])
        .current_dir(root())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start the reference server");
    let mut lines =
        tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(child.stdout.take().expect("stdout")));
    let url = loop {
        let line = super::guard("READY", lines.next_line()).await.expect("stdout").expect("a READY line");
        if let Some(url) = line.strip_prefix("READY ") {
            break url.to_owned();
        }
    };
    (child, url)
}
