//! The bounded event cache: events leave memory once the data file holds them and the cache
//! is over its budget, and every read gets them back from the disk, the same bytes, gap-free,
//! from any cursor, across the line between disk and memory, after retention and after a
//! restart. (`tests/resident.rs` measures the resident set with a gibibyte retained.)

use super::*;
use forkless_store_redb::Options;

/// No room for events in memory, a checkpoint after every write.
fn spilling() -> Options {
    Options {
        durability: Durability::Immediate,
        cache_bytes: 0,
        checkpoint_interval: Duration::ZERO,
        ..Options::default()
    }
}

fn metric(store: &RedbStore, name: &str) -> u64 {
    store.metrics().iter().find(|m| m.name == name).map(|m| m.value).expect(name)
}

/// Wait until `done` holds of the store (checkpoints run on their own thread).
async fn until(store: &RedbStore, what: &str, done: impl Fn(&RedbStore) -> bool) {
    let waited = tokio::time::timeout(Duration::from_secs(30), async {
        while !done(store) {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    })
    .await;
    assert!(waited.is_ok(), "timed out waiting until {what}");
}

/// Event `n` of session `s`: distinct bytes of varying length (40 to about 1,000).
fn content(s: u64, n: u64) -> Bytes {
    let unit = format!("[{s}:{n}]");
    Bytes::from(unit.repeat(1 + ((n * 7919) % 97) as usize))
}

async fn emit(store: &RedbStore, session: SessionId, s: u64, n: u64, limits: &Limits) {
    store
        .append(Append {
            session,
            target: AppendTarget::Standalone,
            payload: content(s, n),
            kind: EventKind::Intermediate,
            now: T0,
            limits,
        })
        .await
        .expect("append");
}

/// Read everything after `after` in pages of `page`, checking each event names its bytes.
async fn read_all(
    store: &RedbStore,
    session: SessionId,
    stream: StreamId,
    s: u64,
    after: u64,
    page: usize,
) -> u64 {
    let mut cursor = Seq::new(after);
    loop {
        let events = store.read(session, stream, cursor, page, Reader::Inspector).await.expect("read");
        if events.is_empty() {
            return cursor.get();
        }
        assert!(events.len() <= page);
        for e in events {
            assert_eq!(e.seq, cursor.next(), "gap-free after {after} in pages of {page}");
            assert_eq!(e.payload, content(s, e.seq.get()), "event {} names its bytes", e.seq);
            cursor = e.seq;
        }
    }
}

#[tokio::test]
async fn events_that_left_memory_are_read_back_from_the_data_file_from_any_cursor() {
    let dir = tempdir();
    let (store, _) = RedbStore::open_options(dir.path().join("data.redb"), T0, spilling()).unwrap();
    let r = record(61);
    let (sid, s) = (r.id(), r.standalone().id());
    store.create(r).await.unwrap();
    for n in 1..=300 {
        emit(&store, sid, 1, n, &DEFAULT_LIMITS).await;
    }
    until(&store, "all 300 left memory", |st| metric(st, "forkless_store_spilled_events_total") == 300).await;
    assert_eq!(metric(&store, "forkless_store_cached_bytes"), 0);
    for after in [0, 1, 150, 299, 300] {
        for page in [1, 7, 1000] {
            assert_eq!(read_all(&store, sid, s, 1, after, page).await, 300);
        }
    }
    // Ten more, in memory until their checkpoint: a read across the line gets both.
    for n in 301..=310 {
        emit(&store, sid, 1, n, &DEFAULT_LIMITS).await;
    }
    assert_eq!(read_all(&store, sid, s, 1, 295, 100).await, 310);
    assert_eq!(read_all(&store, sid, s, 1, 0, 1000).await, 310);
}

#[tokio::test]
async fn retention_evicts_events_on_disk_and_accounts_for_them() {
    let dir = tempdir();
    let (store, _) = RedbStore::open_options(dir.path().join("data.redb"), T0, spilling()).unwrap();
    let r = record(62);
    let (sid, s) = (r.id(), r.standalone().id());
    store.create(r).await.unwrap();
    let keep_100 = Limits { stream_max_events: 100, ..Limits::default() };
    for n in 1..=300 {
        emit(&store, sid, 2, n, &keep_100).await;
    }
    let retained: u64 = (201..=300).map(|n| content(2, n).len() as u64).sum();
    assert_eq!(store.usage().retained_bytes, retained);
    until(&store, "every retained event left memory", |st| metric(st, "forkless_store_cached_bytes") == 0)
        .await;
    // One more evicts 201, which is on disk only; the new one is in memory until its
    // checkpoint. Whatever that checkpoint did meanwhile, memory holds at most the new one.
    emit(&store, sid, 2, 301, &keep_100).await;
    let retained = retained - content(2, 201).len() as u64 + content(2, 301).len() as u64;
    assert_eq!(store.usage().retained_bytes, retained);
    assert!(metric(&store, "forkless_store_cached_bytes") <= content(2, 301).len() as u64);
    let evicted = store.read(sid, s, Seq::new(200), 10, Reader::Inspector).await;
    assert!(
        matches!(evicted, Err(Error::Evicted { low_water }) if low_water == Seq::new(202)),
        "{evicted:?}"
    );
    assert_eq!(read_all(&store, sid, s, 2, 201, 9).await, 301);
    // Ending the session drops every event, on disk or not, from the accounts too.
    transact(&store, sid, |rec| rec.on_end(forkless_core::EndReason::Deleted, T0)).await.unwrap();
    assert_eq!(store.usage().retained_bytes, 0);
    assert_eq!(metric(&store, "forkless_store_cached_bytes"), 0);
}

#[tokio::test]
async fn memory_holds_no_more_than_its_budget_once_the_data_file_holds_the_rest() {
    let dir = tempdir();
    let options = Options {
        durability: Durability::Batched { window: Duration::from_millis(2) },
        cache_bytes: 256 << 10,
        checkpoint_interval: Duration::from_millis(20),
        ..Options::default()
    };
    // Three quarters of it are for events.
    let budget = 192 << 10;
    let (store, _) = RedbStore::open_options(dir.path().join("data.redb"), T0, options).unwrap();
    let sessions: Vec<_> = (0..6).map(|s| record(70 + s)).collect();
    for r in &sessions {
        store.create(r.clone()).await.unwrap();
    }
    let roomy = Limits { stream_max_events: 100_000, ..Limits::default() };
    for n in 1..=1_000 {
        for (s, r) in sessions.iter().enumerate() {
            emit(&store, r.id(), s as u64, n, &roomy).await;
        }
    }
    let retained = store.usage().retained_bytes;
    assert!(retained > 8 * budget, "the test retains several times the budget ({retained})");
    store.flush().await.unwrap();
    until(&store, "memory is within its budget", |st| metric(st, "forkless_store_cached_bytes") <= budget)
        .await;
    for (s, r) in sessions.iter().enumerate() {
        assert_eq!(read_all(&store, r.id(), r.standalone().id(), s as u64, 0, 64).await, 1_000);
    }
}

#[tokio::test]
async fn after_a_restart_the_retained_events_stay_on_disk_and_read_back_whole() {
    let dir = tempdir();
    let path = dir.path().join("data.redb");
    let sessions: Vec<_> = (0..3).map(|s| record(80 + s)).collect();
    {
        let (store, _) = RedbStore::open(&path, Durability::Immediate, T0).unwrap();
        for (s, r) in sessions.iter().enumerate() {
            store.create(r.clone()).await.unwrap();
            for n in 1..=500 {
                emit(&store, r.id(), s as u64, n, &DEFAULT_LIMITS).await;
            }
        }
    }
    let (store, recovery) = RedbStore::open(&path, Durability::Immediate, T0).unwrap();
    assert_eq!(recovery.events, 1_500);
    assert!(store.usage().retained_bytes > 0);
    assert_eq!(metric(&store, "forkless_store_cached_bytes"), 0, "opening reads no payload into memory");
    for (s, r) in sessions.iter().enumerate() {
        assert_eq!(read_all(&store, r.id(), r.standalone().id(), s as u64, 0, 100).await, 500);
        assert_eq!(read_all(&store, r.id(), r.standalone().id(), s as u64, 250, 1).await, 500);
    }
}
