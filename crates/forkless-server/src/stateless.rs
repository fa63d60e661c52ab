//! POST in the 2026-07-28 revision: no session, no resumption; closing the response stream
//! cancels the request. What the revision says of each request and result (its headers,
//! `server/discover`, `resultType`, caching hints) is [`wire`]'s.

mod listen;
mod wire;

use std::sync::Arc;

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use forkless_core::{OsEntropy, Revision, SessionId};
use forkless_store::Store;
use http::StatusCode;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::clock::now;
use crate::config::AnswerMode;
use crate::context::{Closed, Outlet};
use crate::error::Error;
use crate::handler::{Handler, TaskSupport};
use crate::jsonrpc::{self, Message};
use crate::session::{RequestCancel, SessionShared};
use crate::tasks;

use crate::answer::Call;
use crate::respond::json_response;
use crate::server::App;

/// A JSON answer carrying `out` for request `id`, with the revision's status.
fn answered(id: &Value, out: &Result<Value, jsonrpc::RpcError>) -> Response {
    let mut response = json_response(jsonrpc::response_payload(id, out));
    *response.status_mut() = wire::status_of(out);
    response
}

/// How long a stateless POST waits for its first message before starting an SSE stream: an
/// answer within it goes out as plain JSON (an unknown method as 404).
const FIRST_MESSAGE_WAIT: std::time::Duration = std::time::Duration::from_millis(50);

impl<S: Store, H: Handler> App<S, H> {
    /// A `tasks/…` request: the extension's three methods for a client that declared it
    /// (`-32021` for one that did not), `-32601` for any other (`tasks/result` and `tasks/list`
    /// are not part of it) and for every one when the handler offers no tasks.
    async fn answer_task_method(
        &self,
        shared: &SessionShared,
        method: &str,
        params: Option<&Value>,
    ) -> Result<Value, jsonrpc::RpcError> {
        if self.handler.task_support() == TaskSupport::Unsupported || !tasks::METHODS.contains(&method) {
            return Err(jsonrpc::RpcError::method_not_found(method));
        }
        if !tasks::declared(&shared.client_capabilities) {
            return Err(tasks::missing_capability());
        }
        let mut result = self.common.tasks.answer(method, params, shared.principal.as_deref(), now()).await?;
        wire::complete(method, &mut result);
        Ok(result)
    }

