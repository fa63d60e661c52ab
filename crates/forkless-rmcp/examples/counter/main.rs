//! The rmcp counter served by forkless, on the durable default store.
//!
//! ```text
//! cargo run -p forkless-rmcp --example counter -- [--listen 127.0.0.1:8080] [--data-dir DIR] [--memory]
//!     [--store postgres://…|redis://… [--node-id NAME [--lease-ttl MS] [--advertise URL]]] [--restorable]
//! ```
//!
//! `--memory`: the in-memory store instead of the durable one (nothing survives a restart).
//! `--store`: PostgreSQL or Redis, shared by every process started with it (many nodes behind
//! one load balancer); `--node-id` gives this process its node's lease, so that when it dies
//! another takes its sessions over. `--restorable`: another process carries a session on
//! with a new service instance (the counter's value is the instance's, so it starts again at
//! zero); without it a session whose process died ends `owner_lost`.
//!
//! `service.rs` is the rmcp server as it would be written for rmcp's own
//! `StreamableHttpService`; only the setup lines (`setup.rs`) differ (README: "from rmcp's
//! StreamableHttpService to forkless").

mod service;
mod setup;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut listen = "127.0.0.1:8080".to_owned();
    let mut data_dir = std::path::PathBuf::from("./forkless-rmcp-data");
    let mut memory = false;
    let (mut store, mut node, mut advertise, mut ttl) = (None, None, None, 10_000u64);
    let mut restorable = forkless_server::Restorable::No;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        match flag.as_str() {
            "--listen" => listen = args.next().ok_or("--listen needs an address")?,
            "--data-dir" => data_dir = args.next().ok_or("--data-dir needs a directory")?.into(),
            "--memory" => memory = true,
            "--store" => store = Some(args.next().ok_or("--store needs a postgres:// or redis:// URL")?),
            "--node-id" => node = Some(args.next().ok_or("--node-id needs a name")?.parse()?),
            "--advertise" => advertise = Some(args.next().ok_or("--advertise needs a URL")?.parse()?),
            "--lease-ttl" => ttl = args.next().ok_or("--lease-ttl needs milliseconds")?.parse()?,
            "--restorable" => restorable = forkless_server::Restorable::Yes,
            other => return Err(format!("unknown flag {other}").into()),
        }
    }
    let lease = node.map(|node| forkless_server::node::Lease {
        node,
        ttl: std::time::Duration::from_millis(ttl),
        advertise,
    });
    let keep = match &store {
        Some(url) => setup::Keep::Shared { url, lease },
        None if memory => setup::Keep::Memory,
        None => setup::Keep::Durable(&data_dir),
    };
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    setup::run(&listen, keep, restorable, shutdown).await
}
