//! The checks of a store shared by many nodes: two stores on one database (nodes `a` and `b`,
//! both sending and receiving hints) must behave as one store. A watcher on one node is woken
//! by the other's write; appends and resumes racing from both nodes are numbered and fenced
//! as on one node; a removal on one node stops the other's watchers; a node id is leased to
//! one live process at a time, and a node whose lease lapsed serves nothing. Call
//! [`run_nodes`], or use [`store_node_tests!`](crate::store_node_tests).

use std::collections::BTreeSet;
use std::time::Duration;

use forkless_core::{GetOutcome, GetRequest, SeededEntropy, Seq, SessionRecord};

use super::{GUARD, T0, cfg, created, emit_standalone as emit, leases, name, payload};
use crate::shared::{Database, Loaded, SharedStore, Takeover};
use crate::{Advertised, Error, Owner, Ownership, Publishing, Spending, Store};
use crate::{Reader, StreamEnd, transact};

/// Every check of two nodes, by name.
pub const NODE_CHECKS: &[&str] = &[
    "a_watcher_on_another_node_is_woken_by_its_write",
    "appends_racing_on_two_nodes_are_numbered_gap_free",
    "resumes_racing_on_two_nodes_each_get_a_distinct_epoch",
    "a_removal_on_one_node_stops_the_watchers_on_another",
    "a_node_id_is_leased_to_one_process_at_a_time",
    "a_lapsed_lease_is_taken_over_and_its_old_holder_serves_nothing",
    "a_renewed_lease_outlives_its_time_to_live",
    "a_renewal_arriving_after_its_node_gave_up_changes_nothing",
    "a_lost_nodes_sessions_are_taken_over_once",
    "a_session_names_its_owner_and_its_address",
    "a_key_spent_on_one_node_is_spent_on_every_node",
    "a_notice_published_on_one_node_reaches_every_node_once",
    "a_writer_displaced_by_another_node_reads_nothing_after_the_handover",
    "a_load_asks_only_whether_the_cached_session_moved",
    "a_task_created_on_one_node_resolves_on_the_other_at_once",
];

/// Run one two-node check by name on nodes `a` and `b` of one fresh, empty database.
pub async fn run_nodes<D: Database>(name: &str, a: SharedStore<D>, b: SharedStore<D>) {
    match name {
        "a_watcher_on_another_node_is_woken_by_its_write" => woken_by_the_other_node(a, b).await,
        "appends_racing_on_two_nodes_are_numbered_gap_free" => racing_appends(a, b).await,
        "resumes_racing_on_two_nodes_each_get_a_distinct_epoch" => racing_resumes(a, b).await,
        "a_removal_on_one_node_stops_the_watchers_on_another" => removal_stops_watchers(a, b).await,
        "a_node_id_is_leased_to_one_process_at_a_time" => leases::one_holder(a, b).await,
        "a_lapsed_lease_is_taken_over_and_its_old_holder_serves_nothing" => leases::lapsed(a, b).await,
        "a_renewed_lease_outlives_its_time_to_live" => leases::renewed(a, b).await,
        "a_renewal_arriving_after_its_node_gave_up_changes_nothing" => leases::late_renewal(a, b).await,
        "a_lost_nodes_sessions_are_taken_over_once" => taken_over(a, b).await,
        "a_session_names_its_owner_and_its_address" => owners_named(a, b).await,
        "a_key_spent_on_one_node_is_spent_on_every_node" => spent_everywhere(a, b).await,
        "a_notice_published_on_one_node_reaches_every_node_once" => notices(a, b).await,
        "a_writer_displaced_by_another_node_reads_nothing_after_the_handover" => handover(a, b).await,
        "a_load_asks_only_whether_the_cached_session_moved" => unchanged_loads(a, b).await,
        "a_task_created_on_one_node_resolves_on_the_other_at_once" => {
            super::tasks::resolves_on_the_other_node(&a, &b).await.unwrap_or_else(|e| panic!("{e}"))
        }
        other => panic!("no two-node check named {other}"),
    }
}

