//! What each scenario's connections did, for the HTML report ([`crate::report`]): one lane
//! per connection the scenario opened, with what its head said, every event it delivered
//! (when, and what: a numbered notification, the call's response, another message) and how it
//! ended (the server closed it, it failed, the check cut it, or it was refused).
//!
//! A scenario runs inside [`recording`]; every [`super::probe::Conn`] opened in it takes a
//! lane ([`open`]) and marks it as it is read. Outside a recording nothing is kept. It owns
//! the timeline, not the verdicts (the scenarios') nor the drawing (the report's).

use std::sync::{Arc, Mutex, PoisonError};

use serde::Serialize;
use serde_json::Value;
use tokio::time::Instant;

use super::probe::Head;
use super::tape::payload_number;

tokio::task_local! {
    static RECORDER: Recorder;
}

/// Where one scenario's lanes are kept.
#[derive(Clone, Debug)]
pub(crate) struct Recorder {
    start: Instant,
    lanes: Arc<Mutex<Vec<Lane>>>,
}

/// One connection of a scenario.
#[derive(Clone, Debug, Serialize)]
pub struct Lane {
    /// What was sent: `POST tools/call`, `GET (Last-Event-ID: …)`.
    pub label: String,
    /// When its head arrived, in milliseconds from the scenario's start.
    pub opened_ms: u64,
    /// Its HTTP status.
    pub status: u16,
    /// Whether it carried an event stream.
    pub sse: bool,
    /// `Mcp-Stream-Resumed`, if the server sent it.
    pub resumed: Option<String>,
    /// The refusal's reason (a JSON-RPC error's `data.reason` or message), if it was read.
    pub reason: Option<String>,
    /// What it delivered, in order.
    pub marks: Vec<Mark>,
    /// How it ended, if it did before the scenario did.
    pub end: Option<Ending>,
}

/// One event a connection delivered.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Mark {
    /// When, in milliseconds from the scenario's start.
    pub at_ms: u64,
    /// What it carried.
    pub what: Carried,
}

/// What an event carried.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Carried {
    /// A numbered notification, `#n`.
    Numbered(u64),
    /// A JSON-RPC response.
    Response,
    /// Another message.
    Other,
}

/// How a connection ended.
#[derive(Clone, Debug, Serialize)]
pub struct Ending {
    /// When, in milliseconds from the scenario's start.
    pub at_ms: u64,
    /// How.
    pub how: How,
}

/// How a connection ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum How {
    /// The server ended the body.
    Closed,
    /// The body failed (a reset, or no stream at all).
    Failed,
    /// The check dropped it (a cut).
    Cut,
}

/// A connection's lane in the scenario recording it.
#[derive(Debug)]
pub(crate) struct LaneRef {
    recorder: Recorder,
    index: usize,
}

impl Recorder {
    fn new() -> Self {
        Self { start: Instant::now(), lanes: Arc::default() }
    }

    fn ms(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn lanes(&self) -> std::sync::MutexGuard<'_, Vec<Lane>> {
        self.lanes.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Run `scenario`, recording the lanes of every connection it opens.
pub(crate) async fn recording<T>(scenario: impl Future<Output = T>) -> (T, Vec<Lane>) {
    let recorder = Recorder::new();
    let out = RECORDER.scope(recorder.clone(), scenario).await;
    let lanes = std::mem::take(&mut *recorder.lanes());
    (out, lanes)
}

/// A lane for a connection whose head is `head`, when a scenario is recording.
pub(crate) fn open(label: &str, head: &Head) -> Option<LaneRef> {
    RECORDER
        .try_with(|recorder| {
            let lane = Lane {
                label: label.to_owned(),
                opened_ms: recorder.ms(),
                status: head.status,
                sse: head.sse,
                resumed: head.resumed.clone(),
                reason: None,
                marks: Vec::new(),
                end: None,
            };
            let mut lanes = recorder.lanes();
            lanes.push(lane);
            LaneRef { recorder: recorder.clone(), index: lanes.len() - 1 }
        })
        .ok()
}

impl LaneRef {
    /// The connection delivered an event with `data`.
    pub(crate) fn event(&self, data: &str) {
        let Ok(message) = serde_json::from_str::<Value>(data) else { return };
        let what = match (message.get("method"), payload_number(&message)) {
            (Some(_), Some(n)) if message.get("id").is_none() => Carried::Numbered(n),
            (None, _) if message.get("id").is_some() => Carried::Response,
            _ => Carried::Other,
        };
        let at_ms = self.recorder.ms();
        if let Some(lane) = self.recorder.lanes().get_mut(self.index) {
            lane.marks.push(Mark { at_ms, what });
        }
    }

    /// The server refused it, saying `reason`.
    pub(crate) fn refused(&self, reason: &str) {
        if let Some(lane) = self.recorder.lanes().get_mut(self.index) {
            lane.reason = Some(reason.to_owned());
        }
    }

    /// The connection ended (the first ending is the one kept).
    pub(crate) fn end(&self, how: How) {
        let at_ms = self.recorder.ms();
        if let Some(lane) = self.recorder.lanes().get_mut(self.index) {
            lane.end.get_or_insert(Ending { at_ms, how });
        }
    }
}

impl Drop for LaneRef {
    /// A connection dropped before it ended, and before its response, was cut by the check.
    fn drop(&mut self) {
        let answered = self.recorder.lanes().get(self.index).is_some_and(|lane| {
            lane.end.is_none() && lane.marks.last().is_some_and(|m| m.what == Carried::Response)
        });
        if !answered {
            self.end(How::Cut);
        }
    }
}
