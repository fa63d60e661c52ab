//! The state-machine test of [`forkless_store::conformance::model`] against [`MemoryStore`],
//! and the compare-and-set primitive the model's racing GETs rely on, shown directly.

use std::sync::Arc;
use std::time::Duration;

use forkless_core::{
    Config, GetOutcome, GetRequest, Limits, Liveness, NewSession, ResumeMode, Revision, SeededEntropy,
    SessionId, SessionRecord, Timestamp,
};
use forkless_store::conformance::model::{Backend, cases, run};
use forkless_store::{Fault, FaultyStore, MemoryStore, Store, transact};

const T0_MS: u64 = 1_000_000_000;

struct Memory;

impl Backend for Memory {
    type S = MemoryStore;
    const NAME: &'static str = "memory";
    fn open(_: &tokio::runtime::Runtime, _: Timestamp) -> MemoryStore {
        MemoryStore::new()
    }
}

#[test]
fn core_and_memory_store_keep_the_invariant_under_random_histories() {
    run::<Memory>(cases());
}

/// The memory store behind a wrapper whose reads hand an event the bytes of the one before it,
/// from time to time: the sequence numbers stay right, only the content is renamed.
struct Renaming;

impl Backend for Renaming {
    type S = FaultyStore<MemoryStore>;
    const NAME: &'static str = "memory, reads renamed";
    fn open(_: &tokio::runtime::Runtime, _: Timestamp) -> Self::S {
        let store = FaultyStore::new(MemoryStore::new());
        for _ in 0..3 {
            store.inject(Fault::ReadRenamed);
        }
        store
    }
}

/// The content check's negative control: a store that keeps every sequence number but hands
/// an id to other bytes is caught (a model that compared sequence numbers only passed it).
#[test]
#[should_panic(expected = "other bytes")]
fn negative_control_a_store_that_renames_an_events_bytes_is_caught() {
    run::<Renaming>(300);
}

#[test]
fn a_stale_snapshot_never_overwrites_a_decision() {
    // The primitive the racing GETs above rely on, shown directly.
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let store = Arc::new(MemoryStore::new());
    let mut entropy = SeededEntropy::new(3);
    let id = SessionId::generate(&mut entropy);
    let new = NewSession {
        id,
        revision: Revision::V2025_11_25,
        reset_contract: false,
        principal: None,
        client: Default::default(),
    };
    let record = SessionRecord::create(new, Timestamp::from_millis(T0_MS), &mut entropy).unwrap();
    rt.block_on(store.create(record)).unwrap();
    let a = rt.block_on(store.load(id)).unwrap().unwrap();
    let b = rt.block_on(store.load(id)).unwrap().unwrap();
    let cfg = Config {
        mode: ResumeMode::Compat,
        grace: Duration::from_secs(10),
        liveness: Liveness::PerConnection,
        limits: Limits {
            stream_max_events: 1000,
            stream_ttl: Duration::from_secs(86_400),
            session_idle_ttl: Duration::from_secs(86_400),
            ..Limits::default()
        },
        ..Config::default()
    };
    let now = Timestamp::from_millis(T0_MS);
    let (mut ra, mut rb) = (a.value, b.value);
    let ga = ra.on_get(&GetRequest::default(), now, &cfg, &mut entropy).unwrap();
    let gb = rb.on_get(&GetRequest::default(), now, &cfg, &mut entropy).unwrap();
    assert_eq!(ga, gb, "both snapshots decide row 1 with the same epoch");
    assert!(rt.block_on(store.compare_and_set(a.version, ra)).unwrap().is_some());
    assert_eq!(rt.block_on(store.compare_and_set(b.version, rb)).unwrap(), None);
    let retry =
        rt.block_on(transact(&*store, id, |r| r.on_get(&GetRequest::default(), now, &cfg, &mut entropy)));
    assert!(matches!(retry, Ok((GetOutcome::Conflict(_), _))), "the retry sees the first attachment live");
}

#[test]
fn tasks_written_by_stale_nodes_keep_their_rules_on_the_memory_store() {
    forkless_store::conformance::model::run_tasks::<Memory>((cases() / 20).max(1));
}

/// Tasks kept so that the version a task is written at is ignored (last writer wins).
struct LastWriterWins(forkless_store::TaskMap);

impl forkless_store::TaskStore for LastWriterWins {
    async fn create_task(&self, task: &forkless_core::TaskRecord) -> forkless_store::Result<()> {
        self.0.create_task(task).await
    }
    async fn load_task(
        &self,
        id: forkless_core::TaskId,
    ) -> forkless_store::Result<Option<forkless_store::Versioned<forkless_core::TaskRecord>>> {
        self.0.load_task(id).await
    }
    async fn replace_task(
        &self,
        _expected: forkless_store::Version,
        task: &forkless_core::TaskRecord,
    ) -> forkless_store::Result<Option<forkless_store::Version>> {
        let current = self.0.load_task(task.id()).await?.map(|v| v.version);
        match current {
            Some(v) => self.0.replace_task(v, task).await,
            None => Ok(None),
        }
    }
    async fn open_tasks(
        &self,
        node: Option<&forkless_store::NodeName>,
    ) -> forkless_store::Result<Vec<forkless_core::TaskId>> {
        self.0.open_tasks(node).await
    }
    async fn expire_tasks(&self, now: Timestamp) -> forkless_store::Result<u64> {
        self.0.expire_tasks(now).await
    }
}

/// The task histories' negative control: a store whose task writes ignore the version is
/// caught (a stale node's write lands over a newer state).
#[test]
fn negative_control_a_store_whose_task_writes_ignore_the_version_is_caught() {
    let outcome = forkless_store::conformance::model::run_tasks_against(500, |_| {
        LastWriterWins(forkless_store::TaskMap::default())
    });
    assert!(outcome.is_err(), "last writer wins must be caught");
}
