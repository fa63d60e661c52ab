//! The engine's index of when each session is next due for a sweep ([`Store::due`]): four
//! ordered sets, one per kind of [`Wake`] anchor, so "due at `now`" is four range scans.
//!
//! This module owns the index and how it may lag: an entry is never later than the session's
//! real anchor (an anchor that moves earlier or appears is indexed at once, by the write that
//! moved it), but it may be earlier (an anchor that moved later, such as activity on every
//! append, is left alone until a query finds it stale and refreshes it from the record). So a
//! write pays for the index only when it makes a session due sooner, and a query costs what is
//! due plus what went stale since. The schedule itself is the core's ([`Wake::due`]).
//!
//! [`Store::due`]: crate::Store::due

use std::collections::{BTreeSet, HashMap};

use forkless_core::{IdHashBuilder, Schedule, SessionId, Timestamp, Wake};

/// Sessions by each of their wake anchors, as indexed.
#[derive(Debug, Default)]
pub(crate) struct WakeIndex {
    indexed: HashMap<SessionId, Wake, IdHashBuilder>,
    liveness: BTreeSet<(Timestamp, SessionId)>,
    stream_idle: BTreeSet<(Timestamp, SessionId)>,
    activity: BTreeSet<(Timestamp, SessionId)>,
    ended: BTreeSet<(Timestamp, SessionId)>,
}

/// The earlier of two anchors of one kind (`None` is "never").
fn earliest(a: Option<Timestamp>, b: Option<Timestamp>) -> Option<Timestamp> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// `indexed` with every anchor of `fresh` that is earlier (or new) merged in.
pub(crate) fn merged(indexed: Wake, fresh: Wake) -> Wake {
    Wake {
        liveness: earliest(indexed.liveness, fresh.liveness),
        stream_idle: earliest(indexed.stream_idle, fresh.stream_idle),
        activity: earliest(indexed.activity, fresh.activity),
        ended: earliest(indexed.ended, fresh.ended),
    }
}

impl WakeIndex {
    fn sets(&mut self) -> [&mut BTreeSet<(Timestamp, SessionId)>; 4] {
        [&mut self.liveness, &mut self.stream_idle, &mut self.activity, &mut self.ended]
    }

    /// Index `id` at exactly `wake` (replacing what was indexed).
    pub(crate) fn set(&mut self, id: SessionId, wake: Wake) {
        let old = self.indexed.insert(id, wake).unwrap_or_default();
        if old == wake {
            return;
        }
        let anchors = |w: Wake| [w.liveness, w.stream_idle, w.activity, w.ended];
        for ((set, before), after) in self.sets().into_iter().zip(anchors(old)).zip(anchors(wake)) {
            if before != after {
                if let Some(t) = before {
                    set.remove(&(t, id));
                }
                if let Some(t) = after {
                    set.insert((t, id));
                }
            }
        }
    }

    /// Forget `id`.
    pub(crate) fn remove(&mut self, id: SessionId) {
        self.set(id, Wake::default());
        self.indexed.remove(&id);
    }

    /// Every session whose indexed anchors make it due at `now` (a superset of the sessions
    /// really due: see the module docs).
    pub(crate) fn candidates(&self, now: Timestamp, schedule: &Schedule) -> Vec<SessionId> {
        // Due after `ttl` means anchored at or before `now - ttl`; none if `ttl` is longer
        // than the clock has run.
        let before = |ttl| now.as_millis().checked_sub(duration_ms(ttl)).map(Timestamp::from_millis);
        let scans = [
            (&self.liveness, Some(now)),
            (&self.stream_idle, before(schedule.stream_ttl)),
            (&self.activity, before(schedule.session_idle_ttl)),
            (&self.ended, before(schedule.tombstone_ttl)),
        ];
        let mut out: Vec<SessionId> = Vec::new();
        for (set, until) in scans {
            let Some(until) = until else { continue };
            out.extend(set.iter().take_while(|(t, _)| *t <= until).map(|(_, id)| *id));
        }
        out.sort_unstable();
        out.dedup();
        out
    }
}

fn duration_ms(d: core::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
