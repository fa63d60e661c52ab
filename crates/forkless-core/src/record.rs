//! A session with its streams: the unit the store reads, decides on and writes back by
//! compare-and-set.
//!
//! This module owns the record and the session-level transitions on it (create, open a
//! request stream, append, attach, detach, complete, end, restart). The decision on a GET is
//! [`crate::decision`]'s, retention and time `retention`'s. It does not own payloads,
//! versions or waking readers: those belong to the store.

use crate::config::{Config, Limits};
use crate::error::{EndReason, Error};
use crate::id::{EntropySource, Epoch, EventId, Seq, SessionId, StreamId};
use crate::reason::{ConflictReason, RejectReason};
use crate::session::{Active, Ended, NewSession, Session, SessionState};
use crate::stream::{EventKind, FenceCause, Label, Stream, StreamKind, StreamState};
use crate::stream_map::{StreamChange, StreamMap};
use crate::time::Timestamp;

/// A granted attachment: the shell now serves `stream` to one connection holding `epoch`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grant {
    /// The stream to serve (`Mcp-Stream-Id`).
    pub stream: StreamId,
    /// The connection's epoch; writing stops as soon as it is no longer current.
    pub epoch: Epoch,
    /// Deliver events with seq greater than this.
    pub after: Seq,
    /// `Mcp-Stream-Resumed`: true only for a proven continuation (row 11).
    pub resumed: bool,
    /// Whether a previous connection was attached and must stop before this one writes.
    pub displaced: bool,
    /// The standalone stream fenced by a reset (row 3), if any.
    pub fenced: Option<StreamId>,
}

/// The outcome of a GET, after it was applied to the record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GetOutcome {
    /// 200 SSE.
    Attached(Grant),
    /// 409; nothing changed.
    Conflict(ConflictReason),
    /// 404; the session has ended with this reason.
    Rejected(RejectReason),
}

/// An append's target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppendTarget {
    /// The session's standalone stream, whichever it is at the moment of the append.
    Standalone,
    /// A specific stream; never redirected.
    Stream(StreamId),
    /// A new request stream answered at once: opened, attached to the connection that asked,
    /// given this event as its final one and released again, in one step. The connection then
    /// carries a finished body and no writer ever serves the stream; a client that loses that
    /// body resumes it like any other completed stream. The event must complete the stream
    /// ([`EventKind::Final`]), or the append is refused with [`Error::AnswerNotFinal`].
    Answer(StreamId),
}

/// A request stream left open by a handler that died with its process (or its node): the
/// request is lost and must be answered with an error carrying its id, then completed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Orphan {
    /// The session.
    pub session: SessionId,
    /// The request's stream.
    pub stream: StreamId,
    /// The stream's label: the request's JSON-RPC id, as the server serialized it.
    pub label: Option<Label>,
}

/// A session with its streams' metadata: the unit of compare-and-set in every store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionRecord {
    pub(crate) session: Session,
    pub(crate) standalone: StreamId,
    pub(crate) streams: StreamMap,
    pub(crate) retained_bytes: u64,
}

impl SessionRecord {
    /// A new active session with an empty, never-attached standalone stream.
    pub fn create(new: NewSession, now: Timestamp, entropy: &mut impl EntropySource) -> Result<Self, Error> {
        if !new.revision.has_sessions() {
            return Err(Error::Stateless);
        }
        let standalone = Stream::new(StreamId::generate(entropy), StreamKind::Standalone, now);
        let standalone_id = standalone.id();
        let mut streams = StreamMap::default();
        streams.insert(standalone);
        Ok(Self {
            session: Session {
                id: new.id,
                revision: new.revision,
                reset_contract: new.reset_contract,
                principal: new.principal,
                client: new.client,
                backend: None,
                created_at: now,
                state: SessionState::Active(Active { last_activity: now }),
            },
            standalone: standalone_id,
            streams,
            retained_bytes: 0,
        })
    }

