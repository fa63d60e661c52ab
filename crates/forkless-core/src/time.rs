//! Time as the core sees it: a value handed in by the caller, never read from a clock.
//!
//! [`Timestamp`] is milliseconds since the Unix epoch so that durable stores can persist
//! deadlines. The core never assumes time moves forward: a clock that jumps backwards only
//! postpones deadlines, it never underflows or panics.

use core::fmt;
use core::time::Duration;

/// A point in time, in milliseconds since the Unix epoch, supplied by the caller.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(u64);

impl Timestamp {
    /// The Unix epoch.
    pub const ZERO: Self = Self(0);
    /// The end of time: a deadline that never comes (an attachment its node holds).
    pub const MAX: Self = Self(u64::MAX);

    /// A timestamp `ms` milliseconds after the Unix epoch.
    pub const fn from_millis(ms: u64) -> Self {
        Self(ms)
    }

    /// Milliseconds since the Unix epoch.
    pub const fn as_millis(self) -> u64 {
        self.0
    }

    /// `self + d`, saturating at the far future.
    pub fn saturating_add(self, d: Duration) -> Self {
        Self(self.0.saturating_add(duration_ms(d)))
    }

    /// How long after `earlier` this is; zero if the clock went backwards.
    pub fn saturating_since(self, earlier: Self) -> Duration {
        Duration::from_millis(self.0.saturating_sub(earlier.0))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}ms", self.0)
    }
}

/// Whole milliseconds of `d`, saturating.
pub(crate) fn duration_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
