//! The state-machine test of [`forkless_store::conformance::model`] against [`RedbStore`] on
//! redb's in-memory backend, in immediate durability: the model delivers an event as soon as
//! its emit returns, which is what this mode promises (batched delivers after its window;
//! `crash_model.rs` covers it). One case in 25 of the memory store's count: a writer thread
//! per case.

use forkless_core::Timestamp;
use forkless_store::conformance::model::{Backend, cases, run};
use forkless_store_redb::{Durability, Options, RedbStore};

struct Redb;

impl Backend for Redb {
    type S = RedbStore;
    const NAME: &'static str = "redb (in-memory backend, immediate durability)";
    fn open(_: &tokio::runtime::Runtime, now: Timestamp) -> RedbStore {
        let backend = redb::backends::InMemoryBackend::new();
        // A small log (the least the store uses at its length), so no case fills 8 MiB.
        let log = redb::backends::InMemoryBackend::new();
        redb::StorageBackend::set_len(&log, 64 << 10).expect("size the log");
        RedbStore::open_with_backend(backend, log, Durability::Immediate, now).expect("open").0
    }
}

/// The same store with no room for events in memory and a checkpoint after every write: every
/// event leaves memory as soon as the data file holds it, so reads go through to the disk.
struct Spilling;

impl Backend for Spilling {
    type S = RedbStore;
    const NAME: &'static str = "redb (in-memory backend, no event cache, checkpoint after every write)";
    fn open(_: &tokio::runtime::Runtime, now: Timestamp) -> RedbStore {
        let backend = redb::backends::InMemoryBackend::new();
        let log = redb::backends::InMemoryBackend::new();
        redb::StorageBackend::set_len(&log, 64 << 10).expect("size the log");
        let options = Options {
            durability: Durability::Immediate,
            cache_bytes: 0,
            checkpoint_interval: std::time::Duration::ZERO,
            ..Options::default()
        };
        RedbStore::open_backend_options(backend, log, now, options).expect("open").0
    }
}

#[test]
fn core_and_redb_store_reading_through_to_its_data_file_keep_the_invariant() {
    run::<Spilling>((cases() / 25).max(1));
}

#[test]
fn core_and_redb_store_keep_the_invariant_under_random_histories() {
    run::<Redb>((cases() / 25).max(1));
}

#[test]
fn tasks_written_by_stale_nodes_keep_their_rules_on_the_redb_store() {
    forkless_store::conformance::model::run_tasks::<Redb>((cases() / 100).max(1));
}
