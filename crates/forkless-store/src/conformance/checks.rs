//! The conformance checks themselves, one function per promise (see [`super::CHECKS`]).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use forkless_core::{AppendTarget, EndReason, GetOutcome, GetRequest, Limits, SeededEntropy, Seq, StreamId};

use super::{GUARD, T0, cfg, created, delivered, emit, new_record, open_request, payload, seqs};
use crate::{Append, Error, EventKind, Reader, Store, StreamEnd, Version, transact};

pub(super) async fn create_and_load<S: Store>(store: Arc<S>) {
    let record = new_record(1, false);
    assert_eq!(store.create(record.clone()).await.expect("create"), Version::INITIAL);
    assert!(matches!(store.create(record.clone()).await, Err(Error::SessionExists)));
    let loaded = store.load(record.id()).await.expect("load").expect("present");
    assert_eq!(loaded.version, Version::INITIAL);
    assert_eq!(loaded.value, record);
    let other = new_record(2, false);
    assert!(store.load(other.id()).await.expect("load").is_none());
    assert_eq!(store.sessions().await.expect("sessions"), vec![record.id()]);
}

pub(super) async fn compare_and_set_detects_conflicts<S: Store>(store: Arc<S>) {
    let record = created(&*store, 3).await;
    let a = store.load(record.id()).await.unwrap().unwrap();
    let b = store.load(record.id()).await.unwrap().unwrap();
    let mut first = a.value.clone();
    first.on_request(T0.saturating_add(Duration::from_secs(1))).unwrap();
    let v2 = store.compare_and_set(a.version, first.clone()).await.unwrap().expect("first writer wins");
    assert!(v2 > a.version);
    assert_eq!(store.compare_and_set(b.version, b.value.clone()).await.unwrap(), None, "second writer loses");
    let now = store.load(record.id()).await.unwrap().unwrap();
    assert_eq!((now.version, now.value), (v2, first));
}

pub(super) async fn append_assigns_consecutive_seqs<S: Store>(store: Arc<S>) {
    let record = created(&*store, 4).await;
    let standalone = record.standalone().id();
    for n in 1..=5 {
        let id = emit(&*store, record.id(), AppendTarget::Standalone, n).await.unwrap();
        assert_eq!((id.stream, id.seq), (standalone, Seq::new(n)));
    }
    let request = open_request(&*store, record.id(), 40).await;
    for n in 1..=3 {
        let id = emit(&*store, record.id(), AppendTarget::Stream(request), n).await.unwrap();
        assert_eq!((id.stream, id.seq), (request, Seq::new(n)), "seqs are per stream");
    }
    delivered(&*store, record.id(), standalone, 5).await;
    let events = store.read(record.id(), standalone, Seq::PRIMING, 100, Reader::Inspector).await.unwrap();
    assert_eq!(seqs(&events), vec![1, 2, 3, 4, 5]);
    assert_eq!(events[2].payload, payload(3));
    let loaded = store.load(record.id()).await.unwrap().unwrap().value;
    assert_eq!(loaded.stream(standalone).unwrap().high_water(), Seq::new(5));
}

pub(super) async fn read_starts_at_any_cursor<S: Store>(store: Arc<S>) {
    let record = created(&*store, 5).await;
    let s = record.standalone().id();
    for n in 1..=10 {
        emit(&*store, record.id(), AppendTarget::Standalone, n).await.unwrap();
    }
    delivered(&*store, record.id(), s, 10).await;
    for after in 0..=10u64 {
        let events = store.read(record.id(), s, Seq::new(after), 100, Reader::Inspector).await.unwrap();
        assert_eq!(seqs(&events), (after + 1..=10).collect::<Vec<_>>(), "after {after}");
    }
    let page = store.read(record.id(), s, Seq::new(2), 3, Reader::Inspector).await.unwrap();
    assert_eq!(seqs(&page), vec![3, 4, 5], "max bounds the batch");
    let foreign = StreamId::generate(&mut SeededEntropy::new(99));
    assert!(matches!(
        store.read(record.id(), foreign, Seq::PRIMING, 10, Reader::Inspector).await,
        Err(Error::StreamUnknown)
    ));
}

