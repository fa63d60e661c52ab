//! A node's life around its [`Server`], whatever the store: what the previous process left is
//! answered before the first connection, a store that refuses work stops the node at once,
//! and on a store shared by many nodes the node's lease is held and lost nodes' sessions and
//! tasks are taken over.
//!
//! This module owns that order and those loops, so that every way of running forkless (the
//! CLI's `serve` and `gateway`, an `rmcp` service through `forkless-rmcp`, an application
//! mounting its own handler) gets the same life. It decides nothing about streams or
//! sessions: the store decides who owns what, the handler whether its sessions survive
//! ([`crate::Restorable::takeover`]).

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use forkless_store::shared::{Database, NodeLease, SharedStore, Takeover};
use forkless_store::{Advertised, NodeName, Orphan, Store};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::clock::now;
use crate::handler::Handler;
use crate::server::Server;

/// Resolves, with why, once the store refuses work: a durable store after a failed write, a
/// shared store once this node's lease is lost.
pub type Failure = Pin<Box<dyn Future<Output = String> + Send>>;

/// This node's place on a store shared by many nodes.
#[derive(Clone, Debug)]
pub struct Lease {
    /// The node's id, leased to one live process at a time.
    pub node: NodeName,
    /// The lease's time to live: renewed every third of it; a node that cannot renew stops
    /// before it lapses, and lost nodes are looked for this often.
    pub ttl: Duration,
    /// The base URL other nodes forward this node's sessions' requests to (`http://HOST:PORT`).
    pub advertise: Option<Advertised>,
}

/// Why [`Node::serve`] returned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stopped {
    /// The stop signal fired: connections were drained.
    Signalled,
    /// The store refused work (the reason): every request was refused from that moment on.
    StoreFailed(String),
}

/// A [`Server`] with its node's life (see the module documentation).
pub struct Node<S, H> {
    server: Server<S, H>,
    failure: Option<Failure>,
    takeover: Option<JoinHandle<()>>,
}

impl<S, H> std::fmt::Debug for Node<S, H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node").field("takes_over", &self.takeover.is_some()).finish_non_exhaustive()
    }
}

impl<S: Store, H: Handler> Node<S, H> {
    /// A node alone on its store (memory, or the durable store of one process): the requests
    /// its previous process left (`orphans`, from the store's recovery) are answered with
    /// errors carrying their ids, its tasks are settled by their policy, and `failure` stops
    /// it (`RedbStore::failed`).
    pub async fn alone(
        server: Server<S, H>,
        orphans: &[Orphan],
        failure: Option<Failure>,
    ) -> Result<Self, forkless_store::Error> {
        settle_previous(&server, orphans).await?;
        Ok(Self { server, failure, takeover: None })
    }

    /// The server.
    pub fn server(&self) -> &Server<S, H> {
        &self.server
    }

