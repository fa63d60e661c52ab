//! Wake-ups: the watchers of this node, woken by this node's own writes at once and by other
//! nodes' writes through a hint.
//!
//! A hint names the node that wrote and the streams it changed; a backend delivers it only if
//! the write is stored (PostgreSQL: `NOTIFY` in the writing transaction) and hands what its
//! listener receives to a [`HintSink`], which re-reads the streams this node watches. A hint
//! is only a hint: it is lost while a listener is disconnected, so every watched stream is
//! re-read whenever it (re)connects, and a watcher always sees a state the database stored,
//! never one a hint claimed.
//!
//! It owns the watchers and the hint format, not the channel hints travel on.

use std::collections::HashMap;
use std::sync::{Mutex, Weak};

use forkless_core::{Epoch, IdHashBuilder, Seq, SessionId, Stream, StreamId};
use tokio::sync::watch;

use super::hint::{Hinted, Said};
use super::{Database, Inner};
use crate::{StreamEnd, StreamSignal, StreamWatch};

/// Whether this node tells other nodes about its commits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Hints {
    /// Send a hint with every commit that changes a stream, and listen for other nodes' (the
    /// default: right for any number of nodes).
    #[default]
    Notify,
    /// Neither send nor listen: one node alone on the database.
    Off,
}

/// The watchers of this node, by stream.
#[derive(Debug, Default)]
pub(super) struct Hub {
    senders: Mutex<HashMap<(SessionId, StreamId), watch::Sender<StreamSignal>, IdHashBuilder>>,
}

/// A registered watch whose stream is not read yet: [`Hub::settle`] makes it a [`StreamWatch`].
#[derive(Debug)]
pub(super) struct Pending(watch::Receiver<StreamSignal>);

/// The signal of a stream registered but not read yet: every signal read later is later.
const UNREAD: StreamSignal = StreamSignal { delivered: Seq::PRIMING, epoch: Epoch::NONE, end: None };

/// A signal is later than another if its epoch or delivered mark moved on, or it ended.
fn later(new: &StreamSignal, old: &StreamSignal) -> bool {
    (new.epoch, new.delivered, new.end.is_some()) > (old.epoch, old.delivered, old.end.is_some())
}

impl Hub {
    /// Register a watch on `stream` before its metadata is read, so a commit announced
    /// between that read and [`Self::settle`] still reaches it (an announcement finds no
    /// watcher to wake only if nobody registered).
    pub(super) fn register(&self, session: SessionId, stream: StreamId) -> Pending {
        let mut map = self.senders.lock().unwrap_or_else(|p| p.into_inner());
        let tx = map.entry((session, stream)).or_insert_with(|| watch::Sender::new(UNREAD));
        Pending(tx.subscribe())
    }

    /// The watch `pending` became, starting from `meta` as read after it registered, or from
    /// whatever later was announced meanwhile. If the stream was dropped meanwhile, the watch
    /// reads as fenced.
    pub(super) fn settle(&self, session: SessionId, meta: &Stream, pending: Pending) -> StreamWatch {
        let signal = StreamSignal::of(meta, meta.high_water());
        let map = self.senders.lock().unwrap_or_else(|p| p.into_inner());
        match map.get(&(session, meta.id())) {
            Some(tx) if tx.subscribe().same_channel(&pending.0) => {
                tx.send_if_modified(|s| {
                    later(&signal, s) && {
                        *s = signal;
                        true
                    }
                });
                StreamWatch::new(pending.0)
            }
            _ => {
                let (_, rx) = watch::channel(StreamSignal { end: Some(StreamEnd::Fenced), ..signal });
                StreamWatch::new(rx)
            }
        }
    }

    /// Tell `stream`'s watchers about its committed metadata. Never moves a signal back: a
    /// re-read that raced a later commit is ignored.
    pub(super) fn announce(&self, session: SessionId, meta: &Stream) {
        let map = self.senders.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(tx) = map.get(&(session, meta.id())) {
            let signal = StreamSignal::of(meta, meta.high_water());
            tx.send_if_modified(|s| {
                later(&signal, s) && {
                    *s = signal;
                    true
                }
            });
        }
    }

    /// The stream is gone: its watchers see it fenced.
    pub(super) fn dropped(&self, session: SessionId, stream: StreamId) {
        self.senders.lock().unwrap_or_else(|p| p.into_inner()).remove(&(session, stream));
    }

    /// The session is gone.
    pub(super) fn session_dropped(&self, session: SessionId) {
        self.senders.lock().unwrap_or_else(|p| p.into_inner()).retain(|(s, _), _| *s != session);
    }

