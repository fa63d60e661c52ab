//! A fault-injecting TCP proxy for HTTP/1.1 tests: it forwards bytes between the client and an
//! upstream server and, on request, cuts a response mid-event, holds a connection half-open, or
//! strips headers from resuming requests.
//!
//! It understands just enough HTTP/1.1 to find request heads (for matching faults and stripping
//! headers) and `Content-Length` bodies; a chunked request body switches that connection to
//! plain pass-through. Responses are never parsed, only scanned for a marker: with no
//! pipelining, every response byte after a request head belongs to that request's response.
//! Reusable by end-to-end tests against `forkless serve`.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// Which requests a fault applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Match {
    /// Any request.
    Any,
    /// POST requests.
    Post,
    /// GET requests without `Last-Event-ID`.
    Open,
    /// GET requests with `Last-Event-ID` (resumes).
    Resume,
}

/// What happens to the matched request's response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Forward until `marker` has passed `count` times, then `extra` more bytes, then close
    /// both sockets.
    CutAfter { marker: Vec<u8>, count: usize, extra: usize },
    /// Same trigger, then forward nothing more but keep both sockets open (a peer that
    /// vanished without a FIN), until [`Proxy::release_held`] or the proxy is dropped.
    HoldAfter { marker: Vec<u8>, count: usize, extra: usize },
}

impl Action {
    /// Cut inside the `n`th SSE event (counting the priming event): after the `id: ` that
    /// starts its line and `extra` bytes more, so the client holds `n - 1` whole events and a
    /// fragment. (Matching at a line start keeps `Mcp-Stream-Id: ` headers from counting.)
    pub fn cut_in_event(n: usize, extra: usize) -> Self {
        Self::CutAfter { marker: b"\nid: ".to_vec(), count: n, extra }
    }

    /// Hold the connection half-open inside the `n`th SSE event.
    pub fn hold_in_event(n: usize, extra: usize) -> Self {
        Self::HoldAfter { marker: b"\nid: ".to_vec(), count: n, extra }
    }

    fn trigger(&self) -> (&[u8], usize, usize) {
        match self {
            Self::CutAfter { marker, count, extra } | Self::HoldAfter { marker, count, extra } => {
                (marker, *count, *extra)
            }
        }
    }
}

#[derive(Default)]
struct Control {
    /// Pending faults, with an id. A request arms a copy of the first that matches; the fault
    /// is used up only when its trigger is reached, so a response that ends before the
    /// trigger (an `initialize` answered with JSON, say) leaves it for the next request.
    faults: VecDeque<(u64, Match, Action)>,
    next_fault: u64,
    strip_on_resume: Vec<String>,
    live: Vec<CancellationToken>,
}

/// Counters of what the proxy did.
#[derive(Debug, Default)]
pub struct ProxyCounters {
    pub connections: AtomicU64,
    pub requests: AtomicU64,
    pub cuts: AtomicU64,
    pub holds: AtomicU64,
    pub headers_stripped: AtomicU64,
}

/// A running proxy; dropping it stops accepting and closes held connections.
pub struct Proxy {
    pub addr: SocketAddr,
    control: Arc<Mutex<Control>>,
    pub counters: Arc<ProxyCounters>,
    held: CancellationToken,
    shutdown: CancellationToken,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shutdown.cancel();
        self.held.cancel();
    }
}

