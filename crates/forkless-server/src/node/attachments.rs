//! Attachment ownership on this node: who serves each attached stream here, "the displaced
//! writer has stopped", and which connections have stalled.
//!
//! This module owns the [`Attachments`] interface and its single-process implementation,
//! [`LocalAttachments`]. It decides nothing about who may attach (the core did, by granting an
//! epoch); it makes a granted writer wait until the writer it displaced has stopped, and it is
//! where liveness lives under [`forkless_core::Liveness::PerNode`]: a writer reports each
//! completed write to its lease (an atomic store, no store write), and the node's stall watch
//! asks [`Attachments::stalled`] which leases made no progress for `grace` and detaches those.
//! An idle stream therefore costs no store write at all; the node costs one scan of its own
//! leases per watch interval.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use forkless_core::{Epoch, IdHashBuilder, SessionId, StreamId};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::session::BoxFuture;

/// One attachment: a stream and the epoch its writer was granted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Held {
    /// The session.
    pub session: SessionId,
    /// The stream.
    pub stream: StreamId,
    /// The granted epoch.
    pub epoch: Epoch,
}

/// Where attachments are owned. A node implementation keeps three promises:
///
/// 1. [`Self::acquire`] returns only once no writer holding an older epoch of the stream is
///    still running anywhere this implementation knows of, or once `wait` has passed (after
///    which an older writer can no longer read: the store fences reads by epoch).
/// 2. A lease is released when it is dropped; a writer never outlives its lease.
/// 3. [`Self::stalled`] names every held lease that made no progress since `since`, exactly
///    once, and marks it stalled, which ends its writer.
///
/// [`LocalAttachments`] keeps them within one process. A multi-node implementation keeps them
/// across nodes: the attachment names its node, the node's lease in the shared store bounds
/// how long a dead node's writers can be waited for, and a node that cannot renew its lease
/// stops its writers before the lease can lapse.
pub trait Attachments: Send + Sync + 'static {
    /// Hold `held`, once every older writer of its stream has stopped (or `wait` passed).
    fn acquire(&self, held: Held, wait: Duration) -> BoxFuture<'_, AttachmentLease>;
    /// The leases with no progress since `since`, now marked stalled.
    fn stalled(&self, since: Instant) -> Vec<Held>;
}

/// A held attachment. Report progress with [`Self::progressed`]; dropping it releases the
/// attachment.
pub struct AttachmentLease {
    progress: Arc<Progress>,
    release: Option<Release>,
}

/// What a lease reports and the node watches.
#[derive(Debug)]
struct Progress {
    /// Milliseconds after the node's epoch of the last completed write.
    last: AtomicU64,
    /// Cancelled when the node finds the lease stalled.
    stalled: CancellationToken,
}

type Release = Box<dyn FnOnce() + Send + Sync>;

impl std::fmt::Debug for AttachmentLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AttachmentLease").field("progress", &self.progress).finish_non_exhaustive()
    }
}

impl AttachmentLease {
    /// A completed write: the connection is draining.
    pub fn progressed(&self) {
        self.progress.last.store(millis_since_origin(Instant::now()), Ordering::Relaxed);
    }

    /// Whether the node found this lease stalled (its writer must end).
    pub fn is_stalled(&self) -> bool {
        self.progress.stalled.is_cancelled()
    }

    /// Completes when the node finds this lease stalled.
    pub async fn stalled(&self) {
        self.progress.stalled.cancelled().await;
    }
}

impl Drop for AttachmentLease {
    fn drop(&mut self) {
        if let Some(release) = self.release.take() {
            release();
        }
    }
}

/// The single-process [`Attachments`]: per stream, a watch of the epoch whose writer runs
/// here, and every held lease's progress.
#[derive(Debug, Default)]
pub struct LocalAttachments {
    inner: Arc<Mutex<Registry>>,
}

#[derive(Debug, Default)]
struct Registry {
    writers: HashMap<(SessionId, StreamId), watch::Sender<Option<Epoch>>, IdHashBuilder>,
    leases: HashMap<Held, Arc<Progress>, IdHashBuilder>,
}

fn lock(m: &Mutex<Registry>) -> MutexGuard<'_, Registry> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A fixed origin for progress instants, so they fit an atomic.
fn millis_since_origin(at: Instant) -> u64 {
    static ORIGIN: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    let origin = *ORIGIN.get_or_init(Instant::now);
    u64::try_from(at.saturating_duration_since(origin).as_millis()).unwrap_or(u64::MAX)
}

