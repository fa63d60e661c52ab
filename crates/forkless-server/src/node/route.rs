//! Owner routing (PROTOCOL section 10): a session's handler runs on its owner node, so a
//! POST or DELETE for a session owned by another node is sent there, and its answer (an SSE
//! stream included) streamed back. A client's responses and cancellations travel the same
//! way, so they reach the owner's [`Inbox`](super::Inbox).
//!
//! This module owns the one decision ([`decide`]: serve here, send to the owner, take a
//! lapsed owner's session over, or refuse with a typed error) and a small cache of where
//! sessions owned elsewhere live. It does not move bytes ([`super::forward`]) and does not
//! keep ownership (the store's [`forkless_store::Ownership::owner`]). GET is never routed: any node can tail a
//! stream from the shared log under a fresh epoch.

use std::collections::HashMap;
use std::sync::Mutex;

use axum::extract::Request;
use axum::response::Response;
use forkless_core::{IdHashBuilder, SessionId};
use forkless_store::{Advertised, NodeName, Owner, Store};

use crate::clock::now;
use crate::error::{Error, OwnerUnavailable};
use crate::handler::{Handler, Restorable};
use crate::headers::SESSION_ID;
use crate::server::App;

use super::forward::FORWARDED;

/// What to do with a request for a session this node does not serve right now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Serve it here.
    Serve,
    /// Send it to the owner at `base`.
    Forward {
        /// The owner's node id.
        node: NodeName,
        /// Its advertised base URL.
        base: Advertised,
    },
    /// The owner's lease lapsed: take the session over here, then serve it.
    Adopt,
}

/// Whether a request already made its one hop between nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Arrival {
    /// From a client (or a load balancer).
    Direct,
    /// From another node (it carries [`FORWARDED`]): never sent on again.
    Forwarded,
}

/// The routing decision: from the store's view of the owner, how the request arrived and
/// whether the handler's sessions can be restored away from their node.
pub(crate) fn decide(owner: Owner, arrival: Arrival, restorable: Restorable) -> Result<Step, Error> {
    match (owner, arrival) {
        (Owner::Here, _) => Ok(Step::Serve),
        (Owner::Lapsed { .. }, _) => Ok(Step::Adopt),
        // The owner we were sent to says another node owns it: one hop only, never a loop.
        (Owner::Node { node, .. }, Arrival::Forwarded) => {
            Err(Error::OwnerUnavailable { node: node.to_string(), why: OwnerUnavailable::Moved })
        }
        (Owner::Node { node, advertise: Some(base) }, Arrival::Direct) => Ok(Step::Forward { node, base }),
        // No address to send it to. A restorable session's state is all in the store, so it
        // is served here (its handler's in-process state, such as a cancellation's target,
        // stays on its owner); any other would lose its owner's state.
        (Owner::Node { node, advertise: None }, Arrival::Direct) => match restorable {
            Restorable::Yes => Ok(Step::Serve),
            Restorable::No => {
                Err(Error::OwnerUnavailable { node: node.to_string(), why: OwnerUnavailable::NotAdvertised })
            }
        },
    }
}

/// Where sessions owned by other nodes were last found, so a forwarded request costs no
/// store round trip. An entry is dropped when its hop fails or the owner refuses; at
/// [`Routes::MAX`] entries the cache starts over.
#[derive(Debug, Default)]
pub(crate) struct Routes(Mutex<HashMap<SessionId, (NodeName, Advertised), IdHashBuilder>>);

impl Routes {
    /// Entries kept at most.
    const MAX: usize = 65_536;

    fn get(&self, id: SessionId) -> Option<(NodeName, Advertised)> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).get(&id).cloned()
    }

    fn put(&self, id: SessionId, node: &NodeName, base: &Advertised) {
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() >= Self::MAX {
            map.clear();
        }
        map.insert(id, (node.clone(), base.clone()));
    }

    pub(crate) fn forget(&self, id: SessionId) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
    }
}

impl<S: Store, H: Handler> App<S, H> {
    /// Send `request` to its session's owner if that is another node: `Ok(request)` to serve
    /// it here, `Err(response)` once answered (by the owner, or with a typed refusal).
    pub(crate) async fn route(&self, request: Request) -> Result<Request, Response> {
        let Some(id) = request
            .headers()
            .get(SESSION_ID)
            .and_then(|v| v.to_str().ok())
            .and_then(|s| s.parse::<SessionId>().ok())
        else {
            return Ok(request);
        };
        if self.common.sessions.get(id).is_some() {
            return Ok(request);
        }
        // Boxed: the forwarding's state (an HTTP call to the owner) stays out of every local
        // request's future, which is moved into its task for each POST.
        Box::pin(self.route_elsewhere(id, request)).await
    }

