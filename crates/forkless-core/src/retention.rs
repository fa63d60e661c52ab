//! Retention and time (PROTOCOL section 8): what a session keeps, what it drops to make room,
//! and what the passing of time does to it (liveness expiry, stream and idle time-to-live).
//!
//! This module owns those policies, as transitions on [`SessionRecord`]. A store only applies
//! what they return ([`Eviction`], [`Tick`]); it decides none of it.

use crate::config::{Config, IdleClock, Limits};
use crate::error::{EndReason, Error};
use crate::id::StreamId;
use crate::record::SessionRecord;
use crate::session::SessionState;
use crate::stream::{EventKind, Stream, StreamKind, StreamState};
use crate::time::Timestamp;

/// What retention takes from one stream: its oldest `events` retained events, `bytes` of
/// payload in all ([`SessionRecord::on_retention`]). A store drops exactly these.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Eviction {
    /// How many of the oldest retained events go.
    pub events: usize,
    /// Their payload bytes.
    pub bytes: u64,
    /// Which limit made them go (`None` when none go).
    pub by: Option<EvictedBy>,
}

/// The retention limit that evicted events (PROTOCOL section 8), as `/metrics` labels it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EvictedBy {
    /// [`crate::Limits::stream_max_events`].
    StreamMaxEvents,
    /// [`crate::Limits::stream_max_bytes`].
    StreamMaxBytes,
    /// [`crate::Limits::stream_ttl`] (a detached stream's events, all at once).
    StreamTtl,
}

impl EvictedBy {
    /// The label value: the limit's name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::StreamMaxEvents => "stream_max_events",
            Self::StreamMaxBytes => "stream_max_bytes",
            Self::StreamTtl => "stream_ttl",
        }
    }
}

/// What time alone did to a session in [`SessionRecord::on_tick`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tick {
    /// Attachments detached by liveness expiry.
    pub detached: Vec<StreamId>,
    /// Streams whose retained events were all evicted by their time-to-live.
    pub evicted: Vec<StreamId>,
    /// How many events those streams held.
    pub evicted_events: u64,
    /// Completed request streams dropped entirely by their time-to-live.
    pub dropped: Vec<StreamId>,
    /// Whether the session ended by idling.
    pub ended: bool,
}

impl Tick {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.detached.is_empty() && self.evicted.is_empty() && self.dropped.is_empty() && !self.ended
    }
}

impl SessionRecord {
    /// Whether opening a request stream now would first drop completed ones to make room
    /// (retention by count): a store that applies an [`AppendTarget::Answer`](crate::AppendTarget::Answer) in place must
    /// then also drop their events.
    pub fn opening_drops_streams(&self, limits: &Limits) -> bool {
        self.streams.len() > limits.session_max_streams
    }

    /// Whether a new request stream could be opened now (what
    /// [`Self::open_request_stream`] would refuse with, without changing anything): lets the
    /// server refuse a request before its handler runs rather than after.
    pub fn check_request_stream_room(&self, limits: &Limits) -> Result<(), Error> {
        self.check_active()?;
        // `make_room` drops completed request streams down to seven eighths of the limit, so
        // the limit refuses only if fewer of them exist than the count is over it.
        let (len, max) = (self.streams.len(), limits.session_max_streams);
        if len > max {
            let droppable = self.streams.iter().filter(|s| droppable_since(s).is_some()).count();
            if droppable < len - max {
                return Err(Error::TooManyStreams { max });
            }
        }
        Ok(())
    }

    /// Which limit, if any, `stream` is over: whether [`Self::on_retention`] has anything to
    /// evict. A store that must fetch the sizes it asks for fetches them only when this says so.
    pub fn retention_due(&self, stream: StreamId, limits: &Limits) -> Option<EvictedBy> {
        self.stream(stream).and_then(|s| over_limits(s, limits))
    }

    /// Retention by size after an append to `stream` (PROTOCOL section 8): how many of its oldest
    /// retained events must go for the stream to be within `limits`, given their sizes oldest
    /// first, applied to the metadata at once (the low-water mark rises, the bytes are freed).
    /// The store only drops the payloads the returned plan names; the policy is the core's.
    pub fn on_retention(
        &mut self,
        stream: StreamId,
        oldest_sizes: impl IntoIterator<Item = u64>,
        limits: &Limits,
    ) -> Result<Eviction, Error> {
        let s = self.stream_mut(stream)?;
        let before = s.retained_bytes();
        let by = over_limits(s, limits);
        let mut events = 0;
        let mut sizes = oldest_sizes.into_iter();
        while over_limits(s, limits).is_some() {
            let Some(size) = sizes.next() else { break };
            s.on_evict_oldest(size);
            events += 1;
        }
        let freed = before - s.retained_bytes();
        self.retained_bytes = self.retained_bytes.saturating_sub(freed);
        Ok(Eviction { events, bytes: freed, by: by.filter(|_| events > 0) })
    }

