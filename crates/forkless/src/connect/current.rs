//! The current revision (2026-07-28) behind the bridge, for a host that speaks the session
//! revisions: `server/discover` answers the host's `initialize`; every request is keyed where
//! the server offers idempotency keys (a lost answer is re-issued and runs once), a task is
//! polled to its end so the host sees an ordinary call, and the host answers a task's input
//! requests. The notifications an answer carries reach the host as they arrive.
//!
//! The host's `logging/setLevel` is kept here and asked for by every request (`_meta`
//! `io.modelcontextprotocol/logLevel`, `info` until the host sets one).
//!
//! It owns the mapping between the two revisions, not the requests' rules
//! (`forkless_client::current`'s).

use forkless_client::{CurrentClient, CurrentSettings, Error as ClientError};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use super::host::Host;

/// The revision the host is answered with when it asks for none the bridge knows.
const HOST_DEFAULT: &str = "2025-11-25";

/// Where a 2026-07-28 request names the log level it wants messages at.
const LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
/// The level asked for until the host sends `logging/setLevel`.
const DEFAULT_LEVEL: &str = "info";

/// A 2026-07-28 server.
#[derive(Debug)]
pub(crate) struct Current {
    client: CurrentClient,
    /// The host's `logging/setLevel`: 2026-07-28 has no session to keep it, so every request
    /// asks for it in its `_meta`.
    level: std::sync::Mutex<String>,
    /// Asks the notification task to hand on everything queued so far (before an answer).
    flush: mpsc::UnboundedSender<oneshot::Sender<()>>,
}

impl Current {
    /// `server/discover` on `url`; fails when the server does not speak 2026-07-28.
    pub(crate) async fn open(
        url: &str,
        http: reqwest::Client,
        credentials: Option<std::sync::Arc<dyn forkless_client::Credentials>>,
        host: &Host,
        init: &Value,
    ) -> Result<(Self, Value), ClientError> {
        let (sink, mut notes) = mpsc::unbounded_channel::<forkless_client::Notification>();
        let (flush, mut flushes) = mpsc::unbounded_channel::<oneshot::Sender<()>>();
        let told = host.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    biased;
                    note = notes.recv() => match note {
                        Some(n) => told.notify(&n.method, n.params),
                        None => return,
                    },
                    // Everything an answer stream carried goes out before the answer.
                    Some(done) = flushes.recv() => {
                        while let Ok(n) = notes.try_recv() {
                            told.notify(&n.method, n.params);
                        }
                        let _ = done.send(());
                    }
                }
            }
        });
        let settings = CurrentSettings {
            http: Some(http),
            credentials,
            notifications: Some(sink),
            input: std::sync::Arc::new(host.clone()),
            client_info: init
                .get("clientInfo")
                .cloned()
                .unwrap_or_else(|| json!({ "name": "forkless-connect" })),
            ..CurrentSettings::default()
        };
        let client = CurrentClient::connect(url, settings).await?;
        let result = initialize_result(client.discovery(), init);
        Ok((Self { client, level: std::sync::Mutex::new(DEFAULT_LEVEL.into()), flush }, result))
    }

    fn level(&self) -> std::sync::MutexGuard<'_, String> {
        self.level.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Carry one host request.
    pub(crate) async fn request(&self, method: &str, params: Option<Value>) -> Result<Value, ClientError> {
        match method {
            "ping" => return Ok(json!({})),
            "logging/setLevel" => {
                let asked = params.as_ref().and_then(|p| p.get("level")).and_then(Value::as_str);
                let asked = asked.ok_or_else(|| ClientError::Rpc {
                    code: -32602,
                    message: "logging/setLevel needs a level".into(),
                    data: None,
                })?;
                *self.level() = asked.to_owned();
                return Ok(json!({}));
            }
            _ => {}
        }
        let mut params = params.unwrap_or_else(|| json!({}));
        if let Some(p) = params.as_object_mut() {
            let meta = p.entry("_meta").or_insert_with(|| json!({}));
            if let Some(meta) = meta.as_object_mut()
                && !meta.contains_key(LOG_LEVEL)
            {
                let asked = self.level().clone();
                meta.insert(LOG_LEVEL.into(), json!(asked));
            }
        }
        let outcome = self.client.request(method, params).await;
        let (done, flushed) = oneshot::channel();
        if self.flush.send(done).is_ok() {
            let _ = flushed.await;
        }
        outcome
    }
}

/// What the host's `initialize` is answered with: the server's own description from
/// `server/discover`, in the revision the host asked for when the bridge knows it.
fn initialize_result(discovered: &Value, init: &Value) -> Value {
    let asked = init.get("protocolVersion").and_then(Value::as_str);
    let known = asked.and_then(|v| v.parse::<forkless_client::Revision>().ok()).filter(|r| r.has_sessions());
    let version = known.map_or(HOST_DEFAULT, forkless_client::Revision::as_str);
    let mut capabilities = discovered.get("capabilities").cloned().unwrap_or_else(|| json!({}));
    if let Some(caps) = capabilities.as_object_mut() {
        // What the bridge does itself (tasks driven, keys) is not the host's business.
        caps.remove("extensions");
    }
    let mut result = json!({
        "protocolVersion": version,
        "capabilities": capabilities,
        "serverInfo": discovered.get("serverInfo").cloned().unwrap_or_else(|| json!({ "name": "unknown", "version": "0" })),
    });
    if let Some(instructions) = discovered.get("instructions") {
        result["instructions"] = instructions.clone();
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_gets_its_own_revision_and_the_servers_description_without_extensions() {
        let discovered = json!({
            "supportedVersions": ["2026-07-28"],
            "capabilities": { "tools": {}, "extensions": { "io.modelcontextprotocol/tasks": {} } },
            "serverInfo": { "name": "s", "version": "1" },
            "instructions": "be kind",
        });
        let r = initialize_result(&discovered, &json!({ "protocolVersion": "2025-06-18" }));
        assert_eq!(r["protocolVersion"], "2025-06-18");
        assert_eq!(r["capabilities"], json!({ "tools": {} }));
        assert_eq!(r["serverInfo"]["name"], "s");
        assert_eq!(r["instructions"], "be kind");
        let r = initialize_result(&discovered, &json!({ "protocolVersion": "1999-01-01" }));
        assert_eq!(r["protocolVersion"], HOST_DEFAULT);
    }
}
