//! Tail interest on a shared store (see `shared::interest`): what a database that filters
//! hints ([`Database::filters_hints`]) must show with two nodes, `a` and `b`, both with hints
//! on. A group commit hints a session only while another node watches it (or owns it), and a
//! watch that starts while a commit is under way misses nothing. Each check runs with leases
//! (owners declare nothing) and without (every watcher declares, nobody owns).

use std::time::Duration;

use bytes::Bytes;

use super::{GUARD, listener_connected, name, new_record, until_delivered};
use crate::shared::{Database, SharedStore};
use crate::{Publishing, Store, StreamWatch};

/// Whether the two nodes hold leases (`na`, `nb`) during a check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Leases {
    /// Each node holds one: the session's creator owns it.
    Held,
    /// Neither does: sessions have no owner.
    None,
}

const TTL: Duration = Duration::from_secs(30);

fn counter<S: Store>(store: &S, name: &str) -> u64 {
    store.metrics().iter().find(|m| m.name == name).map_or(0, |m| m.value)
}

/// Every hint `from` sent before now has reached `to`: `from` publishes a marker, which
/// travels on the hints' channel after them (in the order they were sent).
async fn settled<S: Publishing>(from: &S, to: &S, marker: u64) {
    let mut bulletins = to.subscribe();
    let text = format!("{{\"marker\":{marker}}}");
    from.publish(Bytes::from(text.clone())).await.expect("publish");
    tokio::time::timeout(GUARD, async {
        while bulletins.recv().await.expect("bulletins") != text.as_bytes() {}
    })
    .await
    .expect("the marker arrives");
}

async fn emit<S: Store>(store: &S, record: &forkless_core::SessionRecord, n: u64) -> forkless_core::EventId {
    super::emit(store, record.id(), forkless_core::AppendTarget::Standalone, n).await.expect("append")
}

async fn leases<D: Database>(
    a: &SharedStore<D>,
    b: &SharedStore<D>,
    leases: Leases,
) -> Vec<crate::shared::NodeLease<D>> {
    match leases {
        Leases::Held => vec![
            a.hold_lease(&name("na"), TTL, None).await.expect("lease a"),
            b.hold_lease(&name("nb"), TTL, None).await.expect("lease b"),
        ],
        Leases::None => Vec::new(),
    }
}

/// Node a's commits hint a session only while node b watches it: none while nobody there
/// does (checked against a marker that travels after the commit's hints), a hint and a
/// wake-up while b watches, none again once b withdrew its interest.
pub async fn commits_hint_only_the_sessions_another_node_watches<D: Database>(
    a: SharedStore<D>,
    b: SharedStore<D>,
    held: Leases,
) {
    let _leases = leases(&a, &b, held).await;
    listener_connected(&b).await;
    let record = new_record(1, true);
    a.create(record.clone()).await.expect("create");
    let stream = record.standalone().id();
    let mut own = a.watch(record.id(), stream).await.expect("watch");
    let owner = usize::from(held == Leases::None);
    assert_eq!(a.tailing().await, owner, "an owner declares no interest; without leases a watcher does");

    // Nobody else watches: the commit carries no hint.
    let quiet = counter(&b, "forkless_store_hints_received_total");
    let id = emit(&a, &record, 1).await;
    until_delivered(&mut own, id.seq).await;
    settled(&a, &b, 1).await;
    assert_eq!(counter(&b, "forkless_store_hints_received_total"), quiet, "no other node watched: no hint");

    // Node b watches: a's commits hint it, and its watch wakes (it would wait forever else).
    let mut remote: StreamWatch = b.watch(record.id(), stream).await.expect("watch");
    assert_eq!(b.tailing().await, 1, "a watch of another node's session declares interest");
    let id = emit(&a, &record, 2).await;
    until_delivered(&mut remote, id.seq).await;
    let hinted = counter(&b, "forkless_store_hints_received_total");
    assert!(hinted > quiet, "the commit was hinted");

    // Node b stops watching and withdraws: the hints stop again.
    drop(remote);
    assert_eq!(b.sweep_interest().await.expect("sweep"), 1, "the unwatched session's interest is withdrawn");
    assert_eq!(b.tailing().await, 0);
    let id = emit(&a, &record, 3).await;
    until_delivered(&mut own, id.seq).await;
    settled(&a, &b, 2).await;
    assert_eq!(counter(&b, "forkless_store_hints_received_total"), hinted, "withdrawn: no hint");
}

/// Node b starts watching while node a's one commit of the session is under way, 40 times:
/// either the watch's read sees the commit, or the commit sees b's interest and hints it.
pub async fn a_watch_that_races_a_commit_misses_nothing<D: Database>(
    a: SharedStore<D>,
    b: SharedStore<D>,
    held: Leases,
) {
    let _leases = leases(&a, &b, held).await;
    listener_connected(&b).await;
    for round in 0..40u64 {
        let record = new_record(100 + round, true);
        a.create(record.clone()).await.expect("create");
        let stream = record.standalone().id();
        let (watch, id) = tokio::join!(b.watch(record.id(), stream), emit(&a, &record, round));
        until_delivered(&mut watch.expect("watch"), id.seq).await;
    }
}

/// One `#[tokio::test]` per tail-interest check, with leases and without, on two nodes that
/// `$make` (`async` → `Option<(guard, a, b)>`, `None` to skip) connects afresh for each.
#[macro_export]
macro_rules! store_interest_tests {
    (maybe $make:expr) => {
        $crate::store_interest_tests!(@each $make;
            commits_hint_only_the_sessions_another_node_watches: commits_hint_only_the_sessions_another_node_watches, Held;
            without_leases_commits_hint_only_the_sessions_another_node_watches: commits_hint_only_the_sessions_another_node_watches, None;
            a_watch_that_races_a_commit_misses_nothing: a_watch_that_races_a_commit_misses_nothing, Held;
            without_leases_a_watch_that_races_a_commit_misses_nothing: a_watch_that_races_a_commit_misses_nothing, None;
        );
    };
    (@each $make:expr; $($name:ident: $check:ident, $leases:ident;)*) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            use $crate::conformance::interest::{Leases, $check};
            let Some((_guard, a, b)) = $make.await else { return };
            $check(a, b, Leases::$leases).await;
        }
    )*};
}
