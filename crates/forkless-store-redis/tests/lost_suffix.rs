//! A Redis that comes back with less than it delivered must never number new events over
//! the ones a client received: judged by the client's whole view (every id it accepted still
//! names the same bytes, or is refused), against private `redis-server` processes this test
//! starts on free ports and kills with SIGKILL.
//!
//! - restarted from an older snapshot: every session ends (`history_lost`), nothing is renamed;
//! - the same with the check switched off (the negative control): an event is renamed;
//! - restarted without persistence: every session is unknown, none is re-created;
//! - restarted with `appendfsync always`: nothing was lost, so the session goes on;
//! - a node whose cached record's version is numbered again after the restart (another node
//!   ended the session under it) reads the ended record, not its cached one.

use std::time::Duration;

use bytes::Bytes;
use forkless_core::{AppendTarget, EndReason, Seq, SessionRecord};
use forkless_store::conformance;
use forkless_store::{Error, Reader, SpendKey, Spending, Spent, Store};
use forkless_store_redis::testing::PrivateRedis;
use forkless_store_redis::{AfterRestart, Hints, RedisConfig, RedisStore};

/// A failure guard: a server that never answers fails the test instead of hanging it.
const GUARD: Duration = Duration::from_secs(20);

async fn store(redis: &PrivateRedis, after_restart: AfterRestart) -> RedisStore {
    let mut cfg = RedisConfig::new(redis.url());
    cfg.hints = Hints::Off;
    cfg.after_restart = after_restart;
    forkless_store_redis::connect(cfg).await.expect("connect")
}

async fn emit(store: &RedisStore, record: &SessionRecord, n: u64) -> Result<Seq, Error> {
    conformance::emit(store, record.id(), AppendTarget::Standalone, n).await.map(|id| id.seq)
}

/// An append after the restart, retried while the store's connection comes back (typed
/// backend errors, or a notification answered before its batch was stored that the store then
/// could not store); its first other outcome, with the seq it was stored under.
async fn emit_after_restart(store: &RedisStore, record: &SessionRecord, n: u64) -> Result<Seq, Error> {
    tokio::time::timeout(GUARD, async {
        loop {
            match emit(store, record, n).await {
                Err(Error::Backend(_)) => tokio::time::sleep(Duration::from_millis(20)).await,
                Ok(_) => {
                    // Its id is provisional until stored: a load waits for that, the log says.
                    let _ = store.load(record.id()).await;
                    let stored = store
                        .read(record.id(), record.standalone().id(), Seq::PRIMING, 100, Reader::Inspector)
                        .await
                        .ok()
                        .and_then(|events| events.into_iter().find(|e| e.payload == conformance::payload(n)));
                    if let Some(event) = stored {
                        return Ok(event.seq);
                    }
                }
                other => return other,
            }
        }
    })
    .await
    .expect("the store reconnects")
}

/// The client's view: every id it accepted still names the same bytes, or is refused.
async fn every_seen_id_still_names_its_event(
    store: &RedisStore,
    record: &SessionRecord,
    seen: &[(Seq, Bytes)],
) -> Result<(), String> {
    let stream = record.standalone().id();
    for (seq, bytes) in seen {
        let after = Seq::new(seq.get() - 1);
        // A refusal (an error) keeps the promise; other content under the id breaks it.
        if let Ok(events) = store.read(record.id(), stream, after, 1, Reader::Inspector).await
            && let Some(e) = events.first()
            && e.seq == *seq
            && e.payload != *bytes
        {
            return Err(format!("event {seq} was renamed: {:?} is now {:?}", bytes, e.payload));
        }
    }
    Ok(())
}

