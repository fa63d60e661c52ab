//! Messages that must reach a session's owner: a client's responses to server-to-client
//! requests, and its cancellations of requests in flight.
//!
//! This module owns the [`Inbox`] interface and the registry of the sessions live on this
//! node ([`LiveSessions`]), which is its single-process implementation: the owner is always
//! this process, so a message is handed straight to the session's in-process state. It does
//! not parse messages (the POST path did) nor decide anything about streams.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use forkless_core::{EndReason, IdHashBuilder, SessionId};
use serde_json::Value;

use crate::jsonrpc::RpcError;
use crate::session::{SessionShared, lock};

/// A message for a session's owner.
#[derive(Debug)]
#[non_exhaustive]
pub enum InboxMessage {
    /// The client answered the server-to-client request `id`.
    Response {
        /// The request's id, as the server sent it.
        id: Value,
        /// Its result, or the client's error.
        outcome: Result<Value, RpcError>,
    },
    /// `notifications/cancelled` for the client's request `id`.
    Cancelled {
        /// The cancelled request's id.
        id: Value,
    },
}

/// What became of a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// The owner had someone waiting for it.
    Delivered,
    /// Nobody waits for it: no such request pending or in flight (answered already, never
    /// sent, or its session ended). Not an error: a late response or cancellation is normal.
    Unclaimed,
}

/// Where messages for a session's owner go. An implementation promises that a message for a
/// live session reaches that session's owner, wherever it runs, at most once, and that
/// [`Delivery::Unclaimed`] means nobody waits for it there.
///
/// The live-session registry keeps this within one process. A multi-node implementation forwards a
/// message for a session owned elsewhere to the owner node (through its inbox in the shared
/// store, or the owner's internal endpoint) and reports what the owner said.
pub trait Inbox: Send + Sync + 'static {
    /// Hand `message` to `session`'s owner.
    fn deliver(&self, session: SessionId, message: InboxMessage) -> Delivery;
}

/// The sessions live in this process, by id: what handles reach and what teardown clears.
#[derive(Default)]
pub(crate) struct LiveSessions {
    map: Mutex<Live>,
    /// Tells the handler a session ended here ([`crate::Handler::session_ended`]).
    on_end: Option<EndHook>,
}

/// The live sessions, and what counts against each principal's share ([`crate::quota`]),
/// kept under one lock so the two never disagree.
#[derive(Default)]
struct Live {
    by_id: HashMap<SessionId, Arc<SessionShared>, IdHashBuilder>,
    by_principal: HashMap<Arc<str>, Share>,
}

/// What one principal holds here: its sessions, and the payload bytes they retain (each as
/// last seen).
#[derive(Default)]
struct Share {
    ids: HashSet<SessionId, IdHashBuilder>,
    retained: u64,
}

impl Live {
    fn add(&mut self, shared: Arc<SessionShared>) {
        if let Some(key) = shared.quota_key.get() {
            let share = self.by_principal.entry(key.clone()).or_default();
            share.ids.insert(shared.id);
            share.retained += shared.retained.load(Ordering::Relaxed);
        }
        self.by_id.insert(shared.id, shared);
    }

    fn remove(&mut self, id: SessionId) -> Option<Arc<SessionShared>> {
        let shared = self.by_id.remove(&id)?;
        if let Some(key) = shared.quota_key.get()
            && let Some(share) = self.by_principal.get_mut(key)
        {
            share.ids.remove(&id);
            share.retained = share.retained.saturating_sub(shared.retained.load(Ordering::Relaxed));
            if share.ids.is_empty() {
                self.by_principal.remove(key);
            }
        }
        Some(shared)
    }
}

/// What runs once a session is torn down here.
pub(crate) type EndHook = Box<dyn Fn(SessionId, EndReason) + Send + Sync>;

impl std::fmt::Debug for LiveSessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveSessions").field("live", &self.len()).finish_non_exhaustive()
    }
}

impl LiveSessions {
    /// A registry that calls `on_end` for every session it tears down.
    pub(crate) fn new(on_end: EndHook) -> Self {
        Self { map: Mutex::default(), on_end: Some(on_end) }
    }

