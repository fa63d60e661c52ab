//! Where a client keeps the ids of the tasks it is waiting for (SEP-2663: clients SHOULD persist
//! task ids so polling resumes after a crash): the [`TaskLog`] trait, a file that survives the
//! process ([`FileTaskLog`]) and one in memory ([`MemoryTaskLog`]).
//!
//! A task id is remembered before the client polls it and forgotten once the task ended and its
//! outcome was handed to the application, so a client that crashed in between polls it again
//! on restart ([`super::CurrentClient::resume_tasks`]).

use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

/// The task ids a client waits for. Implementations must be safe to call from many tasks.
pub trait TaskLog: Send + Sync + 'static {
    /// Remember `id` (durably, for a log that survives the process) before it is polled.
    fn remember(&self, id: &str) -> io::Result<()>;
    /// Forget `id`: its outcome was delivered.
    fn forget(&self, id: &str) -> io::Result<()>;
    /// The ids remembered and not forgotten, oldest first.
    fn pending(&self) -> io::Result<Vec<String>>;
}

/// A [`TaskLog`] in memory: lost with the process.
#[derive(Debug, Default)]
pub struct MemoryTaskLog {
    ids: Mutex<Vec<String>>,
}

impl TaskLog for MemoryTaskLog {
    fn remember(&self, id: &str) -> io::Result<()> {
        let mut ids = self.ids.lock().unwrap_or_else(PoisonError::into_inner);
        if !ids.iter().any(|i| i == id) {
            ids.push(id.to_owned());
        }
        Ok(())
    }
    fn forget(&self, id: &str) -> io::Result<()> {
        self.ids.lock().unwrap_or_else(PoisonError::into_inner).retain(|i| i != id);
        Ok(())
    }
    fn pending(&self) -> io::Result<Vec<String>> {
        Ok(self.ids.lock().unwrap_or_else(PoisonError::into_inner).clone())
    }
}

/// A [`TaskLog`] in a file: one line per change (`+ID;` remembered, `-ID;` forgotten), each
/// synced before the call returns, so a remembered id survives a crash of the client. A line
/// torn by a crash lacks its `;` and names nothing; every write starts on a new line, so a
/// torn one never runs into the next. The
/// file is rewritten with the pending ids alone when it holds four times as many lines.
/// Created (with its folder) on first use; readable by its owner only on Unix.
#[derive(Debug)]
pub struct FileTaskLog {
    path: PathBuf,
    lock: Mutex<()>,
}

/// A task id as a log line may carry it: the wire's base64url characters.
fn well_formed(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

impl FileTaskLog {
    /// A log in `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into(), lock: Mutex::new(()) }
    }

    /// Its file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn read(&self) -> io::Result<(Vec<String>, usize)> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((Vec::new(), 0)),
            Err(e) => return Err(e),
        };
        let mut pending: Vec<String> = Vec::new();
        let mut lines = 0;
        for line in text.lines() {
            lines += 1;
            let Some(record) = line.strip_suffix(';') else { continue };
            match record.split_at_checked(1) {
                Some(("+", id)) if well_formed(id) && !pending.iter().any(|p| p == id) => {
                    pending.push(id.to_owned());
                }
                Some(("-", id)) => pending.retain(|p| p != id),
                // A torn last line (a crash mid-write) names nothing.
                _ => {}
            }
        }
        Ok((pending, lines))
    }

    fn append(&self, line: &str) -> io::Result<()> {
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let mut file = private(&self.path, false)?;
        file.write_all(line.as_bytes())?;
        file.sync_data()
    }

    /// Rewrite the file with only `pending`, atomically (a new file renamed over it).
    fn compact(&self, pending: &[String]) -> io::Result<()> {
        let tmp = self.path.with_extension("compacting");
        let mut text = String::new();
        for id in pending {
            text.push('+');
            text.push_str(id);
            text.push_str(";\n");
        }
        let mut file = private(&tmp, true)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&tmp, &self.path)
    }
}

impl TaskLog for FileTaskLog {
    fn remember(&self, id: &str) -> io::Result<()> {
        if !well_formed(id) {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("not a task id: {id:?}")));
        }
        let _one = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        self.append(&format!("\n+{id};\n"))
    }

    fn forget(&self, id: &str) -> io::Result<()> {
        let _one = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        self.append(&format!("\n-{id};\n"))?;
        let (pending, lines) = self.read()?;
        if lines > 4 * pending.len().max(16) {
            self.compact(&pending)?;
        }
        Ok(())
    }

    fn pending(&self) -> io::Result<Vec<String>> {
        let _one = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(self.read()?.0)
    }
}

/// Open `path` for writing (appending, or from empty), created readable by its owner only.
fn private(path: &Path, truncate: bool) -> io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.create(true);
    if truncate {
        options.write(true).truncate(true);
    } else {
        options.append(true);
    }
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)
}

/// Ids from a set, for tests.
#[cfg(test)]
fn set(ids: Vec<String>) -> std::collections::BTreeSet<String> {
    ids.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_log_keeps_what_was_remembered_and_not_forgotten_across_reopening() {
        let dir = std::env::temp_dir().join(format!("forkless-task-log-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("tasks.log");
        let log = FileTaskLog::new(&path);
        log.remember("aaa").expect("remember");
        log.remember("bbb").expect("remember");
        log.forget("aaa").expect("forget");
        assert!(log.remember("not an id").is_err());
        let reopened = FileTaskLog::new(&path);
        assert_eq!(reopened.pending().expect("read"), vec!["bbb".to_owned()]);
        // A line torn by a crash mid-append names nothing, and the next write is read whole.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(b"+cccc"))
            .expect("tear");
        assert_eq!(reopened.pending().expect("read"), vec!["bbb".to_owned()]);
        reopened.remember("cc").expect("remember");
        for i in 0..100 {
            let id = format!("t{i}");
            reopened.remember(&id).expect("remember");
            reopened.forget(&id).expect("forget");
        }
        let lines = std::fs::read_to_string(&path).expect("file").lines().filter(|l| !l.is_empty()).count();
        assert!(lines < 100, "compacted: {lines} lines");
        assert_eq!(set(reopened.pending().expect("read")), set(vec!["bbb".into(), "cc".into()]));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&path).expect("meta").permissions().mode() & 0o777;
            assert_eq!(mode & 0o077, 0, "only its owner reads it: {mode:o}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