impl Proxy {
    /// Listen on 127.0.0.1 and forward to `upstream`.
    pub async fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy addr");
        let control = Arc::new(Mutex::new(Control::default()));
        let counters = Arc::new(ProxyCounters::default());
        let held = CancellationToken::new();
        let shutdown = CancellationToken::new();
        let (c, n, h, s) = (control.clone(), counters.clone(), held.clone(), shutdown.clone());
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    a = listener.accept() => a,
                    () = s.cancelled() => return,
                };
                let Ok((client, _)) = accepted else { continue };
                n.connections.fetch_add(1, Ordering::Relaxed);
                let kill = s.child_token();
                let mut ctl = lock(&c);
                ctl.live.retain(|k| !k.is_cancelled());
                ctl.live.push(kill.clone());
                drop(ctl);
                tokio::spawn(serve(client, upstream, c.clone(), n.clone(), h.clone(), kill));
            }
        });
        Self { addr, control, counters, held, shutdown }
    }

    /// `http://<proxy>/<path>`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}/{}", self.addr, path.trim_start_matches('/'))
    }

    /// Apply `action` to the next response, of a request matching `on`, that reaches the
    /// action's trigger (faults are used once, in order).
    pub fn fault(&self, on: Match, action: Action) {
        let mut c = lock(&self.control);
        c.next_fault += 1;
        let id = c.next_fault;
        c.faults.push_back((id, on, action));
    }

    /// Remove these headers from every resuming GET (`Last-Event-ID` present), like the
    /// library in the seed that dropped a custom header on retry.
    pub fn strip_on_resume(&self, header: &str) {
        lock(&self.control).strip_on_resume.push(header.to_ascii_lowercase());
    }

    /// Close every connection now.
    pub fn cut_all(&self) {
        let live = std::mem::take(&mut lock(&self.control).live);
        for k in live {
            k.cancel();
        }
    }

    /// Close the connections held half-open by [`Action::HoldAfter`].
    pub fn release_held(&self) {
        self.held.cancel();
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The fault armed on one connection for its current request (request number on the
/// connection, fault id, action), shared by the connection's two directions.
type Armed = Arc<Mutex<Option<(u64, u64, Action)>>>;

async fn serve(
    client: TcpStream,
    upstream: SocketAddr,
    control: Arc<Mutex<Control>>,
    counters: Arc<ProxyCounters>,
    held: CancellationToken,
    kill: CancellationToken,
) {
    let Ok(server) = TcpStream::connect(upstream).await else { return };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (cr, cw) = client.into_split();
    let (sr, sw) = server.into_split();
    let armed: Armed = Arc::new(Mutex::new(None));
    let up = requests(cr, sw, control.clone(), counters.clone(), armed.clone());
    let down = responses(sr, cw, control, counters, armed, held, kill.clone());
    tokio::select! {
        () = kill.cancelled() => {}
        _ = async { tokio::join!(up, down) } => {}
    }
    // Dropping the halves closes both sockets.
    kill.cancel();
}

/// Client → server: forward request heads (possibly edited) and bodies.
async fn requests(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    control: Arc<Mutex<Control>>,
    counters: Arc<ProxyCounters>,
    armed: Armed,
) {
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 16 * 1024];
    let mut raw = false;
    let mut request_no = 0u64;
    loop {
        if raw {
            match from.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if to.write_all(&chunk[..n]).await.is_err() {
                        return;
                    }
                }
            }
            continue;
        }
        // Read until a complete head is buffered.
        let head_end = loop {
            if let Some(p) = find(&buf, b"\r\n\r\n") {
                break Some(p + 4);
            }
            match from.read(&mut chunk).await {
                Ok(0) | Err(_) => break None,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let Some(head_end) = head_end else { break };
        let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
        buf.drain(..head_end);
        counters.requests.fetch_add(1, Ordering::Relaxed);
        request_no += 1;
        let (edited, body_len, chunked) = edit_head(&head, request_no, &control, &counters, &armed);
        if to.write_all(edited.as_bytes()).await.is_err() {
            return;
        }
        if chunked {
            if to.write_all(&buf).await.is_err() {
                return;
            }
            buf.clear();
            raw = true;
            continue;
        }
        // Forward exactly the body.
        let mut remaining = body_len;
        while remaining > 0 {
            if buf.is_empty() {
                match from.read(&mut chunk).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
            let take = remaining.min(buf.len());
            if to.write_all(&buf[..take]).await.is_err() {
                return;
            }
            buf.drain(..take);
            remaining -= take;
        }
    }
    let _ = to.shutdown().await;
}

/// Apply header stripping and arm a matching fault. Returns the head to send, its
/// `Content-Length`, and whether the body is chunked.
fn edit_head(
    head: &str,
    request_no: u64,
    control: &Mutex<Control>,
    counters: &ProxyCounters,
    armed: &Armed,
) -> (String, usize, bool) {
    let mut lines: Vec<&str> = head.trim_end_matches("\r\n").split("\r\n").collect();
    let method = lines.first().and_then(|l| l.split(' ').next()).unwrap_or_default().to_owned();
    let has = |lines: &[&str], name: &str| {
        lines.iter().skip(1).any(|l| l.split(':').next().is_some_and(|n| n.trim().eq_ignore_ascii_case(name)))
    };
    let resume = has(&lines, "last-event-id");
    let c = lock(control);
    if resume && !c.strip_on_resume.is_empty() {
        let before = lines.len();
        lines.retain(|l| {
            let name = l.split(':').next().unwrap_or_default().trim().to_ascii_lowercase();
            !c.strip_on_resume.contains(&name)
        });
        counters.headers_stripped.fetch_add((before - lines.len()) as u64, Ordering::Relaxed);
    }
    let kind = match (method.as_str(), resume) {
        ("POST", _) => Match::Post,
        ("GET", true) => Match::Resume,
        ("GET", false) => Match::Open,
        _ => Match::Any,
    };
    let first = c.faults.iter().find(|(_, on, _)| *on == Match::Any || *on == kind);
    *lock(armed) = first.map(|(id, _, action)| (request_no, *id, action.clone()));
    drop(c);
    let mut body_len = 0;
    let mut chunked = false;
    for l in lines.iter().skip(1) {
        if let Some((name, value)) = l.split_once(':') {
            let name = name.trim();
            if name.eq_ignore_ascii_case("content-length") {
                body_len = value.trim().parse().unwrap_or(0);
            } else if name.eq_ignore_ascii_case("transfer-encoding")
                && value.to_ascii_lowercase().contains("chunked")
            {
                chunked = true;
            }
        }
    }
    let mut out = lines.join("\r\n");
    out.push_str("\r\n\r\n");
    (out, body_len, chunked)
}

/// Server → client: forward, watching for the armed fault's trigger.
async fn responses(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    control: Arc<Mutex<Control>>,
    counters: Arc<ProxyCounters>,
    armed: Armed,
    held: CancellationToken,
    kill: CancellationToken,
) {
    let mut chunk = vec![0u8; 16 * 1024];
    // Per armed fault: occurrences seen and the tail of the previous read (for markers split
    // across reads).
    let mut seen = 0usize;
    let mut tail: Vec<u8> = Vec::new();
    let mut current: Option<(u64, u64, Action)> = None;
    loop {
        let n = match from.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let data = &chunk[..n];
        let now = lock(&armed).clone();
        if now != current {
            current = now;
            seen = 0;
            tail.clear();
        }
        let Some((_, fault, action)) = current.clone() else {
            if to.write_all(data).await.is_err() {
                return;
            }
            continue;
        };
        let (marker, count, extra) = action.trigger();
        // Scan tail+data for marker ends; positions are relative to `data`.
        let mut window = tail.clone();
        window.extend_from_slice(data);
        let mut cut_at = None;
        let mut from_pos = 0;
        while let Some(p) = find(&window[from_pos..], marker) {
            let end = from_pos + p + marker.len();
            from_pos = from_pos + p + 1;
            if end <= tail.len() {
                continue; // counted in the previous read
            }
            seen += 1;
            if seen == count {
                cut_at = Some(end - tail.len() + extra);
                break;
            }
        }
        let keep = marker.len().saturating_sub(1).min(window.len());
        tail = window[window.len() - keep..].to_vec();
        match cut_at {
            None => {
                if to.write_all(data).await.is_err() {
                    return;
                }
            }
            Some(at) => {
                // Use the fault up; if another connection already did, let this one pass.
                let used = {
                    let mut c = lock(&control);
                    let p = c.faults.iter().position(|(id, _, _)| *id == fault);
                    p.and_then(|p| c.faults.remove(p)).is_some()
                };
                if !used {
                    *lock(&armed) = None;
                    if to.write_all(data).await.is_err() {
                        return;
                    }
                    continue;
                }
                let at = at.min(data.len());
                let _ = to.write_all(&data[..at]).await;
                let _ = to.flush().await;
                *lock(&armed) = None;
                match action {
                    Action::CutAfter { .. } => {
                        counters.cuts.fetch_add(1, Ordering::Relaxed);
                        // Close both sockets, both directions.
                        kill.cancel();
                        return;
                    }
                    Action::HoldAfter { .. } => {
                        counters.holds.fetch_add(1, Ordering::Relaxed);
                        held.cancelled().await;
                        return;
                    }
                }
            }
        }
    }
    let _ = to.shutdown().await;
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || hay.len() < needle.len() {
        return None;
    }
    hay.windows(needle.len()).position(|w| w == needle)
}
