//! Stdio children: starting an MCP server program, framing its stdin and stdout as one JSON
//! message per line, logging its stderr, and stopping its whole process group.
//!
//! This module owns processes and pipes. It does not route messages (that is
//! `forkless_server::backend`), and it never restarts a child: one that exits is gone, and
//! its session ends.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use forkless_core::SessionId;
use forkless_server::RpcError;
use forkless_server::backend::{Connector, ExitReason, FromBackend, Link};
use rustix::process::{Pid, Signal, kill_process_group};
use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

/// The program a gateway runs, and how.
#[derive(Clone, Debug)]
pub struct ChildSpec {
    /// The program and its arguments (never passed through a shell).
    pub command: Vec<OsString>,
    /// Variables added to the gateway's environment.
    pub env: Vec<(String, String)>,
    /// Its working directory (default: the gateway's).
    pub cwd: Option<PathBuf>,
    /// Longest line read from its stdout or stderr; longer ones are logged and skipped.
    pub max_line_bytes: usize,
    /// How long it has after SIGTERM before its process group gets SIGKILL.
    pub stop_grace: Duration,
}

impl ChildSpec {
    /// The command line, for logs.
    pub fn describe(&self) -> String {
        self.command.iter().map(|a| a.to_string_lossy().into_owned()).collect::<Vec<_>>().join(" ")
    }
}

/// Starts one child per [`Connector::connect`], and keeps every child until it is stopped.
#[derive(Clone, Debug)]
pub struct StdioConnector {
    spec: Arc<ChildSpec>,
    children: Arc<Children>,
}

impl StdioConnector {
    /// A connector running `spec`.
    pub fn new(spec: ChildSpec) -> Self {
        Self { spec: Arc::new(spec), children: Arc::default() }
    }

    /// The children it started that are not stopped yet.
    pub fn children(&self) -> Arc<Children> {
        self.children.clone()
    }
}

/// Children not stopped yet, by process id (which is also their process group's id).
#[derive(Debug, Default)]
pub struct Children {
    live: Mutex<HashMap<u32, Child>>,
}

impl Children {
    /// How many are running (or exited and not yet stopped by their session's end).
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u32, Child>> {
        self.live.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Stop every child (at shutdown) and wait until each is gone.
    pub async fn stop_all(&self, grace: Duration) {
        let all: Vec<_> = self.lock().drain().collect();
        futures::future::join_all(all.into_iter().map(|(pid, child)| stop_group(pid, child, grace))).await;
    }

    fn stop(&self, pid: u32, grace: Duration) {
        let Some(child) = self.lock().remove(&pid) else { return };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(stop_group(pid, child, grace));
            }
            // No runtime left to wait in: the group is told to stop, the kernel reaps it.
            Err(_) => signal_group(pid, Signal::TERM),
        }
    }
}

/// SIGTERM to the group, SIGKILL after `grace` if the child is still there, then reap it.
async fn stop_group(pid: u32, mut child: Child, grace: Duration) {
    signal_group(pid, Signal::TERM);
    if tokio::time::timeout(grace, child.wait()).await.is_err() {
        tracing::warn!(pid, ?grace, "MCP server did not stop on SIGTERM: killing its process group");
        signal_group(pid, Signal::KILL);
        let _ = child.wait().await;
    }
    // What else of the group outlived its leader goes too.
    signal_group(pid, Signal::KILL);
    tracing::info!(pid, "MCP server stopped");
}

fn signal_group(pid: u32, signal: Signal) {
    let pid = i32::try_from(pid).ok().and_then(Pid::from_raw);
    if let Some(pid) = pid {
        // ESRCH (the group is gone already) is the normal case after an exit.
        let _ = kill_process_group(pid, signal);
    }
}

/// Stops its child when the session lets go of it.
struct ChildGuard {
    pid: u32,
    grace: Duration,
    children: Arc<Children>,
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        self.children.stop(self.pid, self.grace);
    }
}

impl Connector for StdioConnector {
    async fn connect(&self, session: Option<SessionId>) -> Result<Link, RpcError> {
        let spec = &self.spec;
        let (program, args) = spec.command.split_first().ok_or_else(|| RpcError::internal("no command"))?;
        let mut command = Command::new(program);
        command
            .args(args)
            .envs(spec.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Its own process group, so stopping it stops whatever it started too.
            .process_group(0);
        if let Some(cwd) = &spec.cwd {
            command.current_dir(cwd);
        }
        let mut child = command.spawn().map_err(|e| {
            tracing::warn!(command = %spec.describe(), error = %e, "cannot start the MCP server");
            RpcError::internal(format!("cannot start the MCP server: {e}"))
        })?;
        let pid = child.id().ok_or_else(|| RpcError::internal("the MCP server exited at once"))?;
        let who = session.map_or_else(|| "shared".to_owned(), |s| s.to_string());
        tracing::info!(session = %who, pid, command = %spec.describe(), "started MCP server");
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(RpcError::internal("the MCP server's pipes are missing"));
        };
        self.children.lock().insert(pid, child);
        let guard = ChildGuard { pid, grace: spec.stop_grace, children: self.children.clone() };

        let (to_backend, outgoing) = mpsc::channel(64);
        let (incoming, from_backend) = mpsc::channel(64);
        tokio::spawn(write_messages(stdin, outgoing));
        tokio::spawn(read_messages(BufReader::new(stdout), incoming, spec.max_line_bytes, who.clone()));
        tokio::spawn(log_stderr(BufReader::new(stderr), spec.max_line_bytes, who));
        Ok(Link {
            to_backend,
            from_backend,
            guard: Box::new(guard),
            exit: ExitReason::default(),
            facts: Default::default(),
        })
    }
}