    /// Reassemble a record from persisted parts (stores only).
    pub fn restore(
        new: NewSession,
        created_at: Timestamp,
        state: SessionState,
        standalone: StreamId,
        streams: impl IntoIterator<Item = Stream>,
    ) -> Result<Self, Error> {
        let mut map = StreamMap::default();
        for s in streams {
            if !map.insert(s) {
                return Err(Error::StreamExists);
            }
        }
        if map.get(standalone).is_none() {
            return Err(Error::StreamUnknown);
        }
        let retained_bytes = map.iter().map(Stream::retained_bytes).sum();
        let session = Session {
            id: new.id,
            revision: new.revision,
            reset_contract: new.reset_contract,
            principal: new.principal,
            client: new.client,
            backend: None,
            created_at,
            state,
        };
        Ok(Self { session, standalone, streams: map, retained_bytes })
    }

    // ===== events =====

    /// A POST request is answered with SSE: a new request stream, attached to that POST's
    /// connection.
    pub fn open_request_stream(
        &mut self,
        id: StreamId,
        now: Timestamp,
        cfg: &Config,
    ) -> Result<Grant, Error> {
        self.open_labeled_request_stream(id, None, now, cfg)
    }

    /// [`Self::open_request_stream`], tagging the stream with `label` (see [`Label`]).
    pub fn open_labeled_request_stream(
        &mut self,
        id: StreamId,
        label: Option<Label>,
        now: Timestamp,
        cfg: &Config,
    ) -> Result<Grant, Error> {
        self.check_active()?;
        self.make_room(&cfg.limits);
        self.check_room(&cfg.limits)?;
        if !self.streams.insert(Stream::new(id, StreamKind::Request, now).with_label(label)) {
            return Err(Error::StreamExists);
        }
        self.touch(now);
        self.attach(id, Seq::PRIMING, false, None, now, cfg)
    }

    /// Append an event of `size` bytes; a [`EventKind::Final`] one completes its stream.
    /// Sequence assignment and the fencing/ended checks happen in this one step, and a refusal
    /// leaves the record as it was (stores compute appends on their working copy in place).
    pub fn append(
        &mut self,
        target: AppendTarget,
        size: u64,
        kind: EventKind,
        now: Timestamp,
        limits: &Limits,
    ) -> Result<EventId, Error> {
        self.check_active()?;
        if size > limits.stream_max_bytes {
            return Err(Error::EventTooLarge { size, max: limits.stream_max_bytes });
        }
        if self.retained_bytes.saturating_add(size) > limits.session_max_bytes {
            return Err(Error::SessionBudgetExceeded { max: limits.session_max_bytes });
        }
        let id = match target {
            AppendTarget::Standalone => self.standalone,
            AppendTarget::Stream(id) => id,
            AppendTarget::Answer(id) => return self.answer(id, size, kind, now, limits),
        };
        let appended = self.stream_mut(id)?.on_append(size, kind, now)?;
        self.retained_bytes += size;
        Ok(EventId::new(id, appended.seq))
    }

    /// [`AppendTarget::Answer`]: everything is checked before anything changes, so a refusal
    /// leaves the record as it was.
    fn answer(
        &mut self,
        id: StreamId,
        size: u64,
        kind: EventKind,
        now: Timestamp,
        limits: &Limits,
    ) -> Result<EventId, Error> {
        if kind != EventKind::Final {
            return Err(Error::AnswerNotFinal);
        }
        if self.streams.get(id).is_some() {
            return Err(Error::StreamExists);
        }
        self.check_request_stream_room(limits)?;
        self.make_room(limits);
        let mut stream = Stream::new(id, StreamKind::Request, now);
        // The connection that asked holds the stream for the instant it takes to hand it the
        // whole answer: the epoch counts that attachment, as it would for a writer.
        let epoch = stream.on_attach(now, core::time::Duration::ZERO)?;
        let appended = stream.on_append(size, EventKind::Final, now)?;
        stream.on_detach(epoch, now)?;
        self.streams.insert(stream);
        self.retained_bytes += size;
        self.touch(now);
        Ok(EventId::new(id, appended.seq))
    }

