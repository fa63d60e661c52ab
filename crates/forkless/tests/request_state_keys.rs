//! `forkless serve --request-state-keys`: the key ring every node reads to seal and open
//! `requestState` (2026-07-28 multi-round-trip requests).

mod support;

use support::Serve;

/// `--request-state-keys`: a missing file and a bad line are refused (exit 2) naming the file
/// and what is wrong; a good ring starts the server.
#[tokio::test]
async fn a_request_state_key_ring_is_read_and_a_bad_one_named() {
    let dir = std::env::temp_dir().join(format!("forkless-keys-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let (bad, good) = (dir.join("bad"), dir.join("good"));
    std::fs::write(&bad, "# a ring\nk1:0011\n").expect("write");
    std::fs::write(&good, format!("k1:{}\n", "ab".repeat(32))).expect("write");
    let bin = env!("CARGO_BIN_EXE_forkless");
    let missing = dir.join("missing");
    for (file, says) in [(&missing, "No such file"), (&bad, "line 2")] {
        let args = [
            "serve",
            "--store",
            "memory",
            "--revisions",
            "all",
            "--listen",
            "127.0.0.1:0",
            "--request-state-keys",
        ];
        let out = std::process::Command::new(bin)
            .args(args)
            .arg(file)
            .env("RUST_LOG", "off")
            .output()
            .expect("run");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains("--request-state-keys") && stderr.contains(says), "{stderr}");
    }
    let path = good.to_string_lossy().into_owned();
    let serve =
        Serve::start(&["--store", "memory", "--revisions", "all", "--request-state-keys", &path]).await;
    let health = reqwest::get(serve.url.replace("/mcp", "/healthz")).await.expect("healthz");
    assert!(health.status().is_success());
    let _ = std::fs::remove_dir_all(&dir);
}
