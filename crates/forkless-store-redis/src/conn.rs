//! The connection a store talks to Redis through: one Redis (a connection manager that
//! reconnects by itself) or a Redis Cluster (a cluster connection that routes every command
//! and script call to the primary of its keys' slot and follows the cluster's topology),
//! chosen on connect by asking the server named in the URL whether it runs in cluster mode.
//!
//! It owns the choice and the routing, not what is sent (every command names its keys, and
//! every key of one call shares a slot: `crate::keys`).

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisFuture, Value};

/// One Redis or a Redis Cluster.
#[derive(Clone)]
pub(crate) enum Conn {
    /// One Redis (a primary, with or without replicas).
    Single(ConnectionManager),
    /// A Redis Cluster.
    Cluster(ClusterConnection),
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Single(_) => "Conn::Single",
            Self::Cluster(_) => "Conn::Cluster",
        })
    }
}

impl Conn {
    /// Connect to the Redis `client` reaches (at `url`): to the cluster it belongs to if it
    /// runs in cluster mode.
    pub(crate) async fn open(client: redis::Client, url: &crate::tls::Prepared) -> redis::RedisResult<Self> {
        let mut probe = client.get_multiplexed_async_connection().await?;
        let info: String = redis::cmd("INFO").arg("cluster").query_async(&mut probe).await?;
        if info.lines().any(|l| l.trim() == "cluster_enabled:1") {
            let cluster = url.cluster()?;
            return Ok(Self::Cluster(cluster.get_async_connection().await?));
        }
        Ok(Self::Single(ConnectionManager::new(client).await?))
    }

    /// Whether this is a cluster (a script call then sees only one slot's keys).
    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self, Self::Cluster(_))
    }
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::Single(c) => c.req_packed_command(cmd),
            Self::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Self::Single(c) => c.req_packed_commands(cmd, offset, count),
            Self::Cluster(c) => c.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Single(c) => c.get_db(),
            Self::Cluster(c) => c.get_db(),
        }
    }
}
