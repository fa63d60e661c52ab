//! Request parsing and header checks: `Origin`, `Accept`,
//! `Content-Type`, `MCP-Protocol-Version`, the session a request names, and reading a body
//! within its limit.
//!
//! This module owns turning headers into typed values or typed errors. It does not answer
//! anything and decides nothing about streams.

use std::sync::Arc;

use axum::body::Body;
use bytes::Bytes;
use forkless_core::{EndReason, Revision, SessionId, SessionRecord};
use forkless_store::Store;
use http::{HeaderMap, HeaderName, HeaderValue, header};
use http_body_util::BodyExt as _;

use crate::clock::now;
use crate::error::Error;
use crate::handler::Handler;
use crate::headers::{LAST_EVENT_ID, PROTOCOL_VERSION, SESSION_ID, STREAM_ID};
use crate::session::SessionShared;

use crate::server::App;

/// The MCP headers that carry exactly one value.
const SINGLE_VALUED: [HeaderName; 4] = [SESSION_ID, PROTOCOL_VERSION, LAST_EVENT_ID, STREAM_ID];

/// Every single-valued MCP header at most once ([`Error::HeaderRepeated`] otherwise).
pub(crate) fn check_single_valued(headers: &HeaderMap) -> Result<(), Error> {
    // No name repeated at all (the usual case): nothing to look up.
    if headers.len() == headers.keys_len() {
        return Ok(());
    }
    for name in &SINGLE_VALUED {
        let mut values = headers.get_all(name).iter();
        if values.next().is_some() && values.next().is_some() {
            return Err(Error::HeaderRepeated(header_name(name)));
        }
    }
    Ok(())
}

/// The name as the MCP specification spells it.
fn header_name(name: &HeaderName) -> &'static str {
    match name.as_str() {
        "mcp-session-id" => "Mcp-Session-Id",
        "mcp-protocol-version" => "MCP-Protocol-Version",
        "last-event-id" => "Last-Event-ID",
        _ => "Mcp-Stream-Id",
    }
}

impl<S: Store, H: Handler> App<S, H> {
    pub(crate) fn check_origin(&self, headers: &HeaderMap) -> Result<(), Error> {
        let Some(origin) = headers.get(header::ORIGIN) else { return Ok(()) };
        match origin.to_str() {
            Ok(o) if self.common.cfg.allowed_origins.allows(o) => Ok(()),
            Ok(o) => Err(Error::OriginForbidden(o.to_owned())),
            Err(_) => Err(Error::OriginForbidden(String::from_utf8_lossy(origin.as_bytes()).into_owned())),
        }
    }

    /// Who the request is: the verified token's issuer and subject when auth is on, else
    /// what [`crate::ServerConfig::principal`] derives.
    pub(crate) fn principal(&self, headers: &HeaderMap) -> Option<String> {
        if self.common.cfg.auth.is_some() {
            return headers
                .get(crate::auth::VERIFIED_PRINCIPAL)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
        }
        self.common.cfg.principal.as_ref().and_then(|p| (p.0)(headers))
    }

    /// The session named by `Mcp-Session-Id`, checked: known, active, same principal.
    pub(crate) async fn session(
        &self,
        headers: &HeaderMap,
    ) -> Result<(SessionRecord, Arc<SessionShared>), Error> {
        let (record, live) = self.checked_session(headers).await?;
        let Some(shared) = live else {
            // Created by a process that is gone, for a handler whose sessions die with it.
            let (id, reason) = (record.id(), EndReason::OwnerLost);
            let _ = forkless_store::transact(&*self.common.store, id, |r| r.on_end(reason, now())).await;
            self.common.metrics.session_ended(reason.as_str());
            tracing::info!(session = %id, "session lost with the process that served it");
            return Err(Error::SessionEnded(reason));
        };
        Ok((record, shared))
    }

