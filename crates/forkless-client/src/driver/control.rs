//! The handles on one stream: what its driver shares with [`StreamControl`] handles and the
//! client (statistics, and fault injection for the check and chaos tools).

use super::*;

/// What a driver shares with [`StreamControl`] handles and the client.
#[derive(Debug)]
pub(crate) struct StreamShared {
    pub(super) origin: StreamOrigin,
    pub(super) session: SessionView,
    pub(super) stream_id: Mutex<Option<StreamId>>,
    pub(super) stats: Mutex<StreamStats>,
    pub(super) cut: Notify,
    pub(super) finished: AtomicBool,
    /// Cancelled when the driver has stopped, for [`StreamControl::finished`].
    pub(super) done: CancellationToken,
    pub(super) stop: CancellationToken,
}

impl StreamShared {
    pub(crate) fn new(origin: StreamOrigin, session: SessionView) -> Arc<Self> {
        let stop = session.cancel.child_token();
        Arc::new(Self {
            origin,
            session,
            stream_id: Mutex::new(None),
            stats: Mutex::new(StreamStats::default()),
            cut: Notify::new(),
            finished: AtomicBool::new(false),
            done: CancellationToken::new(),
            stop,
        })
    }

    pub(crate) fn stats(&self) -> StreamStats {
        lock(&self.stats).clone()
    }

    pub(super) fn stats_mut(&self) -> MutexGuard<'_, StreamStats> {
        lock(&self.stats)
    }
}

/// A handle on one SSE stream: its statistics, and fault injection for the check and chaos
/// tools.
#[derive(Clone, Debug)]
pub struct StreamControl {
    shared: Arc<StreamShared>,
}

impl StreamControl {
    pub(crate) fn new(shared: Arc<StreamShared>) -> Self {
        Self { shared }
    }

    /// Which stream this is.
    pub fn origin(&self) -> StreamOrigin {
        self.shared.origin
    }

    /// The server's identity for the stream (`Mcp-Stream-Id`), if it named one.
    pub fn stream_id(&self) -> Option<StreamId> {
        *lock(&self.shared.stream_id)
    }

    /// A snapshot of the stream's counters.
    pub fn stats(&self) -> StreamStats {
        self.shared.stats()
    }

    /// Whether the driver has stopped (completed, failed or closed).
    pub fn is_finished(&self) -> bool {
        self.shared.finished.load(Ordering::SeqCst)
    }

    /// Wait until the driver has stopped.
    pub async fn finished(&self) {
        self.shared.done.cancelled().await;
    }

    /// Drop the current connection as if the network had failed; the stream then resumes as
    /// usual. If no connection is being read right now (the driver is between connections),
    /// the next one is cut as soon as it is established.
    pub fn cut(&self) {
        self.shared.cut.notify_one();
    }

    /// Stop this stream for good (without ending the session).
    pub fn close(&self) {
        self.shared.stop.cancel();
    }
}
