//! Retention beyond memory on the durable store: the resident set while a gibibyte of events
//! is retained under a bounded cache, and how fast a replay reads them back from the data file
//! against from memory.
//!
//! It owns the measurement (in this process, on the allocator `forkless serve` ships with when
//! the caller installs it) and the check that every replayed event comes back once, in order,
//! as it was written; the command prints it, `tests/retention.rs` holds CI to its bound, and
//! `docs/benchmarks.md` records it.

use std::path::Path;
use std::time::{Duration, Instant};

use bytes::Bytes;
use forkless_core::{
    AppendTarget, EventKind, Limits, NewSession, Revision, SeededEntropy, Seq, SessionId, SessionRecord,
    Timestamp,
};
use forkless_store::{Append, Reader, Store};
use forkless_store_redb::{Options, RedbStore};

use crate::Error;
use crate::procstat;

/// What to retain.
#[derive(Clone, Copy, Debug)]
pub struct Retention {
    /// Sessions, each with one stream holding its share.
    pub sessions: usize,
    /// Payload bytes retained across them.
    pub retained_bytes: u64,
    /// The size of each event.
    pub event_bytes: usize,
    /// The store's cache ([`Options::cache_bytes`]).
    pub cache_bytes: u64,
    /// Also fill a store whose cache holds everything and replay from it (the reference).
    pub compare_memory: bool,
}

/// What a run measured. Resident sizes are this process's, in KiB.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct Figures {
    /// Events retained.
    pub events: u64,
    /// Their payload bytes.
    pub retained_bytes: u64,
    /// The store's cache.
    pub cache_bytes: u64,
    /// After opening the store and creating the sessions.
    pub rss_start_kib: u64,
    /// With everything retained and checkpointed.
    pub rss_filled_kib: u64,
    /// The peak while filling (VmHWM).
    pub hwm_filled_kib: u64,
    /// After a restart (a new store on the same files).
    pub rss_reopened_kib: u64,
    /// After replaying everything from the reopened store.
    pub rss_replayed_kib: u64,
    /// Appends, MiB/s.
    pub append_mib_s: f64,
    /// Replay after the restart, everything from the data file, MiB/s.
    pub replay_disk_mib_s: f64,
    /// Replay from a store whose cache holds everything, MiB/s (0 unless compared).
    pub replay_memory_mib_s: f64,
}

const T0: Timestamp = Timestamp::from_millis(5_000_000);

/// How many events a replay asks for at once (a resuming client's page).
const PAGE: usize = 64;

fn record(seed: u64) -> SessionRecord {
    let mut e = SeededEntropy::new(seed);
    let new = NewSession {
        id: SessionId::generate(&mut e),
        revision: Revision::V2025_11_25,
        reset_contract: true,
        principal: None,
        client: Default::default(),
    };
    SessionRecord::create(new, T0, &mut e).expect("a new record is valid")
}

/// Event `n` of session `s`: its numbers, then a filler byte of its own.
fn event(s: u64, n: u64, len: usize) -> Bytes {
    let mut bytes = vec![(s * 31 + n) as u8; len.max(16)];
    bytes[..8].copy_from_slice(&s.to_be_bytes());
    bytes[8..16].copy_from_slice(&n.to_be_bytes());
    Bytes::from(bytes)
}

fn names_its_bytes(payload: &[u8], s: u64, n: u64, len: usize) -> bool {
    payload.len() == len.max(16)
        && payload[..8] == s.to_be_bytes()
        && payload[8..16] == n.to_be_bytes()
        && payload.last() == Some(&((s * 31 + n) as u8))
}

fn rss() -> (u64, u64) {
    procstat::sample(std::process::id()).map_or((0, 0), |s| (s.rss_kib, s.hwm_kib))
}

fn store_err(what: &str) -> impl Fn(forkless_store::Error) -> Error + '_ {
    move |e| Error::Store(format!("{what}: {e}"))
}

/// Measure in `dir` (two stores' files go there).
pub fn run(dir: &Path, spec: Retention) -> Result<Figures, Error> {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    rt.block_on(measure(dir, spec))
}