    /// Like [`Self::session`], for reading its streams (GET): a session created by a process
    /// that is gone, for a handler whose sessions die with it, can still be resumed, so its
    /// client reads what was delivered and the answers to its lost requests; its next
    /// request (a POST) ends it with `owner_lost`.
    pub(crate) async fn readable_session(
        &self,
        headers: &HeaderMap,
    ) -> Result<(SessionRecord, Arc<SessionShared>), Error> {
        let (record, live) = self.checked_session(headers).await?;
        let shared = live.unwrap_or_else(|| {
            // Not registered: nothing runs for this session here, nothing can be sent on it.
            Arc::new(SessionShared::new(
                record.id(),
                record.session().revision(),
                serde_json::Value::Null,
                serde_json::Value::Null,
                None,
                self.common.shutdown.child_token(),
            ))
        });
        Ok((record, shared))
    }

    /// The session named by `Mcp-Session-Id`, known, active and the principal's, and its
    /// in-process state if it is live here (or can be restored here).
    async fn checked_session(
        &self,
        headers: &HeaderMap,
    ) -> Result<(SessionRecord, Option<Arc<SessionShared>>), Error> {
        let raw = headers.get(SESSION_ID).ok_or(Error::MissingSessionId)?;
        let id: SessionId = raw.to_str().ok().and_then(|s| s.parse().ok()).ok_or(Error::SessionUnknown)?;
        let record = self.common.store.load(id).await?.ok_or(Error::SessionUnknown)?.value;
        if let Some(reason) = record.session().ended() {
            self.common.end_local(id, reason);
            return Err(Error::SessionEnded(reason));
        }
        if (self.common.cfg.principal.is_some() || self.common.cfg.auth.is_some())
            && record.session().principal() != self.principal(headers).as_deref()
        {
            // Another principal's session looks exactly like an unknown one.
            return Err(Error::SessionUnknown);
        }
        let live = self.common.live(&record);
        if let Some(live) = &live {
            live.last_used.store(crate::clock::now_ms(), std::sync::atomic::Ordering::Relaxed);
        }
        Ok((record, live))
    }

    /// A POST body, whole, within `max_body_bytes` and `body_read_timeout`.
    pub(crate) async fn read_request_body(&self, headers: &HeaderMap, body: Body) -> Result<Bytes, Error> {
        let cfg = &self.common.cfg;
        let reading = read_body(headers, body, cfg.max_body_bytes);
        tokio::pin!(reading);
        // A small body is usually in hyper's buffer already: read without arming a timer.
        match futures::poll!(reading.as_mut()) {
            std::task::Poll::Ready(bytes) => bytes,
            std::task::Poll::Pending => match tokio::time::timeout(cfg.body_read_timeout, reading).await {
                Ok(bytes) => bytes,
                Err(_) => {
                    crate::metrics::Metrics::inc(&self.common.metrics.body_timeouts);
                    Err(Error::BodyTimeout(cfg.body_read_timeout))
                }
            },
        }
    }

    /// A store error on `session`: tear down locally if it says the session ended.
    pub(crate) fn store_error(&self, session: SessionId, e: forkless_store::Error) -> Error {
        if let Some(reason) = e.ended() {
            self.common.end_local(session, reason);
        }
        Error::from(e)
    }
}

/// Ids and numbers are visible ASCII, so this never takes the fallback.
pub(crate) fn header_value(s: String) -> HeaderValue {
    HeaderValue::try_from(s).unwrap_or_else(|_| HeaderValue::from_static("invalid"))
}

/// A header's text; a value that is not visible ASCII becomes the empty string, which no
/// identifier parser accepts (so it is judged malformed, never ignored).
pub(crate) fn lossy_header(headers: &HeaderMap, name: &HeaderName) -> Option<String> {
    headers.get(name).map(|v| v.to_str().map(str::to_owned).unwrap_or_default())
}

pub(crate) fn protocol_version(headers: &HeaderMap) -> Result<Option<Revision>, Error> {
    let Some(v) = headers.get(PROTOCOL_VERSION) else { return Ok(None) };
    let text = String::from_utf8_lossy(v.as_bytes()).into_owned();
    text.trim().parse::<Revision>().map(Some).map_err(|_| Error::UnsupportedVersion(text))
}

