//! How a [`super::MessageBackend`] maps sessions to backends, and its limits.

use std::time::Duration;

use crate::handler::{Restorable, Revisions};

/// How sessions map to backends.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Sharing {
    /// One backend per session, started at its `initialize`, which is forwarded. The backend
    /// is the session's state.
    #[default]
    PerSession,
    /// One backend for every session, initialized once by forkless. Request ids and progress
    /// tokens are rewritten per session; a notification that names no request of a session
    /// is counted and logged, never sent to a client that may not own it; the backend's
    /// requests to clients are answered `-32601`.
    Shared,
}

/// Settings of a [`MessageBackend`].
#[derive(Clone, Copy, Debug)]
pub struct BackendConfig {
    /// Sessions and backends. Default [`Sharing::PerSession`].
    pub sharing: Sharing,
    /// How long a backend may take to answer `initialize` (a stdio child started by `npx`
    /// may download itself first). Default 60 s.
    pub initialize_timeout: Duration,
    /// Whether a session can be served by a backend other than the one it started with
    /// (after a restart, or on another node). Default [`Restorable::No`]: a backend is the
    /// session's state. [`Restorable::Yes`] is for services whose state is elsewhere (an
    /// in-process service over shared state): a new backend is started for such a session
    /// on its next request and initialized with what its client said at `initialize`.
    pub restorable: Restorable,
    /// The revisions its sessions may speak. Default [`Revisions::SessionsOnly`]: a
    /// 2026-07-28 client falls back to a session. [`Revisions::All`] serves that revision
    /// too, each request on a backend of its own (`stateless`), for backends whose state
    /// does not live in a session (the CLI gateway's `--revisions all`).
    pub revisions: Revisions,
    /// 2026-07-28: how long a backend's call waits for its client's answer to the backend's
    /// own request (sampling, elicitation, roots), asked as an `input_required` round.
    /// Default 10 minutes (the sealed `requestState`'s own default lifetime).
    pub round_ttl: Duration,
    /// 2026-07-28: how many such calls may wait at once on this node (each holds its
    /// backend); a question beyond that is refused, and the tool sees the error. Default 100.
    pub max_waiting_rounds: usize,
}

impl Default for BackendConfig {
    fn default() -> Self {
        Self {
            sharing: Sharing::PerSession,
            initialize_timeout: Duration::from_secs(60),
            restorable: Restorable::No,
            revisions: Revisions::SessionsOnly,
            round_ttl: Duration::from_secs(600),
            max_waiting_rounds: 100,
        }
    }
}
