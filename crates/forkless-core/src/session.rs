//! A session's own facts: who it is, what it negotiated, what the client said at
//! initialize, and its lifecycle (active, then ended for a reason).
//!
//! This module owns those facts. The session's streams and every transition on them are the
//! [`crate::record::SessionRecord`]'s; what time and retention do to it is in
//! `retention`.
//!
//! ```text
//!   create ──▶ Active ──── on_end(Deleted | Rejected(reason) | IdleExpired | Failed) ──▶ Ended
//!                │  ▲                                                  (terminal; every
//!                └──┘ on_get / open_request_stream / append / on_tick   stream fenced)
//! ```

use crate::error::EndReason;
use crate::id::SessionId;
use crate::revision::Revision;
use crate::time::Timestamp;

/// A session's lifecycle state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionState {
    /// Serving requests.
    Active(Active),
    /// Terminal: answered with 404 from now on.
    Ended(Ended),
}

/// An active session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Active {
    /// The last request, attach or write on this session.
    pub last_activity: Timestamp,
}

/// An ended session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ended {
    /// When.
    pub at: Timestamp,
    /// Why.
    pub reason: EndReason,
}

/// What the client said about itself at initialize, kept with the session so that it
/// survives restarts: its `capabilities` and `clientInfo`, as the JSON text it sent (the core
/// does not read JSON; the server does). `None` when unknown (a session recovered from a file
/// written before these facts were stored).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientFacts {
    /// `params.capabilities` of initialize, serialized.
    pub capabilities: Option<std::sync::Arc<str>>,
    /// `params.clientInfo` of initialize, serialized.
    pub info: Option<std::sync::Arc<str>>,
}

/// Per-session facts fixed at initialize, plus the lifecycle state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Session {
    pub(crate) id: SessionId,
    pub(crate) revision: Revision,
    pub(crate) reset_contract: bool,
    pub(crate) principal: Option<String>,
    pub(crate) client: ClientFacts,
    /// What the backend serving the session needs to reach it again from any node (an HTTP
    /// upstream's session id and revision), as the backend wrote it; `None` until it does.
    pub(crate) backend: Option<std::sync::Arc<str>>,
    pub(crate) created_at: Timestamp,
    pub(crate) state: SessionState,
}

impl Session {
    /// The session id.
    pub const fn id(&self) -> SessionId {
        self.id
    }
    /// The negotiated revision.
    pub const fn revision(&self) -> Revision {
        self.revision
    }
    /// Whether the client declared `experimental["forkless/resume"]` (PROTOCOL section 7).
    pub const fn reset_contract(&self) -> bool {
        self.reset_contract
    }
    /// The authenticated principal the session is bound to, when auth is on.
    pub fn principal(&self) -> Option<&str> {
        self.principal.as_deref()
    }
    /// What the client said about itself at initialize.
    pub const fn client(&self) -> &ClientFacts {
        &self.client
    }
    /// What its backend needs to reach it again from any node, if the backend said.
    pub fn backend(&self) -> Option<&std::sync::Arc<str>> {
        self.backend.as_ref()
    }
    /// When it was created.
    pub const fn created_at(&self) -> Timestamp {
        self.created_at
    }
    /// The lifecycle state.
    pub const fn state(&self) -> &SessionState {
        &self.state
    }
    /// Why it ended, if it did.
    pub const fn ended(&self) -> Option<EndReason> {
        match self.state {
            SessionState::Ended(e) => Some(e.reason),
            SessionState::Active(_) => None,
        }
    }
}

/// What a client said at initialize that the session keeps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewSession {
    /// The id (from the CSPRNG).
    pub id: SessionId,
    /// The negotiated revision; must have sessions.
    pub revision: Revision,
    /// Whether the client declared the reset contract.
    pub reset_contract: bool,
    /// The principal to bind to, when auth is on.
    pub principal: Option<String>,
    /// The client's capabilities and `clientInfo`.
    pub client: ClientFacts,
}
