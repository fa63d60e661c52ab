//! # forkless-core: the sans-IO heart of fork-free MCP resumption
//!
//! This crate decides every reconnect of an MCP Streamable HTTP session and enforces the
//! invariant of the forkless wire contract (PROTOCOL section 1):
//!
//! > At most one live connection is attached to a stream at a time, a session has at most one
//! > standalone (GET) stream identity at a time, and every event a client receives is a
//! > monotonic, gap-free continuation of exactly one stream identity.
//!
//! ## What this crate does not do
//!
//! It performs **no I/O, reads no clock and spawns no tasks**. Time comes in as a
//! [`Timestamp`] argument, randomness through an [`EntropySource`], requests as already
//! received header values. Stores (`forkless-store`) persist [`SessionRecord`]s and event
//! payloads and apply the core's transitions by compare-and-set; the server (`forkless-server`)
//! turns the outcomes into HTTP. Both are thin shells around the functions here, so the same
//! Rust code makes every decision for every backend.
//!
//! ## The model
//!
//! ```text
//!  SessionRecord ─┬─ Session { id, revision, reset_contract, principal, state: Active | Ended }
//!                 ├─ standalone ──▶ the one non-fenced standalone stream
//!                 └─ streams: Stream { id, kind: Standalone | Request,
//!                                      high_water, low_water, epoch,
//!                                      state: Open | Completed | Fenced,
//!                                      attachment: Detached | Attached { deadline } }
//! ```
//!
//! Session lifecycle:
//!
//! ```text
//!   create ──▶ Active ──on_end(reason)──▶ Ended      (terminal: every stream fenced)
//! ```
//!
//! The modules: [`session`] (a session's own facts), [`record`] (a session with its streams,
//! and the transitions on it), `retention` (what retention and time do to a record),
//! [`decision`] (the GET decision and applying it), [`stream`] (one stream's state machine),
//! [`reason`], [`id`], [`config`], [`revision`], [`time`].
//!
//! Stream lifecycle (see [`stream`]):
//!
//! ```text
//!   Open ──on_append(final) / on_complete──▶ Completed      (replay, then end)
//!     └───────────────on_fence───────────────▶ Fenced ◀──── (terminal)
//!   attachment: Detached ──on_attach (epoch+1)──▶ Attached ──on_detach / liveness──▶ Detached
//! ```
//!
//! ## The decision
//!
//! [`decide_get`] is the table of PROTOCOL section 4 as a pure function; [`SessionRecord::on_get`]
//! applies it. Its outcomes:
//!
//! | outcome | HTTP | when |
//! |---|---|---|
//! | [`GetOutcome::Attached`] with `resumed: true` | 200 SSE, `Mcp-Stream-Resumed: true` | row 11 |
//! | [`GetOutcome::Attached`] with `resumed: false` | 200 SSE, `Mcp-Stream-Resumed: false` | rows 1 and 3 |
//! | [`GetOutcome::Conflict`] | 409 | row 2 |
//! | [`GetOutcome::Rejected`] | 404, session ended | rows 4-10 and row 1 after eviction |
//!
//! ## Identities
//!
//! [`SessionId`], [`StreamId`], [`EventId`] and [`Epoch`] each own their wire format; see
//! [`id`].

pub mod config;
pub mod decision;
mod entropy;
pub mod error;
pub mod id;
mod id_hash;
pub mod reason;
pub mod record;
mod retention;
pub mod revision;
pub mod session;
pub mod stream;
mod stream_map;
pub mod task;
pub mod time;
mod wake;

pub use config::{Config, ConfigError, IdleClock, Limits, Liveness, ResumeMode};
pub use decision::{ConflictReason, Decision, GetRequest, OpenNew, RejectReason, decide_get};
pub use error::{EndReason, Error};
#[cfg(feature = "os-entropy")]
pub use id::OsEntropy;
pub use id::{
    EntropySource, Epoch, EventId, IdError, IdHashBuilder, IdHasher, SeededEntropy, Seq, SessionId, StreamId,
    TaskId, Wire,
};
pub use record::{AppendTarget, GetOutcome, Grant, Orphan, SessionRecord};
pub use retention::{EvictedBy, Eviction, Tick};
pub use revision::{Revision, RevisionSet, UnsupportedRevision};
pub use session::{Active, ClientFacts, Ended, NewSession, Session, SessionState};
pub use stream::{
    Attached, Attachment, Completed, Detached, EventKind, FenceCause, Fenced, Label, Open, Stream,
    StreamKind, StreamState,
};
pub use stream_map::StreamChange;
pub use task::{
    CancelOutcome, FailCause, NewTask, OnOwnerLost, Outcome, Settlement, TaskError, TaskKind, TaskOwner,
    TaskParts, TaskRecord, TaskStatus, Update,
};
pub use time::Timestamp;
pub use wake::{Schedule, Wake};