pub(crate) fn is_json(headers: &HeaderMap) -> bool {
    let Some(ct) = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()) else { return false };
    let media = ct.split(';').next().unwrap_or("").trim();
    media.eq_ignore_ascii_case("application/json")
}

/// Whether `Accept` admits `wanted` (exactly, by `type/*`, or by `*/*`).
pub(crate) fn accepts(headers: &HeaderMap, wanted: &str) -> bool {
    // Bytes, not str, and no allocation: this runs on every POST and GET.
    let wanted_type = wanted.split('/').next().unwrap_or("").as_bytes();
    headers.get_all(header::ACCEPT).iter().any(|value| {
        value.as_bytes().split(|&b| b == b',').any(|range| {
            let media = range.split(|&b| b == b';').next().unwrap_or_default().trim_ascii();
            media.eq_ignore_ascii_case(wanted.as_bytes())
                || media == b"*/*"
                || media.strip_suffix(b"/*").is_some_and(|t| t.eq_ignore_ascii_case(wanted_type))
        })
    })
}

pub(crate) async fn read_body(headers: &HeaderMap, body: Body, max: usize) -> Result<Bytes, Error> {
    let declared =
        headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max as u64) {
        return Err(Error::BodyTooLarge { max });
    }
    match http_body_util::Limited::new(body, max).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() => {
            Err(Error::BodyTooLarge { max })
        }
        Err(e) => Err(Error::BodyRead(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(name: HeaderName, v: &'static str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(name, HeaderValue::from_static(v));
        h
    }

    #[test]
    fn accept_matching() {
        let h = with(header::ACCEPT, "application/json, text/event-stream");
        assert!(accepts(&h, "application/json") && accepts(&h, "text/event-stream"));
        let h = with(header::ACCEPT, "*/*");
        assert!(accepts(&h, "text/event-stream"));
        let h = with(header::ACCEPT, "text/*;q=0.5");
        assert!(accepts(&h, "text/event-stream") && !accepts(&h, "application/json"));
        assert!(!accepts(&HeaderMap::new(), "application/json"));
        let h = with(header::ACCEPT, "Application/JSON ; q=1,TEXT/Event-Stream");
        assert!(accepts(&h, "application/json") && accepts(&h, "text/event-stream"));
        let h = with(header::ACCEPT, "application/jsonx, text/event-streams");
        assert!(!accepts(&h, "application/json") && !accepts(&h, "text/event-stream"));
        // Both, as a POST needs them: each admitted by any range, in any header line.
        let both = |h: &HeaderMap| accepts(h, "application/json") && accepts(h, "text/event-stream");
        assert!(both(&with(header::ACCEPT, "text/event-stream, application/json")));
        assert!(both(&with(header::ACCEPT, "*/*")));
        assert!(!both(&with(header::ACCEPT, "text/*, application/xml")));
        let mut h = with(header::ACCEPT, "application/json");
        h.append(header::ACCEPT, HeaderValue::from_static("text/event-stream"));
        assert!(both(&h));
        assert!(!both(&HeaderMap::new()));
    }

    #[test]
    fn content_type_with_parameters() {
        assert!(is_json(&with(header::CONTENT_TYPE, "application/json; charset=utf-8")));
        assert!(!is_json(&with(header::CONTENT_TYPE, "text/plain")));
        assert!(!is_json(&HeaderMap::new()));
    }

    #[test]
    fn protocol_versions() {
        assert_eq!(protocol_version(&HeaderMap::new()).unwrap(), None);
        assert_eq!(
            protocol_version(&with(PROTOCOL_VERSION, "2025-06-18")).unwrap(),
            Some(Revision::V2025_06_18)
        );
        assert!(matches!(
            protocol_version(&with(PROTOCOL_VERSION, "2024-01-01")),
            Err(Error::UnsupportedVersion(_))
        ));
    }
}
