//! A node cut off from its database by a silent partition (a relay that holds every connection
//! open and forwards nothing: dropped packets, so the node learns only from its own clocks),
//! as real processes on PostgreSQL and on Redis, with a second node beside it. What a load
//! balancer and a client see from the cut-off node: `/healthz` never hangs (each probe is
//! answered within the health timeout) and answers 503 once the node stops trusting its
//! lease; a request another node forwards to it is refused with 503 within the lease time,
//! not after a drain or a database timeout. (The resetting partition, and the client's view of
//! the takeover that follows, are `node_lease.rs`'s; a renewal the network releases after its
//! node gave up is the store conformance check
//! `a_renewal_arriving_after_its_node_gave_up_changes_nothing`, with its control.)

mod support;

use std::time::{Duration, Instant};

use serde_json::json;
use support::relay::Relay;
use support::shared::{Backend, SharedStore};
use support::{Serve, Session, free_addr};

/// The nodes' lease time to live.
const LEASE: Duration = Duration::from_millis(1500);

/// A node `name` on `store`, advertising its address.
async fn node(store: &str, name: &str) -> Serve {
    let addr = free_addr();
    let base = format!("http://{addr}");
    let lease = LEASE.as_millis().to_string();
    let args = ["--store", store, "--node-id", name, "--lease-ttl", &lease, "--advertise", &base];
    Serve::start_at(&addr, &args).await
}

#[tokio::test]
async fn a_silently_partitioned_node_says_so_at_once_on_postgres() {
    silently_partitioned(Backend::Postgres).await;
}

#[tokio::test]
async fn a_silently_partitioned_node_says_so_at_once_on_redis() {
    silently_partitioned(Backend::Redis).await;
}

async fn silently_partitioned(backend: Backend) {
    let Some(db) = SharedStore::fresh(backend).await else { return };
    let relay = Relay::start(db.port()).await;
    let a = node(&db.via(relay.port), "na").await;
    let b = node(&db.store, "nb").await;
    // A session of node a's, reached through node b (which forwards to its owner).
    let (mut session, _) = Session::open(&a.url).await;
    session.url = b.url.clone();
    let forwarded = session.send_unchecked("tools/list", json!({})).await;
    assert_eq!(forwarded.status(), 200, "b forwards to the session's owner");

    relay.hold();
    let held = Instant::now();
    // A request for the cut-off owner's session, sent through node b at once.
    let post = tokio::spawn(async move {
        let response = session.send_unchecked("tools/list", json!({})).await;
        let status = response.status().as_u16();
        let body = response.text().await.unwrap_or_default();
        (held.elapsed(), status, body)
    });

    // The load balancer's view of node a: every probe answered within the health timeout
    // (1 s) and a little, and 503 once the node no longer trusts its lease.
    let health = a.url.replace("/mcp", "/healthz");
    let http = reqwest::Client::new();
    let mut probes = Vec::new();
    let unhealthy = loop {
        let asked = Instant::now();
        let answer = tokio::time::timeout(Duration::from_secs(5), http.get(&health).send()).await;
        let took = asked.elapsed();
        let status = match answer {
            Err(_) => panic!("/healthz hung 5 s, {:?} after the partition: {probes:?}", held.elapsed()),
            Ok(Err(e)) => panic!("node a stopped before /healthz said 503 ({e}): {probes:?}"),
            Ok(Ok(response)) => response.status().as_u16(),
        };
        probes.push((held.elapsed(), status, took));
        assert!(took < Duration::from_millis(1500), "a /healthz probe took {took:?}: {probes:?}");
        if status == 503 {
            break held.elapsed();
        }
        assert!(held.elapsed() < LEASE + Duration::from_secs(1), "/healthz still 200: {probes:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // The node stops trusting its lease at most its time to live after its last renewal,
    // which was at most a third of it before the partition.
    assert!(unhealthy <= LEASE + Duration::from_millis(500), "503 only {unhealthy:?} after: {probes:?}");

    let (took, status, body) = post.await.expect("the forwarded request");
    assert!(took <= LEASE + Duration::from_secs(1), "the forwarded request waited {took:?}: {status} {body}");
    assert_eq!(status, 503, "refused while its owner is cut off: {body}");
    let body: serde_json::Value = serde_json::from_str(&body).expect("a JSON-RPC error");
    let reason = body["error"]["data"]["reason"].as_str().unwrap_or_default().to_owned();
    assert!(
        ["node_stopped", "node_lease_lost", "store_unavailable", "owner_unreachable", "owner_timeout"]
            .contains(&reason.as_str()),
        "a typed reason: {body}"
    );
    drop(b);
}
