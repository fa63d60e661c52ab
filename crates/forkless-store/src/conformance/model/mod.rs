//! The property-based state-machine test every store passes: the real core and a store
//! against a small reference model of PROTOCOL sections 4-8, under random histories. A store's
//! crate runs it with [`run`] and a [`Backend`] that opens its store (feature
//! `state-machine`).
//!
//! The system under test drives `forkless-core` through the store exactly as the server does
//! (every decision through [`transact`](crate::transact), appends through [`Store::append`], delivery through
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
//! - every append carries distinct bytes, and every read (a writer's, or an inspection of each
//!   live stream's retained log after each step) finds each id naming the bytes it was appended
//!   with and the bytes the client accepted under it: a store that hands an id to other bytes
//!   fails, not only one that renumbers;
//! - nothing is delivered from a fenced stream, a stale epoch or another session, and a fenced
//!   stream's log reads as empty or evicted;
//! - every rejection is one of [`RejectReason::ALL`](forkless_core::RejectReason::ALL) and is the one the model predicts.
//!
//! Cases: [`cases`] (10,000 by default; `PROPTEST_CASES` or `FORKLESS_PROPTEST_CASES`, which
//! wins, override); a slower store runs a fraction of them. Steps aimed at the rarest rows keep
//! every outcome in a few percent of the cases, and the run fails when an outcome its count
//! makes near-certain never occurred (from about 330 cases, every outcome).

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
pub(super) const STREAM_TTLS: [u64; 4] = [20_000, 20_000, 20_000, 86_400_000];
pub(super) const IDLE_TTLS: [u64; 4] = [45_000, 45_000, 45_000, 86_400_000];
pub(super) const MAX_STEPS: usize = 40;

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

/// How many outcome kinds the generator must reach: the eight rejection reasons, the other
/// GET answers and the events a writer, a client or a tick can meet (see `sut::seen_index`).
pub(super) const OUTCOMES: usize = 19;

/// How often each outcome occurred, per backend, and in how many cases: a generator that never
/// reaches a row of the decision table fails the run.
pub(super) struct Seen {
    pub(super) events: [AtomicU64; OUTCOMES],
    pub(super) cases: [AtomicU64; OUTCOMES],
}

impl Seen {
    /// Add one case's tally.
    pub(super) fn add(&self, tally: &[u64; OUTCOMES]) {
        for (i, n) in tally.iter().enumerate() {
            self.events[i].fetch_add(*n, Ordering::Relaxed);
            self.cases[i].fetch_add(u64::from(*n > 0), Ordering::Relaxed);
        }
    }

    fn load(counters: &[AtomicU64; OUTCOMES]) -> Vec<u64> {
        counters.iter().map(|n| n.load(Ordering::Relaxed)).collect()
    }
}

/// The outcome counters of `B`, made on first use.
pub(super) fn seen<B: Backend>() -> &'static Seen {
    static ALL: OnceLock<Mutex<HashMap<&'static str, &'static Seen>>> = OnceLock::new();
    let mut all = ALL.get_or_init(Mutex::default).lock().unwrap_or_else(|p| p.into_inner());
    all.entry(B::NAME).or_insert_with(|| {
        Box::leak(Box::new(Seen {
            events: [const { AtomicU64::new(0) }; OUTCOMES],
            cases: [const { AtomicU64::new(0) }; OUTCOMES],
        }))
    })
}

/// The share of cases (per mille) in which each outcome occurs at least, for the guard in
/// [`run`]: 70 % of what 10,000 cases on the memory store measured (the rarest, a writer's
/// duplicate, a stream dropped by its time to live and a cursor on a fenced stream, each in
/// 3 to 3.5 % of the cases).
const FLOOR_PER_MILLE: [u32; OUTCOMES] =
    [60, 55, 71, 116, 110, 85, 24, 163, 411, 239, 538, 316, 52, 363, 31, 21, 73, 22, 54];

/// Which outcomes `cases` cases reach with a probability of missing each below 10⁻³ given its
/// floor, so the guard holds at the counts CI runs: every outcome from about 330 cases, the
/// common ones from far fewer.
pub(super) fn guarded(cases: u32) -> Vec<usize> {
    (0..OUTCOMES)
        .filter(|i| {
            let floor = f64::from(FLOOR_PER_MILLE[*i]) / 1000.0;
            f64::from(cases) * -(1.0 - floor).ln() >= 1000f64.ln()
        })
        .collect()
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
    let strategy = Reference::sequential_strategy(5..MAX_STEPS);
    let result = runner.run(&strategy, |(initial, steps, seen)| {
        StoreUnderTest::<B>::test_sequential(config.clone(), initial, steps, seen);
        Ok(())
    });
    let (events, with) = (Seen::load(&seen::<B>().events), Seen::load(&seen::<B>().cases));
    let percent: Vec<String> =
        with.iter().map(|n| format!("{:.1}", *n as f64 * 100.0 / f64::from(cases))).collect();
    eprintln!(
        "{}: {cases} cases in {:.1?}; outcomes seen: {events:?}, in % of cases: {percent:?}",
        B::NAME,
        started.elapsed()
    );
    if let Err(e) = result {
        panic!("{}: {e}", B::NAME);
    }
    // Guard against a generator that never reaches a row: every outcome the count makes
    // near-certain must occur.
    let guarded = guarded(cases);
    if guarded.len() < OUTCOMES {
        eprintln!("{}: {cases} cases guard outcomes {guarded:?} only", B::NAME);
    }
    for i in guarded {
        assert!(with[i] > 0, "outcome #{i} never occurred in {cases} cases: {with:?}");
    }
}
