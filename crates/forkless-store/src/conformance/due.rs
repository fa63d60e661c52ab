//! The check of promise 8: [`Store::due`] names exactly the sessions time would change, even
//! as their anchors move later or earlier through ordinary writes.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use forkless_core::{
    AppendTarget, Config, EndReason, GetRequest, Liveness, Schedule, SeededEntropy, SessionId, Timestamp,
};

use super::{T0, cfg, created, emit, open_request};
use crate::{Store, transact};

fn at(secs: u64) -> Timestamp {
    T0.saturating_add(Duration::from_secs(secs))
}

/// What the store says is due at `now`, and what the records it holds say (the oracle).
async fn due_and_oracle<S: Store>(
    store: &S,
    ids: &[SessionId],
    now: Timestamp,
    schedule: &Schedule,
) -> (BTreeSet<SessionId>, BTreeSet<SessionId>) {
    let due: BTreeSet<SessionId> = store.due(now, schedule).await.expect("due").into_iter().collect();
    let mut oracle = BTreeSet::new();
    for &id in ids {
        if let Some(r) = store.load(id).await.expect("load")
            && r.value.wake().due(now, schedule)
        {
            oracle.insert(id);
        }
    }
    (due, oracle)
}

pub(super) async fn due_lists_exactly_what_time_changes<S: Store>(store: Arc<S>) {
    // Connections renewing themselves, so an attachment has a liveness deadline to index.
    let cfg = Config { liveness: Liveness::PerConnection, ..cfg() };
    let schedule = Schedule::of(&cfg, Duration::from_secs(60));
    let (grace, idle_ttl, stream_ttl) =
        (cfg.grace.as_secs(), cfg.limits.session_idle_ttl.as_secs(), cfg.limits.stream_ttl.as_secs());
    // Idle from T0: due once the idle time to live passes.
    let idle = created(&*store, 1).await.id();
    // Attached at T0, renewing itself: due at its liveness deadline.
    let attached = created(&*store, 2).await.id();
    transact(&*store, attached, |r| r.on_get(&GetRequest::default(), T0, &cfg, &mut SeededEntropy::new(3)))
        .await
        .expect("attach");
    // Ended at T0: its tombstone is due after the tombstone time to live.
    let ended = created(&*store, 4).await.id();
    transact(&*store, ended, |r| r.on_end(EndReason::Deleted, T0)).await.expect("end");
    // Busy: its activity moves later, so it must not be due when its first activity would be.
    let busy = created(&*store, 5).await.id();
    transact(&*store, busy, |r| r.on_request(at(idle_ttl / 2))).await.expect("request");
    // A completed request stream, detached: dropped once the stream time to live passes.
    let answered = created(&*store, 6).await.id();
    let stream = open_request(&*store, answered, 7).await;
    emit(&*store, answered, AppendTarget::Stream(stream), 1).await.expect("event");
    transact(&*store, answered, |r| {
        r.on_complete(stream, T0)?;
        let epoch = r.stream(stream).expect("opened").epoch();
        r.on_detach(stream, epoch, T0)
    })
    .await
    .expect("complete and detach");
    let ids = [idle, attached, ended, busy, answered];

    let expect = |secs: u64, want: &[SessionId]| (secs, want.iter().copied().collect::<BTreeSet<_>>());
    let steps = [
        expect(0, &[]),
        expect(grace - 1, &[]),
        expect(grace, &[attached]),
        expect(59, &[attached]),
        expect(60, &[attached, ended]),
        expect(stream_ttl, &[attached, ended, answered]),
        expect(idle_ttl, &[idle, attached, ended, answered]),
        expect(idle_ttl + idle_ttl / 2, &[idle, attached, ended, answered, busy]),
    ];
    for (secs, want) in steps {
        let (due, oracle) = due_and_oracle(&*store, &ids, at(secs), &schedule).await;
        assert_eq!(due, oracle, "at T0+{secs}s the store's due sessions are the records' own");
        assert_eq!(due, want, "at T0+{secs}s");
    }
    // What a sweep does moves them on: the attachment expires, the tombstone goes, the
    // answered stream is dropped; none is due again at once.
    let now = at(stream_ttl);
    for id in [attached, answered] {
        transact(&*store, id, |r| Ok(r.on_tick(now, &cfg))).await.expect("tick");
    }
    store.remove(ended).await.expect("remove");
    let (due, oracle) = due_and_oracle(&*store, &ids, now, &schedule).await;
    assert_eq!(due, oracle, "after the sweep the store's due sessions are the records' own");
    assert!(due.is_empty(), "nothing is due right after its sweep: {due:?}");
}
