//! The endpoint's answers as HTTP responses: a JSON body, a finished SSE body, or a writer
//! serving a stream in the store (a POST's request stream, or a GET's).
//!
//! This module owns turning what the answer path ([`crate::answer`]) or a GET decided into a
//! response; the head of an SSE response is [`crate::sse::head`], the body's bytes
//! [`crate::writer`]'s.

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use forkless_core::{Grant, Revision, SessionId};
use forkless_store::{Store, StreamWatch};
use http::{HeaderValue, header};
use std::time::Duration;

use crate::answer::Answered;
use crate::error::Error;
use crate::handler::Handler;
use crate::server::App;
use crate::sse::{self, Served};
use crate::writer::{self, Preamble, WriterOptions};

impl<S: Store, H: Handler> App<S, H> {
    /// An endpoint's outcome as its response: an error counted in `/metrics` and answered
    /// with its status and JSON-RPC error.
    pub(crate) fn answer(&self, out: Result<Response, Error>) -> Response {
        out.unwrap_or_else(|e| {
            let (status, _) = e.status_and_code();
            self.common.metrics.error(status.as_str(), e.reason());
            e.into_response()
        })
    }

    /// A POST's requests, answered over SSE as [`Answered`] says.
    pub(crate) async fn respond_sse(
        &self,
        sid: SessionId,
        revision: Revision,
        answered: Answered,
    ) -> Result<Response, Error> {
        match answered {
            Answered::Finished { stream, event, payload } => {
                let retry = self.common.cfg.core.retry_interval;
                let body = writer::finished_body(preamble(revision, false), event, &payload, retry);
                Ok(self.sse(
                    Body::from(body),
                    Served { stream, resumed: false, grace_ms: &self.common.grace_ms },
                ))
            }
            Answered::Stream(grant) => {
                let watch =
                    self.common.store.watch(sid, grant.stream).await.map_err(|e| self.store_error(sid, e))?;
                let opts = WriterOptions {
                    preamble: preamble(revision, false),
                    poll_after: self.poll_after(revision),
                };
                Ok(self.stream_response(sid, grant, watch, opts))
            }
        }
    }

    /// How long a writer serves a stream of `revision` before it ends the response and lets
    /// the client poll (`None`: until the stream completes).
    pub(crate) fn poll_after(&self, revision: Revision) -> Option<Duration> {
        self.common.cfg.poll_after.filter(|_| revision.allows_polling())
    }

    /// The SSE response serving an open stream through its writer.
    pub(crate) fn stream_response(
        &self,
        session: SessionId,
        grant: Grant,
        watch: StreamWatch,
        opts: WriterOptions,
    ) -> Response {
        let body = writer::body(self.common.clone(), session, grant, watch, opts);
        let served = Served { stream: grant.stream, resumed: grant.resumed, grace_ms: &self.common.grace_ms };
        self.sse(body, served)
    }

    fn sse(&self, body: Body, served: Served<'_>) -> Response {
        let mut response = Response::new(body);
        *response.headers_mut() = sse::head(Some(served));
        response
    }
}

/// What a stream's body starts with: a new stream of a revision that primes starts with its
/// priming event, any other with `retry:` alone.
pub(crate) fn preamble(revision: Revision, resumed: bool) -> Preamble {
    if revision.sends_priming_event() && !resumed { Preamble::Priming } else { Preamble::Retry }
}

/// A `200` with an already serialized JSON body.
pub(crate) fn json_response(body: Bytes) -> Response {
    ([(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], body).into_response()
}
