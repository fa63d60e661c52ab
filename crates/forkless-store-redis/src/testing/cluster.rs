//! For tests (feature `testing`): a Redis Cluster of a test's own, three primaries on free
//! ports, each a [`PrivateRedis`] in cluster mode, the 16,384 slots split between them
//! (`CLUSTER ADDSLOTSRANGE`) and joined (`CLUSTER MEET`). Without `redis-server` the test
//! fails when `CI=true` and is skipped (with a note) otherwise.

use std::time::{Duration, Instant};

use super::PrivateRedis;

/// A failure guard: a cluster that does not form fails the test instead of hanging it.
const GUARD: Duration = Duration::from_secs(30);

/// A Redis Cluster of three primaries (no replicas, no persistence), torn down when dropped.
#[derive(Debug)]
pub struct PrivateRedisCluster {
    nodes: Vec<PrivateRedis>,
}

const FLAGS: &[&str] = &[
    "--cluster-enabled",
    "yes",
    "--cluster-config-file",
    "nodes.conf",
    "--cluster-node-timeout",
    "2000",
    "--save",
    "",
    "--appendonly",
    "no",
];

impl PrivateRedisCluster {
    /// Three primaries, formed and serving every slot, or `None` (skip) when there is no
    /// `redis-server` and this is not CI.
    pub fn start() -> Option<Self> {
        let nodes: Vec<PrivateRedis> = (0..3).map(|_| PrivateRedis::start(FLAGS)).collect::<Option<_>>()?;
        let ranges = [(0, 5460), (5461, 10922), (10923, 16383)];
        for (node, (first, last)) in nodes.iter().zip(ranges) {
            node.command(&["CLUSTER", "ADDSLOTSRANGE", &first.to_string(), &last.to_string()]);
        }
        for other in &nodes[1..] {
            nodes[0].command(&["CLUSTER", "MEET", "127.0.0.1", &other.port().to_string()]);
        }
        let this = Self { nodes };
        this.wait_until_formed();
        Some(this)
    }

    /// Every node sees every other and every slot served.
    fn wait_until_formed(&self) {
        let deadline = Instant::now() + GUARD;
        loop {
            let formed = self.nodes.iter().all(|n| {
                let info = match n.command(&["CLUSTER", "INFO"]) {
                    redis::Value::BulkString(b) => String::from_utf8_lossy(&b).into_owned(),
                    redis::Value::VerbatimString { text, .. } => text,
                    _ => String::new(),
                };
                info.contains("cluster_state:ok")
                    && info.contains("cluster_known_nodes:3")
                    && info.contains("cluster_slots_ok:16384")
            });
            if formed {
                return;
            }
            assert!(Instant::now() < deadline, "the redis cluster did not form");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The URL of one of its nodes (a store finds the others through it).
    pub fn url(&self) -> String {
        self.nodes[0].url()
    }

    /// Its nodes.
    pub fn nodes(&self) -> &[PrivateRedis] {
        &self.nodes
    }

    /// How many keys node `i` holds.
    pub fn keys_on(&self, i: usize) -> i64 {
        match self.nodes[i].command(&["DBSIZE"]) {
            redis::Value::Int(n) => n,
            other => panic!("DBSIZE answered {other:?}"),
        }
    }
}