pub(super) async fn append_refused_on_fenced_stream<S: Store>(store: Arc<S>) {
    let record = created(&*store, 6).await;
    let old = record.standalone().id();
    // Attach, emit, detach, then a cursor-less GET under the reset contract fences `old`.
    let (grant, _) = transact(&*store, record.id(), |r| {
        r.on_get(&GetRequest::default(), T0, &cfg(), &mut SeededEntropy::new(7))
    })
    .await
    .unwrap();
    let GetOutcome::Attached(grant) = grant else { panic!("row 1 attaches") };
    emit(&*store, record.id(), AppendTarget::Standalone, 1).await.unwrap();
    transact(&*store, record.id(), |r| r.on_detach(old, grant.epoch, T0)).await.unwrap();
    let (reset, _) = transact(&*store, record.id(), |r| {
        r.on_get(&GetRequest::default(), T0, &cfg(), &mut SeededEntropy::new(8))
    })
    .await
    .unwrap();
    let GetOutcome::Attached(reset) = reset else { panic!("row 3 resets") };
    assert_eq!(reset.fenced, Some(old));
    let err = emit(&*store, record.id(), AppendTarget::Stream(old), 2).await.unwrap_err();
    assert!(matches!(err, Error::Core(forkless_core::Error::StreamFenced)), "{err:?}");
    let id = emit(&*store, record.id(), AppendTarget::Standalone, 3).await.unwrap();
    assert_eq!((id.stream, id.seq), (reset.stream, Seq::new(1)), "standalone appends go to the new stream");
}

pub(super) async fn append_refused_on_ended_session<S: Store>(store: Arc<S>) {
    let record = created(&*store, 9).await;
    let s = record.standalone().id();
    emit(&*store, record.id(), AppendTarget::Standalone, 1).await.unwrap();
    transact(&*store, record.id(), |r| r.on_end(EndReason::Deleted, T0)).await.unwrap();
    let err = emit(&*store, record.id(), AppendTarget::Standalone, 2).await.unwrap_err();
    assert_eq!(err.ended(), Some(EndReason::Deleted));
    let tomb = store.load(record.id()).await.unwrap().expect("tombstone kept");
    assert_eq!(tomb.value.session().ended(), Some(EndReason::Deleted));
    assert!(tomb.value.streams().all(forkless_core::Stream::is_fenced));
    assert!(
        matches!(
            store.read(record.id(), s, Seq::PRIMING, 10, Reader::Inspector).await,
            Err(Error::Evicted { .. })
        ),
        "an ended session's events are dropped"
    );
}

pub(super) async fn append_bumps_version<S: Store>(store: Arc<S>) {
    let record = created(&*store, 10).await;
    let before = store.load(record.id()).await.unwrap().unwrap();
    emit(&*store, record.id(), AppendTarget::Standalone, 1).await.unwrap();
    assert_eq!(store.compare_and_set(before.version, before.value).await.unwrap(), None);
}

pub(super) async fn watch_wakes_on_append<S: Store>(store: Arc<S>) {
    let record = created(&*store, 11).await;
    let s = record.standalone().id();
    let mut watch = store.watch(record.id(), s).await.unwrap();
    assert_eq!(watch.mark_seen().delivered, Seq::PRIMING);
    let waiter = tokio::spawn(async move { watch.changed().await });
    emit(&*store, record.id(), AppendTarget::Standalone, 1).await.unwrap();
    let signal = tokio::time::timeout(GUARD, waiter).await.expect("woken").unwrap();
    assert_eq!(signal.delivered, Seq::new(1));
}

pub(super) async fn watch_reports_attach_and_fence<S: Store>(store: Arc<S>) {
    let record = created(&*store, 12).await;
    let s = record.standalone().id();
    let mut watch = store.watch(record.id(), s).await.unwrap();
    let before = watch.mark_seen().epoch;
    transact(&*store, record.id(), |r| {
        r.on_get(&GetRequest::default(), T0, &cfg(), &mut SeededEntropy::new(1))
    })
    .await
    .unwrap();
    let attached = tokio::time::timeout(GUARD, watch.changed()).await.expect("woken on attach");
    assert!(attached.epoch > before);
    transact(&*store, record.id(), |r| r.on_end(EndReason::Deleted, T0)).await.unwrap();
    let fenced = tokio::time::timeout(GUARD, watch.changed()).await.expect("woken on fence");
    assert_eq!(fenced.end, Some(StreamEnd::Fenced));
}

