//! Which node's handler serves a session ([`Owner`]), and what a node taking over a lost
//! node's session does with it ([`Takeover`]).
//!
//! A store of one process owns every session it holds ([`Owner::Here`]). A store shared by
//! many nodes records the node whose lease created each session, and that node's advertised
//! address, so the server can send a request for a session to the node its handler runs on
//! (PROTOCOL section 10). This module owns the vocabulary, not the routing (the server's
//! cluster layer) nor the ownership records (a shared store's).

/// Where a session's handler runs, as the store knows it now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Owner {
    /// This node (or a store of one process): serve the session here.
    Here,
    /// Another node holding a live lease: send the session's requests there.
    Node {
        /// Its node id.
        node: String,
        /// Its advertised base URL (`--advertise`), if it gave one.
        advertise: Option<String>,
    },
    /// A node whose lease lapsed: its sessions wait to be taken over.
    Lapsed {
        /// Its node id.
        node: String,
    },
}

/// What a node taking over a lost node's sessions does with each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Takeover {
    /// Go on with the session here: its requests in flight are orphans to answer.
    Restore,
    /// End it (`owner_lost`): its handler's state died with its node.
    End,
}
