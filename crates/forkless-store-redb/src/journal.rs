//! The writer thread: makes the engine's effects durable in order, with group commit, and
//! checkpoints them into redb.
//!
//! One thread owns all writes. It takes a group of messages off the queue (how a group forms
//! and how it is settled afterwards: [`super::group`]), writes the group as one write-ahead
//! log entry with one fsync (see [`super::wal`]), and hands what that settled (the events to
//! deliver, the waiters to acknowledge) back to the store: durable before delivery, in both
//! modes. A failed write delivers nothing and poisons the store.
//!
//! The writes since the last checkpoint are also kept in memory; a checkpoint applies them
//! to redb in one transaction (see [`super::checkpoint`]), with the LSN of the last log
//! entry in the META table, on the checkpoint thread ([`super::checkpointer`]) while this
//! thread logs into the log's other region (see [`super::wal`]). A region is handed over when
//! it is full, [`CHECKPOINT_INTERVAL`] after its oldest write (if the checkpoint thread is
//! free then), and when the store closes (then waited for).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use redb::Database;

use super::Durability;
use super::checkpoint::Superseded;
use super::checkpointer::Checkpointer;
use super::codec;
use super::gather::{IMMEDIATE_POLL, gather_waiters, gather_window, poll_briefly};
use super::group::{Group, Settled, WindowPlan, coalesce};
use super::hooks::CrashHook;
use super::inbox::Inbox;
use super::op::Op;
use super::wal::Log;

/// Longest a write waits in the log before a checkpoint copies it into redb. Bounds the
/// replay after a crash (at most this long's writes) and the memory holding them.
pub(crate) const CHECKPOINT_INTERVAL: Duration = Duration::from_secs(1);

/// The failure that poisoned the store, shared with the store's front.
#[derive(Debug)]
pub(crate) struct Poison {
    poisoned: AtomicBool,
    why: tokio::sync::watch::Sender<Option<String>>,
}

impl Default for Poison {
    fn default() -> Self {
        Self { poisoned: AtomicBool::new(false), why: tokio::sync::watch::Sender::new(None) }
    }
}

impl Poison {
    pub(crate) fn check(&self) -> Result<(), String> {
        if self.poisoned.load(Ordering::Acquire) {
            Err(self.why.borrow().clone().unwrap_or_default())
        } else {
            Ok(())
        }
    }

    fn set(&self, why: String) {
        self.why.send_replace(Some(why));
        self.poisoned.store(true, Ordering::Release);
    }

    /// Resolves with the reason once the store is poisoned.
    pub(crate) async fn failed(&self) -> String {
        let mut rx = self.why.subscribe();
        let why = match rx.wait_for(Option::is_some).await {
            Ok(why) => why.clone(),
            // The sender lives as long as `self`, so this cannot end while we hold `&self`.
            Err(_) => None,
        };
        match why {
            Some(why) => why,
            None => std::future::pending().await,
        }
    }
}

/// What the writer thread owns: the log, the writes logged in its current region, and the
/// checkpoint thread (which owns redb).
#[derive(Debug)]
pub(crate) struct Writer {
    checkpointer: Checkpointer,
    log: Log,
    /// The writes of the log's current region, not yet handed over for a checkpoint.
    pending: Vec<Op>,
    /// When the oldest pending write was logged.
    pending_since: Option<Instant>,
    crash_hook: CrashHook,
    /// How long a batched group gathers, from the syncs and groups of late: window, sync and
    /// delivery together stay within the window.
    window_plan: WindowPlan,
    /// What a group's write works in, kept between uses.
    group_scratch: Superseded,
    /// The longest a write waits in the log before a checkpoint copies it into redb.
    checkpoint_interval: Duration,
}

impl Writer {
    /// A writer over a log whose entries are all checkpointed.
    pub(crate) fn new(db: Database, log: Log) -> Self {
        Self {
            checkpointer: Checkpointer::new(db),
            log,
            pending: Vec::new(),
            pending_since: None,
            crash_hook: CrashHook::from_env(),
            window_plan: WindowPlan::default(),
            group_scratch: Superseded::default(),
            checkpoint_interval: CHECKPOINT_INTERVAL,
        }
    }

