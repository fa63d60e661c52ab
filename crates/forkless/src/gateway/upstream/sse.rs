//! The upstream's SSE answers read as events: each one's id and message, the stream's end
//! or break, and a silence taken as a break.

use std::time::Duration;

use futures::StreamExt as _;
use reqwest::header::CONTENT_TYPE;
use serde_json::Value;
use sse_stream::SseByteStream;

pub(crate) fn is_sse(response: &reqwest::Response) -> bool {
    response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("text/event-stream"))
}

/// One SSE event of the upstream: its id, and its message if it carries one (a priming
/// event carries only an id).
pub(crate) struct Event {
    pub(crate) id: Option<String>,
    pub(crate) message: Option<Value>,
}

/// The events of an SSE stream, until it ends or breaks (`Err` with why). With `idle`, a
/// stream that sends nothing (not even a keep-alive) for that long is broken.
pub(crate) fn events(
    response: reqwest::Response,
    idle: Option<Duration>,
) -> impl futures::Stream<Item = Result<Event, String>> {
    let bytes = futures::stream::unfold(response.bytes_stream(), move |mut body| async move {
        let next: Option<Result<bytes::Bytes, std::io::Error>> = match idle {
            None => body.next().await.map(|r| r.map_err(std::io::Error::other)),
            Some(idle) => match tokio::time::timeout(idle, body.next()).await {
                Ok(next) => next.map(|r| r.map_err(std::io::Error::other)),
                Err(_) => Some(Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "silent for longer than --upstream-timeout",
                ))),
            },
        };
        Some((next?, body))
    });
    SseByteStream::new(bytes).filter_map(|event| async move {
        let sse = match event {
            Err(e) => return Some(Err(format!("the stream broke: {e}"))),
            Ok(sse) => sse,
        };
        let message = match sse.data.filter(|d| !d.trim().is_empty()) {
            None => None,
            Some(data) => match serde_json::from_str::<Value>(&data) {
                Ok(message) => Some(message),
                Err(e) => {
                    tracing::warn!(error = %e, "upstream SSE event that is not JSON, skipped");
                    None
                }
            },
        };
        (sse.id.is_some() || message.is_some()).then_some(Ok(Event { id: sse.id, message }))
    })
}
