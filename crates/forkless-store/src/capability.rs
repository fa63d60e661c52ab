//! What a store may do beyond sessions and logs: keep tasks ([`TaskStore`]), spend one-time
//! keys across processes ([`Spending`]), carry listen notifications to other nodes
//! ([`Publishing`]), and know which node serves a session ([`Ownership`]).
//!
//! A store offers a capability through its [`Store`](crate::Store) accessor
//! (`tasks`, `spending`, `publishing`, `ownership`) only where it has one: a store shared by
//! many nodes has all four, the embedded durable store keeps tasks, the memory store none.
//! What a store lacks, the process keeps itself: [`Equipped`](crate::Equipped) adds a
//! [`Ledger`](crate::Ledger), a [`Bulletin`](crate::Bulletin) and a
//! [`TaskMap`](crate::TaskMap), which is exactly what a store of one process would have
//! written for itself. A store without [`Ownership`] serves every session here.
//!
//! This module owns the capability traits and [`Absent`], the answer of a store that has
//! none; not where the capabilities are filled in ([`Equipped`](crate::Equipped)).

use core::future::Future;
use core::time::Duration;

use bytes::Bytes;
use forkless_core::{Orphan, SessionId, TaskId, TaskRecord, Timestamp};

use crate::{NodeName, Owner, Result, SpendKey, Spent, Takeover, TaskStore, Version, Versioned};

/// One-time keys spent at most once across every process sharing the store (promise 9).
pub trait Spending: Send + Sync {
    /// Spend `key`, issued at `issued` and good until `until`: [`Spent::Now`] the first time,
    /// [`Spent::Before`] after, [`Spent::Unvouched`] if it was issued before the store's memory
    /// of spent keys began. Once `until` has passed the store may forget the key.
    fn spend(
        &self,
        key: SpendKey,
        issued: Timestamp,
        until: Timestamp,
        now: Timestamp,
    ) -> impl Future<Output = Result<Spent>> + Send;
}

/// Listen notifications that reach every node sharing the store (promise 10).
pub trait Publishing: Send + Sync {
    /// Send a listen notification (a JSON-RPC notification, 2026-07-28
    /// `subscriptions/listen`) to every node's subscribers, this one's included.
    fn publish(&self, message: Bytes) -> impl Future<Output = Result<()>> + Send;

    /// The listen notifications published from now on, on any node.
    fn subscribe(&self) -> tokio::sync::broadcast::Receiver<Bytes>;
}

/// Which node serves a session's handler, on a store shared by many nodes (PROTOCOL
/// section 10).
pub trait Ownership: Send + Sync {
    /// This node's name, once it holds a node lease: the owner of the sessions and tasks it
    /// creates. `None` before: the store is taken to be the database's only node.
    fn node(&self) -> Option<NodeName>;

    /// How long a writer that displaced a live attachment waits before it writes: the most a
    /// displaced writer on another node may go on reading what its own node committed
    /// (promise 5).
    fn handover(&self) -> Duration;

    /// Which node serves `session`'s handler; at most one round trip.
    fn owner(&self, session: SessionId) -> impl Future<Output = Result<Owner>> + Send;

    /// Take `session` over from its lapsed owner now, by compare-and-set on the owner, and
    /// restore or end it as `what` says: the orphans to answer, or `None` if it was not this
    /// node's to take (its owner is live, or another node took it first).
    fn adopt(
        &self,
        session: SessionId,
        what: Takeover,
        now: Timestamp,
    ) -> impl Future<Output = Result<Option<Vec<Orphan>>>> + Send;

    /// Tasks not yet ended whose owner node's lease lapsed, with that node.
    fn lapsed_tasks(&self) -> impl Future<Output = Result<Vec<(TaskId, NodeName)>>> + Send;
}

/// The capability of a store that has none: no value of it exists, so an accessor's default
/// `None::<&Absent>` is all it can answer.
#[derive(Debug)]
pub enum Absent {}

impl Spending for Absent {
    async fn spend(&self, _: SpendKey, _: Timestamp, _: Timestamp, _: Timestamp) -> Result<Spent> {
        match *self {}
    }
}

impl Publishing for Absent {
    async fn publish(&self, _: Bytes) -> Result<()> {
        match *self {}
    }

    fn subscribe(&self) -> tokio::sync::broadcast::Receiver<Bytes> {
        match *self {}
    }
}

impl Ownership for Absent {
    fn node(&self) -> Option<NodeName> {
        match *self {}
    }

    fn handover(&self) -> Duration {
        match *self {}
    }

    async fn owner(&self, _: SessionId) -> Result<Owner> {
        match *self {}
    }

    async fn adopt(&self, _: SessionId, _: Takeover, _: Timestamp) -> Result<Option<Vec<Orphan>>> {
        match *self {}
    }

    async fn lapsed_tasks(&self) -> Result<Vec<(TaskId, NodeName)>> {
        match *self {}
    }
}

impl TaskStore for Absent {
    async fn create_task(&self, _: &TaskRecord) -> Result<()> {
        match *self {}
    }

    async fn load_task(&self, _: TaskId) -> Result<Option<Versioned<TaskRecord>>> {
        match *self {}
    }

    async fn replace_task(&self, _: Version, _: &TaskRecord) -> Result<Option<Version>> {
        match *self {}
    }

    async fn open_tasks(&self, _: Option<&NodeName>) -> Result<Vec<TaskId>> {
        match *self {}
    }

    async fn expire_tasks(&self, _: Timestamp) -> Result<u64> {
        match *self {}
    }
}
