//! What the record-level tests share: a clock origin and a fresh session.

use forkless_core::{NewSession, Revision, SeededEntropy, SessionId, SessionRecord, Timestamp};

/// `ms` milliseconds after a fixed origin.
pub(crate) fn at(ms: u64) -> Timestamp {
    Timestamp::from_millis(1_000_000 + ms)
}

/// A new 2025-11-25 session created at `at(0)`.
pub(crate) fn session(e: &mut SeededEntropy) -> SessionRecord {
    let new = NewSession {
        id: SessionId::generate(e),
        revision: Revision::V2025_11_25,
        reset_contract: false,
        principal: None,
        client: Default::default(),
    };
    SessionRecord::create(new, at(0), e).unwrap()
}
