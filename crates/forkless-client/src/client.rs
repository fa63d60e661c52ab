//! The application API of the client: requests, notifications, streams and the session's
//! state as the application sees it ([`Client`]).
//!
//! The session itself (initialize, `Mcp-Session-Id`, 404 handling, the requests awaiting a
//! response) is [`crate::inner`]'s; reading and resuming SSE streams is `driver.rs`'s, around
//! the state machine of `resume.rs`.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use forkless_core::Revision;
use serde_json::{Value, json};

use crate::driver::{self, StreamControl};
use crate::error::Error;
use crate::events::{Notifications, Progress};
use crate::inner::{Inner, SessionState, lock};
use crate::jsonrpc::{self};
use crate::stats::StreamStats;

/// An MCP Streamable HTTP client that resumes SSE streams without forking them.
///
/// Cheap to clone; clones share the session. See the crate docs for the guarantees.
///
/// Stream drivers run as tasks on the current tokio runtime and hold the client's state, so an
/// open standalone stream keeps the session alive after the last `Client` is dropped: end it
/// with [`Client::close`] (which also sends DELETE).
#[derive(Clone, Debug)]
pub struct Client {
    pub(crate) inner: Arc<Inner>,
}

impl Client {
    /// The current `Mcp-Session-Id`, if a session is active and the server assigned one.
    pub fn session_id(&self) -> Option<String> {
        let s = lock(&self.inner.session);
        matches!(s.state, SessionState::Active).then(|| s.id.clone()).flatten()
    }

    /// The negotiated protocol revision of the current session.
    pub fn revision(&self) -> Option<Revision> {
        lock(&self.inner.session).revision
    }

    /// The `initialize` result of the current session (server info, capabilities, …).
    pub fn server_info(&self) -> Option<Value> {
        lock(&self.inner.session).init_result.clone()
    }

    /// The server's grace window, from `initialize` or the latest SSE response.
    pub fn server_grace(&self) -> Option<Duration> {
        lock(&self.inner.session).grace
    }

    /// Why the session ended, if it has (and has not been replaced).
    pub fn session_error(&self) -> Option<Error> {
        match &lock(&self.inner.session).state {
            SessionState::Ended(e) => Some(e.clone()),
            _ => None,
        }
    }

    /// Send a request and wait for its response (JSON or SSE, resumed across drops).
    pub async fn request(&self, method: &str, params: Option<Value>) -> Result<Value, Error> {
        self.inner.execute(method, params, None::<fn(Progress)>).await
    }

    /// Like [`Client::request`], with a progress token; `on_progress` sees every
    /// `notifications/progress` for it.
    pub async fn request_with_progress(
        &self,
        method: &str,
        params: Option<Value>,
        on_progress: impl FnMut(Progress),
    ) -> Result<Value, Error> {
        self.inner.execute(method, params, Some(on_progress)).await
    }

    /// `tools/call`: returns the `CallToolResult` as JSON (inspect `isError` there).
    pub async fn call_tool(&self, name: &str, arguments: Value) -> Result<Value, Error> {
        self.request("tools/call", Some(json!({"name": name, "arguments": arguments}))).await
    }

    /// `tools/call` with progress reporting.
    pub async fn call_tool_with_progress(
        &self,
        name: &str,
        arguments: Value,
        on_progress: impl FnMut(Progress),
    ) -> Result<Value, Error> {
        self.request_with_progress(
            "tools/call",
            Some(json!({"name": name, "arguments": arguments})),
            on_progress,
        )
        .await
    }

    /// Send a notification (answered 202 by the server).
    pub async fn notify(&self, method: &str, params: Option<Value>) -> Result<(), Error> {
        let view = self.inner.ensure_session().await?;
        self.inner.send_one_way(&view, &jsonrpc::notification(method, params)).await
    }

    /// The event stream: server notifications and stream/session events. There is one per
    /// client; a second call fails with [`Error::NotificationsTaken`].
    pub fn notifications(&self) -> Result<Notifications, Error> {
        lock(&self.inner.events_rx).take().map(Notifications::new).ok_or(Error::NotificationsTaken)
    }

    /// Open the session's standalone GET stream. Its messages arrive on
    /// [`Client::notifications`]; it is resumed automatically when its connection drops.
    pub async fn open_standalone(&self) -> Result<StreamControl, Error> {
        let view = self.inner.ensure_session().await?;
        driver::open_standalone(&self.inner, view).await
    }

    /// Live streams and the most recently finished ones, for inspection and fault injection.
    pub fn streams(&self) -> Vec<StreamControl> {
        let s = lock(&self.inner.streams);
        s.live.iter().chain(s.finished.iter()).map(|sh| StreamControl::new(sh.clone())).collect()
    }

    /// Statistics summed over every stream this client has had.
    pub fn stats(&self) -> StreamStats {
        let s = lock(&self.inner.streams);
        let mut total = s.retired.clone();
        for sh in &s.live {
            total.add(&sh.stats());
        }
        total
    }

    /// End the session (DELETE) and stop every stream. Requests in flight fail with
    /// [`Error::Closed`]. A 405 (the server does not support DELETE) is not an error.
    pub async fn close(&self) -> Result<(), Error> {
        self.inner.closed.store(true, Ordering::SeqCst);
        let view = {
            let s = lock(&self.inner.session);
            matches!(s.state, SessionState::Active).then(|| s.view())
        };
        let Some(view) = view else { return Ok(()) };
        self.inner.end_session(&view, Error::Closed);
        self.inner.delete(&view).await
    }
}
