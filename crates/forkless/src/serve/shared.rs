//! `serve` on a store shared by many nodes (PostgreSQL, Redis): the node lease, the requests
//! the previous process left, and taking over the sessions of nodes that are gone. It owns
//! that start-up and the takeover loop, not the stores or the server.

use core::future::Future;
use core::pin::Pin;
use core::time::Duration;

use forkless_server::{Handler, Restorable, Server};
use forkless_store::shared::{Database, SharedStore, Takeover};

use super::{ServeArgs, Serving, wall_clock};
use crate::Error;

/// Serve on a store shared by many nodes: hold the node lease first (`--node-id`), so no
/// second process with this id answers this node's requests as orphans, then answer the
/// requests the previous process left, and stop if the lease is lost.
pub(super) async fn serve_shared<D: Database, H: Handler>(
    serving: Serving<H>,
    store: SharedStore<D>,
    args: &ServeArgs,
    label: String,
) -> Result<(), Error> {
    let named = |e: forkless_store::Error| Error::Store(format!("{}: {e}", args.store));
    let failure: Option<Pin<Box<dyn Future<Output = String> + Send>>> = match &args.node_id {
        Some(node) => {
            let ttl = Duration::from_millis(args.lease_ttl);
            let lease =
                hold_lease_waiting(&store, node, ttl, args.advertise.as_deref()).await.map_err(named)?;
            tracing::info!(
                node,
                ttl_ms = args.lease_ttl,
                advertise = args.advertise.as_deref(),
                "node lease held"
            );
            Some(Box::pin(async move { format!("node lease lost: {}", lease.lost().await) }))
        }
        None => None,
    };
    let orphans = store.restart(wall_clock()).await.map_err(named)?;
    tracing::info!(store = %args.store, orphaned_requests = orphans.len(), "shared store ready");
    let what = match serving.served.handler.restorable() {
        Restorable::Yes => Takeover::Restore,
        Restorable::No => Takeover::End,
    };
    let takeover = args.node_id.is_some().then(|| {
        let (store, every) = (store.clone(), Duration::from_millis(args.lease_ttl));
        move |server: &Server<SharedStore<D>, H>| {
            let server = server.clone();
            tokio::spawn(take_over_lost_nodes(store, server, what, every));
        }
    });
    serving.run_with(store, label, orphans, failure, takeover).await
}

/// Hold `node`'s lease. While another process holds it, wait (logging that) for at most one
/// lease time and a tenth: a process that died (a crash, `kill -9`) holds it until it lapses,
/// and its successor starts as soon as it does, rather than failing into a crash loop; a live
/// holder renews it, and after that wait this one gives up as before. Never beside a live
/// holder: the lease is taken only once the database says it lapsed.
async fn hold_lease_waiting<D: Database>(
    store: &SharedStore<D>,
    node: &str,
    ttl: Duration,
    advertise: Option<&str>,
) -> Result<forkless_store::shared::NodeLease<D>, forkless_store::Error> {
    let give_up = tokio::time::Instant::now() + ttl + ttl / 10;
    let mut logged = false;
    loop {
        match store.hold_lease(node, ttl, advertise).await {
            Err(forkless_store::Error::LeaseLost(why))
                if why.contains("held by another") && tokio::time::Instant::now() < give_up =>
            {
                if !logged {
                    tracing::warn!(
                        node,
                        ttl_ms = ttl.as_millis(),
                        "node id held by another process (a crashed one's lease lapses within its time to live): waiting for it"
                    );
                    logged = true;
                }
                tokio::time::sleep(ttl / 20).await;
            }
            other => return other,
        }
    }
}

/// Every `every`, claim the sessions of nodes whose lease lapsed, and answer their requests in
/// flight (restored sessions) with errors carrying their ids; and settle their open tasks.
async fn take_over_lost_nodes<D: Database, H: Handler>(
    store: SharedStore<D>,
    server: Server<SharedStore<D>, H>,
    what: Takeover,
    every: Duration,
) {
    loop {
        tokio::time::sleep(every).await;
        match store.take_over(wall_clock(), what).await {
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
