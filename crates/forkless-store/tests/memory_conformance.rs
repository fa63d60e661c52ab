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

/// A crash loses the tasks a process keeps for a memory store whole: every acknowledged task
/// reads as unknown afterwards, none as an older state.
#[tokio::test]
async fn a_crash_forgets_every_task() {
    let equipped = || forkless_store::Equipped::new(forkless_store::MemoryStore::new());
    let report =
        forkless_store::conformance::crash_keeps_every_acknowledged_task(equipped(), |_lost| async move {
            equipped()
        })
        .await
        .expect("no task reads back older than acknowledged");
    assert!(report.acknowledged > 0);
    assert_eq!(report.forgotten, report.acknowledged, "{report:?}");
}

/// A store with only the core passes the suite as a server uses it: the process keeps its
/// tasks, spent keys and listen notifications (`Equipped`'s stand-ins).
mod core_only {
    forkless_store::store_conformance_tests!(async { CoreOnly(MemoryStore::new()) });

    use forkless_store::{Equipped, MemoryStore, Store, testing::CoreOnly};

    #[test]
    fn a_store_offers_exactly_the_capabilities_it_has() {
        let bare = CoreOnly(MemoryStore::new());
        assert!(bare.tasks().is_none() && bare.spending().is_none() && bare.publishing().is_none());
        assert!(bare.ownership().is_none());
        let memory = MemoryStore::new();
        assert!(memory.tasks().is_some() && memory.spending().is_some() && memory.publishing().is_some());
        assert!(memory.ownership().is_none(), "one process owns every session");
        let equipped = Equipped::new(bare);
        assert!(
            equipped.tasks().is_some() && equipped.spending().is_some() && equipped.publishing().is_some()
        );
        assert!(equipped.ownership().is_none(), "ownership has no stand-in: every session is here");
    }
}