/// One `#[tokio::test]` per two-node check. `$make` is an async expression yielding
/// `Option<(guard, a, b)>`: two nodes' stores on one fresh database, the guard kept until the
/// check ends, `None` skipping it.
#[macro_export]
macro_rules! store_node_tests {
    (maybe $make:expr) => {
        $crate::store_node_tests!(@each $make;
            a_watcher_on_another_node_is_woken_by_its_write, appends_racing_on_two_nodes_are_numbered_gap_free,
            resumes_racing_on_two_nodes_each_get_a_distinct_epoch, a_removal_on_one_node_stops_the_watchers_on_another,
            a_node_id_is_leased_to_one_process_at_a_time, a_lapsed_lease_is_taken_over_and_its_old_holder_serves_nothing,
            a_renewed_lease_outlives_its_time_to_live, a_renewal_arriving_after_its_node_gave_up_changes_nothing,
            a_lost_nodes_sessions_are_taken_over_once,
            a_session_names_its_owner_and_its_address, a_key_spent_on_one_node_is_spent_on_every_node,
            a_notice_published_on_one_node_reaches_every_node_once,
            a_writer_displaced_by_another_node_reads_nothing_after_the_handover,
            a_load_asks_only_whether_the_cached_session_moved,
            a_task_created_on_one_node_resolves_on_the_other_at_once);
    };
    (@each $make:expr; $($name:ident),*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let Some((_guard, a, b)) = $make.await else { return };
                $crate::conformance::run_nodes(stringify!($name), a, b).await;
            }
        )*
        /// The macro's list is the whole list.
        #[test]
        fn every_node_check_runs() {
            assert_eq!(&[$(stringify!($name)),*], $crate::conformance::NODE_CHECKS);
        }
    };
}

async fn woken_by_the_other_node<S: Store>(a: S, b: S) {
    let record = created(&a, 61).await;
    let stream = record.standalone().id();
    let mut watch = b.watch(record.id(), stream).await.unwrap();
    assert_eq!(watch.current().delivered, Seq::PRIMING);
    let id = emit(&a, &record, 1).await.unwrap();
    tokio::time::timeout(GUARD, async {
        while watch.current().delivered < id.seq {
            watch.changed().await;
        }
    })
    .await
    .expect("node b's watcher is woken by node a's write");
    let events = b.read(record.id(), stream, Seq::PRIMING, 10, Reader::Inspector).await.unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].payload, payload(1));
}

async fn racing_appends<S: Store + Clone>(a: S, b: S) {
    let record = created(&a, 62).await;
    let racer = |store: S, record: SessionRecord, base: u64| {
        tokio::spawn(async move {
            let mut got = Vec::new();
            for n in 0..40 {
                got.push((emit(&store, &record, base + n).await.expect("append").seq, base + n));
            }
            got
        })
    };
    let (ra, rb) = (racer(a.clone(), record.clone(), 1000), racer(b.clone(), record.clone(), 2000));
    let (ra, rb) = (ra.await.unwrap(), rb.await.unwrap());
    // A notification's id is provisional on a shared store until it is stored (a write by
    // the other node may renumber it first; nothing is delivered before): the log is judged,
    // once each node's appends are stored (a load waits for them).
    a.load(record.id()).await.unwrap();
    b.load(record.id()).await.unwrap();
    let events =
        a.read(record.id(), record.standalone().id(), Seq::PRIMING, 100, Reader::Inspector).await.unwrap();
    let seqs: Vec<u64> = events.iter().map(|e| e.seq.get()).collect();
    assert_eq!(seqs, (1..=80).collect::<Vec<_>>(), "80 events, numbered gap-free");
    for (racer, base) in [(&ra, 1000), (&rb, 2000)] {
        assert_eq!(racer.len(), 40);
        let mine: Vec<&bytes::Bytes> = events
            .iter()
            .map(|e| &e.payload)
            .filter(|p| (base..base + 40).any(|n| **p == payload(n)))
            .collect();
        let sent: Vec<bytes::Bytes> = (base..base + 40).map(payload).collect();
        assert_eq!(mine, sent.iter().collect::<Vec<_>>(), "each racer's events once, in its order");
    }
}

