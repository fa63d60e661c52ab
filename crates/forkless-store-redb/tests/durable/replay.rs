//! The write-ahead log after a power failure: what is replayed, what is ignored (torn and
//! stale entries), and that no delivered event is ever renamed.

use super::*;

/// A machine (with a small log) running an immediate store with one session whose
/// standalone stream holds `n` events.
async fn machine_with_events(seed: u64, n: u64) -> (Machine, RedbStore, SessionId, StreamId) {
    let machine = Machine::new(Some(SMALL_LOG));
    let rec = record(seed);
    let (sid, s) = (rec.id(), rec.standalone().id());
    let (store, _) = machine.open(Durability::Immediate);
    store.create(rec).await.unwrap();
    if n > 0 {
        emit_n(&store, sid, 1, n).await;
    }
    (machine, store, sid, s)
}

/// Append `n` numbered events to the standalone stream, returning the last id.
/// Events are stored as rows of consecutive events, one row per stream per checkpoint.
/// Eviction drops whole rows and keeps the one straddling the low-water mark; every restart
/// reads back exactly the retained events, in order, whatever rows they sit in.
#[tokio::test]
async fn retained_events_survive_restarts_across_rows_and_trims() {
    let dir = tempdir();
    let path = dir.path().join("data.redb");
    let rec = record(3);
    let sid = rec.id();
    let standalone = rec.standalone().id();
    let limits = Limits { stream_max_events: 100, ..Limits::default() };
    let mut next: u64 = 1;
    // Each round appends, then a clean stop checkpoints the round's events as new rows.
    for (round, count) in [120, 60, 300, 1].into_iter().enumerate() {
        let (store, recovery) =
            RedbStore::open(&path, Durability::Batched { window: Duration::from_millis(2) }, T0).unwrap();
        if round == 0 {
            store.create(rec.clone()).await.unwrap();
        } else {
            assert_eq!(recovery.events, 100, "round {round}: the last 100 events came back");
        }
        let low = next.saturating_sub(100).max(1);
        let back = store.read(sid, standalone, Seq::new(low - 1), 1000, Reader::Inspector).await.unwrap();
        let seqs: Vec<u64> = back.iter().map(|e| e.seq.get()).collect();
        assert_eq!(seqs, (low..next).collect::<Vec<_>>(), "round {round}");
        assert!(back.iter().all(|e| e.payload == payload(e.seq.get())), "round {round}: payloads");
        for _ in 0..count {
            store
                .append(Append {
                    session: sid,
                    target: AppendTarget::Standalone,
                    payload: payload(next),
                    kind: EventKind::Intermediate,
                    now: T0,
                    limits: &limits,
                })
                .await
                .unwrap();
            next += 1;
        }
    }
}

/// A write logs what it changed, not everything its session holds: an append to a session that
/// retains hundreds of answered request streams writes as many log bytes as one to a fresh
/// session (format 2 rewrote the whole record, every stream, on every write).
#[tokio::test]
async fn a_write_logs_only_what_it_changed() {
    let machine = Machine::new(None);
    let (store, _) = machine.open(Durability::Immediate);
    let cfg = Config::default();
    let mut e = SeededEntropy::new(77);
    let mut bytes_per_append = Vec::new();
    for (seed, answered) in [(1, 0), (2, 300)] {
        let sid = record(seed).id();
        store.create(record(seed)).await.unwrap();
        for _ in 0..answered {
            let id = StreamId::generate(&mut e);
            let (grant, _) = transact(&store, sid, |r| r.open_request_stream(id, T0, &cfg)).await.unwrap();
            store
                .append(Append {
                    session: sid,
                    target: AppendTarget::Stream(id),
                    payload: payload(0),
                    kind: EventKind::Final,
                    now: T0,
                    limits: &cfg.limits,
                })
                .await
                .unwrap();
            transact(&store, sid, |r| r.on_detach(id, grant.epoch, T0)).await.unwrap();
        }
        let before = machine.log.written.load(Ordering::SeqCst);
        emit_n(&store, sid, 0, 10).await;
        bytes_per_append.push((machine.log.written.load(Ordering::SeqCst) - before) / 10);
    }
    let [fresh, busy] = bytes_per_append[..] else { unreachable!() };
    assert!(fresh > 0 && fresh < 1024, "an append logs a few hundred bytes, not {fresh}");
    assert!(busy <= fresh + 64, "300 retained streams made an append log {busy} bytes against {fresh}");
}

