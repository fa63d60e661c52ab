//! The store conformance suite against [`MemoryStore`], bare and behind an unarmed
//! [`FaultyStore`] (which must be transparent).

mod memory {
    forkless_store::store_conformance_tests!(async { forkless_store::MemoryStore::new() });
}

mod faulty_unarmed {
    forkless_store::store_conformance_tests!(async {
        forkless_store::FaultyStore::new(forkless_store::MemoryStore::new())
    });
}

/// A crash loses a memory store whole: every id a client received is refused afterwards
/// (the session is unknown: a clean 404), none names other content.
#[tokio::test]
async fn a_crash_refuses_every_received_id() {
    let report = forkless_store::conformance::crash_keeps_every_delivered_id(
        forkless_store::MemoryStore::new(),
        |_lost| async { forkless_store::MemoryStore::new() },
    )
    .await
    .expect("no id names other content after a crash");
    assert!(report.received > 0);
    assert_eq!(report.refused, report.received, "{report:?}");
}

/// A crash loses a memory store's tasks whole: every acknowledged task reads as unknown
/// afterwards, none as an older state.
#[tokio::test]
async fn a_crash_forgets_every_task() {
    let report = forkless_store::conformance::crash_keeps_every_acknowledged_task(
        forkless_store::MemoryStore::new(),
        |_lost| async { forkless_store::MemoryStore::new() },
    )
    .await
    .expect("no task reads back older than acknowledged");
    assert!(report.acknowledged > 0);
    assert_eq!(report.forgotten, report.acknowledged, "{report:?}");
}
