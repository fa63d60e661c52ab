//! The property-based state-machine test every store passes: the real core and a store
//! against a small reference model of PROTOCOL sections 4-8, under random histories. A store's
//! crate runs it with [`run`] and a [`Backend`] that opens its store (feature
//! `state-machine`).
//!
//! The system under test drives `forkless-core` through the store exactly as the server does
//! (every decision through [`transact`], appends through [`Store::append`], delivery through
//! [`Store::read`]) on a tokio current-thread runtime. Simulated connections play the server's
//! writer (deliver from the cursor only while their epoch is current and the stream attached;
//! stop when fenced), and one simulated client per session plays PROTOCOL section 7: it keeps a
//! cursor per stream, treats `resumed: true` as a continuation and anything else as a new
//! stream, drops duplicates and fails on a gap.
//!
//! The reference model is written from the decision table, not from the core's code: streams are
//! plain numbers in vectors, addressed by index. Each step's outcome (including the exact
//! rejection reason, and what each tick expired, evicted, dropped or ended) and the full stream
//! metadata after each step must agree with it.
//!
//! Steps: emits to the standalone stream, to request streams (final events complete them) and
//! to fenced, completed or dropped streams; POSTs opening request streams; writers delivering
//! in small batches (renewing liveness); connection drops; GETs with valid, older, future,
//! malformed, foreign-session and token-mismatched cursors, and without a cursor (with and
//! without the reset contract); two identical GETs racing on one snapshot; clock jumps forwards
//! and backwards (mostly whole seconds, so deadlines are hit exactly); ticks (liveness expiry
//! after grace, stream and idle time-to-live); DELETE. Retention runs with 2, 4 or 1,000 events
//! per stream and with short (20 s stream, 45 s session) or unreachable time-to-live settings,
//! over 2-3 sessions so foreign cursors exist.
//!
//! Checked after every step:
//! - at most one attached (current-epoch, live) connection per stream;
//! - at most one non-fenced standalone stream per session;
//! - what each client accepted as a continuation of a stream identity is exactly `1, 2, …, n`
//!   (gap-free, strictly increasing), and a "new stream" never reuses an identity the client
//!   already accepted events on;
//! - nothing is delivered from a fenced stream, a stale epoch or another session, and a fenced
//!   stream's log reads as empty or evicted;
//! - every rejection is one of [`RejectReason::ALL`] and is the one the model predicts.
//!
//! Cases: [`cases`] (10,000 by default; `PROPTEST_CASES` or `FORKLESS_PROPTEST_CASES`, which
//! wins, override); a slower store runs a fraction of them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use forkless_core::{Config, Limits, Liveness, ResumeMode, Timestamp};
use proptest::test_runner::{Config as ProptestConfig, RngAlgorithm, TestRunner};
use proptest_state_machine::{ReferenceStateMachine, StateMachineTest};

use crate::Store;

mod machine;
mod reference;
mod steps;
mod sut;
mod tasks;
mod transitions;

pub use tasks::{run_tasks, run_tasks_against};

use machine::StoreUnderTest;
use reference::*;
use steps::*;
use sut::*;
use transitions::*;

pub(super) const T0_MS: u64 = 1_000_000_000;
pub(super) const GRACE_MS: u64 = 10_000;
/// Time-to-live settings: short enough that histories reach them, or out of reach.
pub(super) const STREAM_TTLS: [u64; 2] = [20_000, 86_400_000];
pub(super) const IDLE_TTLS: [u64; 2] = [45_000, 86_400_000];
pub(super) const MAX_STEPS: usize = 30;

/// How many cases to run: `FORKLESS_PROPTEST_CASES`, else `PROPTEST_CASES`, else 10,000.
pub fn cases() -> u32 {
    ["FORKLESS_PROPTEST_CASES", "PROPTEST_CASES"]
        .iter()
        .find_map(|var| std::env::var(var).ok()?.parse().ok())
        .unwrap_or(10_000)
}

pub(super) fn config(strict: bool, max_events: u64, stream_ttl: u64, idle_ttl: u64) -> Config {
    Config {
        mode: if strict { ResumeMode::Strict } else { ResumeMode::Compat },
        grace: Duration::from_millis(GRACE_MS),
        // The model tracks each connection's deadline and its renewals.
        liveness: Liveness::PerConnection,
        limits: Limits {
            stream_max_events: max_events,
            stream_ttl: Duration::from_millis(stream_ttl),
            session_idle_ttl: Duration::from_millis(idle_ttl),
            ..Limits::default()
        },
        ..Config::default()
    }
}

/// A store to run the model against.
pub trait Backend: 'static {
    /// The store.
    type S: Store;
    /// Its name in reports.
    const NAME: &'static str;
    /// A fresh, empty store, its clock at `now`, on the runtime that will drive it (a
    /// current-thread runtime with I/O and time enabled).
    fn open(rt: &tokio::runtime::Runtime, now: Timestamp) -> Self::S;
}

/// How often each outcome occurred, per backend: a generator that never reaches a row of the
/// decision table fails the run.
pub(super) type Seen = [AtomicU64; 19];

/// The outcome counters of `B`, made on first use.
pub(super) fn seen<B: Backend>() -> &'static Seen {
    static ALL: OnceLock<Mutex<HashMap<&'static str, &'static Seen>>> = OnceLock::new();
    let mut all = ALL.get_or_init(Mutex::default).lock().unwrap_or_else(|p| p.into_inner());
    all.entry(B::NAME).or_insert_with(|| Box::leak(Box::new([const { AtomicU64::new(0) }; 19])))
}

/// Run `cases` random histories against `B`'s store; panics with the minimal failing history.
pub fn run<B: Backend>(cases: u32) {
    // XorShift: generation dominates this test's time in debug builds, and ChaCha costs twice
    // as much for no benefit here. Failures are reported with their minimal input.
    let config = ProptestConfig {
        cases,
        failure_persistence: None,
        rng_algorithm: RngAlgorithm::XorShift,
        ..ProptestConfig::default()
    };
    let started = Instant::now();
    let mut runner = TestRunner::new(config.clone());
    let strategy = Reference::sequential_strategy(1..MAX_STEPS);
    let result = runner.run(&strategy, |(initial, steps, seen)| {
        StoreUnderTest::<B>::test_sequential(config.clone(), initial, steps, seen);
        Ok(())
    });
    let seen: Vec<u64> = seen::<B>().iter().map(|n| n.load(Ordering::Relaxed)).collect();
    eprintln!("{}: {cases} cases in {:.1?}; outcomes seen: {seen:?}", B::NAME, started.elapsed());
    if let Err(e) = result {
        panic!("{}: {e}", B::NAME);
    }
    if cases >= 5_000 {
        // Guard against a generator that never reaches a row: every outcome must occur.
        for (i, n) in seen.iter().enumerate() {
            assert!(*n > 0, "outcome #{i} never occurred in {cases} cases: {seen:?}");
        }
    }
}
