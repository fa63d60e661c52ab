//! 2026-07-28 requests through a message backend: the revision has no session, so each
//! request gets a backend of its own (the shared one in [`Sharing::Shared`]), initialized
//! with what the request says of its client, and stopped once it has answered. `server/
//! discover` tells what the backend said of itself at its first `initialize` ([`discover`]
//! asks it once, before serving).
//!
//! A backend's own request to the client (sampling, elicitation, roots) has no stream to
//! travel on in this revision: it goes out as an `input_required` round while the call waits
//! on this node (`super::rounds`). It owns this path; sessions are `super`'s.
//!
//! [`discover`]: MessageBackend::discover

use forkless_core::Revision;
use serde_json::{Value, json};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{Connector, MessageBackend, Sharing, rounds, server_info};
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

    /// Answer one 2026-07-28 request `method` with `params` on a backend of its own, or,
    /// for a retry carrying a round's answer, the call waiting for it (`rounds`).
    pub(super) async fn answer_statelessly(
        &self,
        method: &str,
        params: Option<Value>,
        ctx: RequestContext,
    ) -> Result<Value, RpcError> {
        if let Some(id) = ctx.request_state().and_then(|s| s.get(rounds::ROUND)).and_then(Value::as_str) {
            let id = id.to_owned();
            return rounds::resume(&self.parked, &self.cfg, &id, &ctx).await;
        }
        let session = ctx.session().clone();
        let peer = self.initialized_for(&session, SPOKEN.as_str()).await?;
        if let Some(result) = peer.initialized() {
            let _ = self.discovered.set(server_info(&result, Some(&json!(SPOKEN.as_str()))));
        }
        // The call may outlive this round (its backend asks the client something): it runs
        // on a context of its own, stopped by its own token, its questions parked.
        let (parked, questions) = mpsc::channel(1);
        let cancel = CancellationToken::new();
        let mut running = ctx.clone();
        running.cancel = crate::session::RequestCancel::made(cancel.clone());
        running.parked = Some(parked);
        let (per_session, method) = (self.cfg.sharing == Sharing::PerSession, method.to_owned());
        let run = tokio::spawn(async move {
            peer.attach(session.clone());
            let answered = peer.forward(&method, params, running).await;
            peer.detach(session.id());
            if per_session {
                peer.stop();
            }
            answered
        });
        rounds::round(&self.parked, &self.cfg, rounds::Call { run, questions, cancel }, &ctx).await
    }
}