    /// Every stream someone here still watches (entries nobody watches any more are dropped).
    pub(super) fn watched(&self, session: Option<SessionId>) -> Vec<(SessionId, StreamId)> {
        let mut map = self.senders.lock().unwrap_or_else(|p| p.into_inner());
        map.retain(|_, tx| tx.receiver_count() > 0);
        map.keys().filter(|(s, _)| session.is_none_or(|id| id == *s)).copied().collect()
    }

    /// Whether anyone here watches `stream`.
    pub(super) fn is_watched(&self, session: SessionId, stream: StreamId) -> bool {
        let map = self.senders.lock().unwrap_or_else(|p| p.into_inner());
        map.get(&(session, stream)).is_some_and(|tx| tx.receiver_count() > 0)
    }
}

impl<D: Database> Inner<D> {
    /// The hint of a write from `old` to `new`, if hints are on and a stream changed.
    pub(super) fn hint(
        &self,
        old: &forkless_core::SessionRecord,
        new: &forkless_core::SessionRecord,
    ) -> Option<String> {
        if self.hints == Hints::Off {
            return None;
        }
        let streams: Vec<StreamId> = new.changes_since(old).map(|c| c.id()).collect();
        if streams.is_empty() {
            return None;
        }
        self.hints_sent.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Some(Said::Changed { session: new.id(), streams: Some(streams) }.encode(&self.node))
    }
}

/// Where a backend's hint listener hands what it receives: it re-reads the streams a hint
/// names that this node watches, and everything watched when the listener (re)connects.
#[derive(Debug)]
pub struct HintSink<D> {
    inner: Weak<Inner<D>>,
    node: String,
}

impl<D: Database> HintSink<D> {
    pub(super) fn new(inner: Weak<Inner<D>>, node: String) -> Self {
        Self { inner, node }
    }

    /// The listener (re)connected: hints sent meanwhile are lost, so re-read everything
    /// watched. `false` once the store is gone (the listener should end).
    pub async fn connected(&self) -> bool {
        let Some(store) = self.inner.upgrade() else { return false };
        let keys = store.hub.watched(None);
        store.refresh(keys).await;
        store.listener_connects.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        true
    }

    /// A hint arrived. `false` once the store is gone.
    pub async fn hint(&self, payload: &str) -> bool {
        let Some(store) = self.inner.upgrade() else { return false };
        // A malformed hint is ignored; so is this node's own (its watchers and subscribers had
        // what it says at once).
        let Some(hinted) = Hinted::decode(payload).filter(|h| h.from != self.node) else { return true };
        let (session, streams) = match hinted.what {
            Said::Notice(json) => {
                store.bulletin.publish(bytes::Bytes::copy_from_slice(json.as_bytes()));
                return true;
            }
            Said::Changed { session, streams } => (session, streams),
        };
        store.hints_received.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let keys = match streams {
            Some(streams) => streams
                .into_iter()
                .filter(|s| store.hub.is_watched(session, *s))
                .map(|s| (session, s))
                .collect(),
            None => store.hub.watched(Some(session)),
        };
        store.refresh(keys).await;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use forkless_core::Timestamp;

    fn stream_with(appended: u64) -> Stream {
        let mut s =
            Stream::new(StreamId::from_bytes([3; 12]), forkless_core::StreamKind::Request, Timestamp::ZERO);
        for _ in 0..appended {
            s.on_append(1, forkless_core::EventKind::Intermediate, Timestamp::ZERO).expect("open stream");
        }
        s
    }

    #[test]
    fn a_commit_announced_between_a_watchers_read_and_its_registration_still_wakes_it() {
        let hub = Hub::default();
        let session = SessionId::from_bytes([7; 16]);
        let (read, committed) = (stream_with(0), stream_with(1));
        // The watcher registers, reads the stream (nothing yet), and before it settles the
        // answer's commit is announced: what it settles on is the commit, not its read.
        let pending = hub.register(session, read.id());
        hub.announce(session, &committed);
        let mut watch = hub.settle(session, &read, pending);
        assert_eq!(watch.mark_seen().delivered, Seq::new(1), "the announced commit is not lost");
        // A later read never moves it back; a later commit moves it on.
        let again = hub.settle(session, &read, hub.register(session, read.id()));
        assert_eq!(again.current().delivered, Seq::new(1));
        hub.announce(session, &stream_with(2));
        assert_eq!(watch.current().delivered, Seq::new(2));
    }

    #[test]
    fn a_stream_dropped_before_its_watcher_settles_reads_as_fenced() {
        let hub = Hub::default();
        let session = SessionId::from_bytes([7; 16]);
        let read = stream_with(1);
        let pending = hub.register(session, read.id());
        hub.dropped(session, read.id());
        let watch = hub.settle(session, &read, pending);
        assert_eq!(watch.current().end, Some(StreamEnd::Fenced), "never a live watch of a dropped stream");
    }
}
