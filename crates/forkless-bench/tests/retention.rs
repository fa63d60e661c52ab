//! A gibibyte retained on the durable store under its default cache: the resident set stays
//! within the cache plus a fixed cost measured here, and a replay after a restart reads every
//! event back from the data file, once, in order, as it was written (`retention::run` checks
//! each). On the allocator `forkless serve` ships with; its own test binary, so the resident
//! set is this test's alone.

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use forkless_bench::retention::{Figures, Retention, run};
use forkless_store_redb::DEFAULT_CACHE_BYTES;

const MIB: u64 = 1 << 20;

/// What the store costs beside its cache, whatever it retains: the log's buffers, the inbox's
/// backlog, a checkpoint's scratch, the allocator's slack. Measured at 31 to 37 MiB (256 MiB
/// and 1 GiB retained, 64 KiB events); allowed with headroom.
const FIXED: u64 = 48 * MIB;

/// Whether the resident set grew by no more than `cache` and the fixed cost while filling
/// (at its peak too) and after the replay.
fn within(f: &Figures, cache: u64) -> Result<(), String> {
    let over = |kib: u64| kib.saturating_sub(f.rss_start_kib) * 1024;
    let bound = cache + FIXED;
    for (when, grew) in [
        ("filled", over(f.rss_filled_kib)),
        ("at the peak", over(f.hwm_filled_kib)),
        ("replayed", over(f.rss_replayed_kib)),
    ] {
        if grew > bound {
            return Err(format!("{when}: grew by {} MiB, more than {} MiB", grew / MIB, bound / MIB));
        }
    }
    Ok(())
}

fn retain(retained_bytes: u64, cache_bytes: u64) -> Figures {
    let dir = tempfile::tempdir().expect("temp dir");
    let spec =
        Retention { sessions: 16, retained_bytes, event_bytes: 64 << 10, cache_bytes, compare_memory: false };
    let f =
        run(dir.path(), spec).expect("retain, then replay every event once, in order, from the data file");
    eprintln!("{f:#?}");
    assert_eq!(f.retained_bytes, retained_bytes);
    f
}

/// One test, so nothing else runs in this process while it measures. Then the negative
/// control: a cache that holds everything (what the store did before) breaks the bound at a
/// quarter of the retention.
#[test]
fn a_gibibyte_retained_on_the_durable_store_costs_its_cache_not_its_size() {
    let f = retain(1 << 30, DEFAULT_CACHE_BYTES);
    if let Err(why) = within(&f, DEFAULT_CACHE_BYTES) {
        panic!("{why}");
    }
    let control = retain(256 << 20, 1 << 40);
    assert!(within(&control, DEFAULT_CACHE_BYTES).is_err(), "the bound check caught nothing");
}
