//! A TCP relay between a node and its database that a test partitions, in the two ways a
//! network fails: [`Relay::cut`] resets every connection through it and refuses new ones (a
//! partition the node hears about at once); [`Relay::hold`] forwards nothing more in either
//! direction but keeps every connection open, and accepts new ones that go nowhere (packets
//! dropped silently: the node only learns from its own timeouts). [`Relay::reset`] and
//! [`Relay::stall`] do the same to the connections open now only, and let new ones through
//! (a link that broke once, for a caller that reconnects). [`Relay::reset_on`] resets them at
//! a chosen point of what the server sends: the moment given bytes arrive from it, before they
//! are passed on, so the cut lands inside the response that carries them (never after it
//! ended, when it would only kill connections idle in the caller's pool).

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::watch;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Pass,
    Hold,
    Cut,
}

/// What happens to the connections open when a break is called.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Break {
    Reset,
    Stall,
}

pub struct Relay {
    pub port: u16,
    mode: watch::Sender<Mode>,
    /// Bumped by every break of the connections open then, with what befalls them.
    breaks: watch::Sender<(u64, Break)>,
    /// Byte strings that reset every connection the first time one arrives from the server.
    triggers: Triggers,
}

type Triggers = Arc<Mutex<Vec<Vec<u8>>>>;

impl Relay {
    pub async fn start(upstream: u16) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (mode, _) = watch::channel(Mode::Pass);
        let (breaks, _) = watch::channel((0, Break::Reset));
        let watched = mode.clone();
        let broken = breaks.clone();
        let triggers = Triggers::default();
        let armed = Arc::clone(&triggers);
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let mut mode = watched.subscribe();
                let mut breaks = broken.subscribe();
                let born = breaks.borrow_and_update().0;
                let now = *mode.borrow_and_update();
                match now {
                    Mode::Cut => continue, // dropped: refused
                    Mode::Hold => {
                        // Accepted, and never answered.
                        tokio::spawn(async move {
                            let _held = inbound;
                            let _ = mode.wait_for(|m| *m == Mode::Cut).await;
                        });
                        continue;
                    }
                    Mode::Pass => {}
                }
                let (triggers, trip) = (Arc::clone(&armed), broken.clone());
                tokio::spawn(async move {
                    let Ok(outbound) = tokio::net::TcpStream::connect(("127.0.0.1", upstream)).await else {
                        return;
                    };
                    let mut outbound = Tripwire { inner: outbound, triggers, breaks: trip };
                    tokio::select! {
                        copied = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {
                            if copied.is_err_and(|e| e.kind() == io::ErrorKind::ConnectionReset) {
                                return; // a tripwire (or a peer) reset it: both sockets closed.
                            }
                        }
                        _ = mode.wait_for(|m| *m != Mode::Pass) => {}
                        broke = breaks.wait_for(|(n, _)| *n > born) => {
                            if !matches!(broke.map(|b| b.1), Ok(Break::Stall)) {
                                return; // Reset: both sockets closed now.
                            }
                        }
                    }
                    // Held: both sockets stay open and silent until the relay is cut.
                    let _ = mode.wait_for(|m| *m == Mode::Cut).await;
                });
            }
        });
        Self { port, mode, breaks, triggers }
    }

    /// Reset every connection open when `needle` next arrives from the server; the bytes
    /// that carried it are not passed on (the caller gets them again only by resuming).
    /// Armed once per call; several may be armed at a time.
    pub fn reset_on(&self, needle: impl Into<Vec<u8>>) {
        self.triggers.lock().unwrap().push(needle.into());
    }

    /// Reset every connection open now; new ones pass.
    pub fn reset(&self) {
        self.breaks.send_modify(|b| *b = (b.0 + 1, Break::Reset));
    }

    /// Forward nothing more on every connection open now, keeping them open; new ones pass.
    pub fn stall(&self) {
        self.breaks.send_modify(|b| *b = (b.0 + 1, Break::Stall));
    }

    /// Reset every connection and refuse new ones.
    pub fn cut(&self) {
        self.mode.send_replace(Mode::Cut);
    }

    /// Forward nothing more, keeping every connection open.
    pub fn hold(&self) {
        self.mode.send_replace(Mode::Hold);
    }
}

/// The server's side of one relayed connection: a read that brings an armed needle resets
/// every connection instead of returning.
struct Tripwire {
    inner: tokio::net::TcpStream,
    triggers: Triggers,
    breaks: watch::Sender<(u64, Break)>,
}

impl AsyncRead for Tripwire {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        ready!(Pin::new(&mut self.inner).poll_read(cx, buf))?;
        let fresh = &buf.filled()[before..];
        let mut triggers = self.triggers.lock().unwrap();
        let hit = triggers.iter().position(|n| fresh.windows(n.len()).any(|w| w == n.as_slice()));
        if let Some(i) = hit {
            triggers.remove(i);
            drop(triggers);
            self.breaks.send_modify(|b| *b = (b.0 + 1, Break::Reset));
            return Poll::Ready(Err(io::Error::new(io::ErrorKind::ConnectionReset, "reset by the relay")));
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Tripwire {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, data)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
