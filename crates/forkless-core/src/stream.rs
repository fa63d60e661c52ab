//! One SSE stream's model: its log bounds, its lifecycle and its attachment.
//!
//! This module owns the per-stream state machine. It does not own event payloads (stores keep
//! those) nor the decision of which stream a reconnect gets ([`crate::decision`]).
//!
//! ```text
//!              on_append / on_attach / on_detach / on_liveness_expired
//!                 ┌──────┐
//!                 ▼      │
//!   create ──▶  Open ────┴──── on_complete ──▶ Completed ──┐ (replay-only; attach allowed)
//!                 │                                │         │
//!                 └──────── on_fence ─────────────┴─────────┴──▶ Fenced (terminal)
//!
//!   attachment (Open or Completed):  Detached ──on_attach──▶ Attached{deadline}
//!                                       ▲                        │
//!                                       └─ on_detach / on_liveness_expired
//! ```
//!
//! Every [`Stream::on_attach`] bumps the [`Epoch`]; a writer whose epoch is no longer current has
//! been fenced and must stop before its next write.

use core::time::Duration;

use crate::error::Error;
use crate::id::{Epoch, Seq, StreamId};
use crate::time::Timestamp;

/// An opaque tag the shell attaches to a request stream (forkless-server stores the JSON-RPC
/// request id, serialized), so that crash recovery can still answer the request. Any length:
/// tags up to [`Label::INLINE`] bytes (every integer id, most string ids) are stored inline and
/// cost no allocation; longer ones are shared behind an [`Arc`](std::sync::Arc).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Label(LabelBytes);

#[derive(Clone, PartialEq, Eq, Hash)]
enum LabelBytes {
    Inline { len: u8, bytes: [u8; Label::INLINE] },
    Shared(std::sync::Arc<[u8]>),
}

impl Label {
    /// The longest label stored inline.
    pub const INLINE: usize = 46;

    /// A label holding `bytes`.
    pub fn new(bytes: &[u8]) -> Self {
        match u8::try_from(bytes.len()) {
            Ok(len) if bytes.len() <= Self::INLINE => {
                let mut buf = [0u8; Self::INLINE];
                buf[..bytes.len()].copy_from_slice(bytes);
                Self(LabelBytes::Inline { len, bytes: buf })
            }
            _ => Self(LabelBytes::Shared(bytes.into())),
        }
    }

    /// The bytes.
    pub fn as_bytes(&self) -> &[u8] {
        match &self.0 {
            LabelBytes::Inline { len, bytes } => &bytes[..usize::from(*len)],
            LabelBytes::Shared(bytes) => bytes,
        }
    }
}

impl core::fmt::Debug for Label {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Label({:?})", String::from_utf8_lossy(self.as_bytes()))
    }
}

/// Which kind of stream this is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StreamKind {
    /// The session's standalone GET stream.
    Standalone,
    /// A stream answering one POST request.
    Request,
}

/// Why a stream was fenced.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FenceCause {
    /// Replaced by a new standalone stream under the reset contract (row 3).
    Reset,
    /// The session ended.
    SessionEnded,
}

/// Lifecycle state; each variant holds only what is valid in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamState {
    /// Accepting events.
    Open(Open),
    /// Carried its final event; resumable (replay, then end) until retention drops it.
    Completed(Completed),
    /// Terminal: no attach, no append, no delivery.
    Fenced(Fenced),
}

/// An open stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Open {
    /// Who is attached.
    pub attachment: Attachment,
}

/// A completed stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completed {
    /// When the final event was appended.
    pub at: Timestamp,
    /// Who is attached.
    pub attachment: Attachment,
}

/// A fenced stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fenced {
    /// When it was fenced.
    pub at: Timestamp,
    /// Why.
    pub cause: FenceCause,
}

/// Whether a connection is attached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attachment {
    /// No connection.
    Detached(Detached),
    /// One connection, live until `deadline` unless it renews.
    Attached(Attached),
}

/// No connection attached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Detached {
    /// Since when (creation, detach or liveness expiry).
    pub since: Timestamp,
}

/// A connection attached with the stream's current epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attached {
    /// The connection counts as gone after this instant unless it renews.
    pub deadline: Timestamp,
}

/// One stream's metadata. Payloads live in the store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stream {
    id: StreamId,
    kind: StreamKind,
    high_water: Seq,
    low_water: Seq,
    retained_bytes: u64,
    epoch: Epoch,
    ever_attached: bool,
    state: StreamState,
    label: Option<Label>,
}

/// Whether an event ends its stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// More events may follow.
    Intermediate,
    /// The stream's final event (a request's response): appending it completes the stream.
    Final,
}

