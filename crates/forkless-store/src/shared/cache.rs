//! This node's cache of session records: the version and record it last wrote or loaded, so
//! appends on the node that serves a session read nothing. A stale entry costs one refused
//! write and a reload, never a wrong write: the database's compare-and-set decides.
//!
//! Each entry carries a [`Ticket`] that changes whenever anything but the committer puts it
//! (a compare-and-set, a load): the committer, computing one batch on top of another not yet
//! stored, checks that nobody on this node wrote the session in between. It owns the cache,
//! not what is written.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use forkless_core::{IdHashBuilder, SessionId, SessionRecord};

use crate::Version;

/// Changes whenever an entry is put by anything but the committer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Ticket(u64);

/// Who puts an entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum By {
    /// The committer, after a batch it computed was stored: the entry keeps its ticket.
    Committer,
    /// Anything else: the entry gets a new ticket.
    Other,
}

#[derive(Debug, Default)]
pub(super) struct Cache {
    map: Mutex<HashMap<SessionId, (Version, SessionRecord, Ticket), IdHashBuilder>>,
    tickets: AtomicU64,
}

impl Cache {
    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<SessionId, (Version, SessionRecord, Ticket), IdHashBuilder>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The cached record of `id` at its version, with its ticket.
    pub(super) fn get(&self, id: SessionId) -> Option<(Version, SessionRecord, Ticket)> {
        self.lock().get(&id).cloned()
    }

    /// The ticket of `id`'s entry, if it is cached.
    pub(super) fn ticket(&self, id: SessionId) -> Option<Ticket> {
        self.lock().get(&id).map(|(_, _, t)| *t)
    }

    /// Cache `record` at `version`, unless a later version is cached already (a write that
    /// finished after a later one was stored and cached, such as a batch's and a
    /// compare-and-set's racing on one session); the entry's ticket after.
    pub(super) fn put(&self, version: Version, record: &SessionRecord, by: By) -> Ticket {
        let mut record = record.clone();
        record.mark_clean();
        let fresh = || Ticket(self.tickets.fetch_add(1, Ordering::Relaxed));
        let mut map = self.lock();
        match map.entry(record.id()) {
            Entry::Occupied(o) if o.get().0 > version => o.get().2,
            Entry::Occupied(mut o) => {
                let ticket = if by == By::Committer { o.get().2 } else { fresh() };
                o.insert((version, record, ticket));
                ticket
            }
            Entry::Vacant(v) => v.insert((version, record, fresh())).2,
        }
    }

    pub(super) fn forget(&self, id: SessionId) {
        self.lock().remove(&id);
    }
}
