//! The checkpoint thread: applies one log region's writes to redb while the writer thread
//! goes on logging into the other region, so that no sync waits for a checkpoint.
//!
//! A checkpoint of a busy second's writes is a redb transaction of tens of milliseconds. On
//! the writer thread it held back every sync queued behind it: under SSE echo at 16
//! connections the 99th percentile of request latency was the checkpoint's length (17 to
//! 21 ms, once a second). Here the writer hands a region's writes over and goes on; it waits
//! only when it has filled the other region before the checkpoint is done, or when it needs
//! everything checkpointed (closing, a group too large for the log).
//!
//! It owns the thread, the hand-over and the outcome; what a checkpoint writes is
//! [`super::checkpoint`]'s, when one is due and which region is free is
//! [`super::journal`]'s.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use redb::Database;

use super::checkpoint::{Scratch, commit};
use super::op::Op;

/// What the checkpoint thread tells once a checkpoint is committed: the writes it applied.
pub(crate) type OnCommit = Box<dyn FnMut(&[Op]) + Send>;

/// The writer's handle on the checkpoint thread (started with the first checkpoint).
pub(crate) struct Checkpointer {
    db: Arc<Database>,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    /// The writes of the last hand-over, cleared, given back for the next one's buffer.
    spare: Vec<Op>,
    /// Handed to the thread when it starts.
    on_commit: Option<OnCommit>,
}

#[derive(Debug, Default)]
struct Shared {
    state: Mutex<State>,
    changed: Condvar,
    /// Checkpoints committed (the store's `/metrics`, and a signal tests wait on).
    done: Arc<AtomicU64>,
}

#[derive(Debug, Default)]
struct State {
    phase: Phase,
    /// The first failure, kept: the store is poisoned by it, and [`Checkpointer::start`]
    /// hands nothing more over.
    failed: Option<String>,
    /// A done job's writes, emptied, for the writer to reuse.
    spare: Option<Vec<Op>>,
    closing: bool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding this lock leaves the state itself consistent.
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Where the checkpoint thread is.
#[derive(Debug, Default)]
enum Phase {
    #[default]
    Idle,
    /// Handed over, not yet taken: the writes and the LSN of their last log entry.
    Handed(Vec<Op>, u64),
    /// Being applied.
    Applying,
}

impl State {
    fn busy(&self) -> bool {
        !matches!(self.phase, Phase::Idle)
    }
}

impl std::fmt::Debug for Checkpointer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Checkpointer").field("shared", &self.shared).finish_non_exhaustive()
    }
}

impl Checkpointer {
    pub(crate) fn new(db: Database) -> Self {
        Self { db: Arc::new(db), shared: Arc::default(), thread: None, spare: Vec::new(), on_commit: None }
    }

    /// The redb database (read at recovery, before the first checkpoint).
    pub(crate) fn db(&self) -> &Database {
        &self.db
    }

    /// The redb database, for readers of what checkpoints committed.
    pub(crate) fn shared_db(&self) -> Arc<Database> {
        Arc::clone(&self.db)
    }

    /// Call `f` with the writes of every checkpoint once it is committed (on the checkpoint
    /// thread, after the writer may go on). Set before the first checkpoint.
    pub(crate) fn on_commit(&mut self, f: OnCommit) {
        self.on_commit = Some(f);
    }

    /// The count of committed checkpoints, shared with whoever reports it.
    pub(crate) fn done(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.shared.done)
    }

    /// Whether a checkpoint is in progress.
    pub(crate) fn busy(&self) -> bool {
        self.shared.lock().busy()
    }

    /// The failure of a checkpoint, once one failed.
    pub(crate) fn failed(&self) -> Result<(), String> {
        self.shared.lock().failed.clone().map_or(Ok(()), Err)
    }

    /// Hand `ops` (taken, leaving `ops` empty with a spare buffer) over to be applied with
    /// `lsn` as the last log entry applied. Waits for the checkpoint in progress, if any.
    pub(crate) fn start(&mut self, ops: &mut Vec<Op>, lsn: u64) -> Result<(), String> {
        self.wait()?;
        self.spawn()?;
        let job = std::mem::replace(ops, std::mem::take(&mut self.spare));
        self.shared.lock().phase = Phase::Handed(job, lsn);
        self.shared.changed.notify_all();
        Ok(())
    }

    /// Wait until no checkpoint is in progress; the first failure if one failed.
    pub(crate) fn wait(&mut self) -> Result<(), String> {
        let mut state = self.shared.lock();
        while state.busy() {
            state = self.shared.changed.wait(state).unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        if let Some(spare) = state.spare.take() {
            self.spare = spare;
        }
        state.failed.clone().map_or(Ok(()), Err)
    }

    /// Apply `ops` now and wait for it (a checkpoint of everything: closing, or a group too
    /// large for the log).
    pub(crate) fn run(&mut self, ops: &mut Vec<Op>, lsn: u64) -> Result<(), String> {
        self.start(ops, lsn)?;
        self.wait()
    }

    fn spawn(&mut self) -> Result<(), String> {
        if self.thread.is_some() {
            return Ok(());
        }
        let (db, shared) = (Arc::clone(&self.db), Arc::clone(&self.shared));
        let on_commit = self.on_commit.take();
        let thread = std::thread::Builder::new()
            .name("forkless-redb-checkpoint".into())
            .spawn(move || work(&db, &shared, on_commit))
            .map_err(|e| format!("spawning the checkpoint thread: {e}"))?;
        self.thread = Some(thread);
        Ok(())
    }
}

impl Drop for Checkpointer {
    /// Let the checkpoint in progress finish, then stop the thread.
    fn drop(&mut self) {
        self.shared.lock().closing = true;
        self.shared.changed.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The checkpoint thread: apply each job handed over, until closing.
fn work(db: &Database, shared: &Shared, mut on_commit: Option<OnCommit>) {
    let mut scratch = Scratch::default();
    loop {
        let (mut ops, lsn) = {
            let mut state = shared.lock();
            loop {
                // (Only this thread leaves `Handed`, so anything else here is `Idle`.)
                match std::mem::take(&mut state.phase) {
                    Phase::Handed(ops, lsn) => {
                        state.phase = Phase::Applying;
                        break (ops, lsn);
                    }
                    _ if state.closing => return,
                    _ => {
                        state = shared.changed.wait(state).unwrap_or_else(std::sync::PoisonError::into_inner)
                    }
                }
            }
        };
        // Applied without the lock: the writer asks how it goes meanwhile.
        let started = std::time::Instant::now();
        let result = commit(db, &ops, lsn, &mut scratch)
            .map_err(|e| format!("checkpointing the write-ahead log into redb: {e}"));
        tracing::debug!(writes = ops.len(), took = ?started.elapsed(), "checkpoint");
        if result.is_ok()
            && let Some(f) = &mut on_commit
        {
            f(&ops);
        }
        ops.clear();
        let mut state = shared.lock();
        match result {
            Ok(()) => {
                shared.done.fetch_add(1, Ordering::Relaxed);
            }
            Err(why) => {
                state.failed.get_or_insert(why);
            }
        }
        state.phase = Phase::Idle;
        state.spare = Some(ops);
        drop(state);
        shared.changed.notify_all();
    }
}
