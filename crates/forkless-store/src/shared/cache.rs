//! This node's cache of session records: the version and record it last wrote or loaded, and
//! when that was last known to be the database's current record ([`Validated`]), so appends on
//! the node that serves a session read nothing. A stale entry costs one refused write and a
//! reload, never a wrong write: the database's compare-and-set decides. An entry also keeps
//! the history tag of the read it came from ([`Database::load_since`](super::Database::load_since)),
//! carried over the writes this node stores on it, so a later load asks only whether the
//! session moved. It owns the cache, not what is written.

use std::collections::HashMap;
use std::collections::hash_map::Entry as Slot;
use std::sync::Mutex;

use forkless_core::{IdHashBuilder, SessionId, SessionRecord};

use super::tail::Validated;
use super::{Database, Inner, Loaded};
use crate::{Error, Result, Version};

#[derive(Debug)]
struct Entry {
    version: Version,
    record: SessionRecord,
    at: Validated,
    tag: Option<u64>,
}

type Entries = HashMap<SessionId, Entry, IdHashBuilder>;

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
        self.lock().get(&id).map(|e| (e.version, e.record.clone()))
    }

    /// The version and history tag of `id`'s entry, if it has a tag.
    pub(super) fn known(&self, id: SessionId) -> Option<(Version, u64)> {
        self.lock().get(&id).and_then(|e| Some((e.version, e.tag?)))
    }

    /// The database said `id` is still at `version` (asked at `at`): the cached record, now
    /// validated then; `None` if the entry moved on or went meanwhile.
    pub(super) fn confirm(&self, id: SessionId, version: Version, at: Validated) -> Option<SessionRecord> {
        let mut map = self.lock();
        let e = map.get_mut(&id).filter(|e| e.version == version)?;
        e.at = e.at.max(at);
        Some(e.record.clone())
    }

    /// `f` of the cached record of `id` and when it was validated, without copying it.
    pub(super) fn with<R>(&self, id: SessionId, f: impl FnOnce(&SessionRecord, Validated) -> R) -> Option<R> {
        self.lock().get(&id).map(|e| f(&e.record, e.at))
    }

    /// Cache `record` at `version`, validated at `at`, unless a later version is cached
    /// already (a write that finished after a later one was stored and cached, such as a
    /// batch's and a compare-and-set's racing on one session). The same version validated
    /// again keeps the later instant. A record this node wrote keeps the entry's history tag.
    pub(super) fn put(&self, version: Version, record: &SessionRecord, at: Validated) {
        self.store(version, record, at, None);
    }

    /// Cache `record` as read at `version` with history tag `tag` (see [`Self::put`]).
    pub(super) fn put_read(&self, version: Version, record: &SessionRecord, at: Validated, tag: Option<u64>) {
        self.store(version, record, at, Some(tag));
    }

    fn store(&self, version: Version, record: &SessionRecord, at: Validated, read: Option<Option<u64>>) {
        let mut record = record.clone();
        record.mark_clean();
        match self.lock().entry(record.id()) {
            Slot::Occupied(o) if o.get().version > version => {}
            Slot::Occupied(mut o) => {
                let old = o.get();
                let at = if old.version == version { at.max(old.at) } else { at };
                let tag = read.unwrap_or(old.tag);
                o.insert(Entry { version, record, at, tag });
            }
            Slot::Vacant(v) => {
                v.insert(Entry { version, record, at, tag: read.flatten() });
            }
        }
    }

    pub(super) fn forget(&self, id: SessionId) {
        self.lock().remove(&id);
    }
}

impl<D: Database> Inner<D> {
    /// The record at its version: from the cache when `prefer_cache`, else from the database.
    pub(super) async fn current(
        &self,
        id: SessionId,
        prefer_cache: bool,
    ) -> Result<(Version, SessionRecord)> {
        if prefer_cache && let Some(hit) = self.cache.get(id) {
            return Ok(hit);
        }
        let sent = Validated::now();
        let known = self.cache.known(id);
        let mut loaded = self.db.load_since(id, known).await?;
        if let (Loaded::Unchanged, Some((version, _))) = (&loaded, known) {
            match self.cache.confirm(id, version, sent) {
                Some(record) => return Ok((version, record)),
                // The entry moved on meanwhile (a write of this node): read it all.
                None => loaded = self.db.load_since(id, None).await?,
            }
        }
        match loaded {
            Loaded::Found { version, record, tag } => {
                self.cache.put_read(version, &record, sent, tag);
                Ok((version, *record))
            }
            Loaded::Unknown => {
                self.forget(id);
                Err(Error::SessionUnknown)
            }
            Loaded::Unchanged => {
                Err(Error::Backend("the database found a session unchanged that was not named".into()))
            }
        }
    }
}
