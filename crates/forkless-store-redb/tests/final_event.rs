//! A stream's final event (a response a client waits for on an open stream) starts its
//! group's sync at once in batched mode, as an answer sent as a finished body does: it is
//! delivered, with everything appended before it, without waiting out the batch window.
//! Intermediate events still wait for the window.

use std::time::Duration;

use bytes::Bytes;
use forkless_core::{AppendTarget, Config, EventKind, SeededEntropy, Seq, StreamId};
use forkless_store::{Append, Store, transact};
use forkless_store_redb::{Durability, RedbStore};

mod support;
use support::{T0, record};

#[tokio::test]
async fn a_final_event_is_delivered_without_waiting_out_the_window() {
    let dir = tempfile::tempdir().expect("temp dir");
    // A window far longer than the test: only an urgent sync can deliver anything.
    let durability = Durability::Batched { window: Duration::from_secs(3600) };
    let (store, _) = RedbStore::open(dir.path().join("data.redb"), durability, T0).unwrap();
    let (rec, cfg) = (record(3), Config::default());
    let sid = rec.id();
    store.create(rec).await.unwrap();
    let id = StreamId::generate(&mut SeededEntropy::new(31));
    transact(&store, sid, |r| r.open_request_stream(id, T0, &cfg)).await.unwrap();
    let append = |n: u64, kind| Append {
        session: sid,
        target: AppendTarget::Stream(id),
        payload: Bytes::from(format!("{{\"n\":{n}}}")),
        kind,
        now: T0,
        limits: &cfg.limits,
    };
    for n in 1..=2 {
        store.append(append(n, EventKind::Intermediate)).await.unwrap();
    }
    let watch = store.watch(sid, id).await.unwrap();
    assert_eq!(watch.current().delivered, Seq::PRIMING, "intermediate events wait for the window");
    let last = tokio::time::timeout(Duration::from_secs(10), store.append(append(3, EventKind::Final)))
        .await
        .expect("the final append returns once synced")
        .unwrap();
    assert_eq!(last.seq, Seq::new(3));
    assert_eq!(store.watch(sid, id).await.unwrap().current().delivered, Seq::new(3), "delivered at once");
}
