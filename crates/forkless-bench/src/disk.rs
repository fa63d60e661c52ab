//! How long the disk under the scratch directory takes to make a small write durable: the
//! device's part of every durable store's sync, measured before and after a run so that a
//! run's ratios can be read against it.
//!
//! The durable store's figures depend on it more than on anything in forkless: at 16 clients
//! answered over SSE, a redb sync serves a whole round of requests, so its latency beside the
//! CPU a request costs decides how close redb gets to memory. On the development machine it
//! moved between 120 and 210 µs within a day. The probe writes through the page cache (the
//! write-ahead log writes around it where it can, which saves some CPU, not the device's
//! flush).
//!
//! It owns the probe; reporting it is [`crate::report`]'s and the command's.

use std::os::unix::fs::FileExt as _;
use std::path::Path;
use std::time::Instant;

/// A probe's result: the latency of a 4 KiB write followed by `fdatasync`.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct SyncLatency {
    /// Writes timed.
    pub samples: usize,
    /// Median, in microseconds.
    pub p50_us: f64,
    /// 99th percentile, in microseconds.
    pub p99_us: f64,
}

impl std::fmt::Display for SyncLatency {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "p50 {:.0} µs, p99 {:.0} µs", self.p50_us, self.p99_us)
    }
}

/// The size of each probe write, as one log entry of a small group.
const WRITE: usize = 4096;

/// Time `samples` (at least one) 4 KiB writes, each followed by `fdatasync`, at successive
/// offsets of a file in `dir` whose blocks are allocated and synced first (as the
/// write-ahead log's are, so no sync has file metadata to write). The file is removed after.
pub fn sync_latency(dir: &Path, samples: usize) -> std::io::Result<SyncLatency> {
    let samples = samples.max(1);
    let path = dir.join("sync-probe");
    let file = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path)?;
    let result = (|| {
        let block = vec![0x5a_u8; WRITE];
        for i in 0..samples {
            file.write_all_at(&block, (i * WRITE) as u64)?;
        }
        file.sync_all()?;
        let mut took = Vec::with_capacity(samples);
        for i in 0..samples {
            let started = Instant::now();
            file.write_all_at(&block, (i * WRITE) as u64)?;
            file.sync_data()?;
            took.push(started.elapsed().as_secs_f64() * 1e6);
        }
        took.sort_by(f64::total_cmp);
        let at = |q: f64| took[((took.len() - 1) as f64 * q).round() as usize];
        Ok(SyncLatency { samples, p50_us: at(0.5), p99_us: at(0.99) })
    })();
    drop(file);
    let _ = std::fs::remove_file(&path);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_reports_ordered_quantiles_and_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let probe = sync_latency(dir.path(), 20).unwrap();
        assert_eq!(probe.samples, 20);
        assert!(probe.p50_us > 0.0 && probe.p50_us <= probe.p99_us, "{probe:?}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "the probe file is removed");
        assert!(sync_latency(&dir.path().join("missing"), 1).is_err(), "a missing directory is an error");
    }
}
