//! Reading the upstream's answers: a POST's JSON body or SSE stream, read to its end (and
//! resumed when it breaks, where the continuation is provable: [`resume`]), and the
//! upstream's GET stream, opened again when it ends.
//!
//! It owns what counts as an answer and what happens when one breaks; which upstream
//! session and what it counted are [`super`]'s.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::StreamExt as _;
use reqwest::StatusCode;
use reqwest::header::ACCEPT;
use serde_json::Value;

use forkless_server::backend::FromBackend;

use super::Upstream;
use super::current::{self, Relay};
use super::resume::{self, Cursor, Fork, STREAM_ID, Step};
use super::sse::{Event, events, is_sse};

/// Event ids of the GET stream remembered to drop a reopened stream's repeats.
const SEEN: usize = 4096;

/// The id of `message` if it is a request (it has a method and an id).
fn request_id(message: &Value) -> Option<Value> {
    message.get("method")?;
    message.get("id").cloned()
}

/// Whether `message` is the response to the request `id`.
fn answers(message: &Value, id: &Value) -> bool {
    message.get("method").is_none() && message.get("id") == Some(id)
}

/// How reading one upstream response of an answer ended.
enum Read {
    /// The response to the request came (and was handed on).
    Answered,
    /// The stream ended before it.
    Ended,
    /// The stream broke before it (why).
    Broke(String),
    /// The stream sent something that does not continue it.
    Forked(Fork),
}

/// What a resume of a numbered upstream stream got.
enum Resumed {
    /// A response that continues the stream.
    Stream(reqwest::Response),
    /// The upstream forgot the session (404).
    Forgotten,
    /// A response that does not continue it.
    Forked(Fork),
    /// No continuation within `--upstream-timeout` (why).
    Failed(String),
}

impl Upstream {
    /// POST `message` upstream and hand what answers it to the session; a request whose
    /// response does not come gets an error with its id.
    pub(crate) async fn post(self: Arc<Self>, mut message: Value) {
        let mut headers = reqwest::header::HeaderMap::new();
        if let Some(stateless) = self.stateless.get() {
            if stateless.answered_by_client(&message) {
                return;
            }
            match stateless.relay(&mut message) {
                Relay::Drop => return,
                Relay::Answer(result) => {
                    let id = message.get("id").cloned().unwrap_or(Value::Null);
                    return self
                        .deliver(serde_json::json!({ "jsonrpc": "2.0", "id": id, "result": result }))
                        .await;
                }
                Relay::Post(h) => headers = h,
            }
        }
        let id = request_id(&message);
        let initialize = message.get("method").and_then(Value::as_str) == Some("initialize");
        let send = self
            .request(reqwest::Method::POST)
            .headers(headers)
            .header(ACCEPT, "application/json, text/event-stream")
            .json(&message)
            .send();
        let sent = tokio::select! {
            () = self.cancel.cancelled() => return,
            sent = tokio::time::timeout(self.spec.timeout, send) => sent,
        };
        let response = match sent {
            Ok(Ok(response)) => response,
            Ok(Err(e)) => return self.unanswered(id.as_ref(), &format!("sending it failed: {e}")).await,
            Err(_) => return self.unanswered(id.as_ref(), "no answer within --upstream-timeout").await,
        };
        let status = response.status();
        if initialize && matches!(status, StatusCode::BAD_REQUEST | StatusCode::NOT_FOUND) {
            // A 2026-07-28 upstream has no `initialize`: it may be called statelessly.
            return self.initialize_statelessly(&message, response).await;
        }
        if status == StatusCode::NOT_FOUND && !initialize && self.stateless.get().is_none() {
            return self.forgotten();
        }
        let Some(id) = id else {
            if !status.is_success() {
                tracing::warn!(session = ?self.forkless, %status, "the upstream refused a notification or response");
            }
            return;
        };
        if status == StatusCode::ACCEPTED {
            return self.lost(&id, "the upstream accepted the request without answering it").await;
        }
        // Only `initialize`'s head is kept (its session id): no copy of every call's head.
        let head = initialize.then(|| response.headers().clone());
        let answered = if is_sse(&response) {
            self.read_stream(response, &id, head.as_ref()).await
        } else {
            self.read_body(response, &id, head.as_ref()).await
        };
        if self.clone().input_round(&message).await {
            return;
        }
        match answered {
            Ok(true) | Err(Cancelled) => {}
            Ok(false) if !status.is_success() => {
                let error =
                    forkless_server::RpcError::internal(format!("the upstream answered HTTP {status}"))
                        .with_data(
                            serde_json::json!({ "reason": "upstream_error", "status": status.as_u16() }),
                        );
                self.deliver(serde_json::json!({ "jsonrpc": "2.0", "id": id, "error": error.to_json() }))
                    .await;
            }
            Ok(false) => self.lost(&id, "its answer ended without the response").await,
        }
    }

