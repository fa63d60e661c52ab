//! The same rmcp counter (`counter/service.rs`) on rmcp's own Streamable HTTP transport, for
//! the side-by-side comparison with forkless (`scripts/peers/compare-rmcp.sh`,
//! `docs/peers.md`).
//!
//! ```text
//! cargo run -p forkless-rmcp --example counter_rmcp -- [--listen 127.0.0.1:8080]
//! ```

#[path = "counter/service.rs"]
mod service;

use std::sync::Arc;

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut listen = "127.0.0.1:8080".to_owned();
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        match flag.as_str() {
            "--listen" => listen = args.next().ok_or("--listen needs an address")?,
            other => return Err(format!("unknown flag {other}").into()),
        }
    }
    let mut config = StreamableHttpServerConfig::default();
    // Sessions (Mcp-Session-Id), as the forkless side serves them.
    config.legacy_session_mode = true;
    let sessions = Arc::new(LocalSessionManager::default());
    let service = StreamableHttpService::new(|| Ok(service::Counter::new()), sessions, config);
    let router = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind(&listen).await?;
    println!("listening on http://{}/mcp", listener.local_addr()?);
    axum::serve(listener, router)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(())
}
