//! An in-process database double: [`MemoryDatabase`] implements the shared layer's
//! [`Database`] contract with maps behind one lock, and [`HintSource`] with a broadcast
//! channel, so the shared layer's policy (the read fence, group commit, retention, leases,
//! takeovers, hints, tail caching) runs under the same conformance suites as PostgreSQL and
//! Redis in every test run, with no server.
//!
//! It is a proof that the contract is narrow: everything here only stores and reads back
//! (compare-and-set on a version, the logs following the record, leases on its own clock);
//! nothing decides. It is not a store for production: nothing survives the process.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use bytes::Bytes;
use forkless_core::{
    Schedule, Seq, SessionId, SessionRecord, Stream, StreamChange, StreamId, TaskId, Timestamp,
};
use tokio::sync::broadcast;

use crate::shared::{
    Batch, Committed, Database, HintSource, Hints, LeaseOp, NodeName, OwnerFacts, Pipeline, Read,
    SharedStore, TailConfig, TaskRow, Write, Written,
};
use crate::{Error, Result, SpendKey, Spent, StoredEvent, Version};

/// A database in this process, shared by every [`SharedStore`] made from it (clones share it).
#[derive(Clone, Debug)]
pub struct MemoryDatabase {
    tables: Arc<Mutex<Tables>>,
    hints: broadcast::Sender<String>,
    cas: Cas,
}

/// Whether writes compare versions (for negative controls: a database that does not).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cas {
    Compare,
    /// Every write lands, whatever version it was computed on: last writer wins.
    Ignore,
}

#[derive(Debug, Default)]
struct Tables {
    sessions: HashMap<SessionId, Row>,
    nodes: HashMap<String, Lease>,
    spent: HashMap<SpendKey, Timestamp>,
    tasks: HashMap<TaskId, Task>,
}

/// A session's row: its record at its version, its owner, and its streams' events.
#[derive(Debug)]
struct Row {
    version: Version,
    record: SessionRecord,
    owner: Option<String>,
    events: HashMap<StreamId, BTreeMap<Seq, Bytes>>,
}

#[derive(Debug)]
struct Lease {
    token: String,
    expires: Instant,
    advertise: Option<String>,
}

#[derive(Debug)]
struct Task {
    version: Version,
    record: Vec<u8>,
    node: Option<String>,
    open: bool,
    expires: Timestamp,
}

impl Default for MemoryDatabase {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryDatabase {
    /// An empty database.
    pub fn new() -> Self {
        Self { tables: Arc::default(), hints: broadcast::channel(4096).0, cas: Cas::Compare }
    }

    /// For negative controls only: a database whose writes land whatever version they were
    /// computed on (last writer wins), as a backend that forgot its compare-and-set would.
    pub fn ignoring_versions() -> Self {
        Self { cas: Cas::Ignore, ..Self::new() }
    }

    fn stale(&self, stored: Version, expected: Version) -> bool {
        self.cas == Cas::Compare && stored != expected
    }

    /// A node of it: a [`SharedStore`] named `node`, its hints on, its listener running.
    pub fn node(&self, node: &str) -> SharedStore<Self> {
        let name = NodeName::new(node).expect("a valid node name");
        let store = SharedStore::new(self.clone(), Hints::Notify, name, Pipeline::On, TailConfig::default());
        let source = Subscriber { hints: self.hints.clone() };
        store.own_task(tokio::spawn(crate::shared::listen(store.hint_sink(), source)));
        store
    }

    fn tables(&self) -> MutexGuard<'_, Tables> {
        self.tables.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn send(&self, hint: &str) {
        // Nobody listening is no failure: hints are best effort.
        let _ = self.hints.send(hint.to_owned());
    }
}

impl Tables {
    fn live(&self, node: &str) -> bool {
        self.nodes.get(node).is_some_and(|l| l.expires >= Instant::now())
    }
}

impl Row {
    /// The logs follow the record: a dropped stream loses its events, a trim the ones below
    /// its low-water mark, an ended record every event.
    fn follow(&mut self, old: &SessionRecord, new: &SessionRecord) {
        for change in new.changes_since(old) {
            match change {
                StreamChange::Removed(_) => {
                    self.events.remove(&change.id());
                }
                StreamChange::Added(meta) | StreamChange::Changed { after: meta, .. } => {
                    if let Some(log) = self.events.get_mut(&meta.id()) {
                        *log = log.split_off(&meta.low_water());
                    }
                }
            }
        }
        if new.session().ended().is_some() {
            self.events.clear();
        }
    }

    fn stream(&self, stream: StreamId) -> Result<Stream> {
        self.record.stream(stream).cloned().ok_or(Error::StreamUnknown)
    }
}

impl Database for MemoryDatabase {
    async fn load(&self, id: SessionId) -> Result<Option<(Version, SessionRecord)>> {
        Ok(self.tables().sessions.get(&id).map(|row| (row.version, row.record.clone())))
    }