impl Attachments for LocalAttachments {
    fn acquire(&self, held: Held, wait: Duration) -> BoxFuture<'_, AttachmentLease> {
        Box::pin(async move {
            let key = (held.session, held.stream);
            // Subscribe under the registry lock, so the entry cannot be removed in between.
            let (tx, mut rx) = {
                let mut reg = lock(&self.inner);
                let tx = reg.writers.entry(key).or_insert_with(|| watch::Sender::new(None));
                (tx.clone(), tx.subscribe())
            };
            let mine = held.epoch;
            let _ = tokio::time::timeout(wait, rx.wait_for(|w| w.is_none_or(|e| e >= mine))).await;
            drop(rx);
            tx.send_if_modified(|w| {
                let newer = w.is_none_or(|e| e < mine);
                if newer {
                    *w = Some(mine);
                }
                newer
            });
            let progress = Arc::new(Progress {
                last: AtomicU64::new(millis_since_origin(Instant::now())),
                stalled: CancellationToken::new(),
            });
            lock(&self.inner).leases.insert(held, progress.clone());
            let inner = self.inner.clone();
            let release: Release = Box::new(move || release(&inner, held, &tx));
            AttachmentLease { progress, release: Some(release) }
        })
    }

    fn stalled(&self, since: Instant) -> Vec<Held> {
        let since = millis_since_origin(since);
        let reg = lock(&self.inner);
        let mut out = Vec::new();
        for (held, p) in &reg.leases {
            if p.last.load(Ordering::Relaxed) < since && !p.stalled.is_cancelled() {
                p.stalled.cancel();
                out.push(*held);
            }
        }
        out
    }
}

/// A lease ends: its epoch stops being the running writer's, and the stream's entry goes
/// once nobody waits on it.
fn release(inner: &Mutex<Registry>, held: Held, tx: &watch::Sender<Option<Epoch>>) {
    tx.send_if_modified(|w| {
        let mine = *w == Some(held.epoch);
        if mine {
            *w = None;
        }
        mine
    });
    let mut reg = lock(inner);
    reg.leases.remove(&held);
    let key = (held.session, held.stream);
    let idle = tx.receiver_count() == 0 && tx.borrow().is_none();
    if idle && reg.writers.get(&key).is_some_and(|current| current.same_channel(tx)) {
        reg.writers.remove(&key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use forkless_core::SeededEntropy;

    fn held(epoch: u64) -> Held {
        let mut e = SeededEntropy::new(1);
        Held {
            session: SessionId::generate(&mut e),
            stream: StreamId::generate(&mut e),
            epoch: Epoch::new(epoch),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_newer_writer_waits_for_the_displaced_one_to_release() {
        let local = Arc::new(LocalAttachments::default());
        let first = local.acquire(held(1), Duration::from_secs(10)).await;
        let second = {
            let local = local.clone();
            tokio::spawn(async move { local.acquire(held(2), Duration::from_secs(10)).await })
        };
        tokio::task::yield_now().await;
        assert!(!second.is_finished(), "the second writer waits while the first runs");
        drop(first);
        let second = second.await.expect("acquired after the release");
        assert!(!second.is_stalled());
        assert!(lock(&local.inner).writers.len() == 1 && lock(&local.inner).leases.len() == 1);
        drop(second);
        let reg = lock(&local.inner);
        assert!(reg.writers.is_empty() && reg.leases.is_empty(), "nothing is left once both are released");
    }

    #[tokio::test(start_paused = true)]
    async fn a_displaced_writer_that_never_stops_is_waited_for_no_longer_than_wait() {
        let local = LocalAttachments::default();
        let _stuck = local.acquire(held(1), Duration::from_secs(10)).await;
        let started = Instant::now();
        let _second = local.acquire(held(2), Duration::from_secs(3)).await;
        assert_eq!(started.elapsed(), Duration::from_secs(3));
    }

    #[tokio::test(start_paused = true)]
    async fn only_leases_without_progress_are_stalled_and_each_once() {
        let local = LocalAttachments::default();
        let quiet = local.acquire(held(1), Duration::ZERO).await;
        let mut other = held(1);
        other.stream = StreamId::generate(&mut SeededEntropy::new(9));
        let busy = local.acquire(other, Duration::ZERO).await;
        tokio::time::advance(Duration::from_secs(5)).await;
        busy.progressed();
        let since = Instant::now() - Duration::from_secs(1);
        assert_eq!(local.stalled(since), vec![held(1)]);
        assert!(quiet.is_stalled() && !busy.is_stalled());
        assert!(local.stalled(since).is_empty(), "a stalled lease is reported once");
    }
}