    /// The connection holding `epoch` on `stream` completed a write (liveness renewal).
    pub fn on_write_completed(
        &mut self,
        stream: StreamId,
        epoch: Epoch,
        now: Timestamp,
        cfg: &Config,
    ) -> Result<(), Error> {
        self.check_active()?;
        self.stream_mut(stream)?.on_write_completed(epoch, now, cfg.attach_hold())?;
        self.touch(now);
        Ok(())
    }

    /// The connection holding `epoch` on `stream` went away. The stream stays resumable.
    pub fn on_detach(&mut self, stream: StreamId, epoch: Epoch, now: Timestamp) -> Result<(), Error> {
        self.check_active()?;
        self.stream_mut(stream)?.on_detach(epoch, now)?;
        self.touch(now);
        Ok(())
    }

    /// Complete `stream` without a final event.
    pub fn on_complete(&mut self, stream: StreamId, now: Timestamp) -> Result<(), Error> {
        self.check_active()?;
        self.stream_mut(stream)?.on_complete(now)
    }

    /// A request arrived on the session: it is not idle.
    pub fn on_request(&mut self, now: Timestamp) -> Result<(), Error> {
        self.check_active()?;
        self.touch(now);
        Ok(())
    }

    /// The backend serving the session says how to reach it again from any node (an HTTP
    /// upstream's session): kept with the session, replacing what it said before.
    pub fn on_backend(&mut self, facts: std::sync::Arc<str>) -> Result<(), Error> {
        self.check_active()?;
        self.session.backend = Some(facts);
        Ok(())
    }

    /// What a store read back of [`Self::on_backend`] (stores only).
    pub fn restore_backend(&mut self, facts: Option<std::sync::Arc<str>>) {
        self.session.backend = facts;
    }

    /// End the session: every stream fenced, nothing retained. Ending twice is refused.
    pub fn on_end(&mut self, reason: EndReason, now: Timestamp) -> Result<(), Error> {
        self.check_active()?;
        self.streams.update_each(|s| {
            if !s.is_fenced() {
                // Cannot fail: checked not fenced.
                let _ = s.on_fence(now, FenceCause::SessionEnded);
            }
            s.on_evict_all();
        });
        self.retained_bytes = 0;
        self.session.state = SessionState::Ended(Ended { at: now, reason });
        Ok(())
    }

    /// The server restarted: no connection survived, so every attachment is detached (the
    /// streams stay resumable). Returns the open request streams, whose handlers died with the
    /// process; the server answers each (with the request id its label holds) and completes it.
    pub fn on_restart(&mut self, now: Timestamp) -> Vec<Orphan> {
        let mut orphaned = Vec::new();
        let session = self.session.id;
        self.streams.update_each(|s| {
            s.on_restart(now);
            if s.kind() == StreamKind::Request && matches!(s.state(), StreamState::Open(_)) {
                orphaned.push(Orphan { session, stream: s.id(), label: s.label().cloned() });
            }
        });
        orphaned
    }

    // ===== getters =====

