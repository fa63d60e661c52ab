//! The node lease on a shared database, as two stores (nodes `a` and `b`) see it: one live
//! holder at a time, a lapsed holder that serves nothing, a renewed lease that outlives its
//! time to live, and a renewal the network held back until its node gave up, which must not
//! push the lease out (a dead node's sessions are taken over when its lease lapses, not one
//! whole lease later). Part of [`super::nodes`]'s checks.

use std::time::Duration;

use forkless_core::Seq;

use super::GUARD;
use super::{created, emit_standalone as emit, name};
use crate::shared::{Database, LeaseOp, SharedStore};
use crate::{Error, Reader, Store};

pub(super) async fn one_holder<D: Database>(a: SharedStore<D>, b: SharedStore<D>) {
    let ttl = Duration::from_secs(5);
    let held = a.hold_lease(&name("n1"), ttl, None).await.expect("a free node id is leased");
    let refused = b.hold_lease(&name("n1"), ttl, None).await;
    assert!(matches!(refused, Err(Error::LeaseLost(_))), "a held node id is refused");
    held.release().await.expect("release");
    b.hold_lease(&name("n1"), ttl, None).await.expect("a released node id is leased at once");
}

pub(super) async fn lapsed<D: Database>(a: SharedStore<D>, b: SharedStore<D>) {
    let record = created(&a, 65).await;
    let ttl = Duration::from_millis(600);
    // A process that stops renewing (paused, or cut off) without giving its lease up.
    drop(a.hold_lease(&name("n2"), ttl, None).await.expect("lease"));
    let taken = tokio::time::timeout(GUARD, async {
        loop {
            match b.hold_lease(&name("n2"), ttl, None).await {
                Ok(lease) => return lease,
                Err(Error::LeaseLost(_)) => tokio::time::sleep(ttl / 10).await,
                Err(e) => panic!("{e}"),
            }
        }
    })
    .await
    .expect("the lapsed lease is taken over");
    // The old holder refuses everything: it counted its lease as lapsed before the database.
    assert!(matches!(a.load(record.id()).await, Err(Error::LeaseLost(_))));
    assert!(matches!(emit(&a, &record, 1).await, Err(Error::LeaseLost(_))), "it appends nothing");
    let events =
        b.read(record.id(), record.standalone().id(), Seq::PRIMING, 10, Reader::Inspector).await.unwrap();
    assert!(events.is_empty(), "nothing was appended under the lapsed lease");
    taken.check().expect("the new holder holds it");
}

pub(super) async fn renewed<D: Database>(a: SharedStore<D>, b: SharedStore<D>) {
    let record = created(&a, 66).await;
    let ttl = Duration::from_millis(300);
    let started = std::time::Instant::now();
    let held = a.hold_lease(&name("n3"), ttl, None).await.expect("lease");
    // Wait until the keeper's renewals carried the lease three times past its first time to
    // live (each landed renewal moves `held_until` on), then check it at once.
    tokio::time::timeout(GUARD, async {
        while held.held_until() < started + ttl * 3 {
            tokio::time::sleep(ttl / 20).await;
        }
    })
    .await
    .expect("the keeper renews the lease");
    held.check().expect("still held");
    emit(&a, &record, 1).await.expect("its holder still serves");
    assert!(
        matches!(b.hold_lease(&name("n3"), ttl, None).await, Err(Error::LeaseLost(_))),
        "and nobody else can take it"
    );
}

/// A renewal sent while the node still trusted its lease, held back by the network and
/// executed after the node gave up (less than the node's margin left on the database's clock),
/// changes nothing: the lease lapses when it would have. The control: the same renewal
/// without that condition (the statement of earlier builds) pushes the lease a whole time to
/// live out.
pub(super) async fn late_renewal<D: Database>(a: SharedStore<D>, b: SharedStore<D>) {
    let ttl = Duration::from_millis(1000);
    let in_hand = ttl / 5;
    for (node, in_hand, pushed_out) in [("n7", in_hand, false), ("n8", Duration::ZERO, true)] {
        let acquire = |token| LeaseOp::Acquire { node, token, ttl, advertise: None };
        assert!(a.database().lease(acquire("t-a")).await.expect("acquire"), "a free node id is leased");
        let acquired = tokio::time::Instant::now();
        // The node counts its lease lapsed `in_hand` before the database does; its renewal
        // arrives half of that before the database's lapse.
        tokio::time::sleep_until(acquired + ttl - ttl / 10).await;
        let renew = LeaseOp::Renew { node, token: "t-a", ttl, in_hand };
        let renewed = a.database().lease(renew).await.expect("renew");
        assert_eq!(renewed, pushed_out, "{node}: a renewal with {in_hand:?} required in hand, arriving late");
        // Past the lease's first time to live: another process gets the node id unless the
        // late renewal pushed the lease out.
        tokio::time::sleep_until(acquired + ttl + ttl / 10).await;
        let taken = b.database().lease(acquire("t-b")).await.expect("acquire");
        assert_eq!(taken, !pushed_out, "{node}: taken over when the first lease lapsed");
    }
}
