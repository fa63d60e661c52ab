//! A TCP relay between a node and its database that a test partitions, in the two ways a
//! network fails: [`Relay::cut`] resets every connection through it and refuses new ones (a
//! partition the node hears about at once); [`Relay::hold`] forwards nothing more in either
//! direction but keeps every connection open, and accepts new ones that go nowhere (packets
//! dropped silently: the node only learns from its own timeouts).

use tokio::sync::watch;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Pass,
    Hold,
    Cut,
}

pub struct Relay {
    pub port: u16,
    mode: watch::Sender<Mode>,
}

impl Relay {
    pub async fn start(upstream: u16) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (mode, _) = watch::channel(Mode::Pass);
        let watched = mode.clone();
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let mut mode = watched.subscribe();
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
                    }
                    // Held: both sockets stay open and silent until the relay is cut.
                    let _ = mode.wait_for(|m| *m == Mode::Cut).await;
                });
            }
        });
        Self { port, mode }
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
