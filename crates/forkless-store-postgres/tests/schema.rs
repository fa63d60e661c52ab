//! The schema's evolution: a database an older build left is migrated on connect without
//! renaming or losing an event, and one a newer build wrote is refused by name.

use forkless_core::{AppendTarget, EventKind, Limits, Seq, Timestamp};
use forkless_store::codec::{encode_header, encode_stream};
use forkless_store::{Error, Reader, Store};
use forkless_store_postgres::testing::fresh;
use forkless_store_postgres::{PgConfig, Pipeline, schema};

const T0: Timestamp = Timestamp::from_millis(1_000_000);

async fn client(url: &str) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.expect("connect");
    tokio::spawn(conn);
    client
}

/// Schema 6 kept one row per event; schema 7 keeps chunks. A session written under 6 reads
/// back under 7 with every event at its seq, byte for byte, and appends go on after them.
#[tokio::test]
async fn events_stored_one_per_row_read_back_unchanged_after_the_chunk_migration() {
    let Some(db) = fresh().await else { return };
    db.migrate_to(6).await;
    let mut record = forkless_store::conformance::new_record(41, true);
    let limits = Limits::default();
    let payloads: Vec<Vec<u8>> =
        (1..=3).map(|n| format!("{{\"n\":{n},\"pad\":\"{}\"}}", "x".repeat(n * 7)).into_bytes()).collect();
    let mut stream = None;
    for p in &payloads {
        let id = record
            .append(AppendTarget::Standalone, p.len() as u64, EventKind::Intermediate, T0, &limits)
            .unwrap();
        stream = Some(id.stream);
    }
    let stream = stream.unwrap();
    // The rows a schema 6 build wrote for this session.
    let c = client(&db.url).await;
    let sid = record.id();
    let id = sid.as_bytes().as_slice();
    c.execute(
        "INSERT INTO forkless_sessions (id, version, header) VALUES ($1, 4, $2)",
        &[&id, &encode_header(&record)],
    )
    .await
    .unwrap();
    for s in record.streams() {
        let meta = encode_stream(s);
        c.execute(
            "INSERT INTO forkless_streams (session, stream, meta) VALUES ($1, $2, $3)",
            &[&id, &s.id().as_bytes().as_slice(), &meta],
        )
        .await
        .unwrap();
    }
    for (i, p) in payloads.iter().enumerate() {
        c.execute(
            "INSERT INTO forkless_events (session, stream, seq, payload) VALUES ($1, $2, $3, $4)",
            &[&id, &stream.as_bytes().as_slice(), &(i as i64 + 1), &p.as_slice()],
        )
        .await
        .unwrap();
    }

    // Appends return once stored, so the read below sees the one this test makes.
    let mut cfg = PgConfig::new(&db.url);
    cfg.pipeline = Pipeline::Off;
    let store = forkless_store_postgres::connect(cfg).await.expect("connect migrates");
    let version: i32 = c.query_one("SELECT max(version) FROM forkless_schema", &[]).await.unwrap().get(0);
    assert_eq!(version, schema::SCHEMA_VERSION);
    let events = store.read(sid, stream, Seq::PRIMING, 100, Reader::Inspector).await.unwrap();
    let read: Vec<(u64, &[u8])> = events.iter().map(|e| (e.seq.get(), &e.payload[..])).collect();
    let want: Vec<(u64, &[u8])> =
        payloads.iter().enumerate().map(|(i, p)| (i as u64 + 1, p.as_slice())).collect();
    assert_eq!(read, want, "every event at its seq, byte for byte");
    let tail = store.read(sid, stream, Seq::new(2), 100, Reader::Inspector).await.unwrap();
    assert_eq!(tail.iter().map(|e| e.seq.get()).collect::<Vec<_>>(), [3], "a cursor inside the old rows");

    let append = forkless_store::Append {
        session: sid,
        target: AppendTarget::Standalone,
        payload: bytes::Bytes::from_static(b"{\"n\":4}"),
        kind: EventKind::Intermediate,
        now: T0,
        limits: &limits,
    };
    let id4 = store.append(append).await.unwrap();
    assert_eq!(id4.seq, Seq::new(4), "appends continue after the migrated events");
    let all = store.read(sid, stream, Seq::PRIMING, 100, Reader::Inspector).await.unwrap();
    assert_eq!(all.iter().map(|e| e.seq.get()).collect::<Vec<_>>(), [1, 2, 3, 4]);
    assert_eq!(&all[3].payload[..], b"{\"n\":4}");
}

#[tokio::test]
async fn a_schema_newer_than_this_build_is_refused_by_name() {
    let Some(db) = fresh().await else { return };
    drop(forkless_store_postgres::connect(PgConfig::new(&db.url)).await.expect("a fresh database"));
    let c = client(&db.url).await;
    let future = schema::SCHEMA_VERSION + 1;
    c.execute("INSERT INTO forkless_schema (version, name) VALUES ($1, 'from a later build')", &[&future])
        .await
        .unwrap();
    match forkless_store_postgres::connect(PgConfig::new(&db.url)).await {
        Err(Error::Corrupt(why)) => {
            assert!(why.contains(&future.to_string()) && why.contains("from a later build"), "{why}");
        }
        other => panic!("a newer schema must be refused, got {:?}", other.map(|_| ())),
    }
}