    pub(crate) async fn post_stateless(
        &self,
        revision: Revision,
        headers: &http::HeaderMap,
        peer: Option<crate::quota::PeerAddr>,
        body: jsonrpc::Body,
    ) -> Result<Response, Error> {
        if body.batch && !revision.accepts_batches() {
            return Err(Error::BatchNotAllowed(revision.as_str()));
        }
        let Some(message) = body.messages.into_iter().next() else {
            return Err(Error::InvalidMessage("empty body".into()));
        };
        // No session: what the client says of itself travels in each request's `_meta`.
        let meta = match &message {
            Message::Request { params, .. } | Message::Notification { params, .. } => {
                params.as_ref().and_then(|p| p.get("_meta"))
            }
            Message::Response { .. } => None,
        };
        let field = |key: &str| meta.and_then(|m| m.get(key)).cloned().unwrap_or(Value::Null);
        let shared = Arc::new(
            SessionShared::new(
                SessionId::generate(&mut OsEntropy),
                revision,
                field("io.modelcontextprotocol/clientCapabilities"),
                field("io.modelcontextprotocol/clientInfo"),
                None,
                self.common.shutdown.child_token(),
            )
            .asked_by(self.principal(headers)),
        );
        // Whose share a task this request creates counts against: its principal, else its
        // client's address (`crate::quota`).
        if let Some(key) =
            crate::quota::key(shared.principal.as_deref(), headers, peer, &self.common.cfg.quotas)
        {
            let _ = shared.quota_key.set(key);
        }
        let mut call = match message {
            Message::Response { .. } => {
                return Err(Error::InvalidMessage("clients send no responses in 2026-07-28".into()));
            }
            Message::Notification { method, params } => {
                if method == "notifications/cancelled" {
                    // A keyed request outlives its response stream: only a cancellation naming
                    // its key stops it.
                    if let Some(key) = tasks::Key::cancelled_by(shared.principal.as_deref(), params.as_ref())
                    {
                        self.common.tasks.cancel_key(key, shared.principal.as_deref()).await;
                    }
                } else if method != "notifications/initialized" {
                    self.on_notification(&shared, method, params);
                }
                return Ok(StatusCode::ACCEPTED.into_response());
            }
            Message::Request { id, method, params } => {
                let schema = (method == "tools/call")
                    .then(|| params.as_ref().and_then(|p| p.get("name")?.as_str()))
                    .flatten()
                    .and_then(|name| self.handler.tool_input_schema(name));
                let arguments = params.as_ref().and_then(|p| p.get("arguments"));
                let checked = wire::check_request(headers, &method, params.as_ref()).and_then(|()| {
                    schema.map_or(Ok(()), |s| wire::check_param_headers(headers, &s, arguments))
                });
                if let Err(refusal) = checked {
                    return Ok((refusal.status, axum::Json(refusal.body(&id))).into_response());
                }
                if method == "subscriptions/listen" {
                    let info = self.handler.info();
                    let keep_alive = self.common.cfg.core.keep_alive;
                    return Ok(listen::listen(
                        &id,
                        params.as_ref(),
                        &info,
                        keep_alive,
                        self.common.shutdown.clone(),
                        forkless_store::Publishing::subscribe(&*self.common.store),
                    ));
                }
                if method.starts_with("tasks/") {
                    let out = self.answer_task_method(&shared, &method, params.as_ref()).await;
                    return Ok(answered(&id, &out));
                }
                if method == "server/discover" {
                    let info = self.handler.info();
                    let ttl = self.common.cfg.idempotency.ttl;
                    let mut result =
                        wire::discover(&info, self.handler.task_support(), ttl, self.common.served);
                    wire::complete(&method, &mut result);
                    return Ok(json_response(jsonrpc::response_payload(&id, &Ok(result))));
                }
                Call { id, method, params }
            }
        };
        let method = call.method.clone();
        // A keyed request runs once per key: a re-issue gets the first execution's answer.
        let keyed = match tasks::Key::of(shared.principal.as_deref(), &method, call.params.as_ref()) {
            Ok(None) => None,
            Ok(Some(key)) => match self.common.tasks.claim(&key, shared.principal.as_deref()).await {
                tasks::Claim::Run(run) => Some(run),
                tasks::Claim::Done(out) => return Ok(answered(&call.id, &out)),
            },
            Err(refused) => return Ok(answered(&call.id, &Err(refused))),
        };
        // Closing the response cancels the request in this revision, unless it is keyed.
        let cancel = match &keyed {
            Some(run) => run.cancellation(),
            None => shared.cancel.child_token(),
        };
        let closing = match &keyed {
            Some(_) => CancellationToken::new(),
            None => cancel.clone(),
        };
        match self.common.cfg.answer {
            AnswerMode::Json if keyed.is_some() => {
                // Run in a task of its own: the connection closing drops this future, never
                // the keyed request, whose answer is kept for its re-issue.
                let (app, id) = (self.clone(), call.id.clone());
                let execution = tokio::spawn(async move {
                    let (out, _) = app
                        .answerer
                        .run(shared, &mut call, RequestCancel::made(cancel), Outlet::Nowhere)
                        .await;
                    let out = out.map(|mut result| {
                        wire::complete(&method, &mut result);
                        result
                    });
                    if let Some(run) = keyed {
                        run.finish(&out).await;
                    }
                    out
                });
                // Only a runtime shutting down stops it (the handler's panics are caught).
                let out = execution
                    .await
                    .unwrap_or_else(|_| Err(jsonrpc::RpcError::internal("the server is stopping")));
                Ok(answered(&id, &out))
            }
            AnswerMode::Json => {
                let guard = closing.drop_guard();
                let (out, _) =
                    self.answerer.run(shared, &mut call, RequestCancel::made(cancel), Outlet::Nowhere).await;
                let out = out.map(|mut result| {
                    wire::complete(&method, &mut result);
                    result
                });
                guard.disarm();
                let mut response = json_response(jsonrpc::response_payload(&call.id, &out));
                *response.status_mut() = wire::status_of(&out);
                Ok(response)
            }
            AnswerMode::Sse => {
                let (tx, mut rx) = mpsc::channel::<Value>(64);
                let closed = if keyed.is_some() { Closed::RunsOn } else { Closed::Cancels };
                let app = self.clone();
                let task_cancel = cancel.clone();
                tokio::spawn(async move {
                    let (out, _) = app
                        .answerer
                        .run(
                            shared,
                            &mut call,
                            RequestCancel::made(task_cancel.clone()),
                            Outlet::Direct(tx.clone(), closed),
                        )
                        .await;
                    let out = out.map(|mut result| {
                        wire::complete(&method, &mut result);
                        result
                    });
                    if let Some(run) = keyed {
                        run.finish(&out).await;
                    }
                    if !task_cancel.is_cancelled() {
                        let _ = tx.send(jsonrpc::respond(&call.id, out)).await;
                    }
                });
                // Closing the response (dropping this future) cancels the request from here on
                // (a keyed one: nothing).
                let guard = closing.drop_guard();
                // The head waits for the first message: a request answered before it sent
                // anything is answered with plain JSON, and an unknown method with 404.
                // Only briefly, so a long request's stream (and its keep-alive) starts at once.
                let first = match tokio::time::timeout(FIRST_MESSAGE_WAIT, rx.recv()).await {
                    Ok(Some(first)) => Some(first),
                    Ok(None) => {
                        guard.disarm();
                        return Err(Error::InvalidMessage("the request was cancelled".into()));
                    }
                    Err(_) => None,
                };
                if let Some(first) = first.as_ref().filter(|m| m.get("id").is_some()) {
                    guard.disarm();
                    let status = wire::status_of_code(first.pointer("/error/code").and_then(Value::as_i64));
                    return Ok((status, axum::Json(first.clone())).into_response());
                }
                let state = (rx, Some(guard), first);
                let stream = futures::stream::unfold(state, |(mut rx, guard, mut first)| async move {
                    guard.as_ref()?;
                    let message = match first.take() {
                        Some(m) => m,
                        None => rx.recv().await?,
                    };
                    // The response (the one message with an id) ends the stream.
                    let guard = if message.get("id").is_some() {
                        if let Some(g) = guard {
                            g.disarm();
                        }
                        None
                    } else {
                        guard
                    };
                    let chunk = crate::sse::event(None, message.to_string().as_bytes());
                    Some((Ok::<_, std::convert::Infallible>(chunk), (rx, guard, first)))
                });
                let mut response = Response::new(Body::from_stream(stream));
                *response.headers_mut() = crate::sse::head(None);
                Ok(response)
            }
        }
    }
}
