//! A connection's socket as the listener sees it: when a request's head starts arriving (for
//! `header_read_timeout`), and hyper's own rejections given a JSON-RPC body.
//!
//! When hyper cannot parse a request (control
//! bytes in a header, a malformed request line, a head beyond its buffer) it answers by
//! itself, before any router runs, with an empty-bodied `400` or `431` and closes the
//! connection. This wrapper around the connection's socket recognises exactly that response
//! as hyper writes it (an error status, `content-length: 0`, `connection: close`, no
//! `content-type`, nothing after the head; the router never answers an error that way) and
//! writes the same status with the JSON-RPC error body every other refusal carries.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use super::{Conn, Registry};
use crate::error::INVALID_REQUEST;

/// The socket (a TCP stream, or a TLS stream over one), noting read activity and rewriting
/// hyper's empty error responses.
#[derive(Debug)]
pub(crate) struct Socket<IO = TcpStream> {
    inner: IO,
    conn: Arc<Conn>,
    registry: Arc<Registry>,
    /// A rewritten response being written, and how much of it is out.
    pending: Option<(Vec<u8>, usize)>,
}

impl<IO> Socket<IO> {
    pub(super) fn new(inner: IO, conn: Arc<Conn>, registry: Arc<Registry>) -> Self {
        Self { inner, conn, registry, pending: None }
    }
}

/// The replacement for `head` if it is one of hyper's own empty error responses.
fn rewrite(head: &[u8]) -> Option<Vec<u8>> {
    // Checked on every write, so the common case (a success head, a body chunk) is turned
    // away by its first bytes.
    let error_status = head.starts_with(b"HTTP/1.1 4") || head.starts_with(b"HTTP/1.1 5");
    if !error_status || head.len() > 512 || !head.ends_with(b"\r\n\r\n") {
        return None;
    }
    let text = std::str::from_utf8(head).ok()?;
    let rest = text.strip_prefix("HTTP/1.1 ")?;
    let status: u16 = rest.get(..3)?.parse().ok()?;
    let lower = text.to_ascii_lowercase();
    let hyper_own = (400..600).contains(&status)
        && text.ends_with("\r\n\r\n")
        && lower.contains("\r\ncontent-length: 0\r\n")
        && lower.contains("\r\nconnection: close\r\n")
        && !lower.contains("\r\ncontent-type:");
    if !hyper_own {
        return None;
    }
    let (reason, message) = match status {
        431 => ("headers_too_large", "the request's headers are larger than the server accepts"),
        _ => ("request_malformed", "the request is not valid HTTP/1.1"),
    };
    // The shape of every refusal's body (`crate::error::Error::body`).
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "error": { "code": INVALID_REQUEST, "message": message, "data": { "reason": reason } },
    })
    .to_string();
    let status_line = text.split("\r\n").next()?;
    Some(
        format!(
            "{status_line}\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes(),
    )
}

impl<IO: AsyncRead + Unpin> AsyncRead for Socket<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let out = Pin::new(&mut self.inner).poll_read(cx, buf);
        // Bytes while nothing is in flight are the start of a request's head.
        if buf.filled().len() > before {
            self.conn.head_arriving(&self.registry);
        }
        out
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Socket<IO> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(cx, &[io::IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if this.pending.is_none() {
            // hyper writes an error response's head as one slice, with nothing after it.
            let first = bufs.iter().find(|b| !b.is_empty()).map_or(&[][..], |b| &**b);
            match rewrite(first) {
                Some(replacement) => this.pending = Some((replacement, 0)),
                None => return Pin::new(&mut this.inner).poll_write_vectored(cx, bufs),
            }
        }
        // Write the replacement out; hyper's bytes count as written once it all is.
        let total = bufs.iter().map(|b| b.len()).sum();
        while let Some((bytes, done)) = &mut this.pending {
            if *done == bytes.len() {
                this.pending = None;
                break;
            }
            match Pin::new(&mut this.inner).poll_write(cx, &bytes[*done..]) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => *done += n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        Poll::Ready(Ok(total))
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::rewrite;

    #[test]
    fn only_hypers_own_empty_error_responses_are_rewritten() {
        let hyper = b"HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\ndate: Tue, 01 Dec 2026 14:42:03 GMT\r\n\r\n";
        let out = String::from_utf8(rewrite(hyper).expect("rewritten")).unwrap();
        assert!(out.starts_with("HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\n"), "{out}");
        assert!(out.contains(r#""reason":"request_malformed""#), "{out}");
        let big =
            b"HTTP/1.1 431 Request Header Fields Too Large\r\nconnection: close\r\ncontent-length: 0\r\n\r\n";
        assert!(String::from_utf8(rewrite(big).unwrap()).unwrap().contains("headers_too_large"));
        for ours in [
            &b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"[..],
            b"HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: 10\r\n\r\n",
            b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: 0\r\n\r\n",
            b"HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\r\n{}",
            b"event: message\r\n",
        ] {
            assert!(rewrite(ours).is_none(), "{}", String::from_utf8_lossy(ours));
        }
    }
}
