//! What correctness needs from the node a session is served on, named and put behind
//! interfaces so that a node can be one of many; and the node's life around its server
//! ([`Node`]: what a previous process left, a failing store, the lease and takeovers on a
//! shared store).
//!
//! | interface | owns | single-process implementation |
//! |---|---|---|
//! | [`Attachments`] | who serves each attached stream here; "the displaced writer has stopped"; stalled connections (liveness per node) | [`LocalAttachments`] |
//! | [`Inbox`] | client responses and cancellations reaching the session's owner | the live-session registry |
//! | [`forkless_store::Store::due`] | which sessions a sweep must visit | the store engine's wake index |
//! | [`forkless_store::Ownership::owner`] | which node a session's handler runs on (`route` sends its POSTs and DELETEs there, `forward` carries them) | always this one |
//!
//! Each interface's docs say what a multi-node implementation must promise. What stays
//! process-local by nature (a session's handler-side state, its pending server-to-client
//! requests) lives on its owner node and is reached through the [`Inbox`].
//!
//! Liveness is per node ([`forkless_core::Liveness::PerNode`]): an attached idle stream
//! costs no store write; a writer reports completed writes to its lease in memory, and one
//! stall watch per node detaches a connection that made no progress for `grace`, a store
//! write only when that happens. (Per-connection renewal cost one compare-and-set per attached
//! connection per half keep-alive: about 6,700 writes per second for 10,000 idle streams.)

mod attachments;
mod forward;
mod inbox;
mod life;
mod route;

pub use attachments::{AttachmentLease, Attachments, Held, LocalAttachments};
pub(crate) use forward::Forwarder;
pub(crate) use inbox::LiveSessions;
pub use inbox::{Delivery, Inbox, InboxMessage};
pub use life::{Failure, Lease, Node, Stopped};
pub(crate) use route::Routes;