/// A session with 3 events in the snapshot and 3 more after it, all read by the client.
async fn three_saved_three_not(
    redis: &PrivateRedis,
    store: &RedisStore,
) -> (SessionRecord, Vec<(Seq, Bytes)>) {
    let record = conformance::new_record(40, true);
    store.create(record.clone()).await.unwrap();
    for n in 1..=3 {
        emit(store, &record, n).await.unwrap();
    }
    store.load(record.id()).await.unwrap(); // stored, as a client that saw them knows
    redis.command(&["SAVE"]);
    for n in 4..=6 {
        emit(store, &record, n).await.unwrap();
    }
    store.load(record.id()).await.unwrap();
    let seen = store
        .read(record.id(), record.standalone().id(), Seq::PRIMING, 100, Reader::Inspector)
        .await
        .unwrap();
    assert_eq!(seen.len(), 6);
    (record, seen.into_iter().map(|e| (e.seq, e.payload)).collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_from_an_older_snapshot_ends_the_session_and_renames_nothing() {
    let Some(mut redis) = PrivateRedis::start(&["--save", "", "--appendonly", "no"]) else { return };
    let store = store(&redis, AfterRestart::Verify).await;
    let (record, seen) = three_saved_three_not(&redis, &store).await;
    redis.crash_and_restart();
    // Redis now holds events 1..3 only. The next append must not become event 4.
    let next = emit_after_restart(&store, &record, 7).await;
    assert!(
        matches!(next, Err(ref e) if e.ended() == Some(EndReason::HistoryLost)),
        "the append after the restart is refused with history_lost: {next:?}"
    );
    let loaded = store.load(record.id()).await.unwrap().expect("the session's tombstone");
    assert_eq!(loaded.value.session().ended(), Some(EndReason::HistoryLost));
    every_seen_id_still_names_its_event(&store, &record, &seen).await.unwrap();
    // A node that starts now sees the same.
    let late = self::store(&redis, AfterRestart::Verify).await;
    assert!(
        late.load(record.id())
            .await
            .unwrap()
            .is_some_and(|r| r.value.session().ended() == Some(EndReason::HistoryLost))
    );
}

/// The negative control: the same history with the check off renames an event the client saw.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn negative_control_trusting_every_restart_renames_a_seen_event() {
    let Some(mut redis) = PrivateRedis::start(&["--save", "", "--appendonly", "no"]) else { return };
    let store = store(&redis, AfterRestart::TrustBlindly).await;
    let (record, seen) = three_saved_three_not(&redis, &store).await;
    redis.crash_and_restart();
    let next = emit_after_restart(&store, &record, 7).await;
    assert_eq!(next.ok(), Some(Seq::new(4)), "without the check, the lost number 4 is handed out again");
    let violation = every_seen_id_still_names_its_event(&store, &record, &seen).await;
    assert!(violation.is_err_and(|v| v.contains("event 4 was renamed")), "the oracle catches the rename");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_without_persistence_forgets_the_session_and_recreates_none() {
    let Some(mut redis) = PrivateRedis::start(&["--save", "", "--appendonly", "no"]) else { return };
    let store = store(&redis, AfterRestart::Verify).await;
    let record = conformance::new_record(41, true);
    store.create(record.clone()).await.unwrap();
    emit(&store, &record, 1).await.unwrap();
    store.load(record.id()).await.unwrap();
    redis.crash_and_restart();
    let next = emit_after_restart(&store, &record, 2).await;
    assert!(matches!(next, Err(Error::SessionUnknown)), "{next:?}");
    assert!(store.load(record.id()).await.unwrap().is_none(), "not re-created");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_that_synced_every_write_keeps_the_session_going() {
    let Some(mut redis) =
        PrivateRedis::start(&["--save", "", "--appendonly", "yes", "--appendfsync", "always"])
    else {
        return;
    };
    let store = store(&redis, AfterRestart::Verify).await;
    let record = conformance::new_record(42, true);
    store.create(record.clone()).await.unwrap();
    for n in 1..=3 {
        emit(&store, &record, n).await.unwrap();
    }
    store.load(record.id()).await.unwrap();
    let seen: Vec<(Seq, Bytes)> = store
        .read(record.id(), record.standalone().id(), Seq::PRIMING, 100, Reader::Inspector)
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.seq, e.payload))
        .collect();
    redis.crash_and_restart();
    let next = emit_after_restart(&store, &record, 4).await;
    assert_eq!(next.ok(), Some(Seq::new(4)), "nothing was lost, so the stream goes on");
    every_seen_id_still_names_its_event(&store, &record, &seen).await.unwrap();
}

/// A node asks only whether a session moved from the version it cached; after a restart that
/// lost a suffix, the same version can name another record (here the session ended by
/// another node, one version past the snapshot, as the cached one was): the boot's tag tells
/// them apart, and the node reads the ended record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_numbered_again_after_a_lost_suffix_is_read_afresh() {
    let Some(mut redis) = PrivateRedis::start(&["--save", "", "--appendonly", "no"]) else { return };
    let a = store(&redis, AfterRestart::Verify).await;
    let record = conformance::new_record(43, true);
    a.create(record.clone()).await.unwrap();
    emit(&a, &record, 1).await.unwrap();
    a.load(record.id()).await.unwrap();
    redis.command(&["SAVE"]);
    emit(&a, &record, 2).await.unwrap();
    let cached = a.load(record.id()).await.unwrap().expect("the session").version;
    redis.crash_and_restart();
    // Node b finds the boot unvouched and ends the session: one version past the snapshot.
    let b = store(&redis, AfterRestart::Verify).await;
    let next = emit_after_restart(&b, &record, 3).await;
    assert!(matches!(next, Err(ref e) if e.ended() == Some(EndReason::HistoryLost)), "{next:?}");
    let ended = b.load(record.id()).await.unwrap().expect("the tombstone");
    assert_eq!(ended.version, cached, "the ended record took the version node a cached");
    let seen = tokio::time::timeout(GUARD, async {
        loop {
            match a.load(record.id()).await {
                Err(Error::Backend(_)) => tokio::time::sleep(Duration::from_millis(20)).await,
                other => return other,
            }
        }
    })
    .await
    .expect("node a reconnects")
    .unwrap()
    .expect("the session");
    assert_eq!(seen.version, cached);
    assert_eq!(seen.value.session().ended(), Some(EndReason::HistoryLost), "node a reads the ended record");
}