    /// [`Self::route`] for a session not live here: forwarded, taken over or served.
    async fn route_elsewhere(&self, id: SessionId, request: Request) -> Result<Request, Response> {
        let arrival =
            if request.headers().contains_key(FORWARDED) { Arrival::Forwarded } else { Arrival::Direct };
        let cached = match arrival {
            Arrival::Direct => self.common.routes.get(id),
            Arrival::Forwarded => None,
        };
        let mut from_cache = cached.is_some();
        let (mut node, mut base) = match cached {
            Some(found) => found,
            None => match self.resolve(id, arrival).await.map_err(|e| self.answer(Err(e)))? {
                Step::Forward { node, base } => (node, base),
                step => return self.serve_here(id, step, request).await,
            },
        };
        let (parts, body) = request.into_parts();
        let body = self.read_request_body(&parts.headers, body).await.map_err(|e| self.answer(Err(e)))?;
        loop {
            let why = match self.common.forwarder.send(&parts, body.clone(), &base).await {
                Ok(response) => {
                    self.common.metrics.forwarded("answered");
                    if response.status().is_server_error() || response.status() == http::StatusCode::NOT_FOUND
                    {
                        // The owner refused or the session ended: look it up afresh next time.
                        self.common.routes.forget(id);
                    }
                    return Err(response);
                }
                Err(why) => why,
            };
            self.common.metrics.forwarded(why.as_str());
            self.common.routes.forget(id);
            if from_cache && why == OwnerUnavailable::Unreachable {
                // The cached owner may be gone and its session taken over: ask the store once.
                from_cache = false;
                match self.resolve(id, arrival).await.map_err(|e| self.answer(Err(e)))? {
                    Step::Forward { node: n, base: b } => (node, base) = (n, b),
                    step => return self.serve_here(id, step, Request::from_parts(parts, body.into())).await,
                }
                continue;
            }
            tracing::warn!(session = %id, %node, %base, reason = why.as_str(), "the session's owner could not be reached");
            return Err(self.answer(Err(Error::OwnerUnavailable { node: node.to_string(), why })));
        }
    }

    /// Where the store says `id`'s owner is, decided; a forward is remembered.
    async fn resolve(&self, id: SessionId, arrival: Arrival) -> Result<Step, Error> {
        let owner = self.common.store.owner(id).await?;
        let step = match decide(owner, arrival, self.common.restorable) {
            // An ended session has nothing left to run on its owner: any node answers it (404
            // with its end reason), whichever node ended it and whether or not that node can
            // be reached. (A node that advertises no address may take a lost node's session
            // over and end it; refusing it as unavailable would send its client retrying a
            // 503 forever.)
            Err(Error::OwnerUnavailable { .. }) if self.has_ended(id).await? => Step::Serve,
            step => step?,
        };
        if let Step::Forward { node, base } = &step {
            self.common.routes.put(id, node, base);
        }
        Ok(step)
    }

    /// Whether the store holds `id` as ended.
    async fn has_ended(&self, id: SessionId) -> Result<bool, Error> {
        let record = self.common.store.load(id).await?;
        Ok(record.is_some_and(|r| r.value.session().ended().is_some()))
    }

    /// Serve here, taking a lapsed owner's session over first if `step` says so.
    async fn serve_here(&self, id: SessionId, step: Step, request: Request) -> Result<Request, Response> {
        if step != Step::Adopt {
            return Ok(request);
        }
        let what = self.common.restorable.takeover();
        match self.common.store.adopt(id, what, now()).await.map_err(|e| self.answer(Err(e.into())))? {
            Some(orphans) => {
                let answered = self.common.answer_orphans(&orphans, crate::common::Lost::Takeover).await;
                tracing::warn!(session = %id, answered, ?what, "took over a lost node's session on its request");
                Ok(request)
            }
            // Another node claimed it first: the store now names that owner.
            None => Box::pin(self.route(request)).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b() -> NodeName {
        NodeName::new("b").expect("a name")
    }

    fn at(base: &str) -> Advertised {
        Advertised::new(base).expect("an address")
    }

    fn node(advertise: Option<&str>) -> Owner {
        Owner::Node { node: b(), advertise: advertise.map(at) }
    }

    #[test]
    fn a_session_owned_elsewhere_goes_to_its_owner_once() {
        let step = decide(node(Some("http://b:8080")), Arrival::Direct, Restorable::No).unwrap();
        assert_eq!(step, Step::Forward { node: b(), base: at("http://b:8080") });
        let again = decide(node(Some("http://b:8080")), Arrival::Forwarded, Restorable::Yes);
        assert!(matches!(again, Err(Error::OwnerUnavailable { why: OwnerUnavailable::Moved, .. })));
    }

    #[test]
    fn here_serves_and_a_lapsed_owner_is_adopted() {
        for arrival in [Arrival::Direct, Arrival::Forwarded] {
            assert_eq!(decide(Owner::Here, arrival, Restorable::No).unwrap(), Step::Serve);
            let lapsed = Owner::Lapsed { node: b() };
            assert_eq!(decide(lapsed, arrival, Restorable::No).unwrap(), Step::Adopt);
        }
    }

    #[test]
    fn without_an_address_only_a_restorable_session_is_served_away_from_its_owner() {
        assert_eq!(decide(node(None), Arrival::Direct, Restorable::Yes).unwrap(), Step::Serve);
        let refused = decide(node(None), Arrival::Direct, Restorable::No);
        assert!(matches!(refused, Err(Error::OwnerUnavailable { why: OwnerUnavailable::NotAdvertised, .. })));
    }
}
