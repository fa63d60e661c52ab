//! The session revisions (2025-03-26 to 2025-11-25) behind the bridge: one `forkless-client`
//! session, opened with the host's own `initialize`, whose streams go on only through a proven
//! continuation ([`Continuation::Proven`]): a request whose stream cannot be continued fails
//! with its id, and the host is told; nothing of a fork is passed on.
//!
//! It owns the session and its events, not the host's framing (`super::host`).

use forkless_client::{Client, ClientBuilder, ClientEvent, Continuation, Error as ClientError, StreamOrigin};
use std::time::Duration;

use futures::FutureExt as _;
use tokio::sync::{mpsc, oneshot};

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::host::Host;

/// One upstream session.
#[derive(Debug)]
pub(crate) struct Sessions {
    client: Client,
    host: Host,
    /// Stops the event pump (which holds the client and the host) when the bridge ends.
    stop: CancellationToken,
    /// Asks the pump to hand on everything queued so far (before a request's answer).
    flush: mpsc::UnboundedSender<oneshot::Sender<()>>,
}

impl Sessions {
    /// Open the session with the host's `initialize` params; its result is the host's answer.
    /// `ended` is cancelled when the server ends the session.
    pub(crate) async fn open(
        builder: ClientBuilder,
        host: &Host,
        init: &Value,
        ended: CancellationToken,
    ) -> Result<(Self, Value), ClientError> {
        let mut builder = builder.continuation(Continuation::Proven).handler(host.clone());
        if let Some(revision) =
            init.get("protocolVersion").and_then(Value::as_str).and_then(|v| v.parse().ok())
        {
            builder = builder.protocol_revision(revision);
        }
        if let Some(info) = init.get("clientInfo") {
            let text = |k: &str| info.get(k).and_then(Value::as_str).unwrap_or("unknown").to_owned();
            builder = builder.client_info(text("name"), text("version"));
        }
        if let Some(Value::Object(caps)) = init.get("capabilities") {
            for (name, value) in caps {
                builder = builder.capability(name.clone(), value.clone());
            }
        }
        let client = builder.connect().await?;
        let result = client.server_info().unwrap_or_else(|| json!({}));
        let events = client.notifications()?;
        let stop = CancellationToken::new();
        let (flush, flushes) = mpsc::unbounded_channel();
        tokio::spawn(pump(events, client.clone(), host.clone(), ended, stop.clone(), flushes));
        tokio::spawn(open_standalone(client.clone(), host.clone(), None));
        Ok((Self { client, host: host.clone(), stop, flush }, result))
    }

    /// Carry one host request; progress for the host's token goes to it as it comes, and
    /// every notification the server sent before the answer reaches the host before it.
    pub(crate) async fn request(&self, method: &str, params: Option<Value>) -> Result<Value, ClientError> {
        let token = params.as_ref().and_then(|p| p.pointer("/_meta/progressToken")).cloned();
        let outcome = match token {
            None => self.client.request(method, params).await,
            Some(token) => {
                let host = &self.host;
                self.client.request_with_progress(method, params, |p| host.progress(&token, &p)).await
            }
        };
        let (done, flushed) = oneshot::channel();
        if self.flush.send(done).is_ok() {
            let _ = flushed.await;
        }
        outcome
    }

    /// Pass one host notification on (not `initialized`: the client sent its own).
    pub(crate) async fn notify(&self, method: &str, params: Option<Value>) {
        if method == "notifications/initialized" {
            return;
        }
        if let Err(e) = self.client.notify(method, params).await {
            self.host.tell("warning", &format!("the host's {method} did not reach the server: {e}"));
        }
    }

    /// Why the server ended the session, if it has.
    pub(crate) fn ended(&self) -> Option<ClientError> {
        self.client.session_error().filter(|e| !matches!(e, ClientError::Closed))
    }

    /// The bridge is done: end the session (DELETE) when `delete`, and stop its streams and
    /// the event pump either way.
    pub(crate) async fn finish(&self, delete: bool) {
        if delete && let Err(e) = self.client.close().await {
            tracing::debug!(error = %e, "closing the session failed");
        }
        for stream in self.client.streams() {
            stream.close();
        }
        self.stop.cancel();
    }
}

/// How long the bridge waits before opening a fresh notification stream in place of one that
/// ended without a proven continuation.
const REOPEN_AFTER: Duration = Duration::from_secs(1);

/// Open the server's notification (GET) stream, after `pause`; a server without one is fine.
async fn open_standalone(client: Client, host: Host, pause: Option<Duration>) {
    if let Some(pause) = pause {
        tokio::time::sleep(pause).await;
    }
    match client.open_standalone().await {
        Ok(_) | Err(ClientError::StandaloneUnsupported | ClientError::Closed) => {}
        Err(e) if client.session_error().is_some() => {
            tracing::debug!(error = %e, "no session to open a stream in")
        }
        Err(e) => host.tell("warning", &format!("the server's notification stream could not be opened: {e}")),
    }
}

/// Server notifications to the host; what happened to streams and the session, told. A
/// notification stream that ended without a proven continuation is replaced by a fresh one.
async fn pump(
    mut events: forkless_client::Notifications,
    client: Client,
    host: Host,
    ended: CancellationToken,
    stop: CancellationToken,
    mut flushes: mpsc::UnboundedReceiver<oneshot::Sender<()>>,
) {
    loop {
        tokio::select! {
            biased;
            () = stop.cancelled() => return,
            event = events.recv() => match event {
                Some(event) => handle(event, &client, &host, &ended),
                None => return,
            },
            // Everything the client queued before a request's answer goes out before it.
            Some(done) = flushes.recv() => {
                while let Some(Some(event)) = events.recv().now_or_never() {
                    handle(event, &client, &host, &ended);
                }
                let _ = done.send(());
            }
        }
    }
}

/// One client event: a notification to the host, or what happened told.
fn handle(event: ClientEvent, client: &Client, host: &Host, ended: &CancellationToken) {
    match event {
        ClientEvent::Notification(n) => host.notify(&n.method, n.params),
        // Under a proven continuation a new stream ends the old one (`StreamFailed`).
        ClientEvent::NewStream { .. } => {}
        ClientEvent::Resumed { origin, continuity, .. } => {
            tracing::debug!(?origin, ?continuity, "a stream was resumed");
        }
        ClientEvent::StreamFailed { origin: StreamOrigin::Request(_), error } => {
            host.tell("warning", &format!("a request's stream was given up, its request failed: {error}"));
        }
        ClientEvent::StreamFailed { origin: StreamOrigin::Standalone, error } => {
            host.tell(
                "warning",
                &format!(
                    "the server's notification stream was given up ({error}); opening a fresh one: \
                     notifications sent meanwhile may be lost (none is repeated)"
                ),
            );
            tokio::spawn(open_standalone(client.clone(), host.clone(), Some(REOPEN_AFTER)));
        }
        // The bridge closed it itself (the host is done).
        ClientEvent::SessionEnded { error: ClientError::Closed } => ended.cancel(),
        ClientEvent::SessionEnded { error } => {
            host.tell("error", &format!("the server ended the session: {error}"));
            ended.cancel();
        }
        other => tracing::debug!(?other, "client event"),
    }
}
