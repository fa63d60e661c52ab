//! The setup lines: all that differs from serving the same service with rmcp's own
//! `StreamableHttpService`. The example's `main` calls it; `tests/example.rs` and
//! `tests/nodes.rs` run it in processes of their own, so the tests kill and restart exactly
//! these lines.

use std::future::Future;
use std::path::Path;

use forkless_rmcp::Options;
use forkless_server::node::{Lease, Node};
use forkless_server::{Restorable, ServerConfig};
use forkless_store::MemoryStore;
use forkless_store_redb::RedbStore;

use crate::service::Counter;

/// Where the sessions are kept.
pub(crate) enum Keep<'a> {
    /// In memory: nothing survives the process.
    Memory,
    /// In the durable store in this directory.
    Durable(&'a Path),
    /// In PostgreSQL or Redis (`postgres://…`, `redis://…[#prefix]`), shared by every process
    /// with this URL, each holding its node's `lease` when it has one.
    Shared { url: &'a str, lease: Option<Lease> },
}

/// Serve the counter on `listen` until `shutdown`, keeping sessions as `keep` says;
/// `restorable`: whether another process may carry a session on (the counter's value is the
/// instance's, so only when losing it is acceptable). Prints `listening on http://ADDR/mcp`
/// once bound.
pub(crate) async fn run(
    listen: &str,
    keep: Keep<'_>,
    restorable: Restorable,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), Box<dyn std::error::Error>> {
    let listener = tokio::net::TcpListener::bind(listen).await?;
    println!("listening on http://{}/mcp", listener.local_addr()?);
    let options = Options { restorable };
    let config = ServerConfig::default();
    // The setup: a forkless server for the rmcp service, instead of rmcp's
    // StreamableHttpService, and its node: calls a previous process was running when it
    // stopped get an error carrying their ids, so no client waits for them for ever.
    let stopped = match keep {
        Keep::Memory => {
            let server = forkless_rmcp::server_with(MemoryStore::new(), made, config, options)?;
            Node::alone(server, &[], None).await?.serve(listener, shutdown).await?
        }
        Keep::Durable(dir) => {
            std::fs::create_dir_all(dir)?;
            let (store, recovery) =
                RedbStore::open(dir.join("forkless.redb"), Default::default(), wall_clock())?;
            let failed = store.clone();
            let server = forkless_rmcp::server_with(store, made, config, options)?;
            let failure = Box::pin(async move { failed.failed().await });
            Node::alone(server, &recovery.orphans, Some(failure)).await?.serve(listener, shutdown).await?
        }
        Keep::Shared { url, lease } if url.starts_with("postgres") => {
            let store = forkless_store_postgres::connect(forkless_store_postgres::PgConfig::new(url)).await?;
            let server = forkless_rmcp::server_with(store, made, config, options)?;
            Node::shared(server, lease).await?.serve(listener, shutdown).await?
        }
        Keep::Shared { url, lease } => {
            let store = forkless_store_redis::connect(forkless_store_redis::RedisConfig::new(url)).await?;
            let server = forkless_rmcp::server_with(store, made, config, options)?;
            Node::shared(server, lease).await?.serve(listener, shutdown).await?
        }
    };
    match stopped {
        forkless_server::node::Stopped::Signalled => Ok(()),
        forkless_server::node::Stopped::StoreFailed(why) => Err(why.into()),
    }
}

/// A new service instance, as rmcp's `StreamableHttpService` makes one per session.
fn made() -> Result<Counter, std::io::Error> {
    Ok(Counter::new())
}

fn wall_clock() -> forkless_core::Timestamp {
    let ms =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_millis();
    forkless_core::Timestamp::from_millis(u64::try_from(ms).unwrap_or(u64::MAX))
}
