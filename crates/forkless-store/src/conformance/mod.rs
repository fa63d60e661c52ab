//! The store conformance suite: every [`Store`] must pass every check here.
//!
//! Call [`run_all`] with a factory of fresh, empty stores, or use
//! [`store_conformance_tests!`](crate::store_conformance_tests) to get one `#[tokio::test]` per
//! check. Timeouts in this suite are failure guards (a wake-up that never comes fails the
//! check instead of hanging CI), never synchronisation.

use crate::{Append, EventKind};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use forkless_core::{
    AppendTarget, Config, Limits, NewSession, Revision, SeededEntropy, Seq, SessionId, SessionRecord,
    StreamId, Timestamp,
};

use crate::{Equipped, Error, Store, transact};

pub(super) const GUARD: Duration = Duration::from_secs(10);
pub(super) const T0: Timestamp = Timestamp::from_millis(1_000_000);

/// Every check, by name.
pub const CHECKS: &[&str] = &[
    "create_and_load",
    "compare_and_set_detects_conflicts",
    "append_assigns_consecutive_seqs",
    "read_starts_at_any_cursor",
    "append_refused_on_fenced_stream",
    "append_refused_on_ended_session",
    "append_bumps_version",
    "watch_wakes_on_append",
    "watch_reports_attach_and_fence",
    "concurrent_appends_are_gap_free",
    "concurrent_resumes_each_get_a_distinct_epoch",
    "eviction_by_count",
    "eviction_by_bytes",
    "completed_stream_refuses_appends",
    "remove_forgets_everything",
    "answer_opens_fills_and_releases_a_stream",
    "reads_are_fenced_by_epoch",
    "due_lists_exactly_what_time_changes",
    "usage_counts_retained_bytes_and_evictions",
    "a_one_time_key_is_spent_once",
    "a_published_notice_reaches_each_subscriber_once",
    "a_task_reads_back_and_replaces_by_compare_and_set",
    "of_many_settlers_of_a_lost_owner_one_restarts_the_task",
    "open_tasks_are_found_by_node_and_expiry_removes_only_what_expired",
];

/// Run one check by name against a fresh store.
///
/// The store is checked as a server uses it, [`Equipped`]: a capability it lacks is the
/// process's stand-in, which must keep the same promise.
pub async fn run<S: Store>(name: &str, store: S) {
    let store = Arc::new(Equipped::new(store));
    match name {
        "create_and_load" => checks::create_and_load(store).await,
        "compare_and_set_detects_conflicts" => checks::compare_and_set_detects_conflicts(store).await,
        "append_assigns_consecutive_seqs" => checks::append_assigns_consecutive_seqs(store).await,
        "read_starts_at_any_cursor" => checks::read_starts_at_any_cursor(store).await,
        "append_refused_on_fenced_stream" => checks::append_refused_on_fenced_stream(store).await,
        "append_refused_on_ended_session" => checks::append_refused_on_ended_session(store).await,
        "append_bumps_version" => checks::append_bumps_version(store).await,
        "watch_wakes_on_append" => checks::watch_wakes_on_append(store).await,
        "watch_reports_attach_and_fence" => checks::watch_reports_attach_and_fence(store).await,
        "concurrent_appends_are_gap_free" => checks::concurrent_appends_are_gap_free(store).await,
        "concurrent_resumes_each_get_a_distinct_epoch" => {
            checks::concurrent_resumes_each_get_a_distinct_epoch(store).await
        }
        "eviction_by_count" => checks::eviction_by_count(store).await,
        "eviction_by_bytes" => checks::eviction_by_bytes(store).await,
        "completed_stream_refuses_appends" => checks::completed_stream_refuses_appends(store).await,
        "remove_forgets_everything" => checks::remove_forgets_everything(store).await,
        "answer_opens_fills_and_releases_a_stream" => {
            checks::answer_opens_fills_and_releases_a_stream(store).await
        }
        "reads_are_fenced_by_epoch" => checks::reads_are_fenced_by_epoch(store).await,
        "due_lists_exactly_what_time_changes" => due::due_lists_exactly_what_time_changes(store).await,
        "usage_counts_retained_bytes_and_evictions" => {
            usage::usage_counts_retained_bytes_and_evictions(store).await
        }
        "a_one_time_key_is_spent_once" => usage::a_one_time_key_is_spent_once(store).await,
        "a_published_notice_reaches_each_subscriber_once" => {
            usage::a_published_notice_reaches_each_subscriber_once(store).await
        }
        "a_task_reads_back_and_replaces_by_compare_and_set" => {
            tasks::a_task_reads_back_and_replaces_by_compare_and_set(store).await
        }
        "of_many_settlers_of_a_lost_owner_one_restarts_the_task" => {
            tasks::of_many_settlers_of_a_lost_owner_one_restarts_the_task(store).await
        }
        "open_tasks_are_found_by_node_and_expiry_removes_only_what_expired" => {
            tasks::open_tasks_are_found_by_node_and_expiry_removes_only_what_expired(store).await
        }
        other => panic!("no conformance check named {other}"),
    }
}

