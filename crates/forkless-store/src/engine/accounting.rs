//! What the engine counts and indexes beside its records: the retained bytes and evictions
//! of [`Engine::usage`], and the wake index behind [`Engine::due`] (see [`crate::due`]).

use super::*;

impl Engine {
    /// Account for a session's retained bytes going from `before` to `after`.
    pub(super) fn retain(&self, before: u64, after: u64) {
        if after >= before {
            self.retained.fetch_add(after - before, Ordering::Relaxed);
        } else {
            self.retained.fetch_sub(before - after, Ordering::Relaxed);
        }
    }

    /// What `session` retains, if it is held.
    pub fn retained_by(&self, session: SessionId) -> Option<u64> {
        let slot = self.slot(session).ok()?;
        let slot = lock(&slot).ok()?;
        Some(slot.record.retained_bytes())
    }

    /// What every session retains, and what retention evicted so far.
    pub fn usage(&self) -> Usage {
        Usage {
            retained_bytes: self.retained.load(Ordering::Relaxed),
            evicted_by_events: self.evicted[0].load(Ordering::Relaxed),
            evicted_by_bytes: self.evicted[1].load(Ordering::Relaxed),
        }
    }

    /// Index `slot` as due no later than `fresh` says (only a change that makes the session
    /// due sooner takes the index's lock).
    pub(super) fn index_sooner(&self, slot: &mut Slot, fresh: Wake) {
        let wake = merged(slot.wake, fresh);
        if wake != slot.wake {
            slot.wake = wake;
            if let Ok(mut index) = self.wakes.lock() {
                index.set(slot.record.id(), wake);
            }
        }
    }

    /// Index `slot` at exactly its record's anchors.
    pub(super) fn index_exact(&self, slot: &mut Slot) {
        let wake = slot.record.wake();
        slot.wake = wake;
        if let Ok(mut index) = self.wakes.lock() {
            index.set(slot.record.id(), wake);
        }
    }

    /// Every session due for a sweep at `now` under `schedule` (the store promise of the same
    /// name): the index's candidates, each checked against its record (and re-indexed from it).
    pub fn due(&self, now: Timestamp, schedule: &Schedule) -> Result<Vec<SessionId>> {
        let candidates = self.wakes.lock().map_err(|_| poisoned())?.candidates(now, schedule);
        let mut due = Vec::with_capacity(candidates.len());
        for id in candidates {
            match self.slot(id) {
                Ok(slot) => {
                    let mut slot = lock(&slot)?;
                    self.index_exact(&mut slot);
                    if slot.wake.due(now, schedule) {
                        due.push(id);
                    }
                }
                Err(Error::SessionUnknown) => self.wakes.lock().map_err(|_| poisoned())?.remove(id),
                Err(e) => return Err(e),
            }
        }
        Ok(due)
    }
}
