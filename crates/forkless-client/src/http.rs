//! The HTTP edge: header names, reading a response head into the state machine's terms, and
//! the SSE body reader with an idle timeout.
//!
//! Owns nothing about sessions or streams; `client.rs` decides what to send and `resume.rs`
//! what the answers mean.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures::Stream;
use reqwest::Response;
use reqwest::header::{CONTENT_TYPE, HeaderMap};
use tokio::time::{Instant, Sleep};

use crate::error::Error;
use crate::resume::ResponseHead;

/// `Mcp-Session-Id`.
pub const SESSION_ID: &str = "mcp-session-id";
/// `MCP-Protocol-Version`.
pub const PROTOCOL_VERSION: &str = "mcp-protocol-version";
/// `Mcp-Stream-Id` (request: the resumption token; response: the stream carried).
pub const STREAM_ID: &str = "mcp-stream-id";
/// `Mcp-Stream-Resumed`.
pub const STREAM_RESUMED: &str = "mcp-stream-resumed";
/// `Mcp-Stream-Grace-Ms`.
pub const STREAM_GRACE_MS: &str = "mcp-stream-grace-ms";
/// `Last-Event-ID`.
pub const LAST_EVENT_ID: &str = "last-event-id";

/// The `Accept` of a POST: both answers must be supported.
pub(crate) const ACCEPT_POST: &str = "application/json, text/event-stream";
/// The `Accept` of a GET.
pub(crate) const ACCEPT_SSE: &str = "text/event-stream";

/// The kind of a successful response body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BodyKind {
    Json,
    Sse,
    Other,
}

pub(crate) fn body_kind(headers: &HeaderMap) -> BodyKind {
    let ct = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default();
    let essence = ct.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    match essence.as_str() {
        "text/event-stream" => BodyKind::Sse,
        "application/json" => BodyKind::Json,
        _ => BodyKind::Other,
    }
}

pub(crate) fn header(headers: &HeaderMap, name: &str) -> Option<String> {
    headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned)
}

pub(crate) fn response_head(headers: &HeaderMap) -> ResponseHead {
    ResponseHead {
        stream_id: header(headers, STREAM_ID),
        resumed: header(headers, STREAM_RESUMED),
        grace_ms: header(headers, STREAM_GRACE_MS),
    }
}

/// Read a failed response's body (bounded) for the error message.
pub(crate) async fn error_body(resp: Response) -> String {
    const MAX: usize = 2048;
    match resp.bytes().await {
        Ok(b) => String::from_utf8_lossy(&b[..b.len().min(MAX)]).into_owned(),
        Err(e) => format!("<unreadable body: {e}>"),
    }
}

/// Turn a non-success status into the crate's error, reading `data.reason` from a 404.
pub(crate) async fn status_error(resp: Response) -> Error {
    let status = resp.status().as_u16();
    let body = error_body(resp).await;
    match status {
        404 => Error::SessionEnded { reason: crate::jsonrpc::end_reason(&body) },
        _ => Error::Status { status, body },
    }
}

/// The body of an SSE response as a byte stream that fails when nothing (not even a keep-alive
/// comment) arrives for `idle`: a connection that went silent is treated as lost, so a
/// half-open TCP connection cannot stall a stream forever.
pub(crate) struct IdleGuarded<S> {
    inner: S,
    /// The allowed silence and its timer; `None` disables the check.
    idle: Option<(Duration, Pin<Box<Sleep>>)>,
}

impl<S> IdleGuarded<S> {
    pub(crate) fn new(inner: S, idle: Option<Duration>) -> Self {
        Self { inner, idle: idle.map(|d| (d, Box::pin(tokio::time::sleep(d)))) }
    }
}

impl<S> Stream for IdleGuarded<S>
where
    S: Stream<Item = reqwest::Result<Bytes>> + Unpin,
{
    type Item = io::Result<Bytes>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        match Pin::new(&mut self.inner).poll_next(cx) {
            Poll::Ready(item) => {
                if let Some((idle, timer)) = &mut self.idle {
                    timer.as_mut().reset(Instant::now() + *idle);
                }
                Poll::Ready(item.map(|r| r.map_err(io::Error::other)))
            }
            Poll::Pending => {
                let Some((idle, timer)) = &mut self.idle else { return Poll::Pending };
                if timer.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                let why = format!("no bytes (not even a keep-alive) for {idle:?}");
                Poll::Ready(Some(Err(io::Error::new(io::ErrorKind::TimedOut, why))))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resume::{Step, StreamTracker};
    use crate::stats::StreamStats;
    use forkless_core::{SeededEntropy, StreamId};
    use futures::StreamExt;
    use sse_stream::SseByteStream;

    /// Decode `chunks` with sse-stream and run them through a tracker: the pairing the stream
    /// driver uses, minus the network.
    fn decode(chunks: &[&str], stream: StreamId) -> (Vec<Step>, StreamStats) {
        let owned: Vec<io::Result<Bytes>> =
            chunks.iter().map(|c| Ok(Bytes::copy_from_slice(c.as_bytes()))).collect();
        let mut events = SseByteStream::new(futures::stream::iter(owned));
        let mut tracker = StreamTracker::new(Duration::from_secs(30));
        let mut stats = StreamStats::default();
        let head = ResponseHead {
            stream_id: Some(stream.to_string()),
            resumed: Some("false".into()),
            grace_ms: Some("1000".into()),
        };
        tracker.on_head(&head, &mut stats).unwrap();
        let steps = futures::executor::block_on(async {
            let mut out = Vec::new();
            while let Some(sse) = events.next().await {
                out.push(tracker.on_event(&sse.unwrap(), &mut stats).unwrap());
            }
            out
        });
        (steps, stats)
    }

    #[test]
    fn id_only_priming_event_survives_parsing_and_fragmentation() {
        let s = StreamId::generate(&mut SeededEntropy::new(1));
        let body = format!(
            "id: {s}.0\nretry: 1500\ndata:\n\n: keep-alive\n\nid: {s}.1\ndata: {{\"a\":1}}\n\nid: {s}.2\r\ndata: {{\"b\":\r\ndata: 2}}\r\n\r\n"
        );
        // every possible split point of the body into two chunks gives the same result
        for cut in 0..body.len() {
            let (steps, stats) = decode(&[&body[..cut], &body[cut..]], s);
            assert_eq!(
                steps,
                vec![Step::Nothing, Step::Deliver("{\"a\":1}".into()), Step::Deliver("{\"b\":\n2}".into())],
                "split at {cut}"
            );
            assert_eq!(stats.events_delivered, 2);
        }
    }

    #[test]
    fn an_incomplete_final_event_is_not_delivered() {
        let s = StreamId::generate(&mut SeededEntropy::new(2));
        let body = format!("id: {s}.0\ndata:\n\nid: {s}.1\ndata: {{\"a\":1}}\n\nid: {s}.2\ndata: {{\"cut");
        let (steps, _) = decode(&[&body], s);
        assert_eq!(steps, vec![Step::Nothing, Step::Deliver("{\"a\":1}".into())]);
    }

    #[test]
    fn content_types() {
        let mut h = HeaderMap::new();
        h.insert(CONTENT_TYPE, "text/event-stream; charset=utf-8".parse().unwrap());
        assert_eq!(body_kind(&h), BodyKind::Sse);
        h.insert(CONTENT_TYPE, "Application/JSON".parse().unwrap());
        assert_eq!(body_kind(&h), BodyKind::Json);
        h.remove(CONTENT_TYPE);
        assert_eq!(body_kind(&h), BodyKind::Other);
    }
}