    /// Let time pass: expire liveness, apply stream time-to-live, end an idle session.
    pub fn on_tick(&mut self, now: Timestamp, cfg: &Config) -> Tick {
        let mut tick = Tick::default();
        if self.session.ended().is_some() {
            return tick;
        }
        let ttl = cfg.limits.stream_ttl;
        let standalone = self.standalone;
        self.streams.update_each(|s| {
            if s.on_liveness_check(now) {
                tick.detached.push(s.id());
            }
            let expired = s.idle_since().is_some_and(|t| now.saturating_since(t) >= ttl);
            if expired && s.kind() == StreamKind::Request && s.is_completed() {
                tick.dropped.push(s.id());
            } else if expired && s.retained_events() > 0 {
                tick.evicted_events += s.retained_events();
                s.on_evict_all();
                tick.evicted.push(s.id());
            }
        });
        // A fenced stream's metadata is kept for `ttl` so a late resume still gets the precise
        // `stream_fenced` (row 8) rather than `stream_unknown`; then it is dropped.
        let fenced: Vec<StreamId> = self
            .streams
            .iter()
            .filter(|s| s.id() != standalone)
            .filter(|s| matches!(s.state(), StreamState::Fenced(f) if now.saturating_since(f.at) >= ttl))
            .map(Stream::id)
            .collect();
        for id in tick.dropped.iter().chain(&fenced) {
            self.streams.remove(*id);
        }
        tick.dropped.extend(fenced);
        self.retained_bytes = self.streams.iter().map(Stream::retained_bytes).sum();
        if let SessionState::Active(a) = self.session.state {
            let live = cfg.limits.idle_clock == IdleClock::RequestsAndStreams
                && self.streams.iter().any(|s| s.is_live(now));
            if live {
                // Attached is active: the idle clock counts from when the last stream stopped
                // being live, and the session is not due again before `session_idle_ttl`.
                self.touch(now);
            } else if now.saturating_since(a.last_activity) >= cfg.limits.session_idle_ttl {
                let _ = self.on_end(EndReason::IdleExpired, now);
                tick.ended = true;
            }
        }
        tick
    }

    /// Whether a request arriving at `now` would move the session's idle clock enough to be
    /// worth a write: activity is kept to a resolution of one second (or an eighth of
    /// `session_idle_ttl`, if that is shorter), so a busy session is not rewritten by every
    /// request only to record that it is still busy. An ended session is always due (so
    /// [`Self::on_request`] reports it).
    pub fn activity_due(&self, now: Timestamp, cfg: &Config) -> bool {
        const RESOLUTION: core::time::Duration = core::time::Duration::from_secs(1);
        match self.session.state {
            SessionState::Active(a) => {
                now.saturating_since(a.last_activity) >= RESOLUTION.min(cfg.limits.session_idle_ttl / 8)
            }
            SessionState::Ended(_) => true,
        }
    }

    /// Retention by count: at `session_max_streams`, drop the request streams that time-to-live
    /// retention would drop next (completed, detached, idle the longest), so that a session
    /// answering every request over SSE is not refused after its 1,024th request within
    /// `stream_ttl`. It drops down to seven eighths of the limit at once, so the scan for
    /// the oldest is paid once per `session_max_streams / 8` requests rather than on each.
    /// Open or attached streams are never dropped: if none can go, [`Self::check_room`]
    /// refuses with [`Error::TooManyStreams`].
    pub(crate) fn make_room(&mut self, limits: &Limits) -> Vec<Stream> {
        if !self.opening_drops_streams(limits) {
            return Vec::new();
        }
        let max = limits.session_max_streams;
        let excess = self.streams.len() - (max - max / 8);
        let mut oldest: Vec<(Timestamp, StreamId)> =
            self.streams.iter().filter_map(|s| droppable_since(s).map(|t| (t, s.id()))).collect();
        if oldest.len() > excess {
            oldest.select_nth_unstable(excess);
            oldest.truncate(excess);
        }
        let mut ids: Vec<StreamId> = oldest.into_iter().map(|(_, id)| id).collect();
        ids.sort_unstable();
        let dropped = self.streams.remove_sorted(&ids);
        for gone in &dropped {
            self.retained_bytes = self.retained_bytes.saturating_sub(gone.retained_bytes());
        }
        dropped
    }

    /// Retention by count ahead of an answer ([`AppendTarget::Answer`] of `size` bytes on the
    /// new stream `stream`) that would open a stream past the limit
    /// ([`Self::opening_drops_streams`]): the streams that append would drop first, dropped
    /// now and returned, so that a store applying the answer in place drops their events too
    /// without comparing two versions of the record. Refused, changing nothing, exactly when
    /// the answer would be; the answer's own append then drops nothing more.
    pub fn make_room_for_answer(
        &mut self,
        stream: StreamId,
        size: u64,
        kind: EventKind,
        limits: &Limits,
    ) -> Result<Vec<Stream>, Error> {
        if kind != EventKind::Final {
            return Err(Error::AnswerNotFinal);
        }
        self.check_active()?;
        if size > limits.stream_max_bytes {
            return Err(Error::EventTooLarge { size, max: limits.stream_max_bytes });
        }
        if self.retained_bytes.saturating_add(size) > limits.session_max_bytes {
            return Err(Error::SessionBudgetExceeded { max: limits.session_max_bytes });
        }
        if self.streams.get(stream).is_some() {
            return Err(Error::StreamExists);
        }
        self.check_request_stream_room(limits)?;
        Ok(self.make_room(limits))
    }
}

/// Since when `s` could be dropped by retention by count: a completed request stream with
/// nothing attached.
fn droppable_since(s: &Stream) -> Option<Timestamp> {
    if s.kind() == StreamKind::Request && s.is_completed() { s.idle_since() } else { None }
}

/// The limit a stream with events left is over (by count first).
fn over_limits(s: &Stream, limits: &Limits) -> Option<EvictedBy> {
    if s.retained_events() == 0 {
        None
    } else if s.retained_events() > limits.stream_max_events {
        Some(EvictedBy::StreamMaxEvents)
    } else if s.retained_bytes() > limits.stream_max_bytes {
        Some(EvictedBy::StreamMaxBytes)
    } else {
        None
    }
}
