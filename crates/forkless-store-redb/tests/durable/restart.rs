//! Sessions, request streams and client facts across a restart, and files of other formats.

use super::*;

#[tokio::test]
async fn sessions_streams_and_events_survive_a_restart() {
    let dir = tempdir();
    let path = dir.path().join("data.redb");
    let rec = record(1);
    let sid = rec.id();
    let standalone = rec.standalone().id();
    {
        let (store, recovery) = RedbStore::open(&path, Durability::Immediate, T0).unwrap();
        assert_eq!(recovery, forkless_store_redb::Recovery { took: recovery.took, ..Default::default() });
        store.create(rec.clone()).await.unwrap();
        let (grant, _) = transact(&store, sid, |r| {
            r.on_get(&GetRequest::default(), T0, &Config::default(), &mut SeededEntropy::new(2))
        })
        .await
        .unwrap();
        assert!(matches!(grant, GetOutcome::Attached(_)));
        for n in 1..=7 {
            standalone_event(&store, sid, payload(n)).await.unwrap();
        }
    }
    // The log sits beside the data file, created at full size; a clean stop checkpointed it.
    let log = std::fs::metadata(dir.path().join("data.redb.wal")).expect("the log exists");
    assert_eq!(log.len(), 8 << 20);
    let later = T0.saturating_add(Duration::from_secs(5));
    let (store, recovery) = RedbStore::open(&path, Durability::Immediate, later).unwrap();
    assert_eq!((recovery.sessions, recovery.events, recovery.detached), (1, 7, 1));
    assert_eq!(recovery.replayed, 0, "a clean stop leaves nothing to replay");
    let back = store.load(sid).await.unwrap().expect("session recovered").value;
    assert_eq!(back.session().principal(), Some("alice"));
    let s = back.stream(standalone).expect("standalone recovered");
    assert_eq!(s.high_water(), Seq::new(7));
    assert!(!s.is_live(later), "a restart leaves no connection attached");
    let events = store.read(sid, standalone, Seq::new(3), 100, Reader::Inspector).await.unwrap();
    assert_eq!(events.iter().map(|e| e.seq.get()).collect::<Vec<_>>(), vec![4, 5, 6, 7]);
    assert_eq!(events[0].payload, payload(4));
    // A resume from the client's cursor works across the restart; new events follow.
    let lei = format!("{standalone}.5");
    let (out, _) = transact(&store, sid, |r| {
        let req = GetRequest { last_event_id: Some(&lei), stream_token: Some(&lei[..16]) };
        r.on_get(&req, later, &Config::default(), &mut SeededEntropy::new(3))
    })
    .await
    .unwrap();
    assert!(matches!(out, GetOutcome::Attached(g) if g.resumed && g.after == Seq::new(5)));
    let next = store
        .append(Append {
            session: sid,
            target: AppendTarget::Standalone,
            payload: payload(8),
            kind: EventKind::Intermediate,
            now: later,
            limits: &Limits::default(),
        })
        .await
        .unwrap();
    assert_eq!(next.seq, Seq::new(8));
}

/// A request stream whose handler died is reported with its label (the request id, of any
/// length), still open; the store writes no answer of its own. Once answered, it is not
/// reported again.
#[tokio::test]
async fn a_request_whose_handler_died_is_reported_with_its_id_until_answered() {
    let dir = tempdir();
    let path = dir.path().join("data.redb");
    let rec = record(4);
    let sid = rec.id();
    let short = StreamId::generate(&mut SeededEntropy::new(40));
    let long = StreamId::generate(&mut SeededEntropy::new(41));
    // A string id far longer than any inline label.
    let long_id = format!("\"{}\"", "x".repeat(10_000));
    {
        let (store, _) = RedbStore::open(&path, Durability::Immediate, T0).unwrap();
        store.create(rec).await.unwrap();
        for (stream, id) in [(short, "17".to_owned()), (long, long_id.clone())] {
            let label = Some(Label::new(id.as_bytes()));
            transact(&store, sid, |r| {
                r.open_labeled_request_stream(stream, label.clone(), T0, &Config::default())
            })
            .await
            .unwrap();
        }
        store
            .append(Append {
                session: sid,
                target: AppendTarget::Stream(short),
                payload: payload(1),
                kind: EventKind::Intermediate,
                now: T0,
                limits: &Limits::default(),
            })
            .await
            .unwrap();
    }
    let (store, recovery) = RedbStore::open(&path, Durability::Immediate, T0).unwrap();
    let mut labels: Vec<_> = recovery
        .orphans
        .iter()
        .map(|o| (o.session, o.stream, o.label.as_ref().map(|l| l.as_bytes().to_vec())))
        .collect();
    labels.sort_by_key(|(_, _, l)| l.as_ref().map(Vec::len));
    assert_eq!(
        labels,
        vec![(sid, short, Some(b"17".to_vec())), (sid, long, Some(long_id.clone().into_bytes()))],
        "both orphans, with their request ids"
    );
    let events = store.read(sid, short, Seq::PRIMING, 10, Reader::Inspector).await.unwrap();
    assert_eq!(events.len(), 1, "the progress event survives; the store answers nothing itself");
    let meta = store.load(sid).await.unwrap().unwrap().value;
    assert!(!meta.stream(short).unwrap().is_completed());
    // Until answered, every restart reports them again; once answered, never.
    drop(store);
    let (store, recovery) = RedbStore::open(&path, Durability::Immediate, T0).unwrap();
    assert_eq!(recovery.orphans.len(), 2);
    for stream in [short, long] {
        store
            .append(Append {
                session: sid,
                target: AppendTarget::Stream(stream),
                payload: payload(9),
                kind: EventKind::Final,
                now: T0,
                limits: &Limits::default(),
            })
            .await
            .unwrap();
    }
    drop(store);
    let (_, recovery) = RedbStore::open(&path, Durability::Immediate, T0).unwrap();
    assert!(recovery.orphans.is_empty());
}