/// One JSON message per line to the child's stdin; its stdin closes when the session's side
/// goes away.
async fn write_messages(mut stdin: tokio::process::ChildStdin, mut outgoing: mpsc::Receiver<Value>) {
    while let Some(message) = outgoing.recv().await {
        let mut line = serde_json::to_vec(&message).unwrap_or_default();
        line.push(b'\n');
        if stdin.write_all(&line).await.is_err() || stdin.flush().await.is_err() {
            return;
        }
    }
}

/// Each line of the child's stdout as a message; what is not JSON is logged and skipped. Ends
/// when stdout closes: the child has exited (or will get no more messages through).
async fn read_messages<R: AsyncBufRead + Unpin>(
    mut out: R,
    incoming: mpsc::Sender<FromBackend>,
    max: usize,
    who: String,
) {
    let mut buf = Vec::new();
    loop {
        match next_line(&mut out, &mut buf, max).await {
            Ok(Line::End) | Err(_) => return,
            Ok(Line::TooLong(len)) => {
                tracing::warn!(session = %who, bytes = len, max, "MCP server wrote a line too long to take: skipped");
            }
            Ok(Line::Text) => {
                let text = buf.trim_ascii();
                if text.is_empty() {
                    continue;
                }
                match serde_json::from_slice::<Value>(text) {
                    Ok(message) => {
                        if incoming.send(message.into()).await.is_err() {
                            return;
                        }
                    }
                    Err(_) => tracing::warn!(
                        session = %who,
                        line = %String::from_utf8_lossy(&text[..text.len().min(200)]),
                        "MCP server wrote a line on stdout that is not JSON: skipped"
                    ),
                }
            }
        }
    }
}

/// The child's stderr, line by line, into the log with its session.
async fn log_stderr<R: AsyncBufRead + Unpin>(mut err: R, max: usize, who: String) {
    let mut buf = Vec::new();
    while let Ok(line) = next_line(&mut err, &mut buf, max).await {
        match line {
            Line::End => return,
            Line::TooLong(len) => {
                tracing::info!(session = %who, bytes = len, "MCP server stderr: (a line too long to log)")
            }
            Line::Text => {
                tracing::info!(session = %who, "MCP server stderr: {}", String::from_utf8_lossy(&buf).trim_end())
            }
        }
    }
}

/// What [`next_line`] read.
#[derive(Debug, PartialEq, Eq)]
enum Line {
    /// A line, in the buffer (without its newline).
    Text,
    /// A line longer than the limit, of this many bytes, skipped.
    TooLong(usize),
    /// The end of the stream.
    End,
}

/// The next line of `r` into `buf`, holding at most `max` bytes of it in memory.
async fn next_line<R: AsyncBufRead + Unpin>(
    r: &mut R,
    buf: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<Line> {
    buf.clear();
    let mut len = 0usize;
    loop {
        let chunk = r.fill_buf().await?;
        if chunk.is_empty() {
            return Ok(match len {
                0 => Line::End,
                n if n > max => Line::TooLong(n),
                _ => Line::Text,
            });
        }
        let (part, newline) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (&chunk[..i], true),
            None => (chunk, false),
        };
        len += part.len();
        if len <= max {
            buf.extend_from_slice(part);
        } else {
            buf.clear();
        }
        let used = part.len() + usize::from(newline);
        r.consume(used);
        if newline {
            return Ok(if len > max { Line::TooLong(len) } else { Line::Text });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_are_bounded_and_a_long_one_is_skipped_whole() {
        let input = b"short\n0123456789abcdef\nok\nlast-without-newline".to_vec();
        let mut r = BufReader::with_capacity(4, &input[..]);
        let mut buf = Vec::new();
        let mut got = Vec::new();
        loop {
            match next_line(&mut r, &mut buf, 8).await.unwrap() {
                Line::End => break,
                Line::Text => got.push(String::from_utf8(buf.clone()).unwrap()),
                Line::TooLong(n) => got.push(format!("<{n}>")),
            }
        }
        assert_eq!(got, ["short", "<16>", "ok", "<20>"]);
    }
}
