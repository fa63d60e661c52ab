//! Owner routing over real processes (PROTOCOL section 10): `forkless gateway` nodes on one
//! PostgreSQL database (or one Redis), each with a stdio MCP server per session (server-everything, whose
//! state dies with its node, so its sessions are not restorable). A request for a session
//! that reaches another node is served by the node whose child holds the session, its SSE
//! answer streamed back through the node it reached; a client's answer to a server-to-client
//! request reaches the child the same way; a node that advertises no address makes its
//! sessions refused elsewhere (typed 503), never served there; and when an owner is killed,
//! its sessions are refused with typed errors until another node ends them `owner_lost`,
//! never re-created with a new child under the old id.

mod support;

use serde_json::{Value, json};
use support::gateway::{all_gone, children, everything};
use support::haproxy::Haproxy;
use support::shared::{Backend, SharedStore};
use support::{Serve, Session, counter, free_addr, guard, metrics, peer, peer_passes};

/// A gateway node `name` on `db`, at a fixed address it advertises (or not).
async fn node(db: &str, name: &str, child: &[String], advertise: bool) -> Serve {
    let addr = free_addr();
    let base = format!("http://{addr}");
    let mut args = vec!["--store", db, "--node-id", name, "--lease-ttl", "1500"];
    if advertise {
        args.extend(["--advertise", &base]);
    }
    Serve::gateway_at(&addr, &args, child).await
}

/// The status and `error.data.reason` of a refused answer.
async fn refusal(response: reqwest::Response) -> (u16, String) {
    let status = response.status().as_u16();
    let body: Value = response.json().await.unwrap_or(Value::Null);
    (status, body["error"]["data"]["reason"].as_str().unwrap_or_default().to_owned())
}

#[tokio::test]
async fn a_gateway_session_is_served_by_its_owner_from_any_node_on_postgres() {
    served_by_its_owner(Backend::Postgres).await;
}

#[tokio::test]
async fn a_gateway_session_is_served_by_its_owner_from_any_node_on_redis() {
    served_by_its_owner(Backend::Redis).await;
}

async fn served_by_its_owner(backend: Backend) {
    let Some(child) = everything() else { return };
    let Some(db) = SharedStore::fresh(backend).await else { return };
    let a = node(&db.store, "a", &child, true).await;
    let b = node(&db.store, "b", &child, true).await;
    let (on_a, _) = Session::open(&a.url).await;
    let owner_child = children(&a, 1).await;

    // Through node b: answered by node a's child, the SSE answer streamed through b.
    let mut on_b = on_a.at(&b.url);
    let echo = on_b.call_tool("echo", json!({ "message": "by way of b" })).await;
    let text = echo.result()["content"][0]["text"].as_str().unwrap_or_default().to_owned();
    assert!(text.contains("by way of b"), "{echo:?}");
    let call = json!({
        "name": "trigger-long-running-operation",
        "arguments": { "duration": 1, "steps": 4 },
        "_meta": { "progressToken": "hop" },
    });
    let long = on_b.request("tools/call", call).await;
    let progress: Vec<u64> = long
        .before
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .map(|m| {
            assert_eq!(m["params"]["progressToken"], "hop", "{m}");
            m["params"]["progress"].as_u64().expect("progress value")
        })
        .collect();
    assert_eq!(progress, [1, 2, 3, 4], "every progress notification through the hop, in order");
    assert!(long.response.get("result").is_some(), "{:?}", long.response);
    assert_eq!(children(&a, 1).await, owner_child, "one child, on the owner, throughout");
    assert!(b.children().is_empty(), "node b started no child for a session it does not own");
    let forwarded =
        counter(&metrics(&b.url).await, "forkless_forwarded_requests_total{outcome=\"answered\"}");
    assert!(forwarded >= 2, "node b forwarded the calls: {forwarded}");

    // DELETE through node b ends the session on its owner: the child stops.
    assert_eq!(on_b.delete().await, 200);
    all_gone(&owner_child, "the owner's child stops on a DELETE sent to another node").await;

    // Negative control: a node that advertises no address. Its session is refused on the
    // other nodes (typed, retryable), not served there; on its own node it goes on.
    let c = node(&db.store, "c", &child, false).await;
    let (mut on_c, _) = Session::open(&c.url).await;
    let (status, reason) = refusal(on_c.at(&a.url).send_unchecked("tools/list", json!({})).await).await;
    assert_eq!((status, reason.as_str()), (503, "owner_not_advertised"));
    let listed = on_c.request("tools/list", json!({})).await;
    assert!(listed.result()["tools"].is_array(), "the session is intact on its owner");

    // The owner is killed: its sessions are refused with typed errors while its lease may
    // be live, then ended `owner_lost` by the node that takes them over; never answered 200.
    let (on_a2, _) = Session::open(&a.url).await;
    a.signal("KILL");
    let mut via_b = on_a2.at(&b.url);
    let mut seen = Vec::new();
    let last = guard("the lost owner's session ends", async {
        loop {
            let answer = refusal(via_b.send_unchecked("tools/list", json!({})).await).await;
            seen.push(answer.clone());
            match answer {
                (503, r) if r == "owner_unreachable" || r == "owner_timeout" => {
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
                other => return other,
            }
        }
    })
    .await;
    assert_eq!((last.0, last.1.as_str()), (404, "owner_lost"), "seen: {seen:?}");
    assert!(b.children().is_empty(), "no child re-created under the old id");
}

#[tokio::test]
async fn the_python_sdk_uses_one_child_through_haproxy_over_three_gateways() {
    let (Some(child), Some(py)) = (everything(), peer(".peers/py/bin/python")) else { return };
    let Some(db) = forkless_store_postgres::testing::fresh().await else { return };
    let mut nodes = Vec::new();
    for name in ["g1", "g2", "g3"] {
        nodes.push(node(&db.url, name, &child, true).await);
    }
    let Some(lb) = Haproxy::start(&nodes.iter().map(Serve::addr).collect::<Vec<_>>()).await else { return };
    // Tools, progress, a sampling request answered by the client and a log message, each
    // request landing on whichever node the balancer picks.
    peer_passes(&py, "tests/interop/gateway/everything.py", &lb.url, &[]).await;
    let (mut forwarded, mut created) = (0, 0);
    for n in &nodes {
        let text = metrics(&n.url).await;
        forwarded += counter(&text, "forkless_forwarded_requests_total{outcome=\"answered\"}");
        created += counter(&text, "forkless_sessions_created_total");
    }
    assert!(forwarded > 0, "round-robin sent requests to nodes that do not own the session");
    assert_eq!(created, 1, "one session, created once, on one node (so one child)");
}
