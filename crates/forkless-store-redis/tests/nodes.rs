//! Two nodes on one Redis: the two-node checks of the conformance suite, tail interest (a
//! group commit hints a session only while another node watches it, and a watch racing a
//! commit misses nothing), and a lost hint made good when a node's subscription is cut and
//! reconnects.

use std::time::Duration;

use forkless_core::{AppendTarget, EventKind, Limits, Timestamp};
use forkless_store::{Append, Store};
use forkless_store_redis::testing::{TestPrefix, fresh};
use forkless_store_redis::{Hints, RedisStore};

const T0: Timestamp = Timestamp::from_millis(1_000_000);
/// A failure guard: a wake-up that never comes fails the test instead of hanging it.
const GUARD: Duration = Duration::from_secs(10);

/// Nodes `a` and `b` (hints on) under a prefix of their own.
async fn two_nodes() -> Option<(TestPrefix, RedisStore, RedisStore)> {
    let prefix = fresh().await?;
    let (a, b) = (prefix.node("a", Hints::Notify).await, prefix.node("b", Hints::Notify).await);
    Some((prefix, a, b))
}

forkless_store::store_node_tests!(maybe two_nodes());

forkless_store::store_interest_tests!(maybe two_nodes());

/// Cut every pub/sub connection to the test's Redis (node b's subscription among them).
async fn kill_subscriptions(prefix: &TestPrefix) -> i64 {
    let client = redis::Client::open(prefix.url.as_str()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    redis::cmd("CLIENT").arg("KILL").arg("TYPE").arg("pubsub").query_async(&mut conn).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_hint_is_made_good_when_the_subscription_reconnects() {
    let Some(prefix) = fresh().await else { return };
    // Node a sends no hints at all: node b can only learn of its write by re-reading.
    let (a, b) = (prefix.node("a", Hints::Off).await, prefix.node("b", Hints::Notify).await);
    forkless_store::conformance::listener_connected(&b).await;
    let record = forkless_store::conformance::new_record(7, true);
    a.create(record.clone()).await.unwrap();
    let mut watch = b.watch(record.id(), record.standalone().id()).await.unwrap();
    let limits = Limits::default();
    let append = Append {
        session: record.id(),
        target: AppendTarget::Standalone,
        payload: "{}".into(),
        kind: EventKind::Intermediate,
        now: T0,
        limits: &limits,
    };
    let id = a.append(append).await.unwrap();
    assert_eq!(watch.current().delivered, forkless_core::Seq::PRIMING, "no hint was sent");
    tokio::time::timeout(GUARD, async {
        while kill_subscriptions(&prefix).await == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("node b's subscription is connected");
    // Node b re-reads the stream after its subscription reconnected.
    forkless_store::conformance::until_delivered(&mut watch, id.seq).await;
}
