//! What a redb store shares only within its process: spent one-time keys
//! ([`forkless_store::Spending`]) and listen notifications ([`forkless_store::Publishing`]).
//! Every clone of the store shares them; nothing of them is written to disk, so a key issued
//! before the store opened is `Unvouched`.

use forkless_core::Timestamp;
use forkless_store::Result;

use crate::RedbStore;

/// One-time keys are spent in this process's memory: complete from when the store opened.
impl forkless_store::Spending for RedbStore {
    async fn spend(
        &self,
        key: forkless_store::SpendKey,
        issued: Timestamp,
        until: Timestamp,
        now: Timestamp,
    ) -> Result<forkless_store::Spent> {
        self.check()?;
        self.inner.spent.spend(key, issued, until, now)
    }
}

/// Listen notifications: this process is the only node.
impl forkless_store::Publishing for RedbStore {
    async fn publish(&self, message: bytes::Bytes) -> Result<()> {
        self.inner.bulletin.publish(message);
        Ok(())
    }

    fn subscribe(&self) -> tokio::sync::broadcast::Receiver<bytes::Bytes> {
        self.inner.bulletin.subscribe()
    }
}