    /// The upstream's response as the client takes it: a 2026-07-28 result translated, or
    /// `None` for an `input_required` one, kept for its round ([`Self::input_round`]).
    fn as_answer(&self, message: Value) -> Option<Value> {
        let Some(stateless) = self.stateless.get() else { return Some(message) };
        let id = message.get("id").cloned().unwrap_or(Value::Null);
        match message.get("result") {
            Some(result) if stateless.keep_asked(&id, result) => None,
            _ => {
                stateless.done(&id);
                Some(current::answered(message))
            }
        }
    }

    async fn unanswered(&self, id: Option<&Value>, why: &str) {
        match id {
            Some(id) => self.lost(id, why).await,
            None => {
                tracing::warn!(session = ?self.forkless, why, "a notification or response did not reach the upstream")
            }
        }
    }

    /// A JSON body: one message or a batch. Whether the response to `id` was in it.
    async fn read_body(
        &self,
        response: reqwest::Response,
        id: &Value,
        initialize: Option<&reqwest::header::HeaderMap>,
    ) -> Result<bool, Cancelled> {
        let body = tokio::select! {
            () = self.cancel.cancelled() => return Err(Cancelled),
            body = response.bytes() => body,
        };
        let Ok(body) = body else { return Ok(false) };
        let messages = match serde_json::from_slice::<Value>(&body) {
            Ok(Value::Array(batch)) => batch,
            Ok(one) => vec![one],
            Err(_) => return Ok(false),
        };
        let mut answered = false;
        for message in messages {
            if answers(&message, id) {
                answered = true;
                let Some(message) = self.as_answer(message) else { continue };
                if let Some(head) = initialize {
                    self.initialized(head, &message);
                }
                self.deliver(message).await;
            } else {
                self.deliver(FromBackend::Related { message, request: id.clone() }).await;
            }
        }
        Ok(answered)
    }

    /// An SSE answer, read until the response to `id` (or its end). Whether it came, or the
    /// request was answered: a stream that breaks or ends before the response is resumed
    /// upstream when the upstream numbers its streams and the resume provably continues it
    /// ([`resume`]); when it does not, or cannot be resumed, the request is answered
    /// `upstream_lost` and nothing past the cursor is passed on.
    async fn read_stream(
        &self,
        response: reqwest::Response,
        id: &Value,
        initialize: Option<&reqwest::header::HeaderMap>,
    ) -> Result<bool, Cancelled> {
        let mut cursor = Cursor::of(response.headers());
        let mut response = response;
        loop {
            let broke = match self.read_events(response, id, initialize, cursor.as_mut()).await? {
                Read::Answered => return Ok(true),
                Read::Forked(fork) => return self.forked(id, fork).await,
                Read::Broke(why) => why,
                Read::Ended if cursor.is_some() => "its answer ended without the response".to_owned(),
                Read::Ended => return Ok(false),
            };
            let Some(at) = &cursor else {
                self.lost(id, &broke).await;
                return Ok(true);
            };
            response = match self.resume(at).await? {
                Resumed::Stream(next) => {
                    self.stats.resumed.fetch_add(1, Ordering::Relaxed);
                    tracing::info!(session = ?self.forkless, %id, from = %at.last_event_id(), why = %broke, "resumed an upstream answer");
                    next
                }
                Resumed::Forked(fork) => return self.forked(id, fork).await,
                Resumed::Forgotten => {
                    self.forgotten();
                    return Ok(true);
                }
                Resumed::Failed(why) => {
                    self.lost(id, &format!("{broke}; resuming it failed: {why}")).await;
                    return Ok(true);
                }
            };
        }
    }

    /// Read one response of an answer, its events taken by `cursor` when it is numbered.
    async fn read_events(
        &self,
        response: reqwest::Response,
        id: &Value,
        initialize: Option<&reqwest::header::HeaderMap>,
        mut cursor: Option<&mut Cursor>,
    ) -> Result<Read, Cancelled> {
        // A numbered stream's upstream sends keep-alives: silence means a dead link.
        let idle = cursor.is_some().then_some(self.spec.timeout);
        let events = events(response, idle);
        tokio::pin!(events);
        loop {
            let next = tokio::select! {
                () = self.cancel.cancelled() => return Err(Cancelled),
                next = events.next() => next,
            };
            let event = match next {
                None => return Ok(Read::Ended),
                Some(Err(why)) => return Ok(Read::Broke(why)),
                Some(Ok(event)) => event,
            };
            if let Some(cursor) = cursor.as_deref_mut()
                && !resume::trusting()
            {
                match cursor.admit(event.id.as_deref()) {
                    Ok(Step::Next) => {}
                    Ok(Step::Repeat) => {
                        if event.message.is_some() {
                            self.stats.duplicates_dropped.fetch_add(1, Ordering::Relaxed);
                        }
                        continue;
                    }
                    Err(fork) => return Ok(Read::Forked(fork)),
                }
            }
            let Some(message) = event.message else { continue };
            if answers(&message, id) {
                let Some(message) = self.as_answer(message) else { return Ok(Read::Answered) };
                if let Some(head) = initialize {
                    self.initialized(head, &message);
                }
                self.deliver(message).await;
                return Ok(Read::Answered);
            }
            // On this request's stream: it goes on the client's request stream too.
            self.deliver(FromBackend::Related { message, request: id.clone() }).await;
        }
    }

