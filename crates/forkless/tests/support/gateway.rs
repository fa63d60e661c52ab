//! `forkless gateway` helpers: server-everything as the child, and waiting on children.

use super::{Serve, guard, peer, running};

const EVERYTHING: &str = ".peers/stdio/node_modules/@modelcontextprotocol/server-everything/dist/index.js";

/// `node <server-everything> stdio`, if installed.
pub fn everything() -> Option<Vec<String>> {
    let script = peer(EVERYTHING)?;
    Some(vec!["node".into(), script.display().to_string(), "stdio".into()])
}

/// Wait until the gateway has exactly `n` children; their pids.
pub async fn children(gw: &Serve, n: usize) -> Vec<u32> {
    guard(&format!("{n} children"), async {
        loop {
            let now: Vec<u32> = gw.children().into_iter().filter(|p| running(*p)).collect();
            if now.len() == n {
                return now;
            }
            tokio::task::yield_now().await;
        }
    })
    .await
}

/// Wait until none of `pids` runs.
pub async fn all_gone(pids: &[u32], what: &str) {
    guard(what, async {
        while pids.iter().any(|p| running(*p)) {
            tokio::task::yield_now().await;
        }
    })
    .await;
}