async fn racing_resumes<S: Store + Clone>(a: S, b: S) {
    let record = created(&a, 63).await;
    let (sid, stream) = (record.id(), record.standalone().id());
    let (first, _) =
        transact(&a, sid, |r| r.on_get(&GetRequest::default(), T0, &cfg(), &mut SeededEntropy::new(9)))
            .await
            .unwrap();
    assert!(matches!(first, GetOutcome::Attached(_)));
    let id = emit(&a, &record, 1).await.unwrap();
    // A client learns an id once its event is delivered, so stored: a load on node a waits
    // for that (a notification's append may return before).
    a.load(sid).await.unwrap();
    let lei = format!("{stream}.{}", id.seq);
    let mut epochs = BTreeSet::new();
    for round in 0..10u64 {
        let resume = |store: S, seed: u64| {
            let lei = lei.clone();
            tokio::spawn(async move {
                let req = GetRequest { last_event_id: Some(&lei), stream_token: None };
                let (out, _) =
                    transact(&store, sid, |r| r.on_get(&req, T0, &cfg(), &mut SeededEntropy::new(seed)))
                        .await
                        .unwrap();
                match out {
                    GetOutcome::Attached(g) => g.epoch,
                    other => panic!("resume refused: {other:?}"),
                }
            })
        };
        let (ea, eb) = (resume(a.clone(), 100 + round), resume(b.clone(), 200 + round));
        for epoch in [ea.await.unwrap(), eb.await.unwrap()] {
            assert!(epochs.insert(epoch), "two resumes were granted epoch {epoch:?}");
        }
    }
    let last = b.load(sid).await.unwrap().unwrap().value.stream(stream).unwrap().epoch();
    assert_eq!(Some(&last), epochs.iter().next_back(), "exactly one attachment is current");
}

async fn removal_stops_watchers<S: Store>(a: S, b: S) {
    let record = created(&a, 64).await;
    let mut watch = b.watch(record.id(), record.standalone().id()).await.unwrap();
    a.remove(record.id()).await.unwrap();
    let signal = tokio::time::timeout(GUARD, async {
        loop {
            let signal = watch.changed().await;
            if signal.end.is_some() {
                return signal;
            }
        }
    })
    .await
    .expect("node b's watcher stops");
    assert_eq!(signal.end, Some(StreamEnd::Fenced));
}

async fn taken_over<D: Database>(a: SharedStore<D>, b: SharedStore<D>) {
    let ttl = Duration::from_millis(600);
    let lease_a = a.hold_lease(&name("na"), ttl, None).await.expect("lease");
    let _lease_b = b.hold_lease(&name("nb"), ttl, None).await.expect("lease");
    // Node a owns two sessions, each with a request in flight.
    let sessions = [created(&a, 67).await, created(&a, 68).await];
    let request = |seed| forkless_core::StreamId::generate(&mut SeededEntropy::new(seed));
    let label = Some(forkless_core::Label::new(b"\"req-9\""));
    for (record, stream) in sessions.iter().zip([request(670), request(680)]) {
        transact(&a, record.id(), |r| r.open_labeled_request_stream(stream, label.clone(), T0, &cfg()))
            .await
            .unwrap();
    }
    assert!(b.take_over(T0, Takeover::Restore).await.unwrap().is_empty(), "node a is alive: nothing to take");
    // Node a is lost (its lease lapses); node b takes its sessions over, each exactly once.
    drop(lease_a);
    let orphans = tokio::time::timeout(GUARD, async {
        loop {
            let found = b.take_over(T0, Takeover::Restore).await.unwrap();
            if !found.is_empty() {
                return found;
            }
            tokio::time::sleep(ttl / 10).await;
        }
    })
    .await
    .expect("node a's sessions are taken over once its lease lapsed");
    assert_eq!(orphans.len(), 2, "both requests in flight are orphans to answer: {orphans:?}");
    assert!(orphans.iter().all(|o| o.label == label), "each carries its request's id");
    assert!(b.take_over(T0, Takeover::Restore).await.unwrap().is_empty(), "a session is taken over once");
    // Node b now owns them: its own restart finds them.
    let mine = b.restart(T0).await.unwrap();
    assert_eq!(mine.len(), 2, "node b owns the sessions it took over");
}