    /// Checkpoint writes `interval` after the oldest was logged (default
    /// [`CHECKPOINT_INTERVAL`]).
    pub(crate) fn set_checkpoint_interval(&mut self, interval: Duration) {
        self.checkpoint_interval = interval;
    }

    /// The count of committed checkpoints.
    pub(crate) fn checkpoints(&self) -> std::sync::Arc<std::sync::atomic::AtomicU64> {
        self.checkpointer.done()
    }

    /// The redb database (read at recovery, before the writer thread starts).
    pub(crate) fn db(&self) -> &Database {
        self.checkpointer.db()
    }

    /// The redb database, shared with readers of what checkpoints committed.
    pub(crate) fn shared_db(&self) -> std::sync::Arc<Database> {
        self.checkpointer.shared_db()
    }

    /// See [`Checkpointer::on_commit`].
    pub(crate) fn on_checkpoint(&mut self, f: super::checkpointer::OnCommit) {
        self.checkpointer.on_commit(f);
    }

    /// When the pending writes are due for a checkpoint, if there are any.
    fn checkpoint_due(&self) -> Option<Instant> {
        self.pending_since.map(|t| t + self.checkpoint_interval)
    }

    /// Make a batch durable: one log entry, one sync. A group too large for the log at all
    /// goes straight into redb with the pending writes (a checkpoint).
    fn write(&mut self, group: &mut Group) -> Result<(), String> {
        let ops = &mut group.ops;
        // A batch window of appends to one stream rewrites its stream row once per append;
        // only the last of each goes to the log.
        let mut skip = self.group_scratch.of(ops).iter();
        ops.retain(|_| !skip.next().copied().unwrap_or(false));
        let out = self.log.begin();
        for op in ops.iter() {
            codec::encode_op(op, out);
        }
        self.log_group(ops)
    }

    /// Log the encoded group (and move it to the pending writes), or checkpoint it straight
    /// into redb when it is too large for a region of the log.
    fn log_group(&mut self, group: &mut Vec<Op>) -> Result<(), String> {
        if self.log.is_empty() {
            return Ok(());
        }
        if !self.log.fits_when_empty() {
            self.pending.append(group);
            return self.checkpoint();
        }
        if !self.log.fits() {
            self.hand_over()?;
        }
        self.crash_hook.before_sync();
        let started = Instant::now();
        self.log.append().map_err(|e| format!("writing the write-ahead log: {e}"))?;
        self.window_plan.synced(started.elapsed());
        self.pending.append(group);
        self.pending_since.get_or_insert_with(Instant::now);
        Ok(())
    }

    /// Checkpoint everything and wait for it, unless the store is poisoned: then what is
    /// pending is dropped here (the log still holds what was synced, and the next open
    /// replays it).
    fn checkpoint_or_poison(&mut self, poison: &Poison) {
        self.or_poison(poison, Self::checkpoint);
    }

    /// Take `step` (a checkpoint or a hand-over) unless the store is poisoned, poisoning it if
    /// the step fails; a poisoned store's pending writes are dropped.
    fn or_poison(&mut self, poison: &Poison, step: fn(&mut Self) -> Result<(), String>) {
        if poison.check().is_ok() {
            fail_on(poison, step(self));
        }
        self.drop_if_poisoned(poison);
    }

    /// Hand the current region over if its checkpoint is due by `by` and the checkpoint
    /// thread is free (never waits for it: it is due again later); report a failed one.
    fn hand_over_if_due(&mut self, by: Instant, poison: &Poison) {
        fail_on(poison, self.checkpointer.failed());
        if poison.check().is_ok()
            && self.checkpoint_due().is_some_and(|due| due <= by)
            && !self.checkpointer.busy()
        {
            fail_on(poison, self.hand_over());
        }
        self.drop_if_poisoned(poison);
    }

    fn drop_if_poisoned(&mut self, poison: &Poison) {
        if poison.check().is_err() {
            self.pending = Vec::new();
            self.pending_since = None;
        }
    }

    /// Hand the current region's writes to the checkpoint thread and go on at the other
    /// region's start, once that region's checkpoint is done (waits for it if not).
    fn hand_over(&mut self) -> Result<(), String> {
        if self.pending.is_empty() {
            return Ok(());
        }
        self.checkpointer.start(&mut self.pending, self.log.last_lsn())?;
        self.pending_since = None;
        self.log.switch();
        Ok(())
    }

