//! When time will next change a session, in a form a store can index without knowing the
//! configuration: a record's [`Wake`] anchors, and the [`Schedule`] that turns them into
//! deadlines.
//!
//! This module owns that arithmetic (a stream's own [`Stream::next_deadline`] included), so a
//! store's "sessions due for a sweep" query
//! ([`Wake::due`]) and the sweeper's own check ([`SessionRecord::next_deadline`]) can never
//! disagree. What a tick then does is [`crate::retention`]'s.

use core::time::Duration;

use crate::config::Config;
use crate::record::SessionRecord;
use crate::session::SessionState;
use crate::stream::{Attachment, Stream, StreamKind, StreamState};
use crate::stream_map::StreamChange;
use crate::time::Timestamp;

/// The durations that turn [`Wake`] anchors into deadlines: the core's retention times and
/// the server's tombstone time to live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Schedule {
    /// [`crate::Limits::stream_ttl`].
    pub stream_ttl: Duration,
    /// [`crate::Limits::session_idle_ttl`].
    pub session_idle_ttl: Duration,
    /// How long an ended session's tombstone is kept before it is removed.
    pub tombstone_ttl: Duration,
}

impl Schedule {
    /// The schedule of `cfg`, with the server's tombstone time to live.
    pub const fn of(cfg: &Config, tombstone_ttl: Duration) -> Self {
        Self {
            stream_ttl: cfg.limits.stream_ttl,
            session_idle_ttl: cfg.limits.session_idle_ttl,
            tombstone_ttl,
        }
    }
}

/// What a session's deadlines count from, each the earliest of its kind; `None` where time
/// alone changes nothing of that kind. A store indexes these four instants and answers "due
/// at `now`" with four range scans, so a sweep costs what is due, not what exists.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Wake {
    /// The earliest liveness deadline of an attachment (an instant, due at itself).
    pub liveness: Option<Timestamp>,
    /// The earliest instant a stream became idle with something for retention to do (events
    /// to evict, a completed or fenced request stream to drop): due after `stream_ttl`.
    pub stream_idle: Option<Timestamp>,
    /// An active session's last activity: due after `session_idle_ttl`.
    pub activity: Option<Timestamp>,
    /// When an ended session ended: its tombstone is due after `tombstone_ttl`.
    pub ended: Option<Timestamp>,
}

impl Wake {
    /// The earliest instant at which this session is due.
    pub fn at(&self, schedule: &Schedule) -> Option<Timestamp> {
        [
            self.liveness,
            self.stream_idle.map(|t| t.saturating_add(schedule.stream_ttl)),
            self.activity.map(|t| t.saturating_add(schedule.session_idle_ttl)),
            self.ended.map(|t| t.saturating_add(schedule.tombstone_ttl)),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Whether the session is due at `now`.
    pub fn due(&self, now: Timestamp, schedule: &Schedule) -> bool {
        self.at(schedule).is_some_and(|t| t <= now)
    }
}

/// What one stream's next deadline counts from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Anchor {
    /// An attachment's liveness deadline.
    Liveness(Timestamp),
    /// An idle instant, due after `stream_ttl`.
    Idle(Timestamp),
}

impl Anchor {
    /// The deadline, given `stream_ttl`.
    pub(crate) fn deadline(self, ttl: Duration) -> Timestamp {
        match self {
            Self::Liveness(t) => t,
            Self::Idle(t) => t.saturating_add(ttl),
        }
    }
}

/// When time alone next changes `s`: a liveness deadline (unless its node holds it), a fenced
/// request stream's drop, or an idle stream's eviction or drop. `None` when waiting changes
/// nothing: an idle stream with no events left and nothing to drop is not due again.
pub(crate) fn anchor(s: &Stream) -> Option<Anchor> {
    if let StreamState::Fenced(f) = s.state() {
        // The standalone stream's metadata is kept (a fenced session ends anyway).
        return (s.kind() == StreamKind::Request).then_some(Anchor::Idle(f.at));
    }
    match s.attachment()? {
        Attachment::Attached(a) => (a.deadline != Timestamp::MAX).then_some(Anchor::Liveness(a.deadline)),
        Attachment::Detached(_) => {
            let droppable = s.kind() == StreamKind::Request && s.is_completed();
            let evictable = s.retained_events() > 0;
            if droppable || evictable { s.idle_since().map(Anchor::Idle) } else { None }
        }
    }
}

impl Stream {
    /// The next instant at which time alone changes this stream (liveness, TTL eviction, or
    /// dropping a completed or fenced request stream); `None` if waiting changes nothing.
    pub fn next_deadline(&self, ttl: Duration) -> Option<Timestamp> {
        anchor(self).map(|a| a.deadline(ttl))
    }
}

impl Wake {
    /// The anchors of one stream alone (a store that changed only it merges these in).
    pub fn of_stream(s: &Stream) -> Self {
        match anchor(s) {
            Some(Anchor::Liveness(t)) => Self { liveness: Some(t), ..Self::default() },
            Some(Anchor::Idle(t)) => Self { stream_idle: Some(t), ..Self::default() },
            None => Self::default(),
        }
    }
}

impl SessionRecord {
    /// The anchors of this session's deadlines (see [`Wake`]).
    pub fn wake(&self) -> Wake {
        match self.session.state {
            SessionState::Ended(e) => Wake { ended: Some(e.at), ..Wake::default() },
            SessionState::Active(a) => {
                let mut wake = Wake { activity: Some(a.last_activity), ..Wake::default() };
                for anchor in self.streams.iter().filter_map(anchor) {
                    let slot = match anchor {
                        Anchor::Liveness(t) => (&mut wake.liveness, t),
                        Anchor::Idle(t) => (&mut wake.stream_idle, t),
                    };
                    *slot.0 = Some(slot.0.map_or(slot.1, |old| old.min(slot.1)));
                }
                wake
            }
        }
    }

    /// The anchors that can have moved sooner since `before` (an earlier version of this
    /// record): the session's own and those of the streams that changed, not the others'.
    /// A store that indexes "due no later than" merges these into what it indexed for
    /// `before`; this costs the streams that changed, where [`Self::wake`] costs them all.
    pub fn wake_since(&self, before: &Self) -> Wake {
        match self.session.state {
            SessionState::Ended(e) => Wake { ended: Some(e.at), ..Wake::default() },
            SessionState::Active(a) => {
                let mut wake = Wake { activity: Some(a.last_activity), ..Wake::default() };
                for change in self.changes_since(before) {
                    let (StreamChange::Added(s) | StreamChange::Changed { after: s, .. }) = change else {
                        continue;
                    };
                    let Some(anchor) = anchor(s) else { continue };
                    let slot = match anchor {
                        Anchor::Liveness(t) => (&mut wake.liveness, t),
                        Anchor::Idle(t) => (&mut wake.stream_idle, t),
                    };
                    *slot.0 = Some(slot.0.map_or(slot.1, |old| old.min(slot.1)));
                }
                wake
            }
        }
    }
}
