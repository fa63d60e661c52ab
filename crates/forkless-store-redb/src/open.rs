//! Opening a store: the data file's format checked before anything is touched, the log
//! opened beside it, recovery, and the writer thread with its courier started.
//!
//! This module owns getting from files on disk to a running [`RedbStore`]; what recovery
//! reads back is [`crate::recovery`]'s, what the writer thread does is [`crate::journal`]'s.

use std::path::Path;
use std::sync::{Arc, Mutex};

use forkless_core::Timestamp;
use forkless_store::engine::Engine;
use forkless_store::{Error, Result};
use redb::{Database, ReadableDatabase};

use crate::checkpoint::META;
use crate::group::Settled;
use crate::inbox::Inbox;
use crate::journal::{self, Poison};
use crate::logfile::LogFile;
use crate::recovery::{check_format, holds_state, log_path, refuse_other_format, replay};
use crate::wal::{LOG_MIN_SIZE, Tail};
use crate::{Durability, Inner, Recovery, RedbStore, backend_err};

/// Where the writer thread hands what a group's sync settled: a task on the async runtime the
/// store was opened in, which delivers the events and acknowledges the waiters. Waking that one
/// task costs one wake-up across threads per group; waking every waiter from the writer
/// thread cost one per waiter (and, on a core shared with the runtime, two context switches
/// each). `None` outside a runtime: the writer thread settles groups itself.
fn courier(engine: &Arc<Engine>) -> Option<tokio::sync::mpsc::UnboundedSender<Settled>> {
    let runtime = tokio::runtime::Handle::try_current().ok()?;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Settled>();
    let engine = Arc::clone(engine);
    runtime.spawn(async move {
        while let Some(settled) = rx.recv().await {
            settled.apply(|e| engine.deliver(e.session, e.event.stream, e.event.seq));
        }
    });
    Some(tx)
}

/// What [`RedbStore::open_with`] does when a file it needs is missing, truncated or belongs to
/// another store (what it held would be lost without a word).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LostFiles {
    /// Refuse to open, with [`Error::Lost`] naming the file. The default.
    #[default]
    Refuse,
    /// Open anyway, with what is left, and log a warning naming what was lost.
    StartWithout,
}

/// The default of [`Options::cache_bytes`]: 64 MiB, sized for a small machine.
pub const DEFAULT_CACHE_BYTES: u64 = 64 << 20;

/// How [`RedbStore::open_options`] opens a store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// When appends are durable.
    pub durability: Durability,
    /// What happens when a file is lost.
    pub lost_files: LostFiles,
    /// The memory the store keeps for what it reads most, beside the sessions' records:
    /// three quarters for the newest retained events (older ones are read from the data file),
    /// one quarter for the data file's pages. Retention is then bounded by the disk, and the
    /// resident set by this (measured: `docs/benchmarks.md`). Default
    /// [`DEFAULT_CACHE_BYTES`].
    pub cache_bytes: u64,
    /// The longest a write waits in the write-ahead log before a checkpoint copies it into
    /// the data file: bounds the replay after a crash, and how long a new event stays in
    /// memory before it may leave for the cache's sake. Default 1 s.
    pub checkpoint_interval: std::time::Duration,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            durability: Durability::default(),
            lost_files: LostFiles::default(),
            cache_bytes: DEFAULT_CACHE_BYTES,
            checkpoint_interval: journal::CHECKPOINT_INTERVAL,
        }
    }
}

impl Options {
    /// The budget of the engine's event cache.
    fn events_budget(&self) -> u64 {
        self.cache_bytes - self.pages_budget() as u64
    }

    /// The size of redb's page cache (its default would be 1 GiB).
    fn pages_budget(&self) -> usize {
        usize::try_from(self.cache_bytes / 4).unwrap_or(usize::MAX)
    }
}

/// A redb builder that times the repair of a file left by an unclean stop: redb rebuilds its
/// own allocation state from the file's last committed transaction (it never touches a
/// committed row of ours; what followed the last checkpoint is in the log, replayed after).
fn timed_builder(options: &Options) -> (redb::Builder, Arc<Mutex<Option<std::time::Instant>>>) {
    let began = Arc::new(Mutex::new(None));
    let mut builder = Database::builder();
    builder.set_cache_size(options.pages_budget());
    let seen = Arc::clone(&began);
    builder.set_repair_callback(move |_| {
        seen.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get_or_insert_with(std::time::Instant::now);
    });
    (builder, began)
}

/// How long the repair timed by [`timed_builder`] took, if there was one.
fn repair_took(began: &Mutex<Option<std::time::Instant>>) -> Option<std::time::Duration> {
    began.lock().unwrap_or_else(std::sync::PoisonError::into_inner).map(|t| t.elapsed())
}