    /// Apply every write logged (and any pending beside the log) to redb and wait for it.
    fn checkpoint(&mut self) -> Result<(), String> {
        if self.pending.is_empty() {
            return self.checkpointer.wait();
        }
        self.checkpointer.run(&mut self.pending, self.log.last_lsn())?;
        self.pending_since = None;
        self.log.switch();
        Ok(())
    }
}

pub(crate) fn run(
    mut writer: Writer,
    rx: &Inbox,
    durability: Durability,
    poison: &Poison,
    settle: &dyn Fn(Settled),
) {
    let window = match durability {
        Durability::Immediate => None,
        Durability::Batched { window } => Some(window),
    };
    // How many waited on the last group: 0, 1, or more (then the next sync waits for company).
    let mut waited_on = 0;
    // The group being written (kept between groups for its buffers).
    let mut group = Group::default();
    loop {
        // In immediate mode, an emitter that waits for each append is back within tens of
        // microseconds: catching its next message awake spares this thread a sleep and the
        // wake-up that follows, which on an idle virtual CPU costs about as much as a sync.
        // (Polling after batched groups that had waiters measured no gain: not done.)
        if window.is_none() && poll_briefly(rx, IMMEDIATE_POLL) {
            waited_on = handle(&mut writer, rx, &mut group, window, poison, settle, waited_on > 1);
            continue;
        }
        // Wait for work; with writes pending, no longer than until their checkpoint is due.
        match rx.wait(writer.checkpoint_due()) {
            Ok(()) => {}
            Err(RecvTimeoutError::Timeout) => {
                // Idle with a checkpoint due: hand the region over (waiting for the checkpoint
                // thread if it is still busy, which a checkpoint a second old rarely is).
                writer.or_poison(poison, Writer::hand_over);
                continue;
            }
            Err(RecvTimeoutError::Disconnected) => break,
        }
        waited_on = handle(&mut writer, rx, &mut group, window, poison, settle, waited_on > 1);
    }
    // Closing: checkpoint, so the next open has nothing to replay.
    writer.checkpoint_or_poison(poison);
}

/// Gather a group from what is queued, write it with one sync, deliver its events, acknowledge
/// its waiters, and checkpoint if one is due; `group` is left empty. `company`: several waited
/// on the last group, so a sync somebody waits for holds back briefly for more. Returns how
/// many waited on this one.
fn handle(
    writer: &mut Writer,
    rx: &Inbox,
    group: &mut Group,
    window: Option<Duration>,
    poison: &Poison,
    settle: &dyn Fn(Settled),
    company: bool,
) -> usize {
    let _ = rx.take_into(group);
    match window {
        // Batched: gather until the window ends, unless somebody waits.
        Some(window) if !group.is_urgent() => {
            // An event waits for the window, then for the sync and its delivery: the window
            // makes room for both, so an event is delivered within the window of its append.
            let close = group.closes(window, &writer.window_plan);
            // A checkpoint due before the window closes is handed over now, so that this
            // group's entry goes to the region the checkpoint thread is not reading.
            writer.hand_over_if_due(close, poison);
            gather_window(rx, group, close.saturating_duration_since(Instant::now()));
        }
        // Immediate, or somebody waits: whatever is queued joined this group, and so does what
        // arrives while writes keep coming (that is what makes commits shared).
        _ if company => gather_waiters(rx, group),
        _ => {}
    }
    fail_on(poison, writer.checkpointer.failed());
    let result = if poison.check().is_err() {
        Err("store is poisoned by an earlier failure".to_owned())
    } else {
        writer.write(group)
    };
    fail_on(poison, result.clone());
    let events = if result.is_ok() { coalesce(&group.deliver) } else { Vec::new() };
    let acks = std::mem::take(&mut group.acks);
    writer.window_plan.gathered(group.messages);
    group.clear();
    let waited_on = acks.len();
    settle(Settled { events, acks, result });
    writer.hand_over_if_due(Instant::now(), poison);
    waited_on
}

/// Poison the store on the first failure.
fn fail_on(poison: &Poison, result: Result<(), String>) {
    if let Err(why) = result
        && poison.check().is_ok()
    {
        tracing::error!(error = %why, "durable store write failed; the store is now poisoned and refuses all work");
        poison.set(why);
    }
}
