//! Tests that need something this machine may lack (a database, a peer SDK, a program): under
//! CI they fail; elsewhere they skip, say why, and are counted by the suite's summary line
//! (`scripts/test.sh`). It owns that rule for every crate's tests, not the probes themselves.

use std::io::Write as _;

/// Whether this run is CI: `CI` set to `true`, `1` or `yes` (in any case).
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| matches!(v.to_ascii_lowercase().as_str(), "true" | "1" | "yes"))
}

/// The calling test cannot run for want of `what` (say, "no PostgreSQL at postgres://…", the
/// same words for every test it stops, so the summary can group them): panics under CI (`why`
/// says what failed); otherwise prints it and appends `what` as one line to the file
/// `FORKLESS_SKIPPED` names, which `scripts/test.sh` counts. The caller then returns.
pub fn skip(what: &str, why: &dyn std::fmt::Display) {
    assert!(!in_ci(), "CI is set and the test cannot run: {what} ({why})");
    eprintln!("skipped: {what} ({why})");
    if let Some(path) = std::env::var_os("FORKLESS_SKIPPED") {
        // One short write per line, appended: tests in parallel never interleave within one.
        let line = format!("{}\n", what.replace('\n', " "));
        if let Ok(mut file) = std::fs::OpenOptions::new().append(true).create(true).open(path) {
            let _ = file.write_all(line.as_bytes());
        }
    }
}
