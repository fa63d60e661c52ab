//! The layout of a store's data: an empty prefix is stamped with this build's layout, and data
//! another layout wrote (an earlier build's, with store-wide indexes and one event per set
//! member; or a later build's) is refused by name on connect, never misread.

use forkless_store::Error;
use forkless_store_redis::testing::fresh;
use forkless_store_redis::{Hints, RedisConfig};

async fn raw(url: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(url).unwrap().get_multiplexed_async_connection().await.unwrap()
}

fn config(url: &str, prefix: &str) -> RedisConfig {
    let mut cfg = RedisConfig::new(url);
    cfg.prefix = prefix.to_owned();
    cfg.hints = Hints::Off;
    cfg
}

#[tokio::test]
async fn an_empty_prefix_is_stamped_and_connects_again() {
    let Some(p) = fresh().await else { return };
    drop(p.store(Hints::Off).await);
    let layout: Option<String> = redis::cmd("GET")
        .arg(format!("{}:layout", p.prefix))
        .query_async(&mut raw(&p.url).await)
        .await
        .unwrap();
    assert_eq!(layout.as_deref(), Some("buckets-64"));
    drop(p.store(Hints::Off).await);
}

#[tokio::test]
async fn sessions_an_earlier_layout_wrote_are_refused_by_name() {
    let Some(p) = fresh().await else { return };
    // What an earlier build leaves: a store-wide session set, and no layout stamp.
    let _: i64 = redis::cmd("SADD")
        .arg(format!("{}:sessions", p.prefix))
        .arg(&[7u8; 16][..])
        .query_async(&mut raw(&p.url).await)
        .await
        .unwrap();
    match forkless_store_redis::connect(config(&p.url, &p.prefix)).await {
        Err(Error::Corrupt(why)) => assert!(why.contains("earlier forkless build"), "{why}"),
        other => panic!("an earlier layout must be refused, got {:?}", other.map(|_| ())),
    }
}

#[tokio::test]
async fn a_later_layout_is_refused_by_name() {
    let Some(p) = fresh().await else { return };
    let _: () = redis::cmd("SET")
        .arg(format!("{}:layout", p.prefix))
        .arg("chunks-9")
        .query_async(&mut raw(&p.url).await)
        .await
        .unwrap();
    match forkless_store_redis::connect(config(&p.url, &p.prefix)).await {
        Err(Error::Corrupt(why)) => assert!(why.contains("chunks-9"), "{why}"),
        other => panic!("another layout must be refused, got {:?}", other.map(|_| ())),
    }
}