/// The message of a lost file, ending with how to start anyway.
fn lost(what: String) -> Error {
    Error::Lost(format!(
        "{what}; restore it, or start without it (`forkless serve --accept-lost-files`, LostFiles::StartWithout)"
    ))
}

impl RedbStore {
    /// Open (or create) the data file at `path` and its write-ahead log beside it (`path` with
    /// `.wal` appended), recover their contents at `now`, and start the writer thread. A file
    /// of an unknown format version is refused, and neither file is touched; so is a pair of
    /// files one of which is missing, truncated or foreign ([`LostFiles::Refuse`]).
    pub fn open(path: impl AsRef<Path>, durability: Durability, now: Timestamp) -> Result<(Self, Recovery)> {
        Self::open_with(path, durability, now, LostFiles::Refuse)
    }

    /// [`Self::open`], choosing what happens when a file is lost.
    pub fn open_with(
        path: impl AsRef<Path>,
        durability: Durability,
        now: Timestamp,
        lost_files: LostFiles,
    ) -> Result<(Self, Recovery)> {
        Self::open_options(path, now, Options { durability, lost_files, ..Options::default() })
    }

    /// [`Self::open`], with every choice in `options`.
    pub fn open_options(
        path: impl AsRef<Path>,
        now: Timestamp,
        options: Options,
    ) -> Result<(Self, Recovery)> {
        let Options { lost_files, .. } = options;
        let started = std::time::Instant::now();
        let path = path.as_ref();
        let log_path = log_path(path);
        let data_existed = path.metadata().is_ok_and(|m| m.len() > 0);
        let log_len = log_path.metadata().ok().map(|m| m.len());
        let mut losses = Vec::new();
        if !data_existed && log_len.is_some_and(|n| n > 0) {
            losses.push(format!(
                "the data file {} is missing but its write-ahead log {} exists: what the data file held is lost",
                path.display(),
                log_path.display()
            ));
        }
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
        if let Some(dir) = dir {
            std::fs::create_dir_all(dir)
                .map_err(|e| Error::Backend(format!("creating {}: {e}", dir.display())))?;
        }
        if path.metadata().is_ok_and(|m| m.len() > 0) {
            // Check the format read-only first, so a file we cannot read is never touched.
            // A file left by a crash needs repair, which read-only access cannot do; it is
            // then checked in write mode (redb repairs its own structures, never our data).
            match redb::ReadOnlyDatabase::open(path) {
                Ok(db) => {
                    let txn = db.begin_read().map_err(backend_err)?;
                    if let Ok(meta) = txn.open_table(META) {
                        let found = meta.get("format").map_err(backend_err)?.map(|v| v.value());
                        refuse_other_format(found)?;
                    }
                }
                // Left by an unclean stop: only a writer may repair it (below, timed).
                Err(redb::DatabaseError::RepairAborted) => {}
                Err(e) => return Err(Error::Backend(format!("opening {}: {e}", path.display()))),
            }
        }
        let (builder, repair) = timed_builder(&options);
        let db =
            builder.create(path).map_err(|e| Error::Backend(format!("opening {}: {e}", path.display())))?;
        let repaired = repair_took(&repair);
        // Redb holds the data file's lock from here on, and the log is only opened by whoever
        // holds it. The log is opened only once the format is known to be ours.
        let log_key = check_format(&db)?;
        if holds_state(&db)? {
            match log_len {
                None => losses.push(format!(
                    "the write-ahead log {} is missing beside the data file {}: the writes it held are lost",
                    log_path.display(),
                    path.display()
                )),
                Some(n) if n < LOG_MIN_SIZE => losses.push(format!(
                    "the write-ahead log {} is truncated ({n} bytes): the writes it held are lost",
                    log_path.display()
                )),
                Some(_) => {}
            }
        }
        check_losses(&losses, lost_files)?;
        let log_err = |e: std::io::Error| Error::Backend(format!("opening {}: {e}", log_path.display()));
        let existed = log_path.exists();
        let log = LogFile::open(&log_path).map_err(log_err)?;
        tracing::debug!(direct = log.is_direct(), "write-ahead log opened");
        let (store, recovery) =
            Self::start(db, log_key, log, &options, now, &log_path.display().to_string())?;
        let store = (store, Recovery { repaired, took: started.elapsed(), ..recovery });
        if !existed && cfg!(unix) {
            // The log is now sized and synced; make its directory entry durable too (a
            // directory can be opened and synced like this on Unix only).
            let dir = dir.unwrap_or(Path::new("."));
            std::fs::File::open(dir).and_then(|d| d.sync_all()).map_err(log_err)?;
        }
        Ok(store)
    }

