//! The checks of what a store counts and remembers beside sessions: [`Store::usage`] (retained
//! bytes follow appends, evictions and removals, every eviction counted under the limit that
//! made it), [`crate::Spending::spend`] (a one-time key is spent once, even by racing callers) and
//! [`crate::Publishing::publish`] (a subscriber of this process receives what it publishes, once).

use std::sync::Arc;

use forkless_core::{AppendTarget, Limits};

use super::{T0, created, delivered, payload};
use crate::{Append, EventKind, Publishing, Spending, Store};

pub(super) async fn usage_counts_retained_bytes_and_evictions<S: Store>(store: Arc<S>) {
    let before = store.usage();
    let sid = created(&*store, 1).await.id();
    let limits = Limits { stream_max_events: 3, stream_max_bytes: 1 << 20, ..Limits::default() };
    let mut sizes = Vec::new();
    for n in 1..=5u64 {
        let p = payload(n);
        sizes.push(p.len() as u64);
        let event = Append {
            session: sid,
            target: AppendTarget::Standalone,
            payload: p,
            kind: EventKind::Intermediate,
            now: T0,
            limits: &limits,
        };
        store.append(event).await.expect("append");
    }
    let standalone = store.load(sid).await.expect("load").expect("stored").value.standalone().id();
    delivered(&*store, sid, standalone, 5).await;
    let after = store.usage();
    let kept: u64 = sizes[2..].iter().sum();
    assert_eq!(after.retained_bytes - before.retained_bytes, kept, "the three newest events are retained");
    assert_eq!(after.evicted_by_events - before.evicted_by_events, 2, "two evicted by stream_max_events");
    assert_eq!(after.evicted_by_bytes, before.evicted_by_bytes, "none by bytes");

    // By bytes: a limit of two events' worth keeps two.
    let tight = Limits { stream_max_events: 100, stream_max_bytes: sizes[0] * 2, ..Limits::default() };
    let sid2 = created(&*store, 2).await.id();
    for n in 1..=4u64 {
        let event = Append {
            session: sid2,
            target: AppendTarget::Standalone,
            payload: payload(n),
            kind: EventKind::Intermediate,
            now: T0,
            limits: &tight,
        };
        store.append(event).await.expect("append");
    }
    let standalone2 = store.load(sid2).await.expect("load").expect("stored").value.standalone().id();
    delivered(&*store, sid2, standalone2, 4).await;
    assert_eq!(
        store.usage().evicted_by_bytes - before.evicted_by_bytes,
        2,
        "two evicted by stream_max_bytes"
    );

    store.remove(sid).await.expect("remove");
    store.remove(sid2).await.expect("remove");
    assert_eq!(store.usage().retained_bytes, before.retained_bytes, "a removed session retains nothing");
}

pub(super) async fn a_one_time_key_is_spent_once<S: Spending + 'static>(store: Arc<S>) {
    use crate::{SpendKey, Spent};
    let now = crate::conformance::wall_clock();
    let until = now.saturating_add(std::time::Duration::from_secs(60));
    let key = SpendKey(*b"conformance-key1");
    // Eight callers race for one key: exactly one spends it.
    let racers: Vec<_> = (0..8)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move { store.spend(key, now, until, now).await.expect("spend") })
        })
        .collect();
    let mut outcomes: Vec<Spent> = Vec::new();
    for racer in racers {
        outcomes.push(racer.await.expect("task"));
    }
    assert_eq!(outcomes.iter().filter(|o| **o == Spent::Now).count(), 1, "{outcomes:?}");
    assert_eq!(store.spend(key, now, until, now).await.expect("spend"), Spent::Before);
    let other = SpendKey(*b"conformance-key2");
    assert_eq!(store.spend(other, now, until, now).await.expect("spend"), Spent::Now, "keys are independent");
}

pub(super) async fn a_published_notice_reaches_each_subscriber_once<S: Publishing>(store: Arc<S>) {
    let (mut one, mut two) = (store.subscribe(), store.subscribe());
    let notice =
        bytes::Bytes::from_static(br#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#);
    store.publish(notice.clone()).await.expect("publish");
    let later =
        bytes::Bytes::from_static(br#"{"jsonrpc":"2.0","method":"notifications/resources/list_changed"}"#);
    store.publish(later.clone()).await.expect("publish");
    for rx in [&mut one, &mut two] {
        let got = [rx.recv().await.expect("first"), rx.recv().await.expect("second")];
        assert_eq!(got, [notice.clone(), later.clone()], "each subscriber, in order, once");
    }
}
