//! 2026-07-28 requests through a message backend: the revision has no session, so each
//! request gets a backend of its own (the shared one in [`Sharing::Shared`]), initialized
//! with what the request says of its client, and stopped once it has answered. `server/
//! discover` tells what the backend said of itself at its first `initialize` ([`discover`]
//! asks it once, before serving).
//!
//! What the revision forbids stays forbidden: a backend's own request to the client
//! (sampling, elicitation, roots) has no stream to travel on and is refused, so the tool sees
//! an error. It owns this path; sessions are `super`'s.
//!
//! [`discover`]: MessageBackend::discover

use forkless_core::Revision;
use serde_json::{Value, json};

use super::{Connector, MessageBackend, Sharing, server_info};
use crate::context::RequestContext;
use crate::jsonrpc::RpcError;

/// The session revision a per-request backend is initialized with.
const SPOKEN: Revision = Revision::V2025_11_25;

impl<C: Connector> MessageBackend<C> {
    /// Ask the backend what it is (a backend started, initialized and stopped), for
    /// `server/discover`. Called before serving 2026-07-28; also learnt from the first
    /// session's `initialize`.
    pub async fn discover(&self) -> Result<(), RpcError> {
        let params = json!({
            "protocolVersion": SPOKEN.as_str(),
            "capabilities": {},
            "clientInfo": { "name": "forkless-gateway", "version": env!("CARGO_PKG_VERSION") },
        });
        let peer = self.start(None).await?;
        let result = self.handshake(&peer, params).await;
        peer.stop();
        let _ = self.discovered.set(server_info(&result?, Some(&json!(SPOKEN.as_str()))));
        Ok(())
    }

    /// Answer one 2026-07-28 request `method` with `params` on a backend of its own.
    pub(super) async fn answer_statelessly(
        &self,
        method: &str,
        params: Option<Value>,
        ctx: RequestContext,
    ) -> Result<Value, RpcError> {
        let session = ctx.session().clone();
        let peer = self.initialized_for(&session, SPOKEN.as_str()).await?;
        if let Some(result) = peer.initialized() {
            let _ = self.discovered.set(server_info(&result, Some(&json!(SPOKEN.as_str()))));
        }
        peer.attach(session.clone());
        let answered = peer.forward(method, params, ctx).await;
        peer.detach(session.id());
        if self.cfg.sharing == Sharing::PerSession {
            peer.stop();
        }
        answered
    }
}