    async fn insert(&self, record: &SessionRecord, owner: Option<&str>) -> Result<()> {
        let mut tables = self.tables();
        if tables.sessions.contains_key(&record.id()) {
            return Err(Error::SessionExists);
        }
        let row = Row {
            version: Version::INITIAL,
            record: record.clone(),
            owner: owner.map(str::to_owned),
            events: HashMap::new(),
        };
        tables.sessions.insert(record.id(), row);
        Ok(())
    }

    async fn write(&self, write: Write<'_>) -> Result<Written> {
        let mut tables = self.tables();
        let Some(row) =
            tables.sessions.get_mut(&write.new.id()).filter(|r| !self.stale(r.version, write.expected))
        else {
            return Ok(Written::Moved);
        };
        row.follow(write.old, write.new);
        row.record = write.new.clone();
        row.version = row.version.next();
        drop(tables);
        if let Some(hint) = &write.hint {
            self.send(hint);
        }
        Ok(Written::Committed)
    }

    async fn write_batch(&self, batch: Batch<'_>) -> Result<Committed> {
        let mut tables = self.tables();
        for s in batch.sessions {
            if tables.sessions.get(&s.start.id()).is_none_or(|r| self.stale(r.version, s.version)) {
                return Ok(Committed::Moved(s.start.id()));
            }
        }
        for chunk in batch.chunks {
            let row = tables.sessions.get_mut(&chunk.session).ok_or(Error::SessionUnknown)?;
            let log = row.events.entry(chunk.stream).or_default();
            for (n, payload) in (chunk.first.get()..).zip(&chunk.payloads) {
                log.insert(Seq::new(n), payload.clone());
            }
        }
        for s in batch.sessions {
            let row = tables.sessions.get_mut(&s.start.id()).ok_or(Error::SessionUnknown)?;
            row.follow(s.start, s.end);
            row.record = s.end.clone();
            row.version = Version::new(s.version.get() + s.appended);
        }
        drop(tables);
        for hint in batch.hints {
            self.send(&hint.text);
        }
        Ok(Committed::All { hints: batch.hints.len() as u64 })
    }

    async fn oldest_sizes(
        &self,
        session: SessionId,
        stream: StreamId,
        from: Seq,
        n: u64,
    ) -> Result<Vec<u64>> {
        let tables = self.tables();
        let row = tables.sessions.get(&session).ok_or(Error::SessionUnknown)?;
        let Some(log) = row.events.get(&stream) else { return Ok(Vec::new()) };
        let n = usize::try_from(n).unwrap_or(usize::MAX);
        Ok(log.range(from..).take(n).map(|(_, p)| p.len() as u64).collect())
    }

    async fn read(&self, session: SessionId, stream: StreamId, after: Seq, max: usize) -> Result<Read> {
        let tables = self.tables();
        let row = tables.sessions.get(&session).ok_or(Error::SessionUnknown)?;
        let meta = row.stream(stream)?;
        let events = row
            .events
            .get(&stream)
            .map(|log| {
                let later = log.range(Seq::new(after.get().saturating_add(1))..).take(max);
                later.map(|(seq, payload)| StoredEvent { seq: *seq, payload: payload.clone() }).collect()
            })
            .unwrap_or_default();
        Ok(Read { meta, events })
    }

    async fn stream(&self, session: SessionId, stream: StreamId) -> Result<Stream> {
        self.tables().sessions.get(&session).ok_or(Error::SessionUnknown)?.stream(stream)
    }

    async fn remove(&self, id: SessionId, hint: Option<String>) -> Result<()> {
        self.tables().sessions.remove(&id);
        if let Some(hint) = &hint {
            self.send(hint);
        }
        Ok(())
    }

    async fn sessions(&self) -> Result<Vec<SessionId>> {
        Ok(self.tables().sessions.keys().copied().collect())
    }

    async fn due(&self, now: Timestamp, schedule: &Schedule) -> Result<Vec<SessionId>> {
        let tables = self.tables();
        Ok(tables
            .sessions
            .values()
            .filter(|r| r.record.wake().due(now, schedule))
            .map(|r| r.record.id())
            .collect())
    }

    async fn health(&self) -> Result<()> {
        Ok(())
    }

    async fn owned(&self, node: &str) -> Result<Vec<SessionId>> {
        let tables = self.tables();
        Ok(tables
            .sessions
            .iter()
            .filter(|(_, r)| r.owner.as_deref() == Some(node))
            .map(|(id, _)| *id)
            .collect())
    }

    async fn ownerless(&self) -> Result<Vec<(SessionId, String)>> {
        let tables = self.tables();
        let lapsed = |owner: &&String| !tables.live(owner);
        Ok(tables
            .sessions
            .iter()
            .filter_map(|(id, r)| r.owner.as_ref().filter(lapsed).map(|owner| (*id, owner.clone())))
            .collect())
    }