async fn emit_n(store: &RedbStore, sid: SessionId, from: u64, n: u64) -> forkless_core::EventId {
    let mut last = None;
    for i in from..from + n {
        last = Some(standalone_event(store, sid, payload(i)).await.unwrap());
    }
    last.expect("n > 0")
}

#[tokio::test]
async fn immediate_mode_loses_nothing_acknowledged_on_power_failure() {
    let machine = Machine::new(None);
    let rec = record(11);
    let (sid, s) = (rec.id(), rec.standalone().id());
    let (store, _) = machine.open(Durability::Immediate);
    store.create(rec).await.unwrap();
    let last = emit_n(&store, sid, 1, 25).await;
    // Pull the plug while the store is still running: nothing is flushed on the way down.
    let (after, recovery) = machine.after_power_failure(0.0).open(Durability::Immediate);
    assert_eq!(recovery.events, 25, "every acknowledged event survived");
    let events = after.read(sid, s, Seq::PRIMING, 100, Reader::Inspector).await.unwrap();
    assert_eq!(events.last().map(|e| e.seq), Some(last.seq));
    drop(store);
}

#[tokio::test]
async fn writes_after_the_last_checkpoint_are_replayed_from_the_log() {
    let (machine, store, sid, s) = machine_with_events(13, 10).await;
    let crashed = machine.after_power_failure(0.0);
    // No checkpoint ran (the first is due a second after the first write): the data file
    // alone holds nothing...
    let (_, alone) = crashed.data_file_alone().open(Durability::Immediate);
    assert_eq!((alone.sessions, alone.events), (0, 0), "nothing was checkpointed yet");
    // ...and the log brings everything back, once: the replay is checkpointed on open.
    let (after, recovery) = crashed.open(Durability::Immediate);
    assert_eq!((recovery.sessions, recovery.events, recovery.replayed), (1, 10, 11));
    let events = after.read(sid, s, Seq::PRIMING, 100, Reader::Inspector).await.unwrap();
    assert_eq!(
        events.iter().map(|e| e.payload.clone()).collect::<Vec<_>>(),
        (1..=10).map(payload).collect::<Vec<_>>()
    );
    drop(after);
    let (_, again) = crashed.data_file_alone().open(Durability::Immediate);
    assert_eq!((again.sessions, again.events), (1, 10), "the replay was checkpointed");
    drop(store);
}

/// Requests answered at once (`AppendTarget::Answer`) open their stream, append to it and
/// may drop older answers to make room, all in one write: after a power failure the log
/// brings back exactly that, and so does the data file once it is checkpointed.
#[tokio::test]
async fn answers_and_the_room_they_made_survive_replay_and_checkpoint() {
    let (machine, store, sid, _) = machine_with_events(15, 0).await;
    let limits = Limits { session_max_streams: 2, ..Limits::default() };
    let mut answered = Vec::new();
    for n in 1..=3 {
        let id = StreamId::generate(&mut SeededEntropy::new(150 + n));
        let at = T0.saturating_add(Duration::from_millis(n));
        store
            .append(Append {
                session: sid,
                target: AppendTarget::Answer(id),
                payload: payload(n),
                kind: EventKind::Final,
                now: at,
                limits: &limits,
            })
            .await
            .unwrap();
        answered.push(id);
    }
    let answered = &answered;
    let check = |store: RedbStore| async move {
        let record = store.load(sid).await.unwrap().expect("session recovered").value;
        assert!(record.stream(answered[0]).is_none(), "the answer that made room stays dropped");
        for (n, id) in [(2, answered[1]), (3, answered[2])] {
            let s = record.stream(id).expect("answered stream recovered");
            assert!(s.is_completed() && s.high_water() == Seq::new(1));
            let events = store.read(sid, id, Seq::PRIMING, 10, Reader::Inspector).await.unwrap();
            assert_eq!(events.iter().map(|e| e.payload.clone()).collect::<Vec<_>>(), vec![payload(n)]);
        }
    };
    let crashed = machine.after_power_failure(0.0);
    let (after, recovery) = crashed.open(Durability::Immediate);
    assert!(recovery.replayed > 0, "recovered from the log");
    check(after).await;
    let (alone, _) = crashed.data_file_alone().open(Durability::Immediate);
    check(alone).await;
    drop(store);
}