/// `health` (what `/healthz` reports) is a typed error while Redis is down, and fine again
/// once it is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_is_an_error_while_redis_is_down() {
    let Some(mut redis) = PrivateRedis::start(&["--save", "", "--appendonly", "no"]) else { return };
    let store = store(&redis, AfterRestart::Verify).await;
    store.health().await.expect("a running redis is healthy");
    redis.kill();
    let down = store.health().await;
    assert!(matches!(down, Err(Error::Backend(_))), "{down:?}");
    redis.crash_and_restart();
    tokio::time::timeout(GUARD, async {
        while store.health().await.is_err() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("healthy again once redis is back");
}

fn wall_clock() -> forkless_core::Timestamp {
    let ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis());
    forkless_core::Timestamp::from_millis(u64::try_from(ms).unwrap_or(u64::MAX))
}

/// A spend after the restart, retried while the store's connection comes back.
async fn spend_after_restart(store: &RedisStore, key: SpendKey, issued: forkless_core::Timestamp) -> Spent {
    tokio::time::timeout(GUARD, async {
        loop {
            let now = wall_clock();
            match store.spend(key, issued, now.saturating_add(Duration::from_secs(60)), now).await {
                Err(Error::Backend(_)) => tokio::time::sleep(Duration::from_millis(20)).await,
                other => return other.expect("spend"),
            }
        }
    })
    .await
    .expect("the store reconnects")
}

/// A one-time key spent before Redis restarted without persistence is forgotten with
/// everything else: it must then be unvouched, never spendable again as new. One issued after
/// the restart spends normally; with every write synced, the spend survives the restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_spent_before_a_restart_that_lost_it_is_never_spent_again() {
    let Some(mut redis) = PrivateRedis::start(&["--save", "", "--appendonly", "no"]) else { return };
    let store = store(&redis, AfterRestart::Verify).await;
    let (key, issued) = (SpendKey(*b"spent-before-the"), wall_clock());
    let until = issued.saturating_add(Duration::from_secs(60));
    assert_eq!(store.spend(key, issued, until, issued).await.unwrap(), Spent::Now);
    redis.crash_and_restart();
    assert_eq!(spend_after_restart(&store, key, issued).await, Spent::Unvouched, "forgotten, so unvouched");
    let fresh = SpendKey(*b"issued-after-the");
    let later = wall_clock();
    assert_eq!(spend_after_restart(&store, fresh, later).await, Spent::Now);
    assert_eq!(spend_after_restart(&store, fresh, later).await, Spent::Before);

    let Some(mut synced) =
        PrivateRedis::start(&["--save", "", "--appendonly", "yes", "--appendfsync", "always"])
    else {
        return;
    };
    let kept = self::store(&synced, AfterRestart::Verify).await;
    let issued = wall_clock();
    assert_eq!(kept.spend(key, issued, until, issued).await.unwrap(), Spent::Now);
    synced.crash_and_restart();
    assert_eq!(spend_after_restart(&kept, key, issued).await, Spent::Before, "kept, so a replay");
}

/// A task created before a snapshot and completed after it, then Redis restarted from that
/// snapshot: the lost completion must not read back as `working` (a client that read
/// `completed` would see it go backwards). The bucket's tasks are forgotten instead: the task
/// reads as unknown. Returns what a `tasks/get` of it reads after the restart.
async fn task_after_an_older_snapshot(after_restart: AfterRestart) -> Option<Option<&'static str>> {
    use forkless_core::{Epoch, OnOwnerLost, Outcome};
    use forkless_store::{TaskStore as _, transact_task};
    let mut redis = PrivateRedis::start(&["--save", "", "--appendonly", "no"])?;
    let store = store(&redis, after_restart).await;
    let task = conformance::new_task(
        44,
        None,
        OnOwnerLost::Fail,
        Duration::from_secs(3600),
        forkless_core::Timestamp::from_millis(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
        ),
    );
    store.create_task(&task).await.unwrap();
    redis.command(&["SAVE"]);
    transact_task(&store, task.id(), |t| {
        t.on_finished(Outcome::Result("{}".into()), Epoch::new(1), t.created())
    })
    .await
    .unwrap();
    redis.crash_and_restart();
    let read = tokio::time::timeout(GUARD, async {
        loop {
            match store.load_task(task.id()).await {
                Err(Error::Backend(_)) => tokio::time::sleep(Duration::from_millis(20)).await,
                other => return other.unwrap(),
            }
        }
    })
    .await
    .expect("the store reconnects");
    Some(read.map(|t| t.value.status().name()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_whose_last_write_redis_lost_reads_unknown_never_older() {
    let Some(read) = task_after_an_older_snapshot(AfterRestart::Verify).await else { return };
    assert_eq!(read, None, "forgotten, not read back as it was before its completion");
}

/// The negative control: trusting every restart reads the completed task back as working.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn negative_control_trusting_every_restart_reads_a_task_back_older() {
    let Some(read) = task_after_an_older_snapshot(AfterRestart::TrustBlindly).await else { return };
    assert_eq!(read, Some("working"), "without the check the lost completion goes back to working");
}
