//! The rmcp counter served by forkless, on the durable default store.
//!
//! ```text
//! cargo run -p forkless-rmcp --example counter -- [--listen 127.0.0.1:8080] [--data-dir DIR] [--memory]
//! ```
//!
//! `--memory`: the in-memory store instead of the durable one (nothing survives a restart).
//!
//! `service.rs` is the rmcp server as it would be written for rmcp's own
//! `StreamableHttpService`; only these setup lines differ (README: "from rmcp's
//! StreamableHttpService to forkless").

mod service;

use forkless_server::ServerConfig;
use forkless_store::MemoryStore;
use forkless_store_redb::RedbStore;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut listen = "127.0.0.1:8080".to_owned();
    let mut data_dir = std::path::PathBuf::from("./forkless-rmcp-data");
    let mut memory = false;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        match flag.as_str() {
            "--listen" => listen = args.next().ok_or("--listen needs an address")?,
            "--data-dir" => data_dir = args.next().ok_or("--data-dir needs a directory")?.into(),
            "--memory" => memory = true,
            other => return Err(format!("unknown flag {other}").into()),
        }
    }
    let listener = tokio::net::TcpListener::bind(&listen).await?;
    println!("listening on http://{}/mcp", listener.local_addr()?);
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    if memory {
        let server = forkless_rmcp::server(
            MemoryStore::new(),
            || Ok(service::Counter::new()),
            ServerConfig::default(),
        )?;
        return Ok(server.serve(listener, shutdown).await?);
    }
    std::fs::create_dir_all(&data_dir)?;
    let (store, recovery) =
        RedbStore::open(data_dir.join("forkless.redb"), Default::default(), wall_clock())?;
    // The setup: a forkless server for the rmcp service, instead of rmcp's StreamableHttpService.
    let server = forkless_rmcp::server(store, || Ok(service::Counter::new()), ServerConfig::default())?;
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
