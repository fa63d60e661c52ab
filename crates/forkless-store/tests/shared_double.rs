//! The shared layer (`forkless_store::shared::SharedStore`) on the in-process database double
//! (`forkless_store::testing::MemoryDatabase`): the same conformance suites PostgreSQL and
//! Redis run, with no server, in every test run. The shared layer's policy (the read fence,
//! group commit, retention, leases and takeovers, hints, the tail) is tested here apart from
//! any real database; what is left to a database's own tests is its storing.

use forkless_store::testing::MemoryDatabase;

mod one_node {
    use super::MemoryDatabase;

    forkless_store::store_conformance_tests!(maybe async { Some(((), MemoryDatabase::new().node("a"))) });
}

mod two_nodes {
    use super::MemoryDatabase;

    /// Nodes `a` and `b` on one database.
    async fn two_nodes() -> Option<(
        (),
        forkless_store::shared::SharedStore<MemoryDatabase>,
        forkless_store::shared::SharedStore<MemoryDatabase>,
    )> {
        let db = MemoryDatabase::new();
        Some(((), db.node("a"), db.node("b")))
    }

    forkless_store::store_node_tests!(maybe two_nodes());
}

mod model {
    use forkless_core::Timestamp;
    use forkless_store::conformance::model::{Backend, cases, run};
    use forkless_store::shared::SharedStore;

    use super::MemoryDatabase;

    struct Double;

    impl Backend for Double {
        type S = SharedStore<MemoryDatabase>;
        const NAME: &'static str = "shared layer on the in-process database";
        fn open(rt: &tokio::runtime::Runtime, _: Timestamp) -> Self::S {
            // The node's listener is a task of the runtime the model drives.
            let _entered = rt.enter();
            MemoryDatabase::new().node("a")
        }
    }

    /// Random histories against the core's model, as the memory store runs them (a tenth of
    /// its count: the shared layer's group commit makes each step slower).
    #[test]
    fn core_and_shared_layer_keep_the_invariant_under_random_histories() {
        run::<Double>((cases() / 10).max(1));
    }
}

/// The negative control: the same two-node check on a double whose writes do not compare
/// versions (a backend that forgot its compare-and-set) fails, so the suite above would catch
/// a backend that breaks the contract. Appends collide by chance (about five runs in six lose
/// one), so it runs until one does, at most twenty times.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[should_panic(expected = "numbered gap-free")]
async fn negative_control_a_database_without_compare_and_set_fails_the_racing_appends_check() {
    for _ in 0..20 {
        let db = MemoryDatabase::ignoring_versions();
        let (a, b) = (db.node("a"), db.node("b"));
        forkless_store::conformance::run_nodes("appends_racing_on_two_nodes_are_numbered_gap_free", a, b)
            .await;
    }
}
