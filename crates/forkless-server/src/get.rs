//! GET and DELETE: the decision on a GET (PROTOCOL section 4, made by the core) turned into
//! an SSE answer, a 409 or a 404; and ending a session.

use axum::response::{IntoResponse, Response};
use forkless_core::{EndReason, GetOutcome, GetRequest, OsEntropy, Revision};
use forkless_store::{Store, transact};
use http::{HeaderMap, StatusCode};

use crate::error::Error;
use crate::handler::Handler;
use crate::metrics::Metrics;
use crate::writer::WriterOptions;

use crate::clock::now;
use crate::headers::{LAST_EVENT_ID, STREAM_ID};
use crate::request::{accepts, check_single_valued, lossy_header, protocol_version};
use crate::respond::preamble;
use crate::server::App;

impl<S: Store, H: Handler> App<S, H> {
    pub(crate) async fn get(&self, headers: &HeaderMap) -> Result<Response, Error> {
        check_single_valued(headers)?;
        self.check_origin(headers)?;
        let version = protocol_version(headers)?;
        if version.is_some_and(Revision::is_stateless) {
            return Err(Error::MethodNotAllowed { allow: "POST" });
        }
        if !accepts(headers, "text/event-stream") {
            return Err(Error::NotAcceptable("text/event-stream"));
        }
        let (record, shared) = self.readable_session(headers).await?;
        let sid = record.id();
        let revision = record.session().revision();
        let last_event_id = lossy_header(headers, &LAST_EVENT_ID);
        let stream_token = lossy_header(headers, &STREAM_ID);
        let req =
            GetRequest { last_event_id: last_event_id.as_deref(), stream_token: stream_token.as_deref() };
        let cfg = self.common.cfg.core;
        let (outcome, _) =
            transact(&*self.common.store, sid, |r| r.on_get(&req, now(), &cfg, &mut OsEntropy))
                .await
                .map_err(|e| self.store_error(sid, e))?;
        let metrics = &self.common.metrics;
        match outcome {
            GetOutcome::Attached(grant) => {
                let (outcome, reason) = match (grant.resumed, grant.fenced) {
                    (true, _) => ("resumed", "continuation"),
                    (false, Some(_)) => ("new", "reset"),
                    (false, None) => ("new", "standalone"),
                };
                metrics.get_outcome(outcome, reason);
                if grant.displaced {
                    Metrics::inc(&metrics.displacements);
                }
                if let Some(old) = grant.fenced {
                    Metrics::inc(&metrics.fences);
                    shared.fail_pending_on(old);
                    metrics.stream_opened(crate::metrics::Opened::Standalone);
                    tracing::info!(session = %sid, fenced = %old, stream = %grant.stream, "standalone stream reset");
                }
                tracing::debug!(session = %sid, stream = %grant.stream, resumed = grant.resumed, after = grant.after.get(), "GET attached");
                let watch =
                    self.common.store.watch(sid, grant.stream).await.map_err(|e| self.store_error(sid, e))?;
                let opts = WriterOptions {
                    preamble: preamble(revision, grant.resumed),
                    poll_after: self.poll_after(revision),
                };
                Ok(self.stream_response(sid, grant, watch, opts))
            }
            GetOutcome::Conflict(reason) => {
                metrics.get_outcome("conflict", reason.as_str());
                Err(Error::Conflict(reason))
            }
            GetOutcome::Rejected(reason) => {
                metrics.get_outcome("rejected", reason.as_str());
                let end = EndReason::Rejected(reason);
                metrics.session_ended(end.as_str());
                tracing::info!(session = %sid, reason = reason.as_str(), "GET rejected; session ended");
                self.common.end_local(sid, end);
                Err(Error::SessionEnded(end))
            }
        }
    }

    pub(crate) async fn delete(&self, headers: &HeaderMap) -> Result<Response, Error> {
        check_single_valued(headers)?;
        self.check_origin(headers)?;
        if protocol_version(headers)?.is_some_and(Revision::is_stateless) {
            return Err(Error::MethodNotAllowed { allow: "POST" });
        }
        let (record, _shared) = self.session(headers).await?;
        let sid = record.id();
        transact(&*self.common.store, sid, |r| r.on_end(EndReason::Deleted, now()))
            .await
            .map_err(|e| self.store_error(sid, e))?;
        self.common.metrics.session_ended(EndReason::Deleted.as_str());
        self.common.end_local(sid, EndReason::Deleted);
        Ok(StatusCode::OK.into_response())
    }
}
