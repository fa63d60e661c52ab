//! When a connection with nothing in flight is closed: its idle and header-read deadlines,
//! and when its task should look at it next.

use super::*;

/// Which timeout a deadline is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Bound {
    /// A request is in flight: nothing to enforce, only a time to look again.
    Busy,
    /// Nothing in flight, no head arriving: `idle_timeout`.
    Idle,
    /// A head arriving: `header_read_timeout`.
    Header,
}

impl Conn {
    /// Bytes arrived: with nothing in flight, a request's head has started (if not already).
    pub(super) fn head_arriving(&self, registry: &Registry) {
        if self.in_flight.load(Ordering::Acquire) == 0 && self.head_since.load(Ordering::Relaxed) == 0 {
            self.head_since.store(registry.now_ms() + 1, Ordering::Relaxed);
        }
    }

    /// When the connection's task should look at it next (never in the past unless a deadline
    /// is due, so the task never spins). Nothing wakes the task when a head starts or a
    /// response ends (that would cost a wake-up per request): it wakes at the deadline as it
    /// stood, or, while idle, once at `header_read_timeout` after the idle start (a head may
    /// have started since). A head that starts later than that is cut off at the idle deadline
    /// at the latest.
    pub(super) fn wake(&self, registry: &Registry, bounds: &Bounds, now: Instant) -> Instant {
        let (deadline, bound) = self.deadline(registry, bounds);
        let look_for_head = self.idle_start(registry) + bounds.header_read_timeout;
        match bound {
            Bound::Idle if look_for_head > now => deadline.min(look_for_head),
            Bound::Idle | Bound::Header | Bound::Busy => deadline,
        }
    }

    /// When the connection last became idle.
    pub(super) fn idle_start(&self, registry: &Registry) -> Instant {
        registry.origin + Duration::from_millis(self.idle_since.load(Ordering::Relaxed))
    }

    /// When this connection next needs looking at, and which bound that is: a head not
    /// complete `header_read_timeout` after it started, or nothing at all `idle_timeout` after
    /// the last response. While a request is in flight, look again one idle timeout from now.
    pub(super) fn deadline(&self, registry: &Registry, bounds: &Bounds) -> (Instant, Bound) {
        if self.in_flight.load(Ordering::Acquire) > 0 {
            return (Instant::now() + bounds.idle_timeout, Bound::Busy);
        }
        match self.head_since.load(Ordering::Relaxed) {
            0 => {
                let since = Duration::from_millis(self.idle_since.load(Ordering::Relaxed));
                (registry.origin + since + bounds.idle_timeout, Bound::Idle)
            }
            started => {
                let since = Duration::from_millis(started - 1);
                (registry.origin + since + bounds.header_read_timeout, Bound::Header)
            }
        }
    }
}
