//! The hop between nodes: a request for a session owned by another node, sent to that node's
//! advertised address over a pooled HTTP/1.1 connection, and its answer (an SSE stream
//! included) streamed back to the client as it comes.
//!
//! This module owns the bytes of the hop: which headers travel (hop-by-hop ones do not), the
//! mark that stops a second hop ([`FORWARDED`]), the connect and head timeouts, and what a
//! failed hop is called ([`OwnerUnavailable`]). Where a request goes is [`super::route`]'s.

use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use forkless_store::Advertised;
use http::request::Parts;
use http::{HeaderMap, HeaderName, HeaderValue, Uri, header};
use http_body_util::Full;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use crate::error::OwnerUnavailable;

/// Marks a request one node sent to another; such a request is never sent on again.
pub(crate) const FORWARDED: HeaderName = HeaderName::from_static("forkless-forwarded");

/// Headers that belong to one connection, not to the request (RFC 9110 section 7.6.1), and
/// the ones the hop sets itself.
const NOT_FORWARDED: [HeaderName; 9] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
    header::HOST,
];

/// Sends requests to other nodes. Cheap to share; its connections are pooled per owner.
#[derive(Debug)]
pub(crate) struct Forwarder {
    client: Client<HttpConnector, Full<Bytes>>,
    head_timeout: Duration,
}

impl Forwarder {
    pub(crate) fn new(connect_timeout: Duration, head_timeout: Duration) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(connect_timeout));
        connector.set_nodelay(true);
        let client = Client::builder(TokioExecutor::new()).build(connector);
        Self { client, head_timeout }
    }

    /// Send the request (`parts`, its whole `body`) to the node at `base`: the owner's
    /// answer, streaming, or why it could not be had.
    pub(crate) async fn send(
        &self,
        parts: &Parts,
        body: Bytes,
        base: &Advertised,
    ) -> Result<Response, OwnerUnavailable> {
        let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
        let uri: Uri = format!("{}{path}", base.as_str().trim_end_matches('/'))
            .parse()
            .map_err(|_| OwnerUnavailable::Unreachable)?;
        let mut out = http::Request::builder().method(parts.method.clone()).uri(uri);
        if let Some(headers) = out.headers_mut() {
            copy_headers(&parts.headers, headers);
            headers.insert(FORWARDED, HeaderValue::from_static("1"));
        }
        let out = out.body(Full::new(body)).map_err(|_| OwnerUnavailable::Unreachable)?;
        let answer = match tokio::time::timeout(self.head_timeout, self.client.request(out)).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(e)) => {
                tracing::debug!(error = %e, %base, "hop to the owner failed");
                return Err(OwnerUnavailable::Unreachable);
            }
            Err(_) => return Err(OwnerUnavailable::Timeout),
        };
        let (mut head, incoming) = answer.into_parts();
        for name in &NOT_FORWARDED {
            head.headers.remove(name);
        }
        Ok(Response::from_parts(head, Body::new(incoming)))
    }
}

/// Every header of `from` that belongs to the request, into `to`.
fn copy_headers(from: &HeaderMap, to: &mut HeaderMap) {
    let named_by_connection: Vec<String> = from
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(',').map(|t| t.trim().to_ascii_lowercase()))
        .collect();
    for (name, value) in from {
        if NOT_FORWARDED.contains(name) || named_by_connection.iter().any(|n| n == name.as_str()) {
            continue;
        }
        to.append(name.clone(), value.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_by_hop_headers_stay_behind() {
        let mut from = HeaderMap::new();
        from.insert(header::CONNECTION, HeaderValue::from_static("keep-alive, x-private"));
        from.insert("x-private", HeaderValue::from_static("secret"));
        from.insert(header::HOST, HeaderValue::from_static("lb:80"));
        from.insert("mcp-session-id", HeaderValue::from_static("abc"));
        from.append(header::ACCEPT, HeaderValue::from_static("application/json"));
        from.append(header::ACCEPT, HeaderValue::from_static("text/event-stream"));
        let mut to = HeaderMap::new();
        copy_headers(&from, &mut to);
        assert!(to.get(header::CONNECTION).is_none() && to.get("x-private").is_none());
        assert!(to.get(header::HOST).is_none());
        assert_eq!(to.get("mcp-session-id").unwrap(), "abc");
        assert_eq!(to.get_all(header::ACCEPT).iter().count(), 2);
    }
}
