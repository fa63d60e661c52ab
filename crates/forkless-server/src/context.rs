//! The handles a handler gets to talk back to its client: [`SessionHandle`] (the session and
//! its standalone stream) and [`RequestContext`] (one request: its stream, progress, logs,
//! server-to-client requests, cancellation).
//!
//! Every event a handle emits is appended to the store, and the core decides whether that is
//! allowed (a fenced stream or ended session is a typed [`SendError`], never a redirect and
//! never a silent drop).

use std::fmt;
use std::sync::Arc;

use crate::input::AskError;
use crate::input::Rounds;
use crate::jsonrpc::RpcError;
use crate::listeners::Publish;
use crate::request_state::{Binding, RequestStates};
use crate::session::SendError;
use crate::session::{RequestCancel, RequestStream, SessionShared, notification_payload};
use crate::tasks::TaskStarter;
use forkless_core::{AppendTarget, EndReason, EventKind, Revision, SessionId};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// A session, as a handler sees it: who the client is, and its standalone stream.
#[derive(Clone)]
pub struct SessionHandle {
    pub(crate) shared: Arc<SessionShared>,
}

impl fmt::Debug for SessionHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("SessionHandle").field(&self.shared).finish()
    }
}

impl SessionHandle {
    /// The session id (for a stateless 2026-07-28 request: a fresh id that names nothing).
    pub fn id(&self) -> SessionId {
        self.shared.id
    }

    /// The negotiated revision.
    pub fn revision(&self) -> Revision {
        self.shared.revision
    }

    /// The client's `capabilities` from initialize (`null` when not known).
    pub fn client_capabilities(&self) -> &Value {
        &self.shared.client_capabilities
    }

    /// Refuse the session's new requests with `reason` from now on, before its end runs.
    pub(crate) fn refuse_new(&self, reason: EndReason) {
        self.shared.refuse_new(reason);
    }

    /// What the session's backend said it needs to reach the session from any node (kept in
    /// its record by [`Self::remember_backend`]), if it said.
    pub fn backend_facts(&self) -> Option<Arc<str>> {
        crate::session::lock(&self.shared.backend).clone()
    }

    /// Keep `facts` in the session's record, so that whichever node serves the session next
    /// can reach its backend (an HTTP upstream's session id). A session without a store (a
    /// stateless request) keeps nothing.
    pub async fn remember_backend(&self, facts: Arc<str>) -> Result<(), SendError> {
        *crate::session::lock(&self.shared.backend) = Some(facts.clone());
        match &self.shared.outbox {
            Some(outbox) => outbox.remember_backend(self.shared.id, facts).await,
            None => Ok(()),
        }
    }

    /// The client's `clientInfo` from initialize (`null` when not known).
    pub fn client_info(&self) -> &Value {
        &self.shared.client_info
    }

    /// Why the session ended, if this process knows it did.
    pub fn ended(&self) -> Option<EndReason> {
        self.shared.ended()
    }

    /// A notification on the session's standalone GET stream (kept until the client opens or
    /// resumes it).
    pub async fn notify(&self, method: &str, params: Value) -> Result<(), SendError> {
        let message = json!({ "jsonrpc": "2.0", "method": method, "params": params });
        self.shared.append(AppendTarget::Standalone, &message, EventKind::Intermediate).await.map(|_| ())
    }

    /// End the session with `reason` (for a handler backed by another MCP server:
    /// [`EndReason::BackendExited`] when that server is gone). New requests are refused with
    /// 404 and `reason` at once. The requests in flight finish first (a handler fails them
    /// with errors, which reach their clients with the requests' ids), and the streams stay
    /// readable for the advertised retry budget, so that a client whose connection broke can
    /// resume and read those answers; then the session ends in the store.
    pub async fn end(&self, reason: EndReason) -> Result<(), SendError> {
        self.shared.close(reason).await
    }

