//! The store's one error type.

use forkless_core::{EndReason, Seq};

/// Everything that can go wrong in a store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The core refused the transition (fenced stream, ended session, limits, ...).
    #[error(transparent)]
    Core(#[from] forkless_core::Error),
    /// No session with this id (never existed, or removed).
    #[error("unknown session")]
    SessionUnknown,
    /// No task with this id (never existed, or expired and removed).
    #[error("unknown task")]
    TaskUnknown,
    /// A task with this id already exists.
    #[error("task already exists")]
    TaskExists,
    /// The core refused a task's transition (ended, superseded, a reused key, ...).
    #[error(transparent)]
    Task(#[from] forkless_core::TaskError),
    /// A session with this id already exists.
    #[error("session already exists")]
    SessionExists,
    /// The stream is not part of the session.
    #[error("unknown stream")]
    StreamUnknown,
    /// Events after the cursor were evicted; the oldest retained seq is `low_water`.
    #[error("events after the cursor were evicted (oldest retained is {low_water})")]
    Evicted {
        /// The stream's low-water mark.
        low_water: Seq,
    },
    /// Compare-and-set kept losing to concurrent writers.
    #[error("gave up after {attempts} compare-and-set conflicts")]
    Contended {
        /// How many times it tried.
        attempts: u32,
    },
    /// The backend failed (I/O, connection, disk full). Nothing was applied.
    #[error("store backend failed: {0}")]
    Backend(String),
    /// The backend cannot vouch for its state after an earlier failure and refuses work.
    #[error("store is poisoned after an earlier failure: {0}")]
    Poisoned(String),
    /// Persisted data is of an unknown format version or unreadable.
    #[error("stored data is unreadable: {0}")]
    Corrupt(String),
    /// A file the store needs is missing, truncated or belongs to another store, so starting
    /// would silently lose what it held; the message names the file and how to start anyway.
    #[error("{0}")]
    Lost(String),
    /// A process-local ledger of spent keys holds its maximum of live keys ([`crate::Spending::spend`]).
    #[error("the store holds its maximum of {0} unexpired spent keys")]
    SpendFull(usize),
    /// This node does not hold its lease (another live process holds the node id, or the
    /// lease lapsed before it was renewed), so it serves nothing: another node may own what
    /// it held.
    #[error("node lease: {0}")]
    LeaseLost(String),
}

impl Error {
    /// The session's end reason, when the error says it ended.
    pub fn ended(&self) -> Option<EndReason> {
        match self {
            Self::Core(forkless_core::Error::SessionEnded { reason }) => Some(*reason),
            _ => None,
        }
    }
}
