//! Settings the core decides with, their defaults, and their validation.
//!
//! Every limit here is documented with its default; [`Config::validate`] refuses settings that
//! would break an invariant (for example a grace window that a client's retries could outlast,
//! seed condition 5).

use core::time::Duration;

/// How strictly a resume must identify its stream (PROTOCOL section 4, row 7).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ResumeMode {
    /// `Mcp-Stream-Id` is optional; when present it must match `Last-Event-ID`.
    #[default]
    Compat,
    /// `Mcp-Stream-Id` is required on every resume.
    Strict,
}

/// Retention limits (PROTOCOL section 8). Hitting one evicts or refuses with a typed error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Events kept per stream; older ones are evicted. Default 10,000.
    pub stream_max_events: u64,
    /// Payload bytes kept per stream; older events are evicted. Default 16 MiB.
    pub stream_max_bytes: u64,
    /// How long a detached or completed stream's events are kept. Default 10 minutes.
    pub stream_ttl: Duration,
    /// Payload bytes kept across all streams of a session; an append beyond it is refused.
    /// Default 64 MiB.
    pub session_max_bytes: u64,
    /// Streams a session may hold at once (completed ones count until retention drops them;
    /// at the limit, the oldest completed and detached request stream is dropped to make room,
    /// and only a session whose streams are all open or attached is refused). Default 1,024.
    pub session_max_streams: usize,
    /// A session idle for this long ends (what counts as activity: [`Self::idle_clock`]).
    /// Default 30 minutes.
    pub session_idle_ttl: Duration,
    /// What keeps a session from idling. Default [`IdleClock::RequestsAndStreams`].
    pub idle_clock: IdleClock,
}

/// What counts as a session's activity for [`Limits::session_idle_ttl`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IdleClock {
    /// Requests, and any stream attached to a connection: a client holding its GET stream
    /// open is not idle.
    #[default]
    RequestsAndStreams,
    /// Requests only: an open GET stream does not keep the session. For sessions that hold
    /// something costly (a gateway's stdio child), so a forgotten client cannot keep it.
    Requests,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            stream_max_events: 10_000,
            stream_max_bytes: 16 << 20,
            stream_ttl: Duration::from_secs(600),
            session_max_bytes: 64 << 20,
            session_max_streams: 1024,
            session_idle_ttl: Duration::from_secs(1800),
            idle_clock: IdleClock::RequestsAndStreams,
        }
    }
}

/// Who keeps an attachment live (PROTOCOL section 5, liveness).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Liveness {
    /// Each connection renews its own deadline in the record with every completed write
    /// ([`crate::SessionRecord::on_write_completed`]): a stalled connection is detached by
    /// [`crate::SessionRecord::on_tick`] once `grace` passes. One record write per attached
    /// connection per renewal.
    PerConnection,
    /// The node serving the connection holds the attachment: the record keeps no deadline for
    /// it, so an idle stream costs no store write at all. The node watches its own
    /// connections and detaches a stalled one itself (after `grace`), and a restart (one
    /// process) or the node's lease lapsing (many nodes) releases all it held. The default.
    PerNode,
}

/// Everything the core decides with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Strict or compat resume (default compat).
    pub mode: ResumeMode,
    /// How long an attached connection may go without a completed write before it counts as
    /// gone (detached, not fenced); also how long a resume waits for a displaced writer to
    /// stop. Default 10 s.
    pub grace: Duration,
    /// The `retry:` interval sent on SSE streams. Default 1 s.
    pub retry_interval: Duration,
    /// The total reconnect budget the server advertises to clients; must exceed `grace`.
    /// Default 30 s.
    pub retry_budget: Duration,
    /// Interval of keep-alive comments (which also renew liveness); must be below `grace`.
    /// Default 3 s.
    pub keep_alive: Duration,
    /// Who keeps attachments live. Default [`Liveness::PerNode`].
    pub liveness: Liveness,
    /// Retention limits.
    pub limits: Limits,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            mode: ResumeMode::Compat,
            grace: Duration::from_secs(10),
            retry_interval: Duration::from_secs(1),
            retry_budget: Duration::from_secs(30),
            keep_alive: Duration::from_secs(3),
            liveness: Liveness::PerNode,
            limits: Limits::default(),
        }
    }
}