#[tokio::test]
async fn a_torn_entry_at_the_end_of_the_log_is_ignored() {
    let (machine, store, sid, s) = machine_with_events(14, 10).await;
    // The next entry is written but its sync fails: the crash then keeps half of it.
    machine.log.fail_sync.store(true, Ordering::SeqCst);
    let err = standalone_event(&store, sid, payload(11)).await;
    assert!(matches!(err, Err(Error::Poisoned(_))), "{err:?}");
    let (after, recovery) = machine.after_power_failure(0.5).open(Durability::Immediate);
    assert_eq!((recovery.events, recovery.replayed), (10, 11), "the torn entry is not replayed");
    let events = after.read(sid, s, Seq::PRIMING, 100, Reader::Inspector).await.unwrap();
    assert_eq!(events.iter().map(|e| e.seq.get()).collect::<Vec<_>>(), (1..=10).collect::<Vec<_>>());
    // Whole, the same unsynced entry may survive: it was never acknowledged, but it is a
    // valid continuation.
    let (_, whole) = machine.after_power_failure(1.0).open(Durability::Immediate);
    assert_eq!((whole.events, whole.replayed), (11, 12));
    drop(store);
}

#[tokio::test]
async fn entries_of_an_earlier_log_cycle_are_never_replayed() {
    // Every append is one entry of the same size, so after the log starts over each new
    // entry overwrites exactly one old one, and past the last new entry lies a whole, valid
    // entry of the cycle before, with an older session record.
    let (machine, store, sid, s) = machine_with_events(15, 0).await;
    let limits = Limits { stream_max_events: 1_000_000, ..Limits::default() };
    let n = 700;
    for i in 1..=n {
        let p = Bytes::from(format!("{{\"n\":{i:08}}}"));
        store
            .append(Append {
                session: sid,
                target: AppendTarget::Standalone,
                payload: p,
                kind: EventKind::Intermediate,
                now: T0,
                limits: &limits,
            })
            .await
            .unwrap();
    }
    let (after, recovery) = machine.after_power_failure(0.0).open(Durability::Immediate);
    assert!(recovery.replayed > 0 && recovery.replayed < n as usize, "{recovery:?}");
    let back = after.load(sid).await.unwrap().unwrap().value;
    assert_eq!(back.stream(s).unwrap().high_water(), Seq::new(n), "no older record was replayed over");
    let events = after.read(sid, s, Seq::PRIMING, 1000, Reader::Inspector).await.unwrap();
    assert_eq!(events.len(), n as usize);
    assert!(events.iter().zip(1..).all(|(e, i)| e.seq.get() == i));
    drop(store);
}

#[tokio::test]
async fn a_checkpoint_followed_by_a_crash_loses_nothing() {
    let (machine, store, sid, s) = machine_with_events(16, 10).await;
    // The periodic checkpoint (a second after the first pending write) copies the log into
    // the data file; then the power fails.
    checkpointed(&store).await;
    let crashed = machine.after_power_failure(0.0);
    let (_, alone) = crashed.data_file_alone().open(Durability::Immediate);
    assert_eq!((alone.sessions, alone.events), (1, 10), "the data file alone holds everything");
    let (after, recovery) = crashed.open(Durability::Immediate);
    assert_eq!((recovery.events, recovery.replayed), (10, 0), "checkpointed entries are not replayed");
    let events = after.read(sid, s, Seq::PRIMING, 100, Reader::Inspector).await.unwrap();
    assert_eq!(events.iter().map(|e| e.seq.get()).collect::<Vec<_>>(), (1..=10).collect::<Vec<_>>());
    // And a clean stop checkpoints too, leaving nothing to replay.
    emit_n(&after, sid, 11, 5).await;
    drop(after);
    drop(store);
    let (_, clean) = crashed.data_file_alone().open(Durability::Immediate);
    assert_eq!(clean.events, 15);
}

#[tokio::test]
async fn a_write_larger_than_the_log_goes_straight_to_the_data_file() {
    let (machine, store, sid, s) = machine_with_events(17, 3).await;
    let big = Bytes::from(vec![b'x'; SMALL_LOG as usize * 2]);
    standalone_event(&store, sid, big.clone()).await.unwrap();
    emit_n(&store, sid, 5, 2).await;
    let crashed = machine.after_power_failure(0.0);
    let (_, alone) = crashed.data_file_alone().open(Durability::Immediate);
    assert_eq!(alone.events, 4, "the large write was checkpointed with everything before it");
    let (after, recovery) = crashed.open(Durability::Immediate);
    assert_eq!((recovery.events, recovery.replayed), (6, 2), "what followed it is in the log");
    let events = after.read(sid, s, Seq::PRIMING, 100, Reader::Inspector).await.unwrap();
    assert_eq!(events[3].payload, big);
    assert_eq!(events.iter().map(|e| e.seq.get()).collect::<Vec<_>>(), (1..=6).collect::<Vec<_>>());
    drop(store);
}

