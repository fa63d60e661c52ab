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