    /// The session.
    pub const fn session(&self) -> &Session {
        &self.session
    }
    /// The session id.
    pub const fn id(&self) -> SessionId {
        self.session.id
    }
    /// The current standalone stream.
    pub fn standalone(&self) -> &Stream {
        // The standalone id always names a stream of this record (checked by create/restore,
        // and on_get inserts before switching).
        self.streams.get(self.standalone).unwrap_or_else(|| unreachable!("standalone stream missing"))
    }
    /// A stream of this session.
    pub fn stream(&self, id: StreamId) -> Option<&Stream> {
        self.streams.get(id)
    }
    /// Every stream of this session, in id order.
    pub fn streams(&self) -> impl Iterator<Item = &Stream> {
        self.streams.iter()
    }
    /// How this record's streams differ from those of `before`, an earlier version of it, in
    /// id order. Cheap when few changed: streams the versions still share are not compared.
    pub fn changes_since<'a>(&'a self, before: &'a Self) -> impl Iterator<Item = StreamChange<'a>> {
        self.streams.changes_since(&before.streams)
    }
    /// Whether what a store keeps as this record's header (everything but its streams: the
    /// session, and which stream is its standalone one) differs from `before`'s. An append
    /// never changes it, so a store need not rewrite the header of a session it only appended to.
    pub fn header_changed_since(&self, before: &Self) -> bool {
        self.standalone != before.standalone || self.session != before.session
    }
    /// Mark this version as the one a store keeps: copies taken from it and changed later
    /// report [`Self::changes_since`] it by the streams they touched, without a walk over the
    /// others. Content and equality are unaffected.
    pub fn mark_clean(&mut self) {
        self.streams.mark_clean();
    }
    /// Number of streams held.
    pub fn stream_count(&self) -> usize {
        self.streams.len()
    }
    /// Payload bytes retained across the session's streams.
    pub const fn retained_bytes(&self) -> u64 {
        self.retained_bytes
    }
    /// The next instant at which [`Self::on_tick`] would change something (`None` once
    /// ended: a tombstone's removal is the sweeper's, see [`crate::Wake::ended`]).
    pub fn next_deadline(&self, cfg: &Config) -> Option<Timestamp> {
        let SessionState::Active(a) = self.session.state else { return None };
        let idle = a.last_activity.saturating_add(cfg.limits.session_idle_ttl);
        let streams = self.streams.iter().filter_map(|s| s.next_deadline(cfg.limits.stream_ttl));
        streams.chain(core::iter::once(idle)).min()
    }

    // ===== helpers =====

    /// Row 3 applied: fence the standalone stream `old` and make `fresh` the standalone
    /// stream, attached, in one step.
    pub(crate) fn reset_standalone(
        &mut self,
        old: StreamId,
        fresh: Stream,
        now: Timestamp,
        cfg: &Config,
    ) -> Result<Grant, Error> {
        self.check_room(&cfg.limits)?;
        self.stream_mut(old)?.on_fence(now, FenceCause::Reset)?;
        self.drop_bytes_of(old);
        let fresh_id = fresh.id();
        if !self.streams.insert(fresh) {
            return Err(Error::StreamExists);
        }
        self.standalone = fresh_id;
        self.attach(fresh_id, Seq::PRIMING, false, Some(old), now, cfg)
    }

    pub(crate) fn attach(
        &mut self,
        stream: StreamId,
        after: Seq,
        resumed: bool,
        fenced: Option<StreamId>,
        now: Timestamp,
        cfg: &Config,
    ) -> Result<Grant, Error> {
        let s = self.stream_mut(stream)?;
        let displaced = matches!(s.attachment(), Some(crate::stream::Attachment::Attached(_)));
        let epoch = s.on_attach(now, cfg.attach_hold())?;
        Ok(Grant { stream, epoch, after, resumed, displaced, fenced })
    }

    pub(crate) fn drop_bytes_of(&mut self, stream: StreamId) {
        if let Some(s) = self.streams.get_mut(stream) {
            self.retained_bytes = self.retained_bytes.saturating_sub(s.retained_bytes());
            s.on_evict_all();
        }
    }

    pub(crate) fn stream_mut(&mut self, id: StreamId) -> Result<&mut Stream, Error> {
        self.streams.get_mut(id).ok_or(Error::StreamUnknown)
    }

    pub(crate) fn check_active(&self) -> Result<(), Error> {
        match self.session.state {
            SessionState::Active(_) => Ok(()),
            SessionState::Ended(e) => Err(Error::SessionEnded { reason: e.reason }),
        }
    }

    pub(crate) fn check_room(&self, limits: &Limits) -> Result<(), Error> {
        // The standalone stream does not count against the limit.
        if self.streams.len() > limits.session_max_streams {
            return Err(Error::TooManyStreams { max: limits.session_max_streams });
        }
        Ok(())
    }

    pub(crate) fn touch(&mut self, now: Timestamp) {
        if let SessionState::Active(a) = &mut self.session.state {
            a.last_activity = a.last_activity.max(now);
        }
    }
}
