//! The session behind a [`crate::Client`]: its lifecycle (initialize, `Mcp-Session-Id`,
//! `MCP-Protocol-Version`, 404 handling and re-initialization), the table of requests awaiting
//! a response, progress routing and the registry of live streams.
//!
//! It does not own the reading or resuming of SSE streams (that is `driver.rs`, around the
//! state machine of `resume.rs`).

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use forkless_core::{EntropySource, Revision};
use reqwest::{Response, Url};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::driver::{Host, SessionView, Streams};
use crate::error::Error;
use crate::events::{ClientEvent, Progress, ServerRequestHandler, StreamOrigin};
use crate::jsonrpc::Incoming;
use crate::resume::ResumeHeaders;

/// The capability key this client declares in `initialize` (PROTOCOL section 7).
pub const RESUME_CAPABILITY: &str = "forkless/resume";

/// Settings, with their defaults; see [`crate::ClientBuilder`].
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    pub(crate) retry: crate::backoff::RetryPolicy,
    pub(crate) reinit_on_404: bool,
    pub(crate) request_timeout: Option<Duration>,
    pub(crate) idle_timeout: Option<Duration>,
    pub(crate) revision: Revision,
    pub(crate) client_name: String,
    pub(crate) client_version: String,
    pub(crate) capabilities: serde_json::Map<String, Value>,
    pub(crate) declare_resume: bool,
    pub(crate) continuation: crate::resume::Continuation,
}

#[derive(Debug, Default)]
pub(crate) enum SessionState {
    #[default]
    NotStarted,
    Initializing,
    Active,
    Ended(Error),
}

#[derive(Debug, Default)]
pub(crate) struct Session {
    pub(crate) id: Option<String>,
    pub(crate) revision: Option<Revision>,
    pub(crate) init_result: Option<Value>,
    pub(crate) grace: Option<Duration>,
    pub(crate) state: SessionState,
    pub(crate) generation: u64,
    pub(crate) cancel: CancellationToken,
}

impl Session {
    pub(crate) fn view(&self) -> SessionView {
        SessionView {
            id: self.id.clone(),
            revision: self.revision,
            generation: self.generation,
            cancel: self.cancel.clone(),
        }
    }
}

pub(crate) type PendingTx = oneshot::Sender<Result<Value, Error>>;

pub(crate) struct Inner {
    /// The `Arc` this lives in, for tasks that outlive a borrowed `&Inner`.
    pub(crate) me: Weak<Inner>,
    pub(crate) http: reqwest::Client,
    pub(crate) url: Url,
    pub(crate) settings: Settings,
    pub(crate) handler: Arc<dyn ServerRequestHandler>,
    pub(crate) credentials: Option<Arc<dyn crate::Credentials>>,
    pub(crate) session: Mutex<Session>,
    pub(crate) init_lock: tokio::sync::Mutex<()>,
    pub(crate) closed: AtomicBool,
    pub(crate) next_id: AtomicU64,
    /// Request id → (session generation, waiter).
    pub(crate) pending: Mutex<HashMap<u64, (u64, PendingTx)>>,
    /// Progress token → callback channel.
    pub(crate) progress: Mutex<HashMap<String, mpsc::UnboundedSender<Progress>>>,
    pub(crate) events_tx: mpsc::UnboundedSender<ClientEvent>,
    pub(crate) events_rx: Mutex<Option<mpsc::UnboundedReceiver<ClientEvent>>>,
    pub(crate) streams: Mutex<Streams>,
    pub(crate) entropy: Mutex<Box<dyn EntropySource + Send>>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").field("url", &self.url.as_str()).finish_non_exhaustive()
    }
}

pub(crate) use crate::driver::lock;

/// Removes a request's waiter and progress route when the request is done or abandoned.
pub(crate) struct PendingGuard<'a> {
    pub(crate) inner: &'a Inner,
    pub(crate) id: u64,
    pub(crate) token: Option<String>,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        lock(&self.inner.pending).remove(&self.id);
        if let Some(t) = &self.token {
            lock(&self.inner.progress).remove(t);
        }
    }
}

impl Inner {
    pub(crate) fn emit(&self, event: ClientEvent) {
        // The receiver may have been dropped by an application that does not want events.
        let _ = self.events_tx.send(event);
    }

    /// The `Arc` this `Inner` lives in (drivers need an owned handle).
    pub(crate) fn self_arc(&self) -> Result<Arc<Self>, Error> {
        self.me.upgrade().ok_or(Error::Closed)
    }
}

mod lifecycle;
mod requests;

// ===== the driver's host =====

impl Host for Inner {
    fn streams(&self) -> &Mutex<Streams> {
        &self.streams
    }
    fn retry(&self) -> crate::backoff::RetryPolicy {
        self.settings.retry
    }
    fn idle_timeout(&self) -> Option<Duration> {
        self.settings.idle_timeout
    }
    fn continuation(&self) -> crate::resume::Continuation {
        self.settings.continuation
    }
    fn jitter(&self) -> &Mutex<Box<dyn EntropySource + Send>> {
        &self.entropy
    }
    fn emit(&self, event: ClientEvent) {
        Inner::emit(self, event);
    }
    fn dispatch(&self, view: &SessionView, msg: Incoming, origin: StreamOrigin) -> bool {
        Inner::dispatch(self, view, msg, origin)
    }
    fn end_session(&self, view: &SessionView, error: Error) {
        Inner::end_session(self, view, error);
    }
    fn is_pending(&self, id: u64) -> bool {
        Inner::is_pending(self, id)
    }
    fn fail_request(&self, id: u64, error: Error) {
        Inner::fail_request(self, id, error);
    }
    fn note_grace(&self, view: &SessionView, grace: Duration) {
        Inner::note_grace(self, view, grace);
    }
    fn get(
        &self,
        view: &SessionView,
        resume: Option<&ResumeHeaders>,
    ) -> impl Future<Output = Result<Response, Error>> + Send {
        Inner::get(self, view, resume)
    }
    fn delete(&self, view: &SessionView) -> impl Future<Output = Result<(), Error>> + Send {
        Inner::delete(self, view)
    }
}
