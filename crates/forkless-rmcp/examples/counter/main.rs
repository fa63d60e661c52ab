//! The rmcp counter served by forkless, on the durable default store.
//!
//! ```text
//! cargo run -p forkless-rmcp --example counter -- [--listen 127.0.0.1:8080] [--data-dir DIR] [--memory]
//! ```
//!
//! `--memory`: the in-memory store instead of the durable one (nothing survives a restart).
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
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        match flag.as_str() {
            "--listen" => listen = args.next().ok_or("--listen needs an address")?,
            "--data-dir" => data_dir = args.next().ok_or("--data-dir needs a directory")?.into(),
            "--memory" => memory = true,
            other => return Err(format!("unknown flag {other}").into()),
        }
    }
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    setup::run(&listen, (!memory).then_some(data_dir.as_path()), shutdown).await
}
