//! Durable tasks on three nodes behind a real HAProxy (round-robin), on PostgreSQL and on
//! Redis (PROTOCOL section 13): a `CreateTaskResult` answered through the balancer names a
//! task every node resolves at once, 200 times of 200; and when the node running two tasks
//! is killed with `kill -9`, another node settles each once its lease lapsed: the one whose
//! work may not run twice fails with `owner_lost`, the restartable one runs again, exactly once
//! (a side-effect file outside the servers counts every start).

mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;
use support::haproxy::Haproxy;
use support::shared::{Backend, SharedStore};
use support::{Serve, counter, free_addr, fresh_data_dir, guard, metrics};

const LEASE_MS: u64 = 1000;

use support::current::{create_task as create, rpc};

fn starts(dir: &Path, label: &str) -> usize {
    std::fs::read_to_string(dir.join(label)).map_or(0, |s| s.lines().count())
}

async fn three_nodes(backend: Backend) {
    let Some(db) = SharedStore::fresh(backend).await else { return };
    let effects = fresh_data_dir();
    std::fs::create_dir_all(&effects).expect("a side-effect directory");
    let effects_arg = effects.display().to_string();
    let lease = LEASE_MS.to_string();
    let mut nodes = Vec::new();
    for name in ["n1", "n2", "n3"] {
        let addr = free_addr();
        let base = format!("http://{addr}");
        let args = [
            "--store",
            &db.store,
            "--node-id",
            name,
            "--lease-ttl",
            &lease,
            "--advertise",
            &base,
            "--revisions",
            "all",
        ];
        nodes.push(
            Serve::start_with_env(&addr, &args, &[("FORKLESS_DEMO_SIDE_EFFECTS", effects_arg.as_str())])
                .await,
        );
    }
    let Some(lb) = Haproxy::start(&nodes.iter().map(Serve::addr).collect::<Vec<_>>()).await else { return };
    let http = reqwest::Client::new();

    // 200 of 200: created through the balancer, read on every node at once.
    for i in 0..200 {
        let id = create(&http, &lb.url, "slow_compute", json!({ "seconds": 1 })).await;
        let reads = nodes.iter().map(|n| rpc(&http, &n.url, "tasks/get", json!({ "taskId": id })));
        for (n, read) in nodes.iter().zip(futures::future::join_all(reads).await) {
            assert!(
                read["result"]["taskId"] == id.as_str(),
                "try {i}: task {id} unknown at {} at once: {read}",
                n.url
            );
        }
    }

    // The owner killed mid-task.
    let owner = nodes.remove(0);
    let fragile =
        create(&http, &owner.url, "fragile_job", json!({ "seconds": 600, "label": "fragile" })).await;
    let restartable =
        create(&http, &owner.url, "restartable_job", json!({ "seconds": 600, "label": "again" })).await;
    guard("both works started", async {
        while starts(&effects, "fragile") < 1 || starts(&effects, "again") < 1 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    let killed = Instant::now();
    owner.signal("KILL");
    let _ = owner.wait().await;
    let settled = |id: String| {
        let (http, url) = (http.clone(), lb.url.clone());
        async move {
            guard("the lost owner's task is settled", async {
                loop {
                    let t = rpc(&http, &url, "tasks/get", json!({ "taskId": id })).await;
                    if t["result"]["status"] != "working" || t["result"]["statusMessage"].is_string() {
                        return t["result"].clone();
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            })
            .await
        }
    };
    let lost = settled(fragile.clone()).await;
    assert_eq!(
        (lost["status"].as_str(), lost["error"]["data"]["reason"].as_str()),
        (Some("failed"), Some("owner_lost")),
        "{lost}"
    );
    guard("the restartable work runs again", async {
        while starts(&effects, "again") < 2 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    eprintln!("settled {:?} after the kill (lease {LEASE_MS} ms)", killed.elapsed());
    let again = rpc(&http, &lb.url, "tasks/get", json!({ "taskId": restartable })).await;
    assert_eq!(again["result"]["status"], "working", "{again}");
    // Once every surviving node's takeover loop has looked for lost tasks twice more (its
    // passes counted in /metrics), the lost attempt was restarted by one of them, once.
    let passes = |text: &str| counter(text, "forkless_task_settle_passes_total");
    let mut seen = Vec::new();
    for n in &nodes {
        seen.push(passes(&metrics(&n.url).await));
    }
    for (n, before) in nodes.iter().zip(seen) {
        guard("two more settle passes", async {
            while passes(&metrics(&n.url).await) < before + 2 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
    }
    assert_eq!((starts(&effects, "fragile"), starts(&effects, "again")), (1, 2), "one restart, on one node");
    let settled: u64 = {
        let mut total = 0;
        for n in &nodes {
            total += counter(&metrics(&n.url).await, "forkless_tasks_settled_total{outcome=\"restarted\"}");
        }
        total
    };
    assert_eq!(settled, 1, "one node restarted it");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_on_postgres_keep_every_task_and_settle_a_lost_owners_once() {
    three_nodes(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_on_redis_keep_every_task_and_settle_a_lost_owners_once() {
    three_nodes(Backend::Redis).await;
}

/// The control of the 200-of-200 oracle above, over HTTP: two nodes in this process on one
/// PostgreSQL database, node a's database armed to acknowledge each task write before it
/// writes it (what answering `CreateTaskResult` before the commit would be). The same oracle
/// (created through one node, read at once on the other) catches it: node b does not know a
/// task node a just gave out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn negative_control_a_create_acknowledged_before_its_commit_is_caught_on_the_other_node() {
    use forkless_server::{Server, ServerConfig};
    use forkless_store::shared::{DbFault, FaultyDatabase, Pipeline, SharedStore, TailConfig};
    use forkless_store_postgres::{Hints, PgConfig};

    let Some(db) = forkless_store_postgres::testing::fresh().await else { return };
    let pg = forkless_store_postgres::database(&PgConfig::new(&db.url)).await.expect("connect");
    let (faulty, faults) = FaultyDatabase::new(pg);
    let store_a = SharedStore::new(
        faulty,
        Hints::Off,
        forkless_store::shared::NodeName::new("a").unwrap(),
        Pipeline::On,
        TailConfig::default(),
    );
    let store_b = db.store(Hints::Off).await;
    let serve = |server: axum::Router| async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}/mcp", listener.local_addr().expect("addr"));
        tokio::spawn(async move { axum::serve(listener, server).await });
        url
    };
    let demo = forkless::demo::DemoHandler::new;
    let a = serve(Server::new(store_a, demo(), ServerConfig::default()).expect("config").router()).await;
    let b = serve(Server::new(store_b, demo(), ServerConfig::default()).expect("config").router()).await;
    let http = reqwest::Client::new();
    let mut caught = None;
    for i in 0..200 {
        faults.inject(DbFault::TaskAckedBeforeWrite);
        let id = create(&http, &a, "slow_compute", json!({ "seconds": 1 })).await;
        let read = rpc(&http, &b, "tasks/get", json!({ "taskId": id })).await;
        if read["result"]["taskId"] != id.as_str() {
            caught = Some((i, read));
            break;
        }
    }
    let (at, read) = caught.expect("acknowledging before the commit must be caught");
    assert_eq!(
        (at, read["error"]["code"].as_i64()),
        (0, Some(-32602)),
        "unknown at once on the other node: {read}"
    );
}
