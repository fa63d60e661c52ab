//! Fault injection for tests over real processes, compiled only with the `fault-injection`
//! feature (which the workspace's tests turn on and no release build of `forkless` has): a
//! process that aborts in the middle of a group sync, and a store that delivers events before
//! they are durable, the rule this store exists to keep, broken on purpose so a negative
//! control can show its oracle catches it. Without the feature both are inert, and no
//! environment variable can reach them.
//!
//! It owns when the hooks fire, not what the journal or the store does around them.

/// Aborts the process while the Nth group is being made durable (its log entry is encoded,
/// nothing of it is delivered, its sync has not returned), with
/// `FORKLESS_TEST_ABORT_IN_SYNC=N` in the environment. Read once at open.
#[derive(Debug, Default)]
pub(crate) struct CrashHook {
    #[cfg(feature = "fault-injection")]
    abort_at: Option<u64>,
    #[cfg(feature = "fault-injection")]
    groups: u64,
}

impl CrashHook {
    pub(crate) fn from_env() -> Self {
        #[cfg(feature = "fault-injection")]
        {
            let abort_at = std::env::var("FORKLESS_TEST_ABORT_IN_SYNC").ok().and_then(|v| v.parse().ok());
            Self { abort_at, groups: 0 }
        }
        #[cfg(not(feature = "fault-injection"))]
        Self::default()
    }

    /// A group is about to be synced.
    #[inline]
    pub(crate) fn before_sync(&mut self) {
        #[cfg(feature = "fault-injection")]
        {
            self.groups += 1;
            if self.abort_at == Some(self.groups) {
                tracing::error!(
                    group = self.groups,
                    "FORKLESS_TEST_ABORT_IN_SYNC: aborting during a group sync"
                );
                std::process::abort();
            }
        }
    }
}

/// Whether a store opened now delivers before durability: with `FORKLESS_TEST_EARLY_DELIVERY=1`
/// in the environment (and the feature), said loudly in the log.
pub(crate) fn early_delivery_from_env() -> bool {
    #[cfg(feature = "fault-injection")]
    if std::env::var("FORKLESS_TEST_EARLY_DELIVERY").as_deref() == Ok("1") {
        tracing::error!(
            "FORKLESS_TEST_EARLY_DELIVERY=1: events are delivered before they are durable (a negative-control test)"
        );
        return true;
    }
    false
}
