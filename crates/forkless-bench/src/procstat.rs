//! Per-process CPU time and memory, read from `/proc/<pid>/stat` and `/proc/<pid>/status`.
//!
//! This module owns only reading those two files; what a figure means (CPU per request,
//! bytes per session) is [`crate::suite`]'s business. On a system without `/proc` every
//! sample is `None` and the harness reports no CPU or memory figures.

use std::sync::OnceLock;

/// One reading of a process.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProcSample {
    /// utime + stime, in clock ticks.
    pub cpu_ticks: u64,
    /// Resident memory now (VmRSS), KiB.
    pub rss_kib: u64,
    /// Peak resident memory so far (VmHWM), KiB.
    pub hwm_kib: u64,
}

impl ProcSample {
    /// CPU seconds between `self` (earlier) and `later`.
    pub fn cpu_seconds_until(&self, later: &Self) -> f64 {
        later.cpu_ticks.saturating_sub(self.cpu_ticks) as f64 / clock_ticks() as f64
    }
}

/// Read `pid`'s CPU time and memory; `None` if the process is gone or `/proc` is missing.
pub fn sample(pid: u32) -> Option<ProcSample> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may contain spaces and parentheses: fields after it follow
    // the last ')'. utime and stime are fields 14 and 15, i.e. 12th and 13th after it.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    Some(ProcSample { cpu_ticks: utime + stime, rss_kib: kib("VmRSS:"), hwm_kib: kib("VmHWM:") })
}

/// Clock ticks per second (`getconf CLK_TCK`; 100, the Linux default, if that fails).
pub fn clock_ticks() -> u64 {
    static TICKS: OnceLock<u64> = OnceLock::new();
    *TICKS.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .filter(|&t: &u64| t > 0)
            .unwrap_or(100)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process() {
        let me = sample(std::process::id()).expect("/proc is available on the bench machines");
        assert!(me.rss_kib > 0 && me.hwm_kib >= me.rss_kib);
    }
}