/// Run every check, each against a fresh store from `make`.
pub async fn run_all<S: Store, F: Future<Output = S>>(make: impl Fn() -> F) {
    for name in CHECKS {
        run(name, make().await).await;
    }
}

/// One `#[tokio::test]` per conformance check. `$make` is an async expression yielding a
/// fresh store; with `maybe`, one yielding `Option<(guard, store)>`: the guard (a database
/// or key prefix of the check's own) lives until the check ends, and `None` skips the check
/// (a store whose server is not running outside CI).
#[macro_export]
macro_rules! store_conformance_tests {
    (maybe $make:expr) => {
        $crate::store_conformance_tests!(@list each_maybe $make);
    };
    (@each_maybe $make:expr; $($name:ident),*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let Some((_guard, store)) = $make.await else { return };
                $crate::conformance::run(stringify!($name), store).await;
            }
        )*
        /// The macro's list is the suite's whole list.
        #[test]
        fn every_conformance_check_runs() {
            assert_eq!(&[$(stringify!($name)),*], $crate::conformance::CHECKS);
        }
    };
    (@list $kind:ident $make:expr) => {
        $crate::store_conformance_tests!(@$kind $make;
            create_and_load, compare_and_set_detects_conflicts, append_assigns_consecutive_seqs,
            read_starts_at_any_cursor, append_refused_on_fenced_stream, append_refused_on_ended_session,
            append_bumps_version, watch_wakes_on_append, watch_reports_attach_and_fence,
            concurrent_appends_are_gap_free, concurrent_resumes_each_get_a_distinct_epoch,
            eviction_by_count, eviction_by_bytes, completed_stream_refuses_appends, remove_forgets_everything,
            answer_opens_fills_and_releases_a_stream, reads_are_fenced_by_epoch,
            due_lists_exactly_what_time_changes, usage_counts_retained_bytes_and_evictions,
            a_one_time_key_is_spent_once, a_published_notice_reaches_each_subscriber_once,
            a_task_reads_back_and_replaces_by_compare_and_set,
            of_many_settlers_of_a_lost_owner_one_restarts_the_task,
            open_tasks_are_found_by_node_and_expiry_removes_only_what_expired);
    };
    ($make:expr) => {
        $crate::store_conformance_tests!(@list each $make);
    };
    (@each $make:expr; $($name:ident),*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                $crate::conformance::run(stringify!($name), $make.await).await;
            }
        )*
    };
}

// ===== helpers =====

/// Wait until a shared store's hint listener has connected and re-read what it watches at
/// least once (`forkless_store_listener_connects_total`), so a test's later writes are not
/// picked up by that first re-read.
pub async fn listener_connected<S: Store>(store: &S) {
    let connects = || {
        store
            .metrics()
            .iter()
            .find(|m| m.name == "forkless_store_listener_connects_total")
            .map_or(0, |m| m.value)
    };
    tokio::time::timeout(GUARD, async {
        while connects() == 0 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    })
    .await
    .expect("the hint listener connected");
}