    /// Open on custom redb storage backends for the data file and the log (fault injection
    /// in tests). A log backend of length at least 64 KiB is used at its length; a shorter
    /// one is filled with zeros to 8 MiB first.
    pub fn open_with_backend(
        backend: impl redb::StorageBackend,
        log: impl redb::StorageBackend,
        durability: Durability,
        now: Timestamp,
    ) -> Result<(Self, Recovery)> {
        Self::open_backend_options(backend, log, now, Options { durability, ..Options::default() })
    }

    /// [`Self::open_with_backend`], with every choice in `options` (what to do about lost
    /// files does not apply: a custom backend is never missing).
    pub fn open_backend_options(
        backend: impl redb::StorageBackend,
        log: impl redb::StorageBackend,
        now: Timestamp,
        options: Options,
    ) -> Result<(Self, Recovery)> {
        let started = std::time::Instant::now();
        let (builder, repair) = timed_builder(&options);
        let db = builder.create_with_backend(backend).map_err(backend_err)?;
        let repaired = repair_took(&repair);
        let log_key = check_format(&db)?;
        let (store, recovery) = Self::start(db, log_key, log, &options, now, "(custom backend)")?;
        Ok((store, Recovery { repaired, took: started.elapsed(), ..recovery }))
    }

    fn start(
        db: Database,
        log_key: u64,
        log: impl redb::StorageBackend,
        options: &Options,
        now: Timestamp,
        log_name: &str,
    ) -> Result<(Self, Recovery)> {
        let Options { durability, lost_files, .. } = *options;
        let (mut writer, replayed, tail) = replay(db, log_key, log)?;
        writer.set_checkpoint_interval(options.checkpoint_interval);
        match tail {
            Tail::Foreign => check_losses(
                &[format!(
                    "the write-ahead log {log_name} begins with an entry written for another data file (taken from another store, or overwritten): the writes it held for this one are lost"
                )],
                lost_files,
            )?,
            Tail::Torn => tracing::info!(
                "the write-ahead log ends in a write a crash interrupted; it was never acknowledged"
            ),
            Tail::Clean => {}
        }
        let inbox = Arc::new(Inbox::default());
        let poison = Arc::new(Poison::default());
        let engine = Arc::new(Engine::with_cache(options.events_budget()));
        let stored = Arc::clone(&engine);
        writer.on_checkpoint(Box::new(move |ops| stored.stored(crate::cold::stored_marks(ops))));
        let store = Self {
            inner: Arc::new(Inner {
                engine: Arc::clone(&engine),
                durability,
                early_delivery: crate::hooks::early_delivery_from_env(),
                spent: forkless_store::Ledger::default(),
                bulletin: forkless_store::Bulletin::default(),
                tasks: forkless_store::TaskMap::default(),
                poison: Arc::clone(&poison),
                inbox: Arc::clone(&inbox),
                writer: Mutex::new(None),
                checkpoints: writer.checkpoints(),
                disk: crate::cold::DataFile(writer.shared_db()),
            }),
        };
        let recovery = Recovery { replayed, ..store.recover(writer.db(), now)? };
        let courier = courier(&engine);
        let writer = std::thread::Builder::new()
            .name("forkless-redb-writer".into())
            .spawn(move || {
                let settle = |settled: Settled| match &courier {
                    Some(tx) => {
                        // If the runtime went away, settle here instead.
                        if let Err(back) = tx.send(settled) {
                            back.0.apply(|e| engine.deliver(e.session, e.event.stream, e.event.seq));
                        }
                    }
                    None => settled.apply(|e| engine.deliver(e.session, e.event.stream, e.event.seq)),
                };
                // However the thread ends (a panic included), nobody may wait on the inbox.
                struct Shut<'a>(&'a Inbox);
                impl Drop for Shut<'_> {
                    fn drop(&mut self) {
                        self.0.shut();
                    }
                }
                let _shut = Shut(&inbox);
                journal::run(writer, &inbox, durability, &poison, &settle);
            })
            .map_err(|e| Error::Backend(format!("spawning the writer thread: {e}")))?;
        if let Ok(mut w) = store.inner.writer.lock() {
            *w = Some(writer);
        }
        Ok((store, recovery))
    }
}

/// Refuse (or, if told to, warn about) what would be lost.
fn check_losses(losses: &[String], lost_files: LostFiles) -> Result<()> {
    let Some(first) = losses.first() else { return Ok(()) };
    match lost_files {
        LostFiles::Refuse => Err(lost(first.clone())),
        LostFiles::StartWithout => {
            for what in losses {
                tracing::warn!("{what}; starting without it, as asked");
            }
            Ok(())
        }
    }
}