async fn owners_named<D: Database>(a: SharedStore<D>, b: SharedStore<D>) {
    let ttl = Duration::from_millis(600);
    let address = Advertised::new("http://127.0.0.1:9001").expect("an address");
    let lease_a = a.hold_lease(&name("oa"), ttl, Some(&address)).await.expect("lease");
    let _lease_b = b.hold_lease(&name("ob"), ttl, None).await.expect("lease");
    let record = created(&a, 69).await;
    let id = record.id();
    assert_eq!(a.owner(id).await.unwrap(), Owner::Here, "the creating node owns it");
    let named = Owner::Node { node: name("oa"), advertise: Some(address.clone()) };
    assert_eq!(b.owner(id).await.unwrap(), named, "another node is told who owns it and where");
    assert_eq!(
        b.adopt(id, Takeover::Restore, T0).await.unwrap(),
        None,
        "a live owner's session is not taken"
    );
    let theirs = created(&b, 70).await;
    assert_eq!(a.owner(theirs.id()).await.unwrap(), Owner::Node { node: name("ob"), advertise: None });
    // Node a is lost: its session is named lapsed until a node adopts it, then that node's.
    drop(lease_a);
    tokio::time::timeout(GUARD, async {
        while b.owner(id).await.unwrap() != (Owner::Lapsed { node: name("oa") }) {
            tokio::time::sleep(ttl / 10).await;
        }
    })
    .await
    .expect("a lapsed owner is named so");
    let adopted = b.adopt(id, Takeover::End, T0).await.unwrap();
    assert_eq!(adopted, Some(Vec::new()), "adopted once, and ended: nothing to answer");
    assert_eq!(b.adopt(id, Takeover::End, T0).await.unwrap(), None, "never adopted twice");
    assert_eq!(b.owner(id).await.unwrap(), Owner::Here, "the adopting node owns it now");
    let ended = b.load(id).await.unwrap().expect("a tombstone").value;
    assert_eq!(
        ended.session().ended(),
        Some(forkless_core::EndReason::OwnerLost),
        "ended owner_lost, not re-created"
    );
}

/// A one-time key spent on one node reads as spent on the other, and racing spends on both
/// nodes leave exactly one winner.
async fn spent_everywhere<D: Database>(a: SharedStore<D>, b: SharedStore<D>) {
    use crate::{SpendKey, Spent};
    let now = super::wall_clock();
    let until = now.saturating_add(Duration::from_secs(60));
    let key = SpendKey(*b"two-node-key-001");
    assert_eq!(a.spend(key, now, until, now).await.expect("spend"), Spent::Now);
    assert_eq!(b.spend(key, now, until, now).await.expect("spend"), Spent::Before, "b sees a's spend");
    let raced = SpendKey(*b"two-node-key-002");
    let (x, y) = tokio::join!(a.spend(raced, now, until, now), b.spend(raced, now, until, now));
    let outcomes = [x.expect("spend"), y.expect("spend")];
    assert_eq!(outcomes.iter().filter(|o| **o == Spent::Now).count(), 1, "{outcomes:?}");
}

async fn next_notice(rx: &mut tokio::sync::broadcast::Receiver<bytes::Bytes>) -> bytes::Bytes {
    tokio::time::timeout(GUARD, rx.recv()).await.expect("a notice in time").expect("received")
}

