//! A TCP relay between a node and its database that a test partitions, in the two ways a
//! network fails: [`Relay::cut`] resets every connection through it and refuses new ones (a
//! partition the node hears about at once); [`Relay::hold`] forwards nothing more in either
//! direction but keeps every connection open, and accepts new ones that go nowhere (packets
//! dropped silently: the node only learns from its own timeouts). [`Relay::reset`] and
//! [`Relay::stall`] do the same to the connections open now only, and let new ones through
//! (a link that broke once, for a caller that reconnects).

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
}

impl Relay {
    pub async fn start(upstream: u16) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (mode, _) = watch::channel(Mode::Pass);
        let (breaks, _) = watch::channel((0, Break::Reset));
        let watched = mode.clone();
        let broken = breaks.clone();
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
                tokio::spawn(async move {
                    let Ok(mut outbound) = tokio::net::TcpStream::connect(("127.0.0.1", upstream)).await
                    else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
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
        Self { port, mode, breaks }
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
