//! Appends answered before their batch was stored, counted by session, so that a load on this
//! node reads its own writes: [`Unstored::settled`] waits until every such append of a session
//! answered before it began is stored (or dropped), never for later ones, so a session that
//! keeps notifying cannot hold a load back. The committer stores batches in order, so a
//! session's appends settle in the order they were answered. It owns the count, not the
//! appends (the committer's).

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use forkless_core::{IdHashBuilder, SessionId};
use tokio::sync::Notify;

/// One session's count: `answered` ever, `settled` of those, in a generation of its own (an
/// entry is dropped once everything answered settled, and starts again at 0).
#[derive(Debug, Clone, Copy)]
struct Count {
    generation: u64,
    answered: u64,
    settled: u64,
}

#[derive(Debug, Default)]
pub(super) struct Unstored {
    count: Mutex<HashMap<SessionId, Count, IdHashBuilder>>,
    generations: AtomicU64,
    changed: Notify,
}

impl Unstored {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<SessionId, Count, IdHashBuilder>> {
        self.count.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// An append of `session` was answered before its batch was stored.
    pub(super) fn answered(&self, session: SessionId) {
        let mut count = self.lock();
        let generation = || self.generations.fetch_add(1, Ordering::Relaxed);
        count
            .entry(session)
            .or_insert_with(|| Count { generation: generation(), answered: 0, settled: 0 })
            .answered += 1;
    }

    /// The next `n` such appends of `session` are stored or dropped.
    pub(super) fn settle(&self, session: SessionId, n: u64) {
        let mut count = self.lock();
        if let Some(c) = count.get_mut(&session) {
            c.settled = (c.settled + n).min(c.answered);
            if c.settled == c.answered {
                count.remove(&session);
            }
        }
        drop(count);
        self.changed.notify_waiters();
    }

    /// Wait until every append of `session` answered before its batch was stored, before
    /// this call, is stored or dropped.
    pub(super) async fn settled(&self, session: SessionId) {
        let Some(at) = self.lock().get(&session).copied() else { return };
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            // Registered before the check, so a settle in between still wakes it.
            changed.as_mut().enable();
            match self.lock().get(&session) {
                Some(c) if c.generation == at.generation && c.settled < at.answered => {}
                _ => return,
            }
            changed.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_load_waits_for_the_sessions_answered_appends_and_only_for_them() {
        let unstored = std::sync::Arc::new(Unstored::default());
        let (a, b) = (SessionId::from_bytes([1; 16]), SessionId::from_bytes([2; 16]));
        unstored.answered(a);
        unstored.answered(a);
        unstored.settled(b).await; // another session's appends do not hold it
        let waiter = tokio::spawn({
            let unstored = std::sync::Arc::clone(&unstored);
            async move { unstored.settled(a).await }
        });
        tokio::task::yield_now().await;
        // Appends answered after the load began do not hold it: a session that keeps
        // notifying cannot hold a load back.
        unstored.answered(a);
        unstored.settle(a, 1);
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "one of the two answered before it is still unstored");
        unstored.settle(a, 1);
        waiter.await.expect("settled once both are stored, the third still unstored");
    }
}