/// A listen notification published on one node reaches the subscribers of both, once each.
async fn notices<D: Database>(a: SharedStore<D>, b: SharedStore<D>) {
    let (mut on_a, mut on_b) = (a.subscribe(), b.subscribe());
    super::listener_connected(&b).await;
    super::listener_connected(&a).await;
    let first =
        bytes::Bytes::from_static(br#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#);
    a.publish(first.clone()).await.expect("publish on a");
    assert_eq!(next_notice(&mut on_a).await, first, "a's own subscriber");
    assert_eq!(next_notice(&mut on_b).await, first, "b's subscriber, through the database");
    let second =
        bytes::Bytes::from_static(br#"{"jsonrpc":"2.0","method":"notifications/prompts/list_changed"}"#);
    b.publish(second.clone()).await.expect("publish on b");
    assert_eq!(next_notice(&mut on_a).await, second, "the next on a is b's, not a second copy of its own");
    assert_eq!(next_notice(&mut on_b).await, second);
}

/// A node serves its own writer from what it just committed (its tail), and that read is
/// fenced across nodes too: once another node took the stream over from a live attachment,
/// the displaced writer reads nothing after the store's handover, and the new writer was told
/// to wait that long before it writes (promise 5).
async fn handover<D: Database>(a: SharedStore<D>, b: SharedStore<D>) {
    let record = created(&a, 65).await;
    let (sid, stream) = (record.id(), record.standalone().id());
    let attach = |store: SharedStore<D>, lei: Option<String>, seed: u64| async move {
        let req = GetRequest { last_event_id: lei.as_deref(), stream_token: None };
        let (out, _) = transact(&store, sid, |r| r.on_get(&req, T0, &cfg(), &mut SeededEntropy::new(seed)))
            .await
            .unwrap();
        match out {
            GetOutcome::Attached(g) => g,
            other => panic!("not attached: {other:?}"),
        }
    };
    let first = attach(a.clone(), None, 10).await;
    let mut watch = a.watch(sid, stream).await.unwrap();
    for n in 1..=3 {
        emit(&a, &record, n).await.unwrap();
    }
    super::until_delivered(&mut watch, Seq::new(3)).await;
    let tail_reads = |s: &SharedStore<D>| {
        s.metrics().iter().find(|m| m.name == "forkless_store_tail_reads_total").map_or(0, |m| m.value)
    };
    let served = tail_reads(&a);
    let events = a.read(sid, stream, Seq::PRIMING, 10, Reader::Attached(first.epoch)).await.unwrap();
    assert_eq!(events.iter().map(|e| e.seq.get()).collect::<Vec<_>>(), [1, 2, 3]);
    assert_eq!(tail_reads(&a), served + 1, "node a served its writer from what it committed");

    let second = attach(b.clone(), Some(format!("{stream}.3")), 11).await;
    assert!(second.displaced, "node a's writer was attached");
    assert!(b.handover() > Duration::ZERO, "so node b's writer waits out the handover");
    tokio::time::sleep(a.handover() + Duration::from_millis(20)).await;
    let stale = a.read(sid, stream, Seq::PRIMING, 10, Reader::Attached(first.epoch)).await.unwrap_err();
    assert!(
        matches!(stale, Error::Core(forkless_core::Error::StaleEpoch { held, .. }) if held == first.epoch),
        "after the handover node a's displaced writer reads nothing: {stale:?}"
    );
    let events = b.read(sid, stream, Seq::PRIMING, 10, Reader::Attached(second.epoch)).await.unwrap();
    assert_eq!(events.len(), 3, "node b's writer reads every event");
}

/// A node that holds a session's record asks only whether it moved ([`Database::load_since`]):
/// unchanged, no record travels; moved by the other node, the whole new one does, and the
/// node's own load reads it.
async fn unchanged_loads<D: Database>(a: SharedStore<D>, b: SharedStore<D>) {
    let record = created(&a, 71).await;
    let id = record.id();
    let db = a.database();
    let Loaded::Found { version, tag, .. } = db.load_since(id, None).await.unwrap() else {
        panic!("a stored session is found")
    };
    let Some(tag) = tag else { return }; // a database that never answers unchanged
    assert!(matches!(db.load_since(id, Some((version, tag))).await.unwrap(), Loaded::Unchanged));
    assert_eq!(a.load(id).await.unwrap().expect("the session").version, version);
    emit(&b, &record, 1).await.unwrap();
    let moved = b.load(id).await.unwrap().expect("the session").version;
    assert!(moved > version);
    match db.load_since(id, Some((version, tag))).await.unwrap() {
        Loaded::Found { version: found, .. } => assert_eq!(found, moved, "the moved record, whole"),
        other => panic!("a moved session reads as {other:?}"),
    }
    assert_eq!(a.load(id).await.unwrap().expect("the session").version, moved, "node a reads b's write");
}