async fn measure(dir: &Path, spec: Retention) -> Result<Figures, Error> {
    let per_session = spec.retained_bytes / spec.sessions as u64 / spec.event_bytes as u64;
    let sessions: Vec<_> = (0..spec.sessions as u64).map(|s| record(1_000 + s)).collect();
    let options = Options { cache_bytes: spec.cache_bytes, ..Options::default() };
    let path = dir.join("bounded.redb");
    let mut figures = Figures { cache_bytes: spec.cache_bytes, ..Figures::default() };
    {
        let (store, _) = RedbStore::open_options(&path, T0, options).map_err(store_err("opening"))?;
        for r in &sessions {
            store.create(r.clone()).await.map_err(store_err("creating a session"))?;
        }
        figures.rss_start_kib = rss().0;
        let took = fill(&store, &sessions, per_session, spec.event_bytes).await?;
        figures.events = per_session * spec.sessions as u64;
        figures.retained_bytes = store.usage().retained_bytes;
        figures.append_mib_s = mib(figures.retained_bytes) / took.as_secs_f64();
        settle(&store, spec.cache_bytes).await?;
        (figures.rss_filled_kib, figures.hwm_filled_kib) = rss();
    }
    let (store, _) = RedbStore::open_options(&path, T0, options).map_err(store_err("reopening"))?;
    figures.rss_reopened_kib = rss().0;
    let took = replay(&store, &sessions, per_session, spec.event_bytes).await?;
    figures.replay_disk_mib_s = mib(figures.retained_bytes) / took.as_secs_f64();
    figures.rss_replayed_kib = rss().0;
    drop(store);
    if spec.compare_memory {
        let roomy = Options { cache_bytes: spec.retained_bytes * 2, ..Options::default() };
        let (store, _) =
            RedbStore::open_options(dir.join("roomy.redb"), T0, roomy).map_err(store_err("opening"))?;
        for r in &sessions {
            store.create(r.clone()).await.map_err(store_err("creating a session"))?;
        }
        fill(&store, &sessions, per_session, spec.event_bytes).await?;
        store.flush().await.map_err(store_err("flushing"))?;
        let took = replay(&store, &sessions, per_session, spec.event_bytes).await?;
        figures.replay_memory_mib_s = mib(figures.retained_bytes) / took.as_secs_f64();
    }
    Ok(figures)
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / f64::from(1 << 20)
}

async fn fill(
    store: &RedbStore,
    sessions: &[SessionRecord],
    per_session: u64,
    len: usize,
) -> Result<Duration, Error> {
    let limits = Limits {
        stream_max_events: u64::MAX,
        stream_max_bytes: u64::MAX,
        session_max_bytes: u64::MAX,
        ..Limits::default()
    };
    let started = Instant::now();
    for n in 1..=per_session {
        for (s, r) in sessions.iter().enumerate() {
            let payload = event(s as u64, n, len);
            let append = Append {
                session: r.id(),
                target: AppendTarget::Standalone,
                payload,
                kind: EventKind::Intermediate,
                now: T0,
                limits: &limits,
            };
            store.append(append).await.map_err(store_err("appending"))?;
        }
    }
    store.flush().await.map_err(store_err("flushing"))?;
    Ok(started.elapsed())
}

/// Wait until the checkpoints have caught up and memory holds no more than the cache.
async fn settle(store: &RedbStore, cache_bytes: u64) -> Result<(), Error> {
    let cached = |store: &RedbStore| {
        store.metrics().iter().find(|m| m.name == "forkless_store_cached_bytes").map_or(u64::MAX, |m| m.value)
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    while cached(store) > cache_bytes {
        if Instant::now() > deadline {
            return Err(Error::Store(format!("the cache still holds {} bytes after 120 s", cached(store))));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

/// Read every session's stream from its start in pages, checking each event comes once, in
/// order, naming its bytes.
async fn replay(
    store: &RedbStore,
    sessions: &[SessionRecord],
    per_session: u64,
    len: usize,
) -> Result<Duration, Error> {
    let started = Instant::now();
    for (s, r) in sessions.iter().enumerate() {
        let stream = r.standalone().id();
        let mut cursor = Seq::PRIMING;
        loop {
            let events = store
                .read(r.id(), stream, cursor, PAGE, Reader::Inspector)
                .await
                .map_err(store_err("replaying"))?;
            if events.is_empty() {
                break;
            }
            for e in events {
                let n = cursor.get() + 1;
                if e.seq.get() != n || !names_its_bytes(&e.payload, s as u64, n, len) {
                    return Err(Error::Store(format!(
                        "session {s}: expected event {n}, got {} ({} bytes)",
                        e.seq,
                        e.payload.len()
                    )));
                }
                cursor = e.seq;
            }
        }
        if cursor.get() != per_session {
            return Err(Error::Store(format!("session {s}: replayed {cursor} of {per_session} events")));
        }
    }
    Ok(started.elapsed())
}
