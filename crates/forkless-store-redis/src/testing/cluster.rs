//! For tests (feature `testing`): a Redis Cluster of a test's own, three primaries on free
//! ports, each a [`PrivateRedis`] in cluster mode, the 16,384 slots split between them
//! (`CLUSTER ADDSLOTSRANGE`) and joined (`CLUSTER MEET`). With TLS
//! ([`PrivateRedisCluster::start_tls`]) every node has a TLS port with a certificate for
//! `127.0.0.1` (the address the nodes announce) from one CA, the cluster bus runs over TLS too (`tls-cluster yes`), and a client connected over TLS
//! is told the nodes' TLS ports. Without `redis-server` the test fails when `CI=true` and is
//! skipped (with a note) otherwise.

use std::time::{Duration, Instant};

use std::path::{Path, PathBuf};

use forkless_tls::testing::TestCa;

use super::{ClientCerts, PrivateRedis};

/// A failure guard: a cluster that does not form fails the test instead of hanging it.
const GUARD: Duration = Duration::from_secs(30);

/// A Redis Cluster of three primaries (no replicas, no persistence), torn down when dropped.
#[derive(Debug)]
pub struct PrivateRedisCluster {
    nodes: Vec<PrivateRedis>,
    /// With TLS: the CA's directory (removed when dropped) and the CA.
    ca: Option<(PathBuf, TestCa)>,
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
        Some(Self::formed(nodes, None))
    }

    /// The same over TLS: clients reach it at [`Self::tls_url`], trusting [`Self::ca_file`].
    pub fn start_tls() -> Option<Self> {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("forkless-redis-ca-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a directory for the cluster's CA");
        let ca = TestCa::new(&dir);
        let flags: Vec<&str> = FLAGS.iter().copied().chain(["--tls-cluster", "yes"]).collect();
        let nodes: Vec<PrivateRedis> = (0..3)
            .map(|_| PrivateRedis::start_tls(&flags, &ca, &["127.0.0.1"], ClientCerts::No))
            .collect::<Option<_>>()?;
        Some(Self::formed(nodes, Some((dir, ca))))
    }

    fn formed(nodes: Vec<PrivateRedis>, ca: Option<(PathBuf, TestCa)>) -> Self {
        let ranges = [(0, 5460), (5461, 10922), (10923, 16383)];
        for (node, (first, last)) in nodes.iter().zip(ranges) {
            node.command(&["CLUSTER", "ADDSLOTSRANGE", &first.to_string(), &last.to_string()]);
        }
        for other in &nodes[1..] {
            // Over TLS the cluster bus listens beside the TLS port.
            let port = other.tls_port().unwrap_or(other.port());
            nodes[0].command(&["CLUSTER", "MEET", "127.0.0.1", &port.to_string()]);
        }
        let this = Self { nodes, ca };
        this.wait_until_formed();
        this
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

    /// The `rediss://` URL of one of its nodes, if started with TLS.
    pub fn tls_url(&self) -> Option<String> {
        self.nodes[0].tls_url("127.0.0.1")
    }

    /// The CA that signed its nodes' certificates, if started with TLS.
    pub fn ca_file(&self) -> Option<&Path> {
        self.ca.as_ref().map(|(_, ca)| ca.ca_file.as_path())
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

impl Drop for PrivateRedisCluster {
    fn drop(&mut self) {
        if let Some((dir, _)) = &self.ca {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}