#[tokio::test]
async fn a_removed_session_stays_removed_through_replay_and_checkpoint() {
    let (machine, store, kept, s) = machine_with_events(18, 3).await;
    let gone = record(19);
    let gone_id = gone.id();
    store.create(gone).await.unwrap();
    emit_n(&store, gone_id, 1, 4).await;
    store.remove(gone_id).await.unwrap();
    emit_n(&store, kept, 4, 2).await;
    // Replayed from the log after a power failure...
    let crashed = machine.after_power_failure(0.0);
    let (after, recovery) = crashed.open(Durability::Immediate);
    assert_eq!((recovery.sessions, recovery.events), (1, 5), "{recovery:?}");
    assert!(after.load(gone_id).await.unwrap().is_none());
    assert_eq!(after.read(kept, s, Seq::PRIMING, 100, Reader::Inspector).await.unwrap().len(), 5);
    // ...and checkpointed by a clean stop.
    drop(after);
    drop(store);
    let (_, alone) = crashed.data_file_alone().open(Durability::Immediate);
    assert_eq!((alone.sessions, alone.events), (1, 5));
}

#[tokio::test]
async fn batched_mode_loses_at_most_the_undelivered_window_and_keeps_a_gap_free_prefix() {
    let machine = Machine::new(Some(SMALL_LOG));
    let rec = record(12);
    let (sid, s) = (rec.id(), rec.standalone().id());
    // A window far longer than the test, so nothing after the flush reaches the disk.
    let durability = Durability::Batched { window: Duration::from_secs(3600) };
    let (store, _) = machine.open(durability);
    store.create(rec).await.unwrap();
    emit_n(&store, sid, 1, 10).await;
    store.flush().await.unwrap();
    let appended = emit_n(&store, sid, 11, 15).await;
    // The appends returned, but no reader is given an event before it is durable...
    let seen = store.read(sid, s, Seq::new(10), 100, Reader::Inspector).await.unwrap();
    assert!(seen.is_empty(), "undelivered: {seen:?}");
    assert_eq!(store.watch(sid, s).await.unwrap().current().delivered, Seq::new(10));
    let (after, recovery) = machine.after_power_failure(0.0).open(Durability::Immediate);
    // ...but only the flushed prefix survived, gap-free.
    assert_eq!(recovery.events, 10);
    let events = after.read(sid, s, Seq::PRIMING, 100, Reader::Inspector).await.unwrap();
    assert_eq!(events.iter().map(|e| e.seq.get()).collect::<Vec<_>>(), (1..=10).collect::<Vec<_>>());
    // A cursor into the lost part (no client can hold one now) is refused, never answered.
    let lei = appended.to_string();
    let (out, _) = transact(&after, sid, |r| {
        let req = GetRequest { last_event_id: Some(&lei), stream_token: None };
        r.on_get(&req, T0, &Config::default(), &mut SeededEntropy::new(5))
    })
    .await
    .unwrap();
    assert_eq!(out, GetOutcome::Rejected(forkless_core::RejectReason::CursorAhead));
    drop(store);
}

/// Promise 4 across a power failure, in both modes: every id the simulated client received
/// still names the same bytes (or is refused), and nothing after the crash reuses one.
#[tokio::test]
async fn a_power_failure_never_renames_a_delivered_event() {
    for durability in [Durability::Immediate, Durability::Batched { window: Duration::from_millis(50) }] {
        let machine = Machine::new(Some(SMALL_LOG));
        let (store, _) = machine.open(durability);
        let report = forkless_store::conformance::crash_keeps_every_delivered_id(store, |store| async move {
            let crashed = machine.after_power_failure(0.0);
            drop(store);
            crashed.open(durability).0
        })
        .await
        .unwrap_or_else(|e| panic!("{durability:?}: {e}"));
        assert!(report.received > 0 && report.still_named > 0, "{durability:?}: {report:?}");
    }
}

