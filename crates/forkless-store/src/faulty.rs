//! A wrapper that makes any store fail on demand, for testing what callers do when a write
//! does not happen (or happens but is not acknowledged).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use forkless_core::{EventId, Seq, SessionId, SessionRecord, StreamId};

use crate::{Append, Error, Reader, Result, Store, StoredEvent, StreamWatch, Version, Versioned};

/// A failure to inject into the next matching call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The next append fails before anything is stored (a failed write or full disk).
    Append,
    /// The next append is stored but the caller gets an error (the acknowledgement is lost,
    /// as after a crash between commit and reply).
    AppendUnacknowledged,
    /// The next compare-and-set fails before anything is written.
    CompareAndSet,
    /// The next compare-and-set is written but the caller gets an error (as when the caller
    /// stopped waiting, or crashed, between the write and its confirmation).
    CompareAndSetUnacknowledged,
    /// The next load fails.
    Load,
    /// The next read fails.
    Read,
    /// The next health check fails (the database stopped answering).
    Health,
    /// The next read that returns an event after a stream's first hands it the bytes of the
    /// event before it (an id that names other bytes: a store reading the wrong row).
    ReadRenamed,
}

/// Any [`Store`], with failures injected by [`FaultyStore::inject`].
#[derive(Clone, Debug)]
pub struct FaultyStore<S> {
    inner: S,
    faults: Arc<Mutex<VecDeque<Fault>>>,
}

impl<S: Store> FaultyStore<S> {
    /// Wrap `inner`; no fault is armed.
    pub fn new(inner: S) -> Self {
        Self { inner, faults: Arc::default() }
    }

    /// Arm `fault` for the next matching call (faults of one kind fire in order).
    pub fn inject(&self, fault: Fault) {
        if let Ok(mut f) = self.faults.lock() {
            f.push_back(fault);
        }
    }

    /// The wrapped store.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    fn take(&self, kinds: &[Fault]) -> Option<Fault> {
        let mut faults = self.faults.lock().ok()?;
        let i = faults.iter().position(|f| kinds.contains(f))?;
        faults.remove(i)
    }
}

fn injected(what: &str) -> Error {
    Error::Backend(format!("injected fault: {what}"))
}

impl<S: Store> Store for FaultyStore<S> {
    async fn create(&self, record: SessionRecord) -> Result<Version> {
        self.inner.create(record).await
    }

    async fn load(&self, id: SessionId) -> Result<Option<Versioned<SessionRecord>>> {
        if self.take(&[Fault::Load]).is_some() {
            return Err(injected("load"));
        }
        self.inner.load(id).await
    }

    async fn compare_and_set(&self, expected: Version, record: SessionRecord) -> Result<Option<Version>> {
        match self.take(&[Fault::CompareAndSet, Fault::CompareAndSetUnacknowledged]) {
            Some(Fault::CompareAndSet) => Err(injected("compare_and_set")),
            Some(_) => {
                self.inner.compare_and_set(expected, record).await?;
                Err(injected("compare_and_set acknowledgement"))
            }
            None => self.inner.compare_and_set(expected, record).await,
        }
    }

    async fn append(&self, event: Append<'_>) -> Result<EventId> {
        match self.take(&[Fault::Append, Fault::AppendUnacknowledged]) {
            Some(Fault::Append) => Err(injected("append")),
            Some(_) => {
                self.inner.append(event).await?;
                Err(injected("append acknowledgement"))
            }
            None => self.inner.append(event).await,
        }
    }

    async fn read(
        &self,
        session: SessionId,
        stream: StreamId,
        after: Seq,
        max: usize,
        reader: Reader,
    ) -> Result<Vec<StoredEvent>> {
        if self.take(&[Fault::Read]).is_some() {
            return Err(injected("read"));
        }
        let mut events = self.inner.read(session, stream, after, max, reader).await?;
        if let Some(event) = events.iter_mut().find(|e| e.seq.get() >= 2)
            && self.take(&[Fault::ReadRenamed]).is_some()
        {
            let before = Seq::new(event.seq.get() - 2);
            let previous = self.inner.read(session, stream, before, 1, Reader::Inspector).await?;
            if let Some(previous) = previous.into_iter().next() {
                event.payload = previous.payload;
            }
        }
        Ok(events)
    }

    async fn watch(&self, session: SessionId, stream: StreamId) -> Result<StreamWatch> {
        self.inner.watch(session, stream).await
    }

    async fn remove(&self, id: SessionId) -> Result<()> {
        self.inner.remove(id).await
    }

    async fn sessions(&self) -> Result<Vec<SessionId>> {
        self.inner.sessions().await
    }

    fn usage(&self) -> crate::Usage {
        self.inner.usage()
    }

    fn retained_by(&self, session: SessionId) -> Option<u64> {
        self.inner.retained_by(session)
    }

    fn metrics(&self) -> Vec<crate::StoreMetric> {
        self.inner.metrics()
    }

    async fn health(&self) -> Result<()> {
        if self.take(&[Fault::Health]).is_some() {
            return Err(injected("health"));
        }
        self.inner.health().await
    }

    async fn due(
        &self,
        now: forkless_core::Timestamp,
        schedule: &forkless_core::Schedule,
    ) -> Result<Vec<SessionId>> {
        self.inner.due(now, schedule).await
    }

    fn tasks(&self) -> Option<&impl crate::TaskStore> {
        self.inner.tasks()
    }

    fn spending(&self) -> Option<&impl crate::Spending> {
        self.inner.spending()
    }

    fn publishing(&self) -> Option<&impl crate::Publishing> {
        self.inner.publishing()
    }

    fn ownership(&self) -> Option<&impl crate::Ownership> {
        self.inner.ownership()
    }
}