    /// Serve on `listener` until `stop` resolves or the store refuses work. A refusal stops
    /// serving at once ([`Server::stop_serving`]: nothing unsaved or unowned is delivered),
    /// then drains like a stop.
    pub async fn serve(
        self,
        listener: TcpListener,
        stop: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<Stopped> {
        let Self { server, failure, takeover } = self;
        let (why_tx, why_rx) = tokio::sync::oneshot::channel();
        let refusing = server.clone();
        let shutdown = async move {
            let failed = async move {
                match failure {
                    Some(failure) => failure.await,
                    None => std::future::pending().await,
                }
            };
            let why = tokio::select! {
                () = stop => Stopped::Signalled,
                why = failed => {
                    tracing::error!(error = %why, "the store refuses work (a failed durable write, or a lost node lease); stopping so nothing unsaved or unowned is delivered");
                    refusing.stop_serving(&why);
                    Stopped::StoreFailed(why)
                }
            };
            let _ = why_tx.send(why);
        };
        let served = server.serve(listener, shutdown).await;
        if let Some(takeover) = takeover {
            takeover.abort();
        }
        served?;
        // The shutdown future drops its sender unsent only if the server ended first.
        Ok(why_rx.await.unwrap_or(Stopped::Signalled))
    }
}

impl<D: Database, H: Handler> Node<SharedStore<D>, H> {
    /// A node on a store shared by many nodes (PostgreSQL, Redis). With a `lease`: hold it
    /// first (waiting out, for at most its time to live and a tenth, the lease of a crashed
    /// process with the same id, never beside a live one), so no second process answers this
    /// node's requests as orphans; answer the requests its previous process left and settle
    /// its tasks; then, every `ttl`, take over the sessions of nodes whose lease lapsed
    /// (restored or ended as the handler says), answer their requests in flight and settle
    /// their tasks. Losing the lease stops the node. Without a lease the node serves every
    /// session the store holds, as one process alone would.
    pub async fn shared(
        server: Server<SharedStore<D>, H>,
        lease: Option<Lease>,
    ) -> Result<Self, forkless_store::Error> {
        let store = server.store().clone();
        let failure = match &lease {
            Some(lease) => {
                let held = hold_waiting(&store, lease).await?;
                tracing::info!(node = %lease.node, ttl_ms = lease.ttl.as_millis(), advertise = lease.advertise.as_ref().map(Advertised::as_str), "node lease held");
                Some(Box::pin(async move { format!("node lease lost: {}", held.lost().await) }) as Failure)
            }
            None => None,
        };
        let orphans = store.restart(now()).await?;
        settle_previous(&server, &orphans).await?;
        let takeover = lease.map(|lease| {
            let what = server.handler().restorable().takeover();
            tokio::spawn(take_over_lost_nodes(store, server.clone(), what, lease.ttl))
        });
        Ok(Self { server, failure, takeover })
    }
}

/// Answer the requests the previous process left with errors carrying their ids, and settle
/// the tasks it left by their policy.
async fn settle_previous<S: Store, H: Handler>(
    server: &Server<S, H>,
    orphans: &[Orphan],
) -> Result<(), forkless_store::Error> {
    if !orphans.is_empty() {
        let answered = server.answer_orphans(orphans).await;
        tracing::info!(answered, lost = orphans.len(), "requests lost in the restart answered");
    }
    let settled = server.settle_tasks_left().await?;
    if settled > 0 {
        tracing::info!(settled, "tasks left by the previous process settled by their policy");
    }
    Ok(())
}

/// Hold `lease.node`'s lease, waiting while another process holds it for at most one time to
/// live and a tenth: a process that died holds it until it lapses, and its successor starts
/// as soon as it does rather than failing into a crash loop; a live holder renews it, and
/// then this one gives up.
async fn hold_waiting<D: Database>(
    store: &SharedStore<D>,
    lease: &Lease,
) -> Result<NodeLease<D>, forkless_store::Error> {
    let give_up = tokio::time::Instant::now() + lease.ttl + lease.ttl / 10;
    let mut logged = false;
    loop {
        match store.hold_lease(&lease.node, lease.ttl, lease.advertise.as_ref()).await {
            Err(forkless_store::Error::LeaseLost(why))
                if why.contains("held by another") && tokio::time::Instant::now() < give_up =>
            {
                if !logged {
                    tracing::warn!(node = %lease.node, ttl_ms = lease.ttl.as_millis(), "node id held by another process (a crashed one's lease lapses within its time to live): waiting for it");
                    logged = true;
                }
                tokio::time::sleep(lease.ttl / 20).await;
            }
            other => return other,
        }
    }
}

/// Every `every`, claim the sessions of nodes whose lease lapsed and answer their requests in
/// flight with errors carrying their ids; and settle their open tasks. Ends when the lease is.
async fn take_over_lost_nodes<D: Database, H: Handler>(
    store: SharedStore<D>,
    server: Server<SharedStore<D>, H>,
    what: Takeover,
    every: Duration,
) {
    loop {
        tokio::time::sleep(every).await;
        match store.take_over(now(), what).await {
            Ok(orphans) if !orphans.is_empty() => {
                let answered = server.answer_taken_over(&orphans).await;
                tracing::warn!(answered, lost = orphans.len(), "took over the sessions of a lost node");
            }
            Ok(_) => {}
            Err(forkless_store::Error::LeaseLost(_)) => return,
            Err(e) => tracing::warn!(error = %e, "taking over lost nodes' sessions failed; retrying"),
        }
        match server.settle_lapsed_tasks().await {
            Ok(0) => {}
            Ok(settled) => tracing::warn!(settled, "settled the tasks of a lost node"),
            Err(forkless_store::Error::LeaseLost(_)) => return,
            Err(e) => tracing::warn!(error = %e, "settling lost nodes' tasks failed; retrying"),
        }
    }
}
