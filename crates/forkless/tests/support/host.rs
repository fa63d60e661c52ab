//! An MCP host as the bridge sees it: `forkless connect URL` run as a child process, spoken to
//! in newline-delimited JSON-RPC on its stdin and stdout, as desktop assistants and editors
//! launch their servers; and the oracle over what such a host received.

use std::process::Stdio;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use super::guard;

/// `forkless connect` with a host on its stdio.
pub struct HostDriver {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Lines<BufReader<ChildStdout>>,
}

impl HostDriver {
    /// Start `forkless connect <url> <extra>` (stderr to the test's, at `warn`).
    pub fn start(url: &str, extra: &[&str]) -> Self {
        let mut command = Command::new(env!("CARGO_BIN_EXE_forkless"));
        command.arg("connect").arg(url).args(extra);
        Self::spawn(command, "error")
    }

    /// Start another bridge, `program <args>`, the same way (stderr discarded: the other
    /// bridges log every message there).
    pub fn start_other(program: &std::path::Path, args: &[&str]) -> Self {
        let mut command = Command::new(program);
        command.args(args).stderr(Stdio::null());
        Self::spawn(command, "error")
    }

    /// [`Self::start`] with the bridge's stderr read line by line into the receiver (at
    /// `info`: what it tells the user, such as where to authorize).
    pub fn start_telling(url: &str, extra: &[&str]) -> (Self, tokio::sync::mpsc::UnboundedReceiver<String>) {
        let mut command = Command::new(env!("CARGO_BIN_EXE_forkless"));
        command.arg("connect").arg(url).args(extra).stderr(Stdio::piped());
        let mut driver = Self::spawn(command, "info");
        let stderr = driver.child.stderr.take().expect("stderr");
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        (driver, rx)
    }

    fn spawn(mut command: Command, log: &str) -> Self {
        let mut child = command
            .env("RUST_LOG", std::env::var("FORKLESS_TEST_LOG").unwrap_or_else(|_| log.into()))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start forkless connect");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("stdout")).lines();
        Self { child, stdin, stdout }
    }

    /// Write one message.
    pub async fn send(&mut self, message: Value) {
        self.send_line(&message.to_string()).await;
    }

    /// Write one line as it is (bad input included).
    pub async fn send_line(&mut self, line: &str) {
        let mut line = line.to_owned();
        line.push('\n');
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(line.as_bytes()).await.expect("write to the bridge");
        stdin.flush().await.expect("flush");
    }

    /// The next message the bridge wrote; `None` once it closed stdout.
    pub async fn next(&mut self) -> Option<Value> {
        let line = guard("a message from the bridge", self.stdout.next_line()).await.expect("read stdout")?;
        Some(
            serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("the bridge wrote a line that is not JSON ({e}): {line}")),
        )
    }

    /// Initialize as a host of revision 2025-11-25 and say `initialized`: the result.
    pub async fn initialize(&mut self) -> Value {
        self.send(json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": { "elicitation": {} },
            "clientInfo": { "name": "test-host", "version": "1" },
        }}))
        .await;
        let answer = self.until_answer(&json!(0), |_| {}).await.0;
        assert!(answer.get("result").is_some(), "initialize failed: {answer}");
        self.send(json!({ "jsonrpc": "2.0", "method": "notifications/initialized" })).await;
        answer["result"].clone()
    }

    /// Read to the answer of request `id`, handing every other message to `seen` first: the
    /// answer and everything before it.
    pub async fn until_answer(&mut self, id: &Value, mut seen: impl FnMut(&Value)) -> (Value, Vec<Value>) {
        let mut before = Vec::new();
        loop {
            let message =
                self.next().await.unwrap_or_else(|| panic!("the bridge ended before answering {id}"));
            if message.get("id") == Some(id) && message.get("method").is_none() {
                return (message, before);
            }
            seen(&message);
            before.push(message);
        }
    }

    /// Close stdin (the host is done) and wait for the bridge to exit.
    pub async fn finish(mut self) -> std::process::ExitStatus {
        drop(self.stdin.take());
        guard("the bridge to exit", self.child.wait()).await.expect("wait")
    }
}

/// The numbers `#N` of the server's log notifications a host received (not the bridge's own,
/// nor a standalone stream's `background …` ones).
pub fn numbered(messages: &[Value]) -> Vec<u64> {
    messages
        .iter()
        .filter(|m| m["method"] == "notifications/message" && m["params"]["logger"] != "forkless-connect")
        .filter(|m| !m["params"]["data"].as_str().is_some_and(|d| d.starts_with("background")))
        .filter_map(|m| m["params"]["data"].as_str()?.rsplit_once('#')?.1.parse().ok())
        .collect()
}

/// What the bridge told the host about itself (`logger: forkless-connect`).
pub fn told(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .filter(|m| m["params"]["logger"] == "forkless-connect")
        .filter_map(|m| m["params"]["data"].as_str().map(str::to_owned))
        .collect()
}

/// The oracle over one call of `count` numbered notifications as the host saw it: every
/// notification exactly once and in order, ending with the result; or a gap-free prefix of them
/// and an error carrying the call's id and a typed reason. `Err` says what broke the rule.
pub fn judge(answer: &Value, numbers: &[u64], count: u64) -> Result<Outcome, String> {
    let prefix: Vec<u64> = (1..=numbers.len() as u64).collect();
    if numbers != prefix.as_slice() {
        return Err(format!("not a gap-free prefix seen once: {numbers:?}"));
    }
    if answer.get("result").is_some() {
        return if numbers.len() as u64 == count {
            Ok(Outcome::Answered)
        } else {
            Err(format!("answered after {} of {count} notifications", numbers.len()))
        };
    }
    match answer.pointer("/error/data/reason").and_then(Value::as_str) {
        Some(reason) => Ok(Outcome::Refused(reason.to_owned())),
        None => Err(format!("neither a result nor a typed refusal: {answer}")),
    }
}

/// How a call ended for the host, when the oracle holds.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every notification once, then the result.
    Answered,
    /// A prefix, then an error with this `data.reason`.
    Refused(String),
}
