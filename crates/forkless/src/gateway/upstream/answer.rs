//! Reading the upstream's answers: a POST's JSON body or SSE stream, read to its end, and
//! the upstream's GET stream, opened again when it ends.
//!
//! It owns what counts as an answer and what happens when one breaks; which upstream
//! session and what it counted are [`super`]'s.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::StreamExt as _;
use reqwest::StatusCode;
use reqwest::header::{ACCEPT, CONTENT_TYPE};
use serde_json::Value;
use sse_stream::SseByteStream;

use forkless_server::backend::FromBackend;

use super::Upstream;

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

fn is_sse(response: &reqwest::Response) -> bool {
    response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("text/event-stream"))
}

/// The messages of an SSE stream's data fields, until it ends or breaks (`Err` with why).
fn events(
    response: reqwest::Response,
) -> impl futures::Stream<Item = Result<(Option<String>, Value), String>> {
    let bytes = response.bytes_stream().map(|r| r.map_err(std::io::Error::other));
    SseByteStream::new(bytes).filter_map(|event| async move {
        match event {
            Err(e) => Some(Err(format!("the stream broke: {e}"))),
            Ok(sse) => {
                let data = sse.data.filter(|d| !d.trim().is_empty())?;
                match serde_json::from_str::<Value>(&data) {
                    Ok(message) => Some(Ok((sse.id, message))),
                    Err(e) => {
                        tracing::warn!(error = %e, "upstream SSE event that is not JSON, skipped");
                        None
                    }
                }
            }
        }
    })
}

impl Upstream {
    /// POST `message` upstream and hand what answers it to the session; a request whose
    /// response does not come gets an error with its id.
    pub(crate) async fn post(self: Arc<Self>, message: Value) {
        let id = request_id(&message);
        let initialize = message.get("method").and_then(Value::as_str) == Some("initialize");
        let send = self
            .request(reqwest::Method::POST)
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
        if status == StatusCode::NOT_FOUND && !initialize {
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
        let head = response.headers().clone();
        let answered = if is_sse(&response) {
            self.read_stream(response, &id, initialize.then_some(&head)).await
        } else {
            self.read_body(response, &id, initialize.then_some(&head)).await
        };
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

    /// An SSE answer, read until the response to `id` (or its end). Whether it came. A
    /// stream cut before it is not resumed: nothing proves a resumed stream continues it.
    async fn read_stream(
        &self,
        response: reqwest::Response,
        id: &Value,
        initialize: Option<&reqwest::header::HeaderMap>,
    ) -> Result<bool, Cancelled> {
        let events = events(response);
        tokio::pin!(events);
        loop {
            let next = tokio::select! {
                () = self.cancel.cancelled() => return Err(Cancelled),
                next = events.next() => next,
            };
            match next {
                None => return Ok(false),
                Some(Err(why)) => {
                    self.lost(id, &why).await;
                    return Ok(true);
                }
                Some(Ok((_, message))) if answers(&message, id) => {
                    if let Some(head) = initialize {
                        self.initialized(head, &message);
                    }
                    self.deliver(message).await;
                    return Ok(true);
                }
                Some(Ok((_, message))) => {
                    // On this request's stream: it goes on the client's request stream too.
                    self.deliver(FromBackend::Related { message, request: id.clone() }).await;
                }
            }
        }
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
                    let events = events(r);
                    tokio::pin!(events);
                    loop {
                        let next = tokio::select! {
                            () = self.cancel.cancelled() => return,
                            next = events.next() => next,
                        };
                        let Some(Ok((event_id, message))) = next else { break };
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
                        self.deliver(message).await;
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
