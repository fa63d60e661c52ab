//! The Redis store on a Redis Cluster (three primaries of the test's own): the conformance
//! suite, the two-node checks (tail interest among them) and the state-machine test pass unchanged, and a group commit
//! across sessions that live on every primary stores each session's events, gap-free, once.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

use bytes::Bytes;
use forkless_core::{AppendTarget, EventKind, Limits, Seq, Timestamp};
use forkless_store::conformance::model::{Backend, cases, run};
use forkless_store::{Append, Reader, Store};
use forkless_store_redis::testing::PrivateRedisCluster;
use forkless_store_redis::{Hints, RedisConfig, RedisStore};

static PREFIX: AtomicU32 = AtomicU32::new(0);

/// A store on `url`'s cluster under a prefix of its own (or `prefix`), named `node`.
async fn store(url: &str, prefix: Option<&str>, node: Option<&str>, hints: Hints) -> RedisStore {
    let mut cfg = RedisConfig::new(url);
    cfg.prefix = prefix.map_or_else(|| format!("c{}", PREFIX.fetch_add(1, Ordering::Relaxed)), str::to_owned);
    cfg.hints = hints;
    cfg.node = node.map(str::to_owned);
    forkless_store_redis::connect(cfg).await.expect("connect to the redis cluster")
}

async fn cluster() -> Option<PrivateRedisCluster> {
    tokio::task::spawn_blocking(PrivateRedisCluster::start).await.expect("start a cluster")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_conformance_suite_passes_on_a_redis_cluster() {
    let Some(cluster) = cluster().await else { return };
    let url = cluster.url();
    forkless_store::conformance::run_all(|| store(&url, None, None, Hints::Off)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_pass_the_node_checks_on_a_redis_cluster() {
    let Some(cluster) = cluster().await else { return };
    let url = cluster.url();
    for name in forkless_store::conformance::NODE_CHECKS {
        let prefix = format!("n{}", PREFIX.fetch_add(1, Ordering::Relaxed));
        let a = store(&url, Some(&prefix), Some("a"), Hints::Notify).await;
        let b = store(&url, Some(&prefix), Some("b"), Hints::Notify).await;
        forkless_store::conformance::run_nodes(name, a, b).await;
    }
    // Tail interest: the interest set lies in its session's slot, as the write that reads it.
    use forkless_store::conformance::interest::{self, Leases};
    for (check, leases) in [0, 1].into_iter().flat_map(|c| [(c, Leases::Held), (c, Leases::None)]) {
        let prefix = format!("n{}", PREFIX.fetch_add(1, Ordering::Relaxed));
        let a = store(&url, Some(&prefix), Some("a"), Hints::Notify).await;
        let b = store(&url, Some(&prefix), Some("b"), Hints::Notify).await;
        match check {
            0 => interest::commits_hint_only_the_sessions_another_node_watches(a, b, leases).await,
            _ => interest::a_watch_that_races_a_commit_misses_nothing(a, b, leases).await,
        }
    }
}

/// Sessions fall in buckets spread over every primary; appends to many of them at once are
/// group-committed per bucket, and every stream reads back gap-free, each event once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_commit_across_every_primary_stores_each_sessions_events_once() {
    let Some(cluster) = cluster().await else { return };
    let store = store(&cluster.url(), None, None, Hints::Off).await;
    let limits = Limits::default();
    let mut records = Vec::new();
    for seed in 0..96 {
        let record = forkless_store::conformance::new_record(seed, true);
        store.create(record.clone()).await.unwrap();
        records.push(record);
    }
    let appends = records.iter().flat_map(|r| (1..=5u64).map(move |n| (r, n))).map(|(r, n)| {
        let store = store.clone();
        let session = r.id();
        let limits = &limits;
        async move {
            let append = Append {
                session,
                target: AppendTarget::Standalone,
                payload: Bytes::from(format!("{{\"s\":\"{session}\",\"n\":{n}}}")),
                kind: EventKind::Intermediate,
                now: Timestamp::from_millis(1_000_000),
                limits,
            };
            store.append(append).await
        }
    });
    for result in futures::future::join_all(appends).await {
        result.expect("append");
    }
    for r in &records {
        let stream = r.standalone().id();
        // A load on the node waits for its appends: every event is stored by then.
        store.load(r.id()).await.unwrap();
        let events = store.read(r.id(), stream, Seq::PRIMING, 100, Reader::Inspector).await.unwrap();
        assert_eq!(events.iter().map(|e| e.seq.get()).collect::<Vec<_>>(), [1, 2, 3, 4, 5]);
        let mut ns: Vec<String> =
            events.iter().map(|e| String::from_utf8_lossy(&e.payload).into_owned()).collect();
        ns.sort();
        ns.dedup();
        assert_eq!(ns.len(), 5, "each event once");
    }
    for i in 0..cluster.nodes().len() {
        assert!(cluster.keys_on(i) > 0, "primary {i} holds some of the sessions");
    }
}

/// The state-machine test on the cluster: every case a store of its own under a prefix of its
/// own.
static URL: Mutex<Option<String>> = Mutex::new(None);

struct OnCluster;

impl Backend for OnCluster {
    type S = RedisStore;
    const NAME: &'static str = "redis cluster (three primaries, a fresh prefix per case)";
    fn open(rt: &tokio::runtime::Runtime, _: Timestamp) -> RedisStore {
        let url = URL.lock().unwrap().clone().expect("the cluster runs");
        rt.block_on(store(&url, None, None, Hints::Off))
    }
}

#[test]
fn core_and_redis_store_keep_the_invariant_on_a_cluster_under_random_histories() {
    let Some(cluster) = PrivateRedisCluster::start() else { return };
    *URL.lock().unwrap() = Some(cluster.url());
    run::<OnCluster>((cases() / 50).max(1));
    *URL.lock().unwrap() = None;
}

/// The same cluster over TLS (`tls-cluster yes`, one CA): the store follows every primary's
/// TLS port, trusting the CA beside the system's roots, and passes the conformance suite.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_conformance_suite_passes_on_a_redis_cluster_over_tls() {
    let Some(cluster) = tokio::task::spawn_blocking(PrivateRedisCluster::start_tls).await.expect("start")
    else {
        return;
    };
    let url = cluster.tls_url().expect("a TLS cluster");
    let ca = cluster.ca_file().expect("its CA").to_owned();
    let connect = || {
        let mut cfg = RedisConfig::new(&url);
        cfg.prefix = format!("t{}", PREFIX.fetch_add(1, Ordering::Relaxed));
        cfg.hints = Hints::Off;
        cfg.tls.ca_file = Some(ca.clone());
        async move { forkless_store_redis::connect(cfg).await.expect("connect to the TLS cluster") }
    };
    // It is a cluster: the store spread its sessions over more than one primary.
    let probe = connect().await;
    for seed in 0..32 {
        probe.create(forkless_store::conformance::new_record(seed, true)).await.unwrap();
    }
    let holding = (0..3).filter(|i| cluster.keys_on(*i) > 0).count();
    assert!(holding > 1, "keys on {holding} primary");
    forkless_store::conformance::run_all(connect).await;
}