pub(super) async fn concurrent_appends_are_gap_free<S: Store>(store: Arc<S>) {
    let record = created(&*store, 13).await;
    let s = record.standalone().id();
    let tasks: Vec<_> = (0..8u64)
        .map(|t| {
            let store = Arc::clone(&store);
            let id = record.id();
            tokio::spawn(async move {
                let mut mine = Vec::new();
                for n in 0..100 {
                    mine.push(
                        emit(&*store, id, AppendTarget::Standalone, t * 1000 + n).await.unwrap().seq.get(),
                    );
                }
                mine
            })
        })
        .collect();
    let mut all = BTreeSet::new();
    for t in tasks {
        let mine = t.await.unwrap();
        assert!(mine.windows(2).all(|w| w[0] < w[1]), "each emitter sees increasing seqs");
        all.extend(mine);
    }
    assert_eq!(all, (1..=800).collect::<BTreeSet<_>>(), "no seq assigned twice, none skipped");
    delivered(&*store, record.id(), s, 800).await;
    let events = store.read(record.id(), s, Seq::PRIMING, 10_000, Reader::Inspector).await.unwrap();
    assert_eq!(seqs(&events), (1..=800).collect::<Vec<_>>());
}

pub(super) async fn concurrent_resumes_each_get_a_distinct_epoch<S: Store>(store: Arc<S>) {
    let record = created(&*store, 14).await;
    let request = open_request(&*store, record.id(), 140).await;
    emit(&*store, record.id(), AppendTarget::Stream(request), 1).await.unwrap();
    let lei = format!("{request}.1");
    let tasks: Vec<_> = (0..8u64)
        .map(|t| {
            let store = Arc::clone(&store);
            let id = record.id();
            let lei = lei.clone();
            tokio::spawn(async move {
                let req = GetRequest { last_event_id: Some(&lei), stream_token: None };
                let (out, _) =
                    transact(&*store, id, |r| r.on_get(&req, T0, &cfg(), &mut SeededEntropy::new(t)))
                        .await
                        .unwrap();
                match out {
                    GetOutcome::Attached(g) => (g.epoch, g.resumed),
                    other => panic!("resume refused: {other:?}"),
                }
            })
        })
        .collect();
    let mut epochs = BTreeSet::new();
    for t in tasks {
        let (epoch, resumed) = t.await.unwrap();
        assert!(resumed);
        assert!(epochs.insert(epoch), "two resumes were granted the same epoch");
    }
    let last = store.load(record.id()).await.unwrap().unwrap().value.stream(request).unwrap().epoch();
    assert_eq!(Some(&last), epochs.iter().next_back(), "exactly one attachment is current");
}

pub(super) async fn eviction_by_count<S: Store>(store: Arc<S>) {
    let record = created(&*store, 15).await;
    let s = record.standalone().id();
    let limits = Limits { stream_max_events: 3, ..Limits::default() };
    for n in 1..=5 {
        store
            .append(Append {
                session: record.id(),
                target: AppendTarget::Standalone,
                payload: payload(n),
                kind: EventKind::Intermediate,
                now: T0,
                limits: &limits,
            })
            .await
            .unwrap();
    }
    delivered(&*store, record.id(), s, 5).await;
    let err = store.read(record.id(), s, Seq::new(1), 10, Reader::Inspector).await.unwrap_err();
    assert!(matches!(err, Error::Evicted { low_water } if low_water == Seq::new(3)), "{err:?}");
    assert_eq!(
        seqs(&store.read(record.id(), s, Seq::new(2), 10, Reader::Inspector).await.unwrap()),
        vec![3, 4, 5]
    );
    let meta = store.load(record.id()).await.unwrap().unwrap().value;
    assert_eq!(meta.stream(s).unwrap().low_water(), Seq::new(3));
}