    /// Resume the numbered stream at `cursor`: a GET with `Last-Event-ID`, again with backoff
    /// while the upstream cannot be reached, until `--upstream-timeout`.
    async fn resume(&self, cursor: &Cursor) -> Result<Resumed, Cancelled> {
        let deadline = tokio::time::Instant::now() + self.spec.timeout;
        let mut backoff = Duration::from_millis(50);
        loop {
            let send = self
                .request(reqwest::Method::GET)
                .header(ACCEPT, "text/event-stream")
                .header("last-event-id", cursor.last_event_id())
                .header(STREAM_ID, cursor.stream())
                .send();
            let sent = tokio::select! {
                () = self.cancel.cancelled() => return Err(Cancelled),
                sent = tokio::time::timeout_at(deadline, send) => sent,
            };
            let why = match sent {
                Err(_) => return Ok(Resumed::Failed("no answer within --upstream-timeout".into())),
                Ok(Ok(r)) if r.status() == StatusCode::NOT_FOUND => return Ok(Resumed::Forgotten),
                Ok(Ok(r)) if r.status().is_success() && is_sse(&r) => {
                    return Ok(match cursor.continued_by(r.headers()) {
                        Err(fork) if !resume::trusting() => Resumed::Forked(fork),
                        _ => Resumed::Stream(r),
                    });
                }
                Ok(Ok(r)) if r.status().is_server_error() || r.status() == StatusCode::TOO_MANY_REQUESTS => {
                    format!("the upstream answered HTTP {}", r.status())
                }
                Ok(Ok(r)) => {
                    return Ok(Resumed::Failed(format!(
                        "the upstream answered the resume with HTTP {}",
                        r.status()
                    )));
                }
                Ok(Err(e)) => format!("reaching the upstream failed: {e}"),
            };
            if tokio::time::Instant::now() + backoff >= deadline {
                return Ok(Resumed::Failed(why));
            }
            tokio::select! {
                () = self.cancel.cancelled() => return Err(Cancelled),
                () = tokio::time::sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(Duration::from_secs(2));
        }
    }

    /// The upstream sent what does not continue the answer: it is not passed on, and the
    /// request is answered `upstream_lost`.
    async fn forked(&self, id: &Value, fork: Fork) -> Result<bool, Cancelled> {
        self.stats.forks_refused.fetch_add(1, Ordering::Relaxed);
        self.lost(id, &format!("the upstream's stream did not continue: {}", fork.0)).await;
        Ok(true)
    }

    /// The upstream's GET stream (its requests and notifications outside any request),
    /// opened again with `Last-Event-ID` when it ends; events it repeats are dropped. Until
    /// the session ends, or for good if the upstream offers none (405).
    pub(crate) async fn standalone(self: Arc<Self>) {
        let mut last: Option<String> = None;
        let mut seen: (HashSet<String>, VecDeque<String>) = Default::default();
        let mut backoff = Duration::from_millis(100);
        let mut opened_before = false;
        loop {
            let mut request = self.request(reqwest::Method::GET).header(ACCEPT, "text/event-stream");
            if let Some(last) = &last {
                request = request.header("last-event-id", last.as_str());
            }
            let sent = tokio::select! {
                () = self.cancel.cancelled() => return,
                sent = request.send() => sent,
            };
            match sent {
                Ok(r) if r.status() == StatusCode::NOT_FOUND => return self.forgotten(),
                Ok(r) if r.status() == StatusCode::METHOD_NOT_ALLOWED => return,
                Ok(r) if r.status().is_success() && is_sse(&r) => {
                    if opened_before {
                        self.stats.standalone_reopened.fetch_add(1, Ordering::Relaxed);
                    }
                    opened_before = true;
                    backoff = Duration::from_millis(100);
                    let events = events(r, None);
                    tokio::pin!(events);
                    loop {
                        let next = tokio::select! {
                            () = self.cancel.cancelled() => return,
                            next = events.next() => next,
                        };
                        let Some(Ok(Event { id: event_id, message })) = next else { break };
                        if let Some(event_id) = event_id {
                            if !seen.0.insert(event_id.clone()) {
                                self.stats.duplicates_dropped.fetch_add(1, Ordering::Relaxed);
                                continue;
                            }
                            seen.1.push_back(event_id.clone());
                            if seen.1.len() > SEEN
                                && let Some(old) = seen.1.pop_front()
                            {
                                seen.0.remove(&old);
                            }
                            last = Some(event_id);
                        }
                        if let Some(message) = message {
                            self.deliver(message).await;
                        }
                    }
                }
                Ok(r) => {
                    tracing::debug!(session = ?self.forkless, status = %r.status(), "upstream GET stream refused")
                }
                Err(e) => tracing::debug!(session = ?self.forkless, error = %e, "upstream GET stream failed"),
            }
            tokio::select! {
                () = self.cancel.cancelled() => return,
                () = tokio::time::sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(Duration::from_secs(10));
        }
    }
}

/// The session ended while an answer was read.
struct Cancelled;
