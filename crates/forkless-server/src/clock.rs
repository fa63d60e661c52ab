//! The wall clock as the server reads it: the core's [`Timestamp`] for every transition, whole
//! milliseconds for headers and JSON fields, and a rate limit for log lines that could repeat
//! at the request rate.
//!
//! A leaf: it imports nothing of this crate, so every module may read the time without tying
//! itself to the state the server shares ([`crate::common`]).

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use forkless_core::Timestamp;

/// The wall clock as the core sees it.
pub(crate) fn now() -> Timestamp {
    Timestamp::from_millis(now_ms())
}

/// The wall clock in whole milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> u64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    millis(since)
}

/// Whole milliseconds of `d`, saturating (header values and JSON fields).
pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Lets a log line through at most once per interval (for conditions that can repeat at the
/// request rate).
#[derive(Debug)]
pub(crate) struct RateLimit {
    every: Duration,
    last: Mutex<Option<Instant>>,
}

impl RateLimit {
    pub(crate) const fn new(every: Duration) -> Self {
        Self { every, last: Mutex::new(None) }
    }

    /// Whether a line may be logged now (and, if so, the clock starts again).
    pub(crate) fn due(&self) -> bool {
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        if last.is_some_and(|t| t.elapsed() < self.every) {
            return false;
        }
        *last = Some(Instant::now());
        true
    }
}
