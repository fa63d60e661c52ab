//! The SSE stream of a POST's request, opened in the store on first use (see
//! [`RequestStream`]).

use std::future::Future;
use std::sync::Arc;

use forkless_core::{Grant, Label, SessionId, StreamId};

use super::Outbox;

/// The SSE stream of a POST's request (or batch), opened in the store when first needed:
/// when its handler first sends something on it, or when the POST's answer has to wait for
/// the handler. A handler that answers at once without sending anything never needs it open:
/// its answer opens, fills and releases the stream in one append
/// ([`forkless_core::AppendTarget::Answer`]), and the POST carries the whole stream as a finished body.
#[derive(Debug)]
pub(crate) struct RequestStream {
    pub(crate) id: StreamId,
    /// The request's JSON-RPC id, serialized, kept with the stream so that a restart can still
    /// answer the request; `None` for a batch's stream (answered with id `null` then).
    pub(crate) label: Option<Label>,
    state: tokio::sync::OnceCell<Claim>,
    /// Told when an opening succeeds (a POST lingering for its handler's answer stops then).
    opened: tokio::sync::Notify,
    /// Where a handler done after its first poll hands its answer to the POST lingering for
    /// it (set by that POST only: a request answered at once allocates nothing for it).
    handoff: std::sync::Mutex<Option<tokio::sync::oneshot::Sender<bytes::Bytes>>>,
}

/// What became of a [`RequestStream`], decided once.
#[derive(Clone, Copy, Debug)]
enum Claim {
    /// Opened, attached to the POST's connection; `None` where the opener holds no grant
    /// (its opening was applied, but whoever made it stopped waiting before it was confirmed).
    Open(Option<Grant>),
    /// Taken by the POST for an answer-at-once: it is (or is being) opened, filled and
    /// released in one append, and nothing more can go on it.
    Answered,
}

impl RequestStream {
    pub(crate) fn new(id: StreamId, label: Option<Label>) -> Arc<Self> {
        Arc::new(Self {
            id,
            label,
            state: tokio::sync::OnceCell::new(),
            opened: tokio::sync::Notify::new(),
            handoff: std::sync::Mutex::new(None),
        })
    }

    /// Claim the stream for an answer-at-once; false if it is open or being opened.
    pub(crate) fn claim_for_answer(&self) -> bool {
        self.state.set(Claim::Answered).is_ok()
    }

    /// Offer to take the handler's answer (the POST, lingering): what it hands over arrives
    /// on the receiver.
    pub(crate) fn offer_handoff(&self) -> tokio::sync::oneshot::Receiver<bytes::Bytes> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        *self.handoff.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(tx);
        rx
    }

    /// The POST's offer, if it made one and still waits (the handler's task, done).
    pub(crate) fn take_handoff(&self) -> Option<tokio::sync::oneshot::Sender<bytes::Bytes>> {
        let taken = self.handoff.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        taken.filter(|tx| !tx.is_closed())
    }

    /// Done once the stream has been opened (by anyone; at once if it was already).
    pub(crate) async fn opened(&self) {
        self.opened.notified().await;
    }

    /// Its grant, opening the stream in the store through `outbox` unless that was decided
    /// already: the one way a request stream is opened, by its POST or by its handler's first
    /// message (see [`Self::open`]).
    pub(crate) async fn open_in(
        &self,
        outbox: &dyn Outbox,
        session: SessionId,
    ) -> Result<Option<Grant>, forkless_store::Error> {
        self.open(|| outbox.open(session, self)).await
    }

    /// Its grant, opening the stream with `open` unless that was decided already. Whoever
    /// comes first opens it; anyone else waits for that and gets the same grant (if the
    /// opening fails, the next caller tries again). `None` if it was claimed for an answer, or
    /// is open without a grant here.
    pub(crate) async fn open<E, Fut>(&self, open: impl FnOnce() -> Fut) -> Result<Option<Grant>, E>
    where
        Fut: Future<Output = Result<Option<Grant>, E>>,
    {
        let claim = self
            .state
            .get_or_try_init(|| async {
                let grant = open().await?;
                self.opened.notify_one();
                Ok(Claim::Open(grant))
            })
            .await?;
        Ok(match claim {
            Claim::Open(grant) => *grant,
            Claim::Answered => None,
        })
    }
}
