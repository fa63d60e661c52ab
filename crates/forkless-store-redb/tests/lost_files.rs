//! A store whose files are not all there refuses to start, naming the file and how to start
//! anyway: the write-ahead log deleted, truncated or taken from another store, or the data
//! file deleted with its log kept. Never a silent empty or partial start.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use forkless_core::{AppendTarget, EventKind, Limits};
use forkless_store::{Append, Error, Store};
use forkless_store_redb::{Durability, LostFiles, RedbStore};

mod support;
use support::{T0, record};

/// A store at `path` holding one session with `events` events, stopped at once after its
/// last write (its log holds them: nothing was checkpointed since, or a clean stop did).
async fn filled(path: &Path, seed: u64, events: u64) {
    let (store, _) = RedbStore::open(path, Durability::Immediate, T0).expect("open");
    let rec = record(seed);
    let sid = rec.id();
    store.create(rec).await.expect("create");
    for n in 0..events {
        let limits = Limits::default();
        let event = Append {
            session: sid,
            target: AppendTarget::Standalone,
            payload: Bytes::from(format!("{{\"n\":{n}}}")),
            kind: EventKind::Intermediate,
            now: T0,
            limits: &limits,
        };
        store.append(event).await.expect("append");
    }
}

fn wal(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(".wal");
    PathBuf::from(p)
}

fn refused(path: &Path, naming: &Path) -> String {
    match RedbStore::open(path, Durability::Immediate, T0) {
        Err(Error::Lost(message)) => {
            assert!(message.contains(&naming.display().to_string()), "names the file: {message}");
            assert!(message.contains("--accept-lost-files"), "says how to start anyway: {message}");
            message
        }
        Err(other) => panic!("refused with the wrong error: {other}"),
        Ok((_, recovery)) => panic!("opened with what was left: {recovery:?}"),
    }
}

/// The store opens when told to start without the lost file.
fn starts_without(path: &Path) {
    let opened = RedbStore::open_with(path, Durability::Immediate, T0, LostFiles::StartWithout);
    assert!(opened.is_ok(), "{:?}", opened.err());
}

#[tokio::test]
async fn a_deleted_log_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data.redb");
    filled(&path, 1, 5).await;
    std::fs::remove_file(wal(&path)).unwrap();
    let message = refused(&path, &wal(&path));
    assert!(message.contains("missing"), "{message}");
    starts_without(&path);
}

#[tokio::test]
async fn a_truncated_log_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data.redb");
    filled(&path, 1, 5).await;
    std::fs::OpenOptions::new().write(true).open(wal(&path)).unwrap().set_len(1000).unwrap();
    let message = refused(&path, &wal(&path));
    assert!(message.contains("truncated"), "{message}");
    starts_without(&path);
}

#[tokio::test]
async fn a_deleted_data_file_beside_its_log_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data.redb");
    filled(&path, 1, 5).await;
    std::fs::remove_file(&path).unwrap();
    let message = refused(&path, &path);
    assert!(message.contains("data file"), "{message}");
    starts_without(&path);
}

#[tokio::test]
async fn a_log_from_another_store_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (ours, theirs) = (dir.path().join("ours.redb"), dir.path().join("theirs.redb"));
    filled(&ours, 1, 3).await;
    filled(&theirs, 2, 40).await;
    std::fs::copy(wal(&theirs), wal(&ours)).unwrap();
    let message = refused(&ours, &wal(&ours));
    assert!(message.contains("another data file"), "{message}");
    starts_without(&ours);
}

#[tokio::test]
async fn a_new_store_and_a_clean_restart_open_without_complaint() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data.redb");
    filled(&path, 1, 5).await;
    let (_, recovery) = RedbStore::open(&path, Durability::Immediate, T0).expect("a clean restart opens");
    assert_eq!(recovery.events, 5);
}