pub(super) async fn eviction_by_bytes<S: Store>(store: Arc<S>) {
    let record = created(&*store, 16).await;
    let s = record.standalone().id();
    let limits = Limits { stream_max_bytes: 25, ..Limits::default() };
    for _ in 1..=4 {
        let p = Bytes::from_static(b"0123456789");
        store
            .append(Append {
                session: record.id(),
                target: AppendTarget::Standalone,
                payload: p,
                kind: EventKind::Intermediate,
                now: T0,
                limits: &limits,
            })
            .await
            .unwrap();
    }
    delivered(&*store, record.id(), s, 4).await;
    assert_eq!(
        seqs(&store.read(record.id(), s, Seq::new(2), 10, Reader::Inspector).await.unwrap()),
        vec![3, 4]
    );
    let meta = store.load(record.id()).await.unwrap().unwrap().value;
    assert_eq!(meta.stream(s).unwrap().retained_bytes(), 20);
    let big = Bytes::from(vec![b'x'; 26]);
    let err = store
        .append(Append {
            session: record.id(),
            target: AppendTarget::Standalone,
            payload: big,
            kind: EventKind::Intermediate,
            now: T0,
            limits: &limits,
        })
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Core(forkless_core::Error::EventTooLarge { .. })), "{err:?}");
}

pub(super) async fn completed_stream_refuses_appends<S: Store>(store: Arc<S>) {
    let record = created(&*store, 17).await;
    let request = open_request(&*store, record.id(), 170).await;
    let mut watch = store.watch(record.id(), request).await.unwrap();
    watch.mark_seen();
    store
        .append(Append {
            session: record.id(),
            target: AppendTarget::Stream(request),
            payload: payload(1),
            kind: EventKind::Final,
            now: T0,
            limits: &Limits::default(),
        })
        .await
        .unwrap();
    let signal = tokio::time::timeout(GUARD, watch.changed()).await.expect("woken");
    assert_eq!((signal.delivered, signal.end), (Seq::new(1), Some(StreamEnd::Completed)));
    let err = emit(&*store, record.id(), AppendTarget::Stream(request), 2).await.unwrap_err();
    assert!(matches!(err, Error::Core(forkless_core::Error::StreamCompleted)), "{err:?}");
}

pub(super) async fn remove_forgets_everything<S: Store>(store: Arc<S>) {
    let record = created(&*store, 18).await;
    emit(&*store, record.id(), AppendTarget::Standalone, 1).await.unwrap();
    store.remove(record.id()).await.unwrap();
    assert!(store.load(record.id()).await.unwrap().is_none());
    assert!(matches!(
        emit(&*store, record.id(), AppendTarget::Standalone, 2).await,
        Err(Error::SessionUnknown)
    ));
    assert!(store.sessions().await.unwrap().is_empty());
}

