//! This node's cache of session records: the version and record it last wrote or loaded, and
//! when that was last known to be the database's current record ([`Validated`]), so appends on
//! the node that serves a session read nothing. A stale entry costs one refused write and a
//! reload, never a wrong write: the database's compare-and-set decides. It owns the cache, not
//! what is written.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::Mutex;

use forkless_core::{IdHashBuilder, SessionId, SessionRecord};

use super::tail::Validated;
use crate::Version;

type Entries = HashMap<SessionId, (Version, SessionRecord, Validated), IdHashBuilder>;

#[derive(Debug, Default)]
pub(super) struct Cache {
    map: Mutex<Entries>,
}

impl Cache {
    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The cached record of `id` at its version.
    pub(super) fn get(&self, id: SessionId) -> Option<(Version, SessionRecord)> {
        self.lock().get(&id).map(|(v, r, _)| (*v, r.clone()))
    }

    /// `f` of the cached record of `id` and when it was validated, without copying it.
    pub(super) fn with<R>(&self, id: SessionId, f: impl FnOnce(&SessionRecord, Validated) -> R) -> Option<R> {
        self.lock().get(&id).map(|(_, r, at)| f(r, *at))
    }

    /// Cache `record` at `version`, validated at `at`, unless a later version is cached
    /// already (a write that finished after a later one was stored and cached, such as a
    /// batch's and a compare-and-set's racing on one session). The same version validated
    /// again keeps the later instant.
    pub(super) fn put(&self, version: Version, record: &SessionRecord, at: Validated) {
        let mut record = record.clone();
        record.mark_clean();
        match self.lock().entry(record.id()) {
            Entry::Occupied(o) if o.get().0 > version => {}
            Entry::Occupied(mut o) => {
                let at = if o.get().0 == version { at.max(o.get().2) } else { at };
                o.insert((version, record, at));
            }
            Entry::Vacant(v) => {
                v.insert((version, record, at));
            }
        }
    }

    pub(super) fn forget(&self, id: SessionId) {
        self.lock().remove(&id);
    }
}
