//! Listen notifications of one process (promise 10): what a [`crate::Publishing::publish`] sends
//! reaches every [`crate::Publishing::subscribe`]r of this process. A store shared by many nodes
//! also carries it to the others (`crate::shared`), each node handing it to its own bulletin.
//!
//! Best effort by design: a subscriber that falls more than [`Bulletin::CAPACITY`] messages
//! behind misses the oldest, as a listener that is not connected misses them all (the
//! 2026-07-28 listen stream is not resumable).

use bytes::Bytes;
use tokio::sync::broadcast;

/// The listen notifications of one process.
#[derive(Debug)]
pub struct Bulletin {
    tx: broadcast::Sender<Bytes>,
}

impl Default for Bulletin {
    fn default() -> Self {
        Self { tx: broadcast::Sender::new(Self::CAPACITY) }
    }
}

impl Bulletin {
    /// Messages a subscriber may fall behind before it misses the oldest.
    pub const CAPACITY: usize = 1024;

    /// Hand `message` to every subscriber of this process (none is fine).
    pub fn publish(&self, message: Bytes) {
        let _ = self.tx.send(message);
    }

    /// What is published from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Bytes> {
        self.tx.subscribe()
    }
}