    /// A server-to-client request on the standalone stream; resolves with the client's result.
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, SendError> {
        let cancel = self.shared.cancel.clone();
        self.shared.request(AppendTarget::Standalone, method, params, &cancel).await
    }
}

/// Where a request's own messages go.
#[derive(Clone, Debug)]
pub(crate) enum Outlet {
    /// The request is answered with SSE: its stream in the store, opened on first use.
    Stream(Arc<RequestStream>),
    /// The request is answered with JSON: the session's standalone stream.
    Standalone,
    /// A stateless (2026-07-28) request answered with SSE: straight to its connection, and
    /// what its messages do once that connection is gone.
    Direct(mpsc::Sender<Value>, Closed),
    /// A stateless request answered with JSON: nowhere to send anything before the answer.
    Nowhere,
}

/// What a stateless request's messages do once its connection closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Closed {
    /// Fail with [`SendError::Cancelled`]: closing the response cancels the request (the
    /// revision's rule for a request without a key).
    Cancels,
    /// Are dropped, and the request runs on: a keyed request's answer is kept for its
    /// re-issue, which reads the answer, not the messages before it (PROTOCOL section 14).
    RunsOn,
}

/// One client request, as its handler sees it.
#[derive(Clone)]
pub struct RequestContext {
    pub(crate) session: SessionHandle,
    pub(crate) request_id: Value,
    pub(crate) progress_token: Option<Value>,
    pub(crate) cancel: RequestCancel,
    pub(crate) outlet: Outlet,
    pub(crate) logs: LogOptIn,
    pub(crate) tasks: Option<TaskStarter>,
    /// Seals this request's `requestState` for its next round (2026-07-28 only).
    pub(crate) states: Option<StateSeal>,
    /// The `requestState` this round came with, checked and used up (2026-07-28).
    pub(crate) state: Option<Value>,
    /// 2026-07-28: the request's rounds of input; `None` in the session revisions, which ask
    /// on the stream.
    pub(crate) rounds: Option<Arc<Rounds>>,
    /// Where [`Self::notify_listeners`] announces.
    pub(crate) listeners: Arc<dyn Publish>,
    /// A stateless request whose work outlives its round (a backend's call kept across
    /// 2026-07-28 `input_required` rounds, `crate::backend`): its server-to-client requests
    /// wait here for the next round instead of being refused.
    pub(crate) parked: Option<mpsc::Sender<Question>>,
}

/// A server-to-client request of a stateless request's work, waiting for the client's answer
/// in a later round.
#[derive(Debug)]
pub(crate) struct Question {
    pub(crate) method: String,
    pub(crate) params: Value,
    pub(crate) reply: tokio::sync::oneshot::Sender<Result<Value, RpcError>>,
}

/// What sealing a state for a request's next round needs: the ring, and what it binds to.
#[derive(Clone)]
pub(crate) struct StateSeal {
    pub(crate) states: Arc<RequestStates>,
    pub(crate) principal: Option<String>,
    pub(crate) method: String,
    pub(crate) name: Option<String>,
}

/// Which of a request's log messages go to the client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LogOptIn {
    /// The session revisions: every one (the session's `logging/setLevel` is the handler's).
    Session,
    /// 2026-07-28 without `_meta` `io.modelcontextprotocol/logLevel`: none.
    None,
    /// 2026-07-28: those at or above this rank (`debug` 0 … `emergency` 7).
    AtLeast(u8),
}

/// The syslog levels MCP logs with, least severe first.
const LOG_LEVELS: [&str; 8] =
    ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"];

impl LogOptIn {
    /// From a 2026-07-28 request's `_meta` `logLevel` (an unknown level opts out).
    pub(crate) fn from_meta(level: Option<&Value>) -> Self {
        level
            .and_then(Value::as_str)
            .and_then(|l| LOG_LEVELS.iter().position(|x| *x == l))
            .map_or(Self::None, |rank| Self::AtLeast(rank as u8))
    }

