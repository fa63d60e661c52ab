//! The store conformance suite against [`PgStore`], each check on a database of its own.

use forkless_store_postgres::Hints;
use forkless_store_postgres::testing as support;

macro_rules! checks {
    ($($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let Some(db) = support::fresh().await else { return };
                forkless_store::conformance::run(stringify!($name), db.store(Hints::Off).await).await;
            }
        )*
        /// The list above is the suite's whole list.
        #[test]
        fn every_check_runs() {
            assert_eq!(&[$(stringify!($name)),*], forkless_store::conformance::CHECKS);
        }
    };
}

checks!(
    create_and_load,
    compare_and_set_detects_conflicts,
    append_assigns_consecutive_seqs,
    read_starts_at_any_cursor,
    append_refused_on_fenced_stream,
    append_refused_on_ended_session,
    append_bumps_version,
    watch_wakes_on_append,
    watch_reports_attach_and_fence,
    concurrent_appends_are_gap_free,
    concurrent_resumes_each_get_a_distinct_epoch,
    eviction_by_count,
    eviction_by_bytes,
    completed_stream_refuses_appends,
    remove_forgets_everything,
    answer_opens_fills_and_releases_a_stream,
    reads_are_fenced_by_epoch,
    due_lists_exactly_what_time_changes,
    usage_counts_retained_bytes_and_evictions,
);

/// Promise 4 across a restart: the database keeps what it committed, so every id a client
/// received still names the same bytes after the node's process is gone and a new one
/// connects (and nothing new reuses one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_never_renames_a_delivered_event() {
    let Some(db) = support::fresh().await else { return };
    let store = db.store(Hints::Off).await;
    let db = &db;
    let report = forkless_store::conformance::crash_keeps_every_delivered_id(store, |store| async move {
        drop(store);
        db.store(Hints::Off).await
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(report.received > 0 && report.still_named == report.received, "{report:?}");
}