pub(super) async fn answer_opens_fills_and_releases_a_stream<S: Store>(store: Arc<S>) {
    let record = created(&*store, 19).await;
    let sid = record.id();
    let limits = Limits { session_max_streams: 2, ..Limits::default() };
    let answer = |seed: u64, complete: bool| {
        let (store, id) = (store.clone(), StreamId::generate(&mut SeededEntropy::new(seed)));
        async move {
            // Answers a millisecond apart, so which one is idle the longest is well defined.
            let at = T0.saturating_add(Duration::from_millis(seed));
            let out = store
                .append(Append {
                    session: sid,
                    target: AppendTarget::Answer(id),
                    payload: payload(seed),
                    kind: EventKind::ending_if(complete),
                    now: at,
                    limits: &limits,
                })
                .await;
            (id, out)
        }
    };

    let (first, out) = answer(190, true).await;
    assert_eq!(out.unwrap(), forkless_core::EventId::new(first, Seq::new(1)));
    let loaded = store.load(sid).await.unwrap().unwrap();
    let meta = loaded.value.stream(first).expect("the answer opened its stream");
    assert!(meta.is_completed() && !meta.is_live(T0), "completed and released");
    let events = store.read(sid, first, Seq::PRIMING, 10, Reader::Inspector).await.unwrap();
    assert_eq!(events.iter().map(|e| e.payload.clone()).collect::<Vec<_>>(), vec![payload(190)]);
    let watch = store.watch(sid, first).await.unwrap();
    assert_eq!((watch.current().delivered, watch.current().end), (Seq::new(1), Some(StreamEnd::Completed)));

    // Refusals store nothing and leave the version alone.
    let err = store
        .append(Append {
            session: sid,
            target: AppendTarget::Answer(first),
            payload: payload(1),
            kind: EventKind::Final,
            now: T0,
            limits: &limits,
        })
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Core(forkless_core::Error::StreamExists)), "{err:?}");
    let (unfinished, out) = answer(191, false).await;
    assert!(matches!(out, Err(Error::Core(forkless_core::Error::AnswerNotFinal))), "{out:?}");
    assert_eq!(store.load(sid).await.unwrap().unwrap().version, loaded.version);
    assert!(store.load(sid).await.unwrap().unwrap().value.stream(unfinished).is_none());
    assert_eq!(store.read(sid, first, Seq::PRIMING, 10, Reader::Inspector).await.unwrap().len(), 1);

    // At the limit, a new answer takes the place of the oldest: its events go with it.
    let (second, out) = answer(192, true).await;
    out.unwrap();
    let (third, out) = answer(193, true).await;
    out.unwrap();
    let loaded = store.load(sid).await.unwrap().unwrap().value;
    assert!(loaded.stream(first).is_none(), "the oldest answer made room");
    assert!(loaded.stream(second).is_some() && loaded.stream(third).is_some());
    assert!(
        store.read(sid, first, Seq::PRIMING, 10, Reader::Inspector).await.is_err(),
        "and its events are gone"
    );
    assert_eq!(
        store.read(sid, third, Seq::PRIMING, 10, Reader::Inspector).await.unwrap()[0].payload,
        payload(193)
    );
}

pub(super) async fn reads_are_fenced_by_epoch<S: Store>(store: Arc<S>) {
    let record = created(&*store, 20).await;
    let (sid, s) = (record.id(), record.standalone().id());
    let get = |lei: Option<String>, seed: u64| {
        let store = store.clone();
        async move {
            let req = GetRequest { last_event_id: lei.as_deref(), stream_token: None };
            let (out, _) =
                transact(&*store, sid, |r| r.on_get(&req, T0, &cfg(), &mut SeededEntropy::new(seed)))
                    .await
                    .expect("GET");
            match out {
                GetOutcome::Attached(g) => g.epoch,
                other => panic!("not attached: {other:?}"),
            }
        }
    };
    let first = get(None, 200).await;
    // Watched here, as a writer's stream is (a shared store serves its own writers from what
    // it just committed: those reads are fenced too).
    let mut watch = store.watch(sid, s).await.expect("watch");
    emit(&*store, sid, AppendTarget::Standalone, 1).await.unwrap();
    super::until_delivered(&mut watch, Seq::new(1)).await;
    assert_eq!(seqs(&store.read(sid, s, Seq::PRIMING, 10, Reader::Attached(first)).await.unwrap()), vec![1]);
    // A resume takes the stream over: the first writer's reads are refused from now on, by the
    // store itself, whatever that writer has noticed.
    let second = get(Some(format!("{s}.1")), 201).await;
    assert_ne!(first, second);
    let stale = store.read(sid, s, Seq::PRIMING, 10, Reader::Attached(first)).await.unwrap_err();
    assert!(
        matches!(stale, Error::Core(forkless_core::Error::StaleEpoch { held, current }) if held == first && current == second),
        "{stale:?}"
    );
    assert_eq!(seqs(&store.read(sid, s, Seq::PRIMING, 10, Reader::Attached(second)).await.unwrap()), vec![1]);
    // Once the stream is fenced (here: the session ends), nobody reads it.
    transact(&*store, sid, |r| r.on_end(EndReason::Deleted, T0)).await.unwrap();
    let fenced = store.read(sid, s, Seq::PRIMING, 10, Reader::Attached(second)).await.unwrap_err();
    assert!(matches!(fenced, Error::Core(forkless_core::Error::StreamFenced)), "{fenced:?}");
}