    async fn owner(&self, session: SessionId) -> Result<Option<OwnerFacts>> {
        let tables = self.tables();
        let Some(node) = tables.sessions.get(&session).and_then(|r| r.owner.clone()) else { return Ok(None) };
        let advertise = tables.nodes.get(&node).and_then(|l| l.advertise.clone());
        let live = tables.live(&node);
        Ok(Some(OwnerFacts { node, advertise, live }))
    }

    async fn claim(&self, session: SessionId, from: &str, to: &str) -> Result<bool> {
        let mut tables = self.tables();
        match tables.sessions.get_mut(&session) {
            Some(row) if row.owner.as_deref() == Some(from) => {
                row.owner = Some(to.to_owned());
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn lease(&self, op: LeaseOp<'_>) -> Result<bool> {
        let mut tables = self.tables();
        let now = Instant::now();
        Ok(match op {
            LeaseOp::Acquire { node, token, ttl, advertise } => {
                let free = tables.nodes.get(node).is_none_or(|l| l.expires < now || l.token == token);
                if free {
                    let lease = Lease {
                        token: token.to_owned(),
                        expires: now + ttl,
                        advertise: advertise.map(str::to_owned),
                    };
                    tables.nodes.insert(node.to_owned(), lease);
                }
                free
            }
            LeaseOp::Renew { node, token, ttl, in_hand } => match tables.nodes.get_mut(node) {
                Some(l) if l.token == token && l.expires >= now + in_hand => {
                    l.expires = now + ttl;
                    true
                }
                _ => false,
            },
            LeaseOp::Release { node, token } => {
                let held = tables.nodes.get(node).is_some_and(|l| l.token == token);
                if held {
                    tables.nodes.remove(node);
                }
                held
            }
        })
    }

    async fn spend(
        &self,
        key: SpendKey,
        _issued: Timestamp,
        until: Timestamp,
        now: Timestamp,
    ) -> Result<Spent> {
        let mut tables = self.tables();
        tables.spent.retain(|_, kept| *kept >= now);
        Ok(match tables.spent.insert(key, until) {
            None => Spent::Now,
            Some(earlier) => {
                tables.spent.insert(key, earlier);
                Spent::Before
            }
        })
    }

    async fn task(&self, id: TaskId) -> Result<Option<(Version, Vec<u8>)>> {
        Ok(self.tables().tasks.get(&id).map(|t| (t.version, t.record.clone())))
    }

    async fn put_task(&self, row: TaskRow<'_>, expected: Option<Version>) -> Result<bool> {
        let mut tables = self.tables();
        let version = match (tables.tasks.get(&row.id), expected) {
            (None, None) => Version::INITIAL,
            (Some(stored), Some(expected)) if stored.version == expected => expected.next(),
            _ => return Ok(false),
        };
        let task = Task {
            version,
            record: row.record.to_vec(),
            node: row.node.map(str::to_owned),
            open: row.open,
            expires: row.expires,
        };
        tables.tasks.insert(row.id, task);
        Ok(true)
    }

    async fn open_tasks(&self, node: Option<&str>) -> Result<Vec<TaskId>> {
        let tables = self.tables();
        Ok(tables
            .tasks
            .iter()
            .filter(|(_, t)| t.open && t.node.as_deref() == node)
            .map(|(id, _)| *id)
            .collect())
    }

    async fn lapsed_tasks(&self) -> Result<Vec<(TaskId, String)>> {
        let tables = self.tables();
        Ok(tables
            .tasks
            .iter()
            .filter(|(_, t)| t.open)
            .filter_map(|(id, t)| t.node.as_ref().filter(|n| !tables.live(n)).map(|n| (*id, n.clone())))
            .collect())
    }

    async fn expire_tasks(&self, now: Timestamp) -> Result<u64> {
        let mut tables = self.tables();
        let before = tables.tasks.len();
        tables.tasks.retain(|_, t| t.expires >= now);
        Ok((before - tables.tasks.len()) as u64)
    }

    async fn publish(&self, hint: &str) -> Result<()> {
        self.send(hint);
        Ok(())
    }
}

/// A node's subscription to the database's hints.
#[derive(Debug)]
struct Subscriber {
    hints: broadcast::Sender<String>,
}

impl HintSource for Subscriber {
    type Subscription = broadcast::Receiver<String>;
    const NAME: &'static str = "memory-database";

    async fn subscribe(&mut self) -> Result<Self::Subscription> {
        Ok(self.hints.subscribe())
    }

    async fn next(subscription: &mut Self::Subscription) -> Option<String> {
        // A receiver that fell behind lost hints: the subscription ends, and the listener
        // subscribes again and re-reads everything watched, as after a reconnect.
        subscription.recv().await.ok()
    }
}
