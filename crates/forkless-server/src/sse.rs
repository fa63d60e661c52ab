//! The SSE wire encoding, in one place.
//!
//! This module owns how an SSE response's head, an event, a comment and a `retry:` field look
//! on the wire (WHATWG "server-sent events", and the stream headers of PROTOCOL section 3). It does not decide what to send. Payloads are serialized
//! JSON, which has no raw newlines, but `data` is still split on every line break so that no
//! payload can ever end an event early or smuggle in a field.

use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use forkless_core::{EventId, StreamId};
use http::{HeaderMap, HeaderName, HeaderValue, header};

use crate::headers::{STREAM_GRACE_MS, STREAM_ID, STREAM_RESUMED};

/// The stream a response serves, as its head names it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Served<'a> {
    pub(crate) stream: StreamId,
    pub(crate) resumed: bool,
    /// `Mcp-Stream-Grace-Ms`, the same on every SSE answer of a server.
    pub(crate) grace_ms: &'a HeaderValue,
}

/// The head of every SSE response: the content type, no caching or proxy buffering, and, for
/// a stream in the store, the stream it serves (`None`: a 2026-07-28 request's own stream,
/// which is nowhere else).
pub(crate) fn head(served: Option<Served<'_>>) -> HeaderMap {
    // Sized for these and what hyper adds, so the map never grows.
    let mut h = HeaderMap::with_capacity(8);
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(HeaderName::from_static("x-accel-buffering"), HeaderValue::from_static("no"));
    if let Some(served) = served {
        let id = HeaderValue::from_bytes(served.stream.wire().as_bytes())
            .unwrap_or_else(|_| HeaderValue::from_static("invalid"));
        h.insert(STREAM_ID, id);
        let resumed = if served.resumed { "true" } else { "false" };
        h.insert(STREAM_RESUMED, HeaderValue::from_static(resumed));
        h.insert(STREAM_GRACE_MS, served.grace_ms.clone());
    }
    h
}

/// One event: an optional `id:`, then `data` split into `data:` lines, then the blank line.
/// One allocation per event: the id is formatted in place, and the line split (a `Vec`) is
/// only done when the data has a line break, which serialized JSON never has.
pub(crate) fn event(id: Option<&EventId>, data: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(data.len() + 64);
    put_event(&mut out, id, data);
    out.freeze()
}

/// [`event`], appended to `out` (so that a batch of events becomes one write).
pub(crate) fn put_event(out: &mut BytesMut, id: Option<&EventId>, data: &[u8]) {
    if let Some(id) = id {
        put_id(out, id);
    }
    // `contains` on bytes is a word-at-a-time search, not a loop over each byte.
    if data.contains(&b'\n') || data.contains(&b'\r') {
        put_data(out, data);
    } else {
        out.put_slice(b"data: ");
        out.put_slice(data);
        out.put_u8(b'\n');
    }
    out.put_u8(b'\n');
}

/// The priming event of a new stream (PROTOCOL section 3): its id (`<stream>.0`), an empty
/// `data` field, and `retry:`; appended to `out`.
pub(crate) fn put_priming(out: &mut BytesMut, id: &EventId, retry: Duration) {
    put_id(out, id);
    put_retry(out, retry);
    out.put_slice(b"data: \n\n");
}

/// `id: <id>` and its line end.
fn put_id(out: &mut BytesMut, id: &EventId) {
    out.put_slice(b"id: ");
    out.put_slice(id.wire().as_bytes());
    out.put_u8(b'\n');
}

/// `retry: <ms>` and its line end.
fn put_retry(out: &mut BytesMut, retry: Duration) {
    out.put_slice(b"retry: ");
    out.put_slice(itoa::Buffer::new().format(millis(retry)).as_bytes());
    out.put_u8(b'\n');
}

/// A `retry:` field on its own (an event without data, which clients do not dispatch).
pub(crate) fn retry(retry: Duration) -> Bytes {
    let mut out = BytesMut::with_capacity(24);
    put_retry_alone(&mut out, retry);
    out.freeze()
}

/// [`retry`], appended to `out`.
pub(crate) fn put_retry_alone(out: &mut BytesMut, retry: Duration) {
    put_retry(out, retry);
    out.put_u8(b'\n');
}

/// A comment line (keep-alive); line breaks in `text` become separate comment lines.
pub(crate) fn comment(text: &str) -> Bytes {
    let mut out = BytesMut::new();
    for line in split_lines(text.as_bytes()) {
        out.put_slice(b": ");
        out.put_slice(line);
        out.put_u8(b'\n');
    }
    out.put_u8(b'\n');
    out.freeze()
}

fn put_data(out: &mut BytesMut, data: &[u8]) {
    for line in split_lines(data) {
        out.put_slice(b"data: ");
        out.put_slice(line);
        out.put_u8(b'\n');
    }
}

/// Split on CRLF, LF and CR (the three SSE line ends); an empty input is one empty line.
fn split_lines(data: &[u8]) -> Vec<&[u8]> {
    let mut lines = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < data.len() {
        match data[i] {
            b'\n' => {
                lines.push(&data[start..i]);
                start = i + 1;
            }
            b'\r' => {
                lines.push(&data[start..i]);
                if data.get(i + 1) == Some(&b'\n') {
                    i += 1;
                }
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    lines.push(&data[start..]);
    lines
}

fn millis(d: Duration) -> u128 {
    d.as_millis()
}

#[cfg(test)]
mod tests {
    use super::*;
    use forkless_core::{SeededEntropy, Seq, StreamId};

    fn id(seq: u64) -> EventId {
        EventId::new(StreamId::generate(&mut SeededEntropy::new(7)), Seq::new(seq))
    }

    #[test]
    fn event_with_id_and_json() {
        let e = id(41);
        assert_eq!(event(Some(&e), br#"{"a":1}"#), format!("id: {e}\ndata: {{\"a\":1}}\n\n"));
    }

    #[test]
    fn event_without_id() {
        assert_eq!(event(None, b"x"), "data: x\n\n");
    }

    #[test]
    fn multi_line_data_becomes_several_data_lines() {
        assert_eq!(event(None, b"a\nb\r\nc\rd"), "data: a\ndata: b\ndata: c\ndata: d\n\n");
        assert_eq!(event(None, b"a\n"), "data: a\ndata: \n\n");
    }

    #[test]
    fn priming_has_id_seq_zero_empty_data_and_retry() {
        let e = id(0);
        let mut out = BytesMut::new();
        put_priming(&mut out, &e, Duration::from_millis(1500));
        assert_eq!(out, format!("id: {e}\nretry: 1500\ndata: \n\n"));
        assert!(out.starts_with(format!("id: {}.0\n", e.stream).as_bytes()));
    }

    #[test]
    fn comments_and_retry() {
        assert_eq!(comment("keep-alive"), ": keep-alive\n\n");
        assert_eq!(comment("a\nb"), ": a\n: b\n\n");
        assert_eq!(retry(Duration::from_secs(2)), "retry: 2000\n\n");
    }

    #[test]
    fn empty_data_is_one_empty_data_line() {
        assert_eq!(event(None, b""), "data: \n\n");
    }
}