impl EventKind {
    /// [`Self::Final`] when `last`, else [`Self::Intermediate`] (for callers that count).
    pub const fn ending_if(last: bool) -> Self {
        if last { Self::Final } else { Self::Intermediate }
    }
}

/// What a successful append assigned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Appended {
    /// The new event's sequence number (`high-water + 1`).
    pub seq: Seq,
    /// Whether this append completed the stream.
    pub completed: bool,
}

impl Stream {
    /// A new, open, detached, empty stream.
    pub const fn new(id: StreamId, kind: StreamKind, now: Timestamp) -> Self {
        Self {
            id,
            kind,
            high_water: Seq::PRIMING,
            low_water: Seq::FIRST,
            retained_bytes: 0,
            epoch: Epoch::NONE,
            ever_attached: false,
            state: StreamState::Open(Open { attachment: Attachment::Detached(Detached { since: now }) }),
            label: None,
        }
    }

    /// The same stream carrying `label`.
    pub fn with_label(mut self, label: Option<Label>) -> Self {
        self.label = label;
        self
    }

    /// Reassemble a stream from persisted fields (stores only). Inconsistent bounds are
    /// clamped so that `low_water <= high_water + 1`.
    #[allow(clippy::too_many_arguments)]
    pub fn restore(
        id: StreamId,
        kind: StreamKind,
        high_water: Seq,
        low_water: Seq,
        retained_bytes: u64,
        epoch: Epoch,
        ever_attached: bool,
        state: StreamState,
    ) -> Self {
        let low_water = low_water.max(Seq::FIRST).min(high_water.next());
        Self { id, kind, high_water, low_water, retained_bytes, epoch, ever_attached, state, label: None }
    }

    // ===== events =====

    /// A connection attaches: bump the epoch and mark it live until `now + grace`.
    /// Any previous attachment is displaced (its epoch is now stale).
    pub fn on_attach(&mut self, now: Timestamp, grace: Duration) -> Result<Epoch, Error> {
        let attachment = Attachment::Attached(Attached { deadline: now.saturating_add(grace) });
        match &mut self.state {
            StreamState::Open(s) => s.attachment = attachment,
            StreamState::Completed(s) => s.attachment = attachment,
            StreamState::Fenced(_) => return Err(Error::StreamFenced),
        }
        self.epoch = self.epoch.next();
        self.ever_attached = true;
        Ok(self.epoch)
    }

    /// The connection holding `epoch` completed a write: it stays live until `now + grace`.
    pub fn on_write_completed(&mut self, epoch: Epoch, now: Timestamp, grace: Duration) -> Result<(), Error> {
        self.check_epoch(epoch)?;
        match self.attachment_mut()? {
            Attachment::Attached(a) => {
                a.deadline = a.deadline.max(now.saturating_add(grace));
                Ok(())
            }
            Attachment::Detached(_) => Err(Error::NotAttached),
        }
    }

    /// The connection holding `epoch` went away.
    pub fn on_detach(&mut self, epoch: Epoch, now: Timestamp) -> Result<(), Error> {
        self.check_epoch(epoch)?;
        let attachment = self.attachment_mut()?;
        match attachment {
            Attachment::Attached(_) => {
                *attachment = Attachment::Detached(Detached { since: now });
                Ok(())
            }
            Attachment::Detached(_) => Err(Error::NotAttached),
        }
    }

    /// Liveness check: an attachment whose deadline passed is detached (not fenced).
    /// Returns whether it expired.
    pub fn on_liveness_check(&mut self, now: Timestamp) -> bool {
        let Ok(attachment) = self.attachment_mut() else { return false };
        match *attachment {
            Attachment::Attached(a) if a.deadline <= now => {
                *attachment = Attachment::Detached(Detached { since: a.deadline });
                true
            }
            _ => false,
        }
    }

    /// The process restarted: whatever was attached is gone (detached, not fenced).
    pub fn on_restart(&mut self, now: Timestamp) {
        if let Ok(attachment) = self.attachment_mut()
            && matches!(attachment, Attachment::Attached(_))
        {
            *attachment = Attachment::Detached(Detached { since: now });
        }
    }

    /// Append an event of `size` bytes; a [`EventKind::Final`] one completes the stream.
    /// Seq assignment and the state check are one step, so nothing lands on a fenced stream.
    pub fn on_append(&mut self, size: u64, kind: EventKind, now: Timestamp) -> Result<Appended, Error> {
        let attachment = match self.state {
            StreamState::Open(s) => s.attachment,
            StreamState::Completed(_) => return Err(Error::StreamCompleted),
            StreamState::Fenced(_) => return Err(Error::StreamFenced),
        };
        self.high_water = self.high_water.next();
        self.retained_bytes = self.retained_bytes.saturating_add(size);
        let completed = kind == EventKind::Final;
        if completed {
            self.state = StreamState::Completed(Completed { at: now, attachment });
        }
        Ok(Appended { seq: self.high_water, completed })
    }

