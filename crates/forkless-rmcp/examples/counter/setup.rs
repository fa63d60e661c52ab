//! The setup lines: all that differs from serving the same service with rmcp's own
//! `StreamableHttpService`. The example's `main` calls it; `tests/example.rs` runs it in a
//! process of its own, so the test kills and restarts exactly these lines.

use std::future::Future;
use std::path::Path;

use forkless_server::ServerConfig;
use forkless_store::MemoryStore;
use forkless_store_redb::RedbStore;

use crate::service::Counter;

/// Serve the counter on `listen` until `shutdown`: on the durable store in `data_dir`, or in
/// memory when there is none. Prints `listening on http://ADDR/mcp` once bound.
pub(crate) async fn run(
    listen: &str,
    data_dir: Option<&Path>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), Box<dyn std::error::Error>> {
    let listener = tokio::net::TcpListener::bind(listen).await?;
    println!("listening on http://{}/mcp", listener.local_addr()?);
    let Some(data_dir) = data_dir else {
        let server =
            forkless_rmcp::server(MemoryStore::new(), || Ok(Counter::new()), ServerConfig::default())?;
        return Ok(server.serve(listener, shutdown).await?);
    };
    std::fs::create_dir_all(data_dir)?;
    let (store, recovery) =
        RedbStore::open(data_dir.join("forkless.redb"), Default::default(), wall_clock())?;
    // The setup: a forkless server for the rmcp service, instead of rmcp's StreamableHttpService.
    let server = forkless_rmcp::server(store, || Ok(Counter::new()), ServerConfig::default())?;
    // Calls the previous process was running when it stopped get an error carrying their
    // ids, so no client waits for them for ever.
    server.answer_orphans(&recovery.orphans).await;
    server.serve(listener, shutdown).await?;
    Ok(())
}

fn wall_clock() -> forkless_core::Timestamp {
    let ms =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_millis();
    forkless_core::Timestamp::from_millis(u64::try_from(ms).unwrap_or(u64::MAX))
}