/// A node's name, for a lease.
pub(super) fn name(node: &str) -> crate::NodeName {
    crate::NodeName::new(node).expect("a valid node name")
}

/// The wall clock, for checks of what a store keeps until a real instant (a database expires
/// spent keys on its own clock).
pub(super) fn wall_clock() -> Timestamp {
    let ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis());
    Timestamp::from_millis(u64::try_from(ms).unwrap_or(u64::MAX))
}

pub(super) fn cfg() -> Config {
    Config::default()
}

/// A new session's record (2025-11-25, no principal), its ids drawn from `seed`: for tests
/// of stores, here and in other crates.
pub fn new_record(seed: u64, reset_contract: bool) -> SessionRecord {
    let mut entropy = SeededEntropy::new(seed);
    let id = SessionId::generate(&mut entropy);
    let new = NewSession {
        id,
        revision: Revision::V2025_11_25,
        reset_contract,
        principal: None,
        client: Default::default(),
    };
    SessionRecord::create(new, T0, &mut entropy).expect("revision has sessions")
}

pub(super) async fn created<S: Store>(store: &S, seed: u64) -> SessionRecord {
    let record = new_record(seed, true);
    store.create(record.clone()).await.expect("create");
    record
}

/// The payload the suite appends as event `n`: `{"n":n}`.
pub fn payload(n: u64) -> Bytes {
    Bytes::from(format!("{{\"n\":{n}}}"))
}

/// Append [`payload`]`(n)` to `target` as an intermediate event, at the suite's clock and the
/// default limits.
pub async fn emit<S: Store>(
    store: &S,
    session: SessionId,
    target: AppendTarget,
    n: u64,
) -> Result<forkless_core::EventId, Error> {
    store
        .append(Append {
            session,
            target,
            payload: payload(n),
            kind: EventKind::Intermediate,
            now: T0,
            limits: &Limits::default(),
        })
        .await
}

/// [`emit`] on `record`'s standalone stream.
pub(super) async fn emit_standalone<S: Store>(
    store: &S,
    record: &SessionRecord,
    n: u64,
) -> Result<forkless_core::EventId, Error> {
    emit(store, record.id(), AppendTarget::Standalone, n).await
}

pub(super) async fn open_request<S: Store>(store: &S, session: SessionId, seed: u64) -> StreamId {
    let id = StreamId::generate(&mut SeededEntropy::new(seed));
    transact(store, session, |r| r.open_request_stream(id, T0, &cfg())).await.expect("open request stream");
    id
}

/// Wait until `watch` says its stream is delivered up to `seq`; panics after the suite's
/// failure guard (10 s) instead of hanging.
pub async fn until_delivered(watch: &mut crate::StreamWatch, seq: Seq) {
    let reached = async {
        while watch.current().delivered < seq {
            watch.changed().await;
        }
    };
    tokio::time::timeout(GUARD, reached).await.expect("events are delivered (within the guard)");
}

/// Wait until `stream`'s events up to `seq` are delivered (promise 3: a store may return from
/// an append before its event reaches readers).
pub(super) async fn delivered<S: Store>(store: &S, session: SessionId, stream: StreamId, seq: u64) {
    let mut watch = store.watch(session, stream).await.expect("watch");
    until_delivered(&mut watch, Seq::new(seq)).await;
}

pub(super) fn seqs(events: &[crate::StoredEvent]) -> Vec<u64> {
    events.iter().map(|e| e.seq.get()).collect()
}

mod checks;
mod crash;
mod due;
pub mod interest;
mod leases;
#[cfg(feature = "state-machine")]
pub mod model;
mod nodes;
mod tasks;
mod usage;
pub use crash::{CrashReport, crash_keeps_every_delivered_id};
pub use nodes::{NODE_CHECKS, run_nodes};
pub use tasks::{TaskCrashReport, crash_keeps_every_acknowledged_task, new_task, resolves_on_the_other_node};
