//! A writer woken by a new event lets a burst go on before it reads (`gather_passes`), so
//! the events of one burst leave in few writes, in order, and nothing is held back once the
//! burst is over. The producer is a message backend (as an rmcp service or a stdio child
//! is): each of its notifications crosses a channel and the message layer before it is
//! appended. The negative control (`gather_passes` 0) reads at once and writes many more chunks.

mod common;

use common::{Client, Sse, counter};
use forkless_core::SessionId;
use forkless_server::backend::{BackendConfig, Connector, ExitReason, Link, MessageBackend};
use forkless_server::{RpcError, Server, ServerConfig};
use forkless_store::MemoryStore;
use serde_json::{Value, json};
use tokio::sync::mpsc;

const EVENTS: u64 = 400;

/// A backend whose one tool sends [`EVENTS`] progress notifications, then its answer.
struct Burst;

impl Connector for Burst {
    async fn connect(&self, _session: Option<SessionId>) -> Result<Link, RpcError> {
        let (to_backend, mut rx) = mpsc::channel::<Value>(16);
        let (tx, from_backend) = mpsc::channel(16);
        tokio::spawn(async move {
            while let Some(m) = rx.recv().await {
                let id = m["id"].clone();
                let result = match m["method"].as_str() {
                    Some("initialize") => json!({
                        "protocolVersion": "2025-06-18",
                        "capabilities": { "tools": {} },
                        "serverInfo": { "name": "burst", "version": "1" },
                    }),
                    Some("tools/call") => {
                        let token = m["params"]["_meta"]["progressToken"].clone();
                        for i in 1..=EVENTS {
                            let p = json!({ "progressToken": token, "progress": i });
                            let n =
                                json!({ "jsonrpc": "2.0", "method": "notifications/progress", "params": p });
                            let _ = tx.send((n).into()).await;
                        }
                        json!({ "content": [] })
                    }
                    _ => continue,
                };
                let _ = tx.send((json!({ "jsonrpc": "2.0", "id": id, "result": result })).into()).await;
            }
        });
        Ok(Link {
            to_backend,
            from_backend,
            guard: Box::new(()),
            exit: ExitReason::default(),
            facts: Default::default(),
        })
    }
}

/// Call the burst on a fresh server with `gather_passes`, read the whole stream, check it,
/// and return (events written, writes) from the server's metrics.
async fn burst(gather_passes: u32) -> (u64, u64) {
    let config = ServerConfig { gather_passes, ..ServerConfig::default() };
    let handler = MessageBackend::new(Burst, BackendConfig::default());
    let server = Server::new(MemoryStore::new(), handler, config).expect("valid config");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(server.serve(listener, std::future::pending()));
    let mut c = Client::new(&format!("{base}/mcp"));
    c.initialize().await;
    let params = json!({ "name": "burst", "arguments": {}, "_meta": { "progressToken": "t" } });
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params });
    let events = Sse::new(c.post_raw(&body).await).rest().await;
    let seqs: Vec<u64> = events.iter().map(common::Event::seq).collect();
    assert_eq!(seqs, (1..=EVENTS + 1).collect::<Vec<_>>(), "every event once, in order, then the answer");
    let progress: Vec<u64> = events[..events.len() - 1]
        .iter()
        .map(|e| e.json()["params"]["progress"].as_u64().expect("a progress notification"))
        .collect();
    assert_eq!(progress, (1..=EVENTS).collect::<Vec<_>>());
    assert_eq!(events.last().unwrap().json()["id"], json!(1));
    let m = reqwest::get(format!("{base}/metrics")).await.unwrap().text().await.unwrap();
    (counter(&m, "forkless_sse_events_written_total"), counter(&m, "forkless_sse_writes_total"))
}

/// Measured on this harness: 401 events in 2 writes gathered, in 26 without (the message
/// layer appends what the channel holds, up to 16, while the writer writes).
#[tokio::test]
async fn a_burst_leaves_in_few_writes_and_fewer_than_without_gathering() {
    let (events, gathered) = burst(ServerConfig::default().gather_passes).await;
    assert_eq!(events, EVENTS + 1);
    assert!(events >= 20 * gathered, "{events} events in {gathered} writes: the burst was not gathered");
    let (events, at_once) = burst(0).await;
    assert_eq!(events, EVENTS + 1);
    assert!(
        at_once >= 3 * gathered,
        "{at_once} writes at once, {gathered} gathered: gathering changed nothing"
    );
}