/// A data file stamped with format version `version` and nothing else.
fn file_of_format(path: &std::path::Path, version: u64) {
    let db = redb::Database::create(path).unwrap();
    let txn = db.begin_write().unwrap();
    {
        let mut meta = txn.open_table(redb::TableDefinition::<&str, u64>::new("meta")).unwrap();
        meta.insert("format", version).unwrap();
    }
    txn.commit().unwrap();
}

#[tokio::test]
async fn a_file_of_an_unknown_format_is_refused_and_left_alone() {
    for (version, says) in [
        (99, "format version 99"),
        (1, "format version 1 (an earlier build's"),
        (2, "format version 2 (an earlier build's"),
    ] {
        let dir = tempdir();
        let path = dir.path().join("data.redb");
        file_of_format(&path, version);
        let before = std::fs::read(&path).unwrap();
        let err = RedbStore::open(&path, Durability::Immediate, T0).unwrap_err();
        assert!(matches!(&err, Error::Corrupt(m) if m.contains(says)), "{err}");
        assert!(std::fs::read(&path).unwrap() == before, "the file is not rewritten");
        assert!(!dir.path().join("data.redb.wal").exists(), "no log is created beside it");
    }
}

/// What the client said at initialize survives a restart with its session.
#[tokio::test]
async fn client_facts_survive_a_restart() {
    let dir = tempdir();
    let path = dir.path().join("data.redb");
    let mut e = SeededEntropy::new(77);
    let facts = forkless_core::ClientFacts {
        capabilities: Some(r#"{"sampling":{},"experimental":{"forkless/resume":{"version":1}}}"#.into()),
        info: Some(r#"{"name":"a client","version":"1.2"}"#.into()),
    };
    let new = NewSession {
        id: SessionId::generate(&mut e),
        revision: Revision::V2025_06_18,
        reset_contract: true,
        principal: None,
        client: facts.clone(),
    };
    let rec = SessionRecord::create(new, T0, &mut e).unwrap();
    let sid = rec.id();
    {
        let (store, _) = RedbStore::open(&path, Durability::Immediate, T0).unwrap();
        store.create(rec).await.unwrap();
    }
    let (store, _) = RedbStore::open(&path, Durability::Immediate, T0).unwrap();
    let back = store.load(sid).await.unwrap().expect("recovered").value;
    assert_eq!(back.session().client(), &facts);
    assert_eq!(back.session().revision(), Revision::V2025_06_18);
    assert!(back.session().reset_contract());
}

/// Files of format 3 (written before client facts were kept), 4 (whose log was one chain) and
/// 5 (without tasks) are migrated on open: their sessions read back (a format 3 file's with
/// their client facts unknown), and the file is stamped 6.
#[tokio::test]
async fn format_3_to_5_files_are_migrated_and_their_sessions_read_back() {
    for old in [3, 4, 5] {
        older_file_is_migrated(old).await;
    }
}

async fn older_file_is_migrated(old: u64) {
    let dir = tempdir();
    let path = dir.path().join("data.redb");
    let rec = record(78);
    let sid = rec.id();
    {
        let (store, _) = RedbStore::open(&path, Durability::Immediate, T0).unwrap();
        store.create(rec).await.unwrap();
        for n in 1..=3 {
            let append = Append {
                session: sid,
                target: AppendTarget::Standalone,
                payload: payload(n),
                kind: EventKind::Intermediate,
                now: T0,
                limits: &Limits::default(),
            };
            store.append(append).await.unwrap();
        }
    }
    // Make it what an older build left: the stamp says so, and for format 3 headers end before
    // the client facts (two empty options, as a session without facts encodes them). (A clean
    // stop left the log with nothing to replay; a log of either is one chain from its start.)
    {
        let db = redb::Database::create(&path).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut meta = txn.open_table(redb::TableDefinition::<&str, u64>::new("meta")).unwrap();
            assert_eq!(meta.get("format").unwrap().map(|v| v.value()), Some(6));
            meta.insert("format", old).unwrap();
            let mut sessions =
                txn.open_table(redb::TableDefinition::<&[u8], &[u8]>::new("sessions")).unwrap();
            let header = sessions.get(&sid.as_bytes()[..]).unwrap().expect("the header").value().to_vec();
            assert_eq!(&header[header.len() - 2..], &[0, 0], "two empty options end a header without facts");
            if old == 3 {
                sessions.insert(&sid.as_bytes()[..], &header[..header.len() - 2]).unwrap();
            }
        }
        txn.commit().unwrap();
    }
    let (store, recovery) = RedbStore::open(&path, Durability::Immediate, T0).unwrap();
    assert_eq!((recovery.sessions, recovery.events), (1, 3));
    let back = store.load(sid).await.unwrap().expect("migrated").value;
    assert_eq!(back.session().client(), &forkless_core::ClientFacts::default(), "unknown, not misread");
    assert_eq!(back.session().principal(), Some("alice"));
    drop(store);
    let db = redb::ReadOnlyDatabase::open(&path).unwrap();
    let txn = redb::ReadableDatabase::begin_read(&db).unwrap();
    let meta = txn.open_table(redb::TableDefinition::<&str, u64>::new("meta")).unwrap();
    assert_eq!(meta.get("format").unwrap().map(|v| v.value()), Some(6), "stamped format 6");
}