/// A setting that would break an invariant.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// Seed condition 5: a resume could race a still-live original connection.
    #[error("grace ({grace:?}) must be shorter than the advertised retry budget ({retry_budget:?})")]
    GraceNotBelowRetryBudget {
        /// The configured grace window.
        grace: Duration,
        /// The configured retry budget.
        retry_budget: Duration,
    },
    /// Keep-alives renew liveness, so they must come more often than the grace window.
    #[error("keep-alive interval ({keep_alive:?}) must be shorter than grace ({grace:?})")]
    KeepAliveNotBelowGrace {
        /// The configured keep-alive interval.
        keep_alive: Duration,
        /// The configured grace window.
        grace: Duration,
    },
    /// The retry interval alone would exhaust the budget.
    #[error("retry interval ({retry_interval:?}) must be shorter than the retry budget")]
    RetryIntervalNotBelowBudget {
        /// The configured retry interval.
        retry_interval: Duration,
    },
    /// A limit or duration that must be above zero is zero.
    #[error("{0} must be above zero")]
    Zero(&'static str),
}

impl Config {
    /// How long a new attachment counts as live without a renewal: `grace` when connections
    /// renew themselves, unbounded when the node holds it.
    pub const fn attach_hold(&self) -> Duration {
        match self.liveness {
            Liveness::PerConnection => self.grace,
            Liveness::PerNode => Duration::MAX,
        }
    }

    /// Check the settings against each other; the server refuses to start otherwise.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let l = &self.limits;
        let zero_checks: [(&'static str, bool); 9] = [
            ("grace", self.grace.is_zero()),
            ("keep_alive", self.keep_alive.is_zero()),
            ("retry_budget", self.retry_budget.is_zero()),
            ("stream_max_events", l.stream_max_events == 0),
            ("stream_max_bytes", l.stream_max_bytes == 0),
            ("stream_ttl", l.stream_ttl.is_zero()),
            ("session_max_bytes", l.session_max_bytes == 0),
            ("session_max_streams", l.session_max_streams == 0),
            ("session_idle_ttl", l.session_idle_ttl.is_zero()),
        ];
        if let Some((name, _)) = zero_checks.iter().find(|(_, zero)| *zero) {
            return Err(ConfigError::Zero(name));
        }
        if self.grace >= self.retry_budget {
            return Err(ConfigError::GraceNotBelowRetryBudget {
                grace: self.grace,
                retry_budget: self.retry_budget,
            });
        }
        if self.keep_alive >= self.grace {
            return Err(ConfigError::KeepAliveNotBelowGrace {
                keep_alive: self.keep_alive,
                grace: self.grace,
            });
        }
        if self.retry_interval >= self.retry_budget {
            return Err(ConfigError::RetryIntervalNotBelowBudget { retry_interval: self.retry_interval });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        assert_eq!(Config::default().validate(), Ok(()));
    }

    #[test]
    fn grace_must_be_below_retry_budget() {
        let cfg = Config { grace: Duration::from_secs(30), ..Config::default() };
        assert!(matches!(cfg.validate(), Err(ConfigError::GraceNotBelowRetryBudget { .. })));
    }

    #[test]
    fn keep_alive_must_be_below_grace() {
        let cfg = Config { keep_alive: Duration::from_secs(10), ..Config::default() };
        assert!(matches!(cfg.validate(), Err(ConfigError::KeepAliveNotBelowGrace { .. })));
    }

    #[test]
    fn zero_limits_are_refused_by_name() {
        let mut cfg = Config::default();
        cfg.limits.stream_max_events = 0;
        assert_eq!(cfg.validate(), Err(ConfigError::Zero("stream_max_events")));
        let mut cfg = Config::default();
        cfg.limits.session_max_streams = 0;
        assert_eq!(cfg.validate(), Err(ConfigError::Zero("session_max_streams")));
    }
}
