//! The durable redb store: the conformance suite in both durability modes, recovery after a
//! restart and refusal of unknown file formats ([`restart`]), what a failed write does
//! ([`failures`]), and replay of the write-ahead log after a power failure, torn and stale
//! entries included ([`replay`]). This file holds what they share.

use forkless_core::EventKind;
use forkless_store::Append;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use forkless_core::{
    AppendTarget, Config, GetOutcome, GetRequest, Label, Limits, NewSession, Revision, SeededEntropy, Seq,
    SessionId, SessionRecord, StreamId, Timestamp,
};
use forkless_store::Reader;
use forkless_store::{Error, Store, transact};
use forkless_store_redb::{Durability, RedbStore};
use redb::ReadableTable as _;
use redb::StorageBackend as _;

const T0: Timestamp = Timestamp::from_millis(5_000_000);

#[path = "../support/mod.rs"]
mod support;

mod cache;
mod checkpoint;
mod failures;
mod replay;
mod restart;

use support::{Machine, SMALL_LOG};

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("temp dir")
}

mod immediate {
    forkless_store::store_conformance_tests!(async {
        let dir = Box::leak(Box::new(super::tempdir()));
        let (store, _) = forkless_store_redb::RedbStore::open(
            dir.path().join("data.redb"),
            forkless_store_redb::Durability::Immediate,
            super::T0,
        )
        .expect("open");
        store
    });
}

mod batched {
    forkless_store::store_conformance_tests!(async {
        let dir = Box::leak(Box::new(super::tempdir()));
        let durability =
            forkless_store_redb::Durability::Batched { window: std::time::Duration::from_millis(2) };
        let (store, _) =
            forkless_store_redb::RedbStore::open(dir.path().join("data.redb"), durability, super::T0)
                .expect("open");
        store
    });
}

/// No room for events in memory and a checkpoint after every write: every read of an event
/// older than the last checkpoint goes through to the data file.
mod spilling {
    forkless_store::store_conformance_tests!(async {
        let dir = Box::leak(Box::new(super::tempdir()));
        let options = forkless_store_redb::Options {
            durability: forkless_store_redb::Durability::Immediate,
            cache_bytes: 0,
            checkpoint_interval: std::time::Duration::ZERO,
            ..forkless_store_redb::Options::default()
        };
        let (store, _) =
            forkless_store_redb::RedbStore::open_options(dir.path().join("data.redb"), super::T0, options)
                .expect("open");
        store
    });
}

fn record(seed: u64) -> SessionRecord {
    let mut e = SeededEntropy::new(seed);
    let new = NewSession {
        id: SessionId::generate(&mut e),
        revision: Revision::V2025_11_25,
        reset_contract: true,
        principal: Some("alice".into()),
        client: Default::default(),
    };
    SessionRecord::create(new, T0, &mut e).expect("create")
}

/// Append an intermediate event to the standalone stream at `T0`, under the default limits.
fn standalone_event(
    store: &RedbStore,
    session: SessionId,
    payload: Bytes,
) -> impl Future<Output = Result<forkless_core::EventId, Error>> + '_ {
    store.append(Append {
        session,
        target: AppendTarget::Standalone,
        payload,
        kind: EventKind::Intermediate,
        now: T0,
        limits: &DEFAULT_LIMITS,
    })
}

/// The default limits, borrowed by [`standalone_event`].
static DEFAULT_LIMITS: std::sync::LazyLock<Limits> = std::sync::LazyLock::new(Limits::default);

fn payload(n: u64) -> Bytes {
    Bytes::from(format!("{{\"n\":{n}}}"))
}