    /// Complete the stream without a final event.
    pub fn on_complete(&mut self, now: Timestamp) -> Result<(), Error> {
        match self.state {
            StreamState::Open(s) => {
                self.state = StreamState::Completed(Completed { at: now, attachment: s.attachment });
                Ok(())
            }
            StreamState::Completed(_) => Err(Error::StreamCompleted),
            StreamState::Fenced(_) => Err(Error::StreamFenced),
        }
    }

    /// Fence the stream: terminal. Fencing twice is refused so callers notice double work.
    pub fn on_fence(&mut self, now: Timestamp, cause: FenceCause) -> Result<(), Error> {
        if self.is_fenced() {
            return Err(Error::StreamFenced);
        }
        self.state = StreamState::Fenced(Fenced { at: now, cause });
        Ok(())
    }

    /// The oldest retained event, of `size` bytes, was evicted.
    pub fn on_evict_oldest(&mut self, size: u64) {
        if self.low_water <= self.high_water {
            self.low_water = self.low_water.next();
            self.retained_bytes = self.retained_bytes.saturating_sub(size);
        }
    }

    /// Every retained event was evicted (time-to-live).
    pub fn on_evict_all(&mut self) {
        self.low_water = self.high_water.next();
        self.retained_bytes = 0;
    }

    // ===== getters =====

    /// The stream id.
    pub const fn id(&self) -> StreamId {
        self.id
    }
    /// Standalone or request.
    pub const fn kind(&self) -> StreamKind {
        self.kind
    }
    /// Seq of the last appended event (0 when none).
    pub const fn high_water(&self) -> Seq {
        self.high_water
    }
    /// Seq of the oldest retained event (`high_water + 1` when none is retained).
    pub const fn low_water(&self) -> Seq {
        self.low_water
    }
    /// Payload bytes retained.
    pub const fn retained_bytes(&self) -> u64 {
        self.retained_bytes
    }
    /// Number of events retained.
    pub const fn retained_events(&self) -> u64 {
        self.high_water.get() + 1 - self.low_water.get()
    }
    /// The current attach epoch.
    pub const fn epoch(&self) -> Epoch {
        self.epoch
    }
    /// Whether any connection ever attached.
    pub const fn ever_attached(&self) -> bool {
        self.ever_attached
    }
    /// The shell's tag, if any.
    pub const fn label(&self) -> Option<&Label> {
        self.label.as_ref()
    }
    /// The lifecycle state.
    pub const fn state(&self) -> &StreamState {
        &self.state
    }
    /// Whether fenced.
    pub const fn is_fenced(&self) -> bool {
        matches!(self.state, StreamState::Fenced(_))
    }
    /// Whether completed.
    pub const fn is_completed(&self) -> bool {
        matches!(self.state, StreamState::Completed(_))
    }
    /// Whether any content event was ever appended.
    pub const fn has_content(&self) -> bool {
        self.high_water.get() > 0
    }
    /// Whether part of the log was evicted.
    pub const fn has_evicted(&self) -> bool {
        self.low_water.get() > 1
    }

    /// The attachment, unless fenced.
    pub const fn attachment(&self) -> Option<Attachment> {
        match self.state {
            StreamState::Open(s) => Some(s.attachment),
            StreamState::Completed(s) => Some(s.attachment),
            StreamState::Fenced(_) => None,
        }
    }

    /// Whether a connection is attached and within its liveness deadline at `now`.
    pub fn is_live(&self, now: Timestamp) -> bool {
        matches!(self.attachment(), Some(Attachment::Attached(a)) if a.deadline > now)
    }

    /// When the stream last stopped being useful to a connection: detached or completed
    /// (whichever is later) with no live attachment; `None` while live or fenced.
    pub fn idle_since(&self) -> Option<Timestamp> {
        match self.state {
            StreamState::Open(Open { attachment: Attachment::Detached(d) }) => Some(d.since),
            StreamState::Completed(Completed { at, attachment: Attachment::Detached(d) }) => {
                Some(at.max(d.since))
            }
            _ => None,
        }
    }

    fn attachment_mut(&mut self) -> Result<&mut Attachment, Error> {
        match &mut self.state {
            StreamState::Open(s) => Ok(&mut s.attachment),
            StreamState::Completed(s) => Ok(&mut s.attachment),
            StreamState::Fenced(_) => Err(Error::StreamFenced),
        }
    }

    fn check_epoch(&self, held: Epoch) -> Result<(), Error> {
        if held == self.epoch { Ok(()) } else { Err(Error::StaleEpoch { held, current: self.epoch }) }
    }
}

#[cfg(test)]
mod tests;
