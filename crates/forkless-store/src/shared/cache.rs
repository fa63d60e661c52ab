//! This node's cache of session records: the version and record it last wrote or loaded, so
//! appends on the node that serves a session read nothing. A stale entry costs one refused
//! write and a reload, never a wrong write: the database's compare-and-set decides. It owns
//! the cache, not what is written.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::Mutex;

use forkless_core::{IdHashBuilder, SessionId, SessionRecord};

use crate::Version;

#[derive(Debug, Default)]
pub(super) struct Cache {
    map: Mutex<HashMap<SessionId, (Version, SessionRecord), IdHashBuilder>>,
}

impl Cache {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<SessionId, (Version, SessionRecord), IdHashBuilder>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The cached record of `id` at its version.
    pub(super) fn get(&self, id: SessionId) -> Option<(Version, SessionRecord)> {
        self.lock().get(&id).cloned()
    }

    /// Cache `record` at `version`, unless a later version is cached already (a write that
    /// finished after a later one was stored and cached, such as a batch's and a
    /// compare-and-set's racing on one session).
    pub(super) fn put(&self, version: Version, record: &SessionRecord) {
        let mut record = record.clone();
        record.mark_clean();
        match self.lock().entry(record.id()) {
            Entry::Occupied(o) if o.get().0 > version => {}
            Entry::Occupied(mut o) => {
                o.insert((version, record));
            }
            Entry::Vacant(v) => {
                v.insert((version, record));
            }
        }
    }

    pub(super) fn forget(&self, id: SessionId) {
        self.lock().remove(&id);
    }
}