    /// Tear down the in-process state of an ended session: unregister it, cancel its
    /// handlers, fail its pending requests, tell the handler. Nothing if it is not live here.
    pub(crate) fn end(&self, id: SessionId, reason: EndReason) {
        if let Some(shared) = self.remove(id) {
            tracing::info!(session = %id, reason = reason.as_str(), "session torn down");
            shared.end(reason);
            if let Some(on_end) = &self.on_end {
                on_end(id, reason);
            }
        }
    }

    /// The live state of `id`, made by `make` if there is none yet.
    pub(crate) fn get_or_insert(
        &self,
        id: SessionId,
        make: impl FnOnce() -> Arc<SessionShared>,
    ) -> Arc<SessionShared> {
        let mut live = lock(&self.map);
        if let Some(shared) = live.by_id.get(&id) {
            return shared.clone();
        }
        let shared = make();
        live.add(shared.clone());
        shared
    }

    /// The live state of `id`, if any.
    pub(crate) fn get(&self, id: SessionId) -> Option<Arc<SessionShared>> {
        lock(&self.map).by_id.get(&id).cloned()
    }

    /// Register a session just created here (counted against its quota key, if it has one).
    pub(crate) fn insert(&self, shared: Arc<SessionShared>) {
        lock(&self.map).add(shared);
    }

    /// Unregister `id`, returning its state.
    pub(crate) fn remove(&self, id: SessionId) -> Option<Arc<SessionShared>> {
        lock(&self.map).remove(id)
    }

    /// How many sessions are live here.
    pub(crate) fn len(&self) -> usize {
        lock(&self.map).by_id.len()
    }

    /// How many live sessions here count against `key`.
    pub(crate) fn held_by(&self, key: &str) -> usize {
        lock(&self.map).by_principal.get(key).map_or(0, |share| share.ids.len())
    }

    /// The payload bytes the live sessions of `key` retain here, each as last seen.
    pub(crate) fn retained_by(&self, key: &str) -> u64 {
        lock(&self.map).by_principal.get(key).map_or(0, |share| share.retained)
    }

    /// `session` now retains `bytes`: its principal's share moves by the difference. Returns
    /// what the share holds now (`None` for a session not live here or counted against no one).
    pub(crate) fn observe_retained(&self, session: SessionId, bytes: u64) -> Option<u64> {
        let mut live = lock(&self.map);
        let shared = live.by_id.get(&session)?.clone();
        let before = shared.retained.swap(bytes, Ordering::Relaxed);
        let share = live.by_principal.get_mut(shared.quota_key.get()?)?;
        share.retained = (share.retained + bytes).saturating_sub(before);
        Some(share.retained)
    }

    /// What the share of `session`'s principal holds now (`None` as for
    /// [`Self::observe_retained`]).
    pub(crate) fn share_of(&self, session: SessionId) -> Option<u64> {
        let live = lock(&self.map);
        let key = live.by_id.get(&session)?.quota_key.get()?;
        live.by_principal.get(key).map(|share| share.retained)
    }

    /// The session to reclaim at the limit for `asking`: the longest idle of the principal
    /// holding the most, if that is more than `asking` holds (one holding as many as anyone
    /// is refused instead).
    pub(crate) fn reclaimable(&self, asking: Option<&str>) -> Option<SessionId> {
        let live = lock(&self.map);
        let holds = asking.and_then(|k| live.by_principal.get(k)).map_or(0, |share| share.ids.len());
        let (_, Share { ids, .. }) = live
            .by_principal
            .iter()
            .filter(|(key, _)| asking != Some(&***key))
            .max_by_key(|(_, share)| share.ids.len())?;
        if ids.len() <= holds {
            return None;
        }
        let idle = |id: &&SessionId| live.by_id.get(id).map_or(0, |s| s.last_used.load(Ordering::Relaxed));
        ids.iter().min_by_key(idle).copied()
    }

    /// Ids of every live session here.
    pub(crate) fn ids(&self) -> Vec<SessionId> {
        lock(&self.map).by_id.keys().copied().collect()
    }
}

impl Inbox for LiveSessions {
    fn deliver(&self, session: SessionId, message: InboxMessage) -> Delivery {
        let Some(shared) = self.get(session) else { return Delivery::Unclaimed };
        let claimed = match message {
            InboxMessage::Response { id, outcome } => shared.resolve(&id, outcome),
            InboxMessage::Cancelled { id } => shared.cancel_request(&id),
        };
        if claimed { Delivery::Delivered } else { Delivery::Unclaimed }
    }
}