/// The group commit's compare-and-set: every session advances from the version its batch was
/// computed on, or none does and the first that moved is named; a header left out is kept.
#[tokio::test]
async fn a_group_commit_advances_every_session_or_names_the_first_that_moved() {
    let Some(db) = fresh().await else { return };
    drop(forkless_store_postgres::connect(PgConfig::new(&db.url)).await.expect("a fresh database"));
    let c = client(&db.url).await;
    let ids: Vec<Vec<u8>> = (1u8..=3).map(|i| vec![i; 16]).collect();
    for id in &ids {
        c.execute(
            "INSERT INTO forkless_sessions (id, version, header) VALUES ($1, 5, $2)",
            &[id, &b"old".to_vec()],
        )
        .await
        .unwrap();
    }
    let none: Vec<Option<i64>> = vec![None; 3];
    let advance = "SELECT forkless_advance_many($1, $2, $3, $4, $5, $6, $7, $8)";
    // The second session is not at version 5: nothing of the batch is written.
    let expected: Vec<i64> = vec![5, 4, 5];
    let next: Vec<i64> = vec![6, 6, 6];
    let headers: Vec<Option<Vec<u8>>> = vec![Some(b"new".to_vec()), None, None];
    let err = c
        .execute(advance, &[&ids, &expected, &next, &headers, &none, &none, &none, &none])
        .await
        .unwrap_err();
    let db_err = err.as_db_error().expect("a database error");
    assert_eq!(db_err.code().code(), "FK001");
    assert_eq!(db_err.detail(), Some("02020202020202020202020202020202"), "the session that moved is named");
    let rows = c.query("SELECT version, header FROM forkless_sessions ORDER BY id", &[]).await.unwrap();
    assert!(
        rows.iter().all(|r| r.get::<_, i64>(0) == 5 && r.get::<_, Vec<u8>>(1) == b"old"),
        "nothing written"
    );
    // Every one at its version: all advance; a header passed replaces, one left out is kept.
    let expected: Vec<i64> = vec![5, 5, 5];
    c.execute(advance, &[&ids, &expected, &next, &headers, &none, &none, &none, &none]).await.unwrap();
    let rows = c.query("SELECT version, header FROM forkless_sessions ORDER BY id", &[]).await.unwrap();
    let got: Vec<(i64, Vec<u8>)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    assert_eq!(got, [(6, b"new".to_vec()), (6, b"old".to_vec()), (6, b"old".to_vec())]);
}

/// Chunks go with their stream and their session (a trigger on the stream rows, not a foreign
/// key checked on every chunk inserted): nothing is left behind.
#[tokio::test]
async fn chunks_go_with_their_stream_and_their_session() {
    let Some(db) = fresh().await else { return };
    let mut cfg = PgConfig::new(&db.url);
    cfg.pipeline = Pipeline::Off;
    let store = forkless_store_postgres::connect(cfg).await.expect("connect");
    let record = forkless_store::conformance::new_record(43, true);
    store.create(record.clone()).await.unwrap();
    let limits = Limits::default();
    for n in 0..3 {
        let append = forkless_store::Append {
            session: record.id(),
            target: AppendTarget::Standalone,
            payload: bytes::Bytes::from(format!("{{\"n\":{n}}}")),
            kind: EventKind::Intermediate,
            now: T0,
            limits: &limits,
        };
        store.append(append).await.unwrap();
    }
    let c = client(&db.url).await;
    let sid = record.id().as_bytes().to_vec();
    let count = "SELECT count(*) FROM forkless_chunks WHERE session = $1";
    assert!(c.query_one(count, &[&sid]).await.unwrap().get::<_, i64>(0) > 0);
    let stream = record.standalone().id().as_bytes().to_vec();
    c.execute("DELETE FROM forkless_streams WHERE stream = $1", &[&stream]).await.unwrap();
    let left: i64 = c.query_one(count, &[&sid]).await.unwrap().get(0);
    assert_eq!(left, 0, "a dropped stream's chunks are gone");
    let other = forkless_store::conformance::new_record(44, true);
    store.create(other.clone()).await.unwrap();
    let append = forkless_store::Append {
        session: other.id(),
        target: AppendTarget::Standalone,
        payload: bytes::Bytes::from_static(b"{}"),
        kind: EventKind::Intermediate,
        now: T0,
        limits: &limits,
    };
    store.append(append).await.unwrap();
    store.remove(other.id()).await.unwrap();
    let left: i64 = c.query_one("SELECT count(*) FROM forkless_chunks", &[]).await.unwrap().get(0);
    assert_eq!(left, 0, "a removed session's chunks are gone");
}