    fn admits(self, level: &str) -> bool {
        match self {
            Self::Session => true,
            Self::None => false,
            Self::AtLeast(min) => LOG_LEVELS.iter().position(|x| *x == level).is_some_and(|r| r as u8 >= min),
        }
    }
}

impl fmt::Debug for RequestContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RequestContext")
            .field("session", &self.session.id())
            .field("request_id", &self.request_id)
            .field("outlet", &self.outlet)
            .finish_non_exhaustive()
    }
}

impl RequestContext {
    /// The session this request belongs to.
    pub fn session(&self) -> &SessionHandle {
        &self.session
    }

    /// The JSON-RPC id of the request.
    pub fn request_id(&self) -> &Value {
        &self.request_id
    }

    /// `params._meta.progressToken`, if the client sent one.
    pub fn progress_token(&self) -> Option<&Value> {
        self.progress_token.as_ref()
    }

    /// Cancelled by `notifications/cancelled` for this request, by the end of the session, by
    /// server shutdown, and (2026-07-28 only) by the client closing the response stream.
    pub fn cancellation(&self) -> &CancellationToken {
        self.cancel.token(&self.session.shared.cancel)
    }

    /// The tasks extension, for this request: `Some` when the request declared
    /// `io.modelcontextprotocol/tasks` (2026-07-28, in its `_meta` client capabilities) and
    /// the handler offers tasks ([`crate::Handler::task_support`]); then the handler may answer
    /// with a task ([`TaskStarter::start`]). `None` otherwise (always in the session
    /// revisions): the handler does the work at once, or refuses with
    /// [`crate::tasks::missing_capability`] when the work can only run as a task.
    pub fn tasks(&self) -> Option<&TaskStarter> {
        self.tasks.as_ref()
    }

    /// The `InputRequiredResult` that asks the client for `requests` (an object: key to
    /// server-to-client request) and, when `state` is given (2026-07-28), carries it sealed as
    /// `requestState` for the next round (bound to this request's principal, method and tool
    /// or prompt, valid for [`crate::request_state::RequestStateConfig::ttl`], accepted once).
    pub fn input_required(&self, requests: Value, state: Option<&Value>) -> Value {
        let mut result = json!({ "resultType": "input_required", "inputRequests": requests });
        // The session revisions have no rounds: nothing to seal a state for.
        if let (Some(state), Some(seal)) = (state, &self.states) {
            let binding = Binding {
                principal: seal.principal.as_deref(),
                method: &seal.method,
                name: seal.name.as_deref(),
            };
            let answers = self.rounds.as_ref().map(|r| r.answers().clone()).unwrap_or_default();
            result["requestState"] = json!(seal.states.seal(state, &answers, &binding, crate::clock::now()));
        }
        result
    }

    /// Ask the client for input under `key` (unique within the request): a server-to-client
    /// request `method` with `params` (`elicitation/create`, `sampling/createMessage`,
    /// `roots/list`), resolving with the client's result, whatever the revision
    /// ([`crate::input`]). In 2026-07-28 an unanswered key stops the round
    /// ([`AskError::Unanswered`]): return it (`?`) and the server answers with an
    /// `InputRequiredResult`; the handler runs again with the answer when the client retries. In the session revisions the request goes out
    /// on the request's stream and the answer comes back on the client's POST.
    pub async fn ask(&self, key: &str, method: &str, params: Value) -> Result<Value, AskError> {
        match &self.rounds {
            Some(rounds) => rounds.answer(key, method, params),
            None => Ok(self.request(method, params).await?),
        }
    }

    /// Announce a change to every 2026-07-28 listener, on every node sharing the store, whose
    /// `subscriptions/listen` filter admits it: `notifications/tools/list_changed`,
    /// `…/prompts/list_changed`, `…/resources/list_changed`, or `notifications/resources/updated`
    /// with the `uri` (best effort: a listener not connected misses it).
    pub async fn notify_listeners(&self, method: &str, params: Value) -> Result<(), SendError> {
        crate::listeners::announce(self.listeners.as_ref(), method, params).await
    }