/// The negative control of the test above: the same store delivering events before they are
/// durable (as it did before durable-before-delivery) is caught renaming an event a client
/// received.
#[tokio::test]
async fn negative_control_early_delivery_is_caught_renaming_an_event() {
    let machine = Machine::new(Some(SMALL_LOG));
    let durability = Durability::Batched { window: Duration::from_secs(3600) };
    let (store, _) = machine.open(durability);
    let store = store.break_durable_before_delivery_for_negative_control();
    let outcome = forkless_store::conformance::crash_keeps_every_delivered_id(store, |store| async move {
        let crashed = machine.after_power_failure(0.0);
        drop(store);
        crashed.open(durability).0
    })
    .await;
    let violation = outcome.expect_err("early delivery must be caught");
    assert!(violation.contains("assigned again") || violation.contains("other content"), "{violation}");
}

/// Promise 11 across a power failure, in both modes: a task's create and every change were
/// acknowledged only once synced, so every task reads back exactly as last acknowledged, even
/// with a batch window of an hour that nothing else would close.
#[tokio::test]
async fn a_power_failure_keeps_every_acknowledged_task() {
    for durability in [Durability::Immediate, Durability::Batched { window: Duration::from_secs(3600) }] {
        let machine = Machine::new(Some(SMALL_LOG));
        let (store, _) = machine.open(durability);
        let report =
            forkless_store::conformance::crash_keeps_every_acknowledged_task(store, |store| async move {
                let crashed = machine.after_power_failure(0.0);
                drop(store);
                crashed.open(durability).0
            })
            .await
            .unwrap_or_else(|e| panic!("{durability:?}: {e}"));
        assert!(report.acknowledged > 0, "{report:?}");
        assert_eq!(report.kept, report.acknowledged, "{durability:?}: {report:?}");
    }
}

/// The negative control of the test above: the same store acknowledging task writes before
/// their sync loses acknowledged tasks to a power failure, and the check sees it.
#[tokio::test]
async fn negative_control_acknowledging_a_task_before_its_sync_loses_it() {
    let machine = Machine::new(Some(SMALL_LOG));
    let durability = Durability::Batched { window: Duration::from_secs(3600) };
    let (store, _) = machine.open(durability);
    let store = store.break_durable_before_delivery_for_negative_control();
    let report =
        forkless_store::conformance::crash_keeps_every_acknowledged_task(store, |store| async move {
            let crashed = machine.after_power_failure(0.0);
            drop(store);
            crashed.open(durability).0
        })
        .await
        .expect("lost tasks read as unknown, never older");
    assert!(report.kept < report.acknowledged, "early acknowledgement must lose tasks: {report:?}");
}

/// Wait for the store's first periodic checkpoint to be committed.
async fn checkpointed(store: &RedbStore) {
    let count = || {
        store.metrics().iter().find(|m| m.name == "forkless_store_checkpoints_total").map_or(0, |m| m.value)
    };
    tokio::time::timeout(Duration::from_secs(30), async {
        while count() == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the periodic checkpoint comes within its interval");
}

/// What opening says it did: after a clean stop, no repair; after a power failure, redb's
/// repair of its own structures is reported with its duration, and the log replayed over the
/// last checkpoint, with nothing lost.
#[tokio::test]
async fn opening_reports_a_repair_only_after_an_unclean_stop() {
    let machine = Machine::new(None);
    let rec = record(41);
    let (sid, s) = (rec.id(), rec.standalone().id());
    let (store, first) = machine.open(Durability::Immediate);
    assert_eq!(first.repaired, None, "a new file needs no repair");
    store.create(rec).await.unwrap();
    emit_n(&store, sid, 1, 5).await;
    let crashed = machine.after_power_failure(0.0);
    let (after, recovery) = crashed.open(Durability::Immediate);
    assert!(recovery.repaired.is_some(), "a file left by a crash is repaired, and says so: {recovery:?}");
    assert!(recovery.took >= recovery.repaired.unwrap_or_default());
    assert_eq!(recovery.events, 5, "{recovery:?}");
    let events = after.read(sid, s, Seq::PRIMING, 100, Reader::Inspector).await.unwrap();
    assert_eq!(events.len(), 5);
    drop(after);
    drop(store);
    let (_, clean) = crashed.open(Durability::Immediate);
    assert_eq!(clean.repaired, None, "after a clean stop: {clean:?}");
    assert_eq!((clean.events, clean.replayed), (5, 0), "everything checkpointed at the clean stop");
}