    /// [`Self::ask`] for an elicitation (`elicitation/create` with `params`).
    pub async fn elicit(&self, key: &str, params: Value) -> Result<Value, AskError> {
        self.ask(key, "elicitation/create", params).await
    }

    /// The state this round came back with ([`Self::input_required`]'s), already checked
    /// and used up by the server: a request whose state is tampered, expired, replayed, or
    /// another principal's or request's never reaches its handler (it is answered `-32602`).
    pub fn request_state(&self) -> Option<&Value> {
        self.state.as_ref()
    }

    /// A notification on this request's stream (its SSE stream; when the request is answered
    /// as JSON it goes to the session's standalone stream).
    pub async fn notify(&self, method: &str, params: Value) -> Result<(), SendError> {
        let target = match &self.outlet {
            Outlet::Stream(stream) => {
                self.session.shared.open_stream(stream).await?;
                AppendTarget::Stream(stream.id)
            }
            Outlet::Standalone => AppendTarget::Standalone,
            Outlet::Direct(tx, closed) => {
                if self.cancel.is_cancelled(&self.session.shared.cancel) {
                    return Err(SendError::Cancelled);
                }
                let message = json!({ "jsonrpc": "2.0", "method": method, "params": params });
                return match (tx.send(message).await, closed) {
                    (Ok(()), _) | (Err(_), Closed::RunsOn) => Ok(()),
                    (Err(_), Closed::Cancels) => Err(SendError::Cancelled),
                };
            }
            Outlet::Nowhere => return Err(SendError::Stateless),
        };
        // Serialized straight into the payload: no envelope object is built per notification.
        let payload = notification_payload(method, &params);
        self.session.shared.append_payload(target, payload, EventKind::Intermediate).await.map(|_| ())
    }

    /// `notifications/progress` with this request's progressToken; `Ok(())` and nothing sent
    /// when the request had none.
    pub async fn progress(
        &self,
        progress: f64,
        total: Option<f64>,
        message: Option<&str>,
    ) -> Result<(), SendError> {
        let Some(token) = &self.progress_token else { return Ok(()) };
        let mut params = json!({ "progressToken": token, "progress": progress });
        if let Some(total) = total {
            params["total"] = json!(total);
        }
        if let Some(message) = message {
            params["message"] = json!(message);
        }
        self.notify("notifications/progress", params).await
    }

    /// `notifications/message` with `level` and `data`.
    pub async fn log(&self, level: &str, data: Value) -> Result<(), SendError> {
        // 2026-07-28: a request that did not opt in (or asked for a higher level) gets none.
        if !self.logs.admits(level) {
            return Ok(());
        }
        self.notify("notifications/message", json!({ "level": level, "data": data })).await
    }

    /// A server-to-client request (sampling/createMessage, elicitation/create, roots/list) on
    /// this request's stream; resolves with the client's result (the client POSTs the
    /// JSON-RPC response).
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, SendError> {
        let target = match &self.outlet {
            Outlet::Stream(stream) => {
                self.session.shared.open_stream(stream).await?;
                AppendTarget::Stream(stream.id)
            }
            Outlet::Standalone => AppendTarget::Standalone,
            Outlet::Direct(..) | Outlet::Nowhere => {
                let Some(parked) = &self.parked else { return Err(SendError::Stateless) };
                let (reply, answer) = tokio::sync::oneshot::channel();
                let question = Question { method: method.to_owned(), params, reply };
                parked.send(question).await.map_err(|_| SendError::Cancelled)?;
                return match answer.await {
                    Ok(Ok(result)) => Ok(result),
                    Ok(Err(refused)) => Err(SendError::Rejected(refused)),
                    Err(_) => Err(SendError::Cancelled),
                };
            }
        };
        self.session.shared.request(target, method, params, self.cancellation()).await
    }
}
