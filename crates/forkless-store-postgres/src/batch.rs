//! The statements of one group commit: every session a batch of appends advanced, moved
//! from the version the batch was computed on to its last in one statement
//! (`forkless_advance_many`), their changed streams, and every event in chunks (a stream's
//! events of the batch in one row), each kind of row in one statement over arrays. Sent as one pipeline: a batch costs one round trip and one
//! commit (one WAL flush), however many events and sessions it holds.
//!
//! It owns these statements, not which appends form a batch or what they write (see
//! [`forkless_store::shared`]).

use std::sync::atomic::{AtomicU64, Ordering};

use deadpool_postgres::ClientWrapper as Client;
use forkless_core::{Seq, SessionId, StreamChange, StreamId};
use forkless_store::codec::{encode_header, encode_stream};
use forkless_store::shared::{Batch, Chunk, Committed, unhex};
use forkless_store::{Error, Result};
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{IsNull, ToSql, Type, accepts, to_sql_checked};

use crate::interest::NOTIFY_FILTERED;
use crate::rows::{Columns, Pending, backend, run};

const ADVANCE_MANY: &str = "SELECT forkless_advance_many($1, $2, $3, $4, $5, $6, $7, $8)";
const DROP_STREAMS: &str = "DELETE FROM forkless_streams s USING unnest($1::bytea[], $2::bytea[]) AS t(se, st) \
     WHERE s.session = t.se AND s.stream = t.st";
const UPSERT_STREAMS: &str = "INSERT INTO forkless_streams (session, stream, meta) \
     SELECT * FROM unnest($1::bytea[], $2::bytea[], $3::bytea[]) \
     ON CONFLICT (session, stream) DO UPDATE SET meta = EXCLUDED.meta";
const INSERT_CHUNKS: &str = "INSERT INTO forkless_chunks (session, stream, last, first, events) \
     SELECT * FROM unnest($1::bytea[], $2::bytea[], $3::bigint[], $4::bigint[], $5::bytea[])";
/// Chunks wholly below the low-water mark go; the one straddling it stays (reads skip what
/// lies below the mark).
const TRIM: &str = "DELETE FROM forkless_chunks c USING unnest($1::bytea[], $2::bytea[], $3::bigint[]) AS t(se, st, low) \
     WHERE c.session = t.se AND c.stream = t.st AND c.last < t.low";
/// Every hint (a batch without a filter); [`NOTIFY_FILTERED`] the hints some node may wait for.
const NOTIFY: &str = "SELECT pg_notify('forkless', h) FROM unnest($1::text[]) AS h";

/// Write a batch in one transaction.
pub(crate) async fn write(client: &Client, batch: Batch<'_>) -> Result<Committed> {
    let Batch { sessions, chunks, hints, filter } = batch;
    let mut ids = Vec::with_capacity(sessions.len());
    let (mut expected, mut next, mut headers) = (Vec::new(), Vec::new(), Vec::new());
    let mut wakes: [Vec<Option<i64>>; 4] = Default::default();
    let (mut dropped, mut upserts, mut trims) = (Rows::default(), Rows::default(), Rows::default());
    for w in sessions {
        let id = w.end.id().as_bytes().to_vec();
        expected.push(w.version.get() as i64);
        next.push((w.version.get() + w.appended) as i64);
        // Appends never change a header: only a changed one is sent.
        headers.push(w.end.header_changed_since(w.start).then(|| encode_header(w.end)));
        for (column, value) in wakes.iter_mut().zip(Columns::of(&w.end.wake()).0) {
            column.push(value);
        }
        for change in w.end.changes_since(w.start) {
            let (low_before, meta) = match change {
                StreamChange::Removed(_) => {
                    dropped.push(&id, change.id(), None);
                    continue;
                }
                StreamChange::Added(meta) => (Seq::FIRST, meta),
                StreamChange::Changed { before, after } => (before.low_water(), after),
            };
            upserts.push(&id, meta.id(), Some(Value::Meta(encode_stream(meta))));
            if meta.low_water() > low_before {
                trims.push(&id, meta.id(), Some(Value::Low(meta.low_water().get() as i64)));
            }
        }
        ids.push(id);
    }
    let c_sessions: Vec<&[u8]> = chunks.iter().map(|c| c.session.as_bytes().as_slice()).collect();
    let c_streams: Vec<&[u8]> = chunks.iter().map(|c| c.stream.as_bytes().as_slice()).collect();
    let c_lasts: Vec<i64> = chunks.iter().map(|c| c.last.get() as i64).collect();
    let c_firsts: Vec<i64> = chunks.iter().map(|c| c.first.get() as i64).collect();
    let c_events: Vec<Row<'_>> = chunks.iter().map(Row).collect();
    let texts: Vec<&str> = hints.iter().map(|h| h.text.as_str()).collect();
    let hinted: Vec<&[u8]> = hints.iter().map(|h| h.session.as_bytes().as_slice()).collect();
    let (owner, node) = filter.map_or((None, ""), |f| (f.owner, f.node));
    let sent = AtomicU64::new(0);
    let prepare = |sql| client.prepare_cached(sql);
    let advance = prepare(ADVANCE_MANY).await.map_err(backend)?;
    let drop_streams = prepare(DROP_STREAMS).await.map_err(backend)?;
    let upsert = prepare(UPSERT_STREAMS).await.map_err(backend)?;
    let insert = prepare(INSERT_CHUNKS).await.map_err(backend)?;
    let trim = prepare(TRIM).await.map_err(backend)?;
    let notify = prepare(if filter.is_some() { NOTIFY_FILTERED } else { NOTIFY }).await.map_err(backend)?;
    // Prepared statements are sent on their first poll: the pipeline goes out in order.
    let mut steps: Vec<Pending<'_>> = Vec::with_capacity(8);
    steps.push(Box::pin(client.batch_execute("BEGIN")));
    let args: Vec<&(dyn ToSql + Sync)> =
        vec![&ids, &expected, &next, &headers, &wakes[0], &wakes[1], &wakes[2], &wakes[3]];
    steps.push(run(client, &advance, args));
    if !dropped.sessions.is_empty() {
        steps.push(run(client, &drop_streams, vec![&dropped.sessions, &dropped.streams]));
    }
    if !upserts.sessions.is_empty() {
        steps.push(run(client, &upsert, vec![&upserts.sessions, &upserts.streams, &upserts.metas]));
    }
    if !chunks.is_empty() {
        steps.push(run(client, &insert, vec![&c_sessions, &c_streams, &c_lasts, &c_firsts, &c_events]));
    }
    if !trims.sessions.is_empty() {
        steps.push(run(client, &trim, vec![&trims.sessions, &trims.streams, &trims.lows]));
    }
    if !hints.is_empty() {
        let args: Vec<&(dyn ToSql + Sync)> = match filter {
            Some(_) => vec![&texts, &hinted, &owner, &node],
            None => vec![&texts],
        };
        let (stmt, sent) = (&notify, &sent);
        steps.push(Box::pin(async move {
            sent.store(client.execute(stmt, &args).await?, Ordering::Relaxed);
            Ok(())
        }));
    }
    steps.push(Box::pin(client.batch_execute("COMMIT")));
    match futures::future::try_join_all(steps).await {
        Ok(_) => Ok(Committed::All { hints: sent.load(Ordering::Relaxed) }),
        Err(e) => {
            crate::rows::rollback(client).await;
            let moved = e.as_db_error().filter(|d| d.code() == &SqlState::from_code("FK001"));
            match moved.and_then(|d| d.detail()).and_then(unhex::<16>) {
                Some(id) => Ok(Committed::Moved(SessionId::from_bytes(id))),
                None if moved.is_some() => Err(Error::Backend("postgres: a session moved, unnamed".into())),
                None => Err(backend(e)),
            }
        }
    }
}

enum Value {
    Meta(Vec<u8>),
    Low(i64),
}

/// Rows of (session, stream, value) as the arrays a statement takes.
#[derive(Default)]
struct Rows {
    sessions: Vec<Vec<u8>>,
    streams: Vec<Vec<u8>>,
    metas: Vec<Vec<u8>>,
    lows: Vec<i64>,
}

impl Rows {
    fn push(&mut self, session: &[u8], stream: StreamId, value: Option<Value>) {
        self.sessions.push(session.to_vec());
        self.streams.push(stream.as_bytes().to_vec());
        match value {
            Some(Value::Meta(m)) => self.metas.push(m),
            Some(Value::Low(l)) => self.lows.push(l),
            None => {}
        }
    }
}

/// A chunk as the `bytea` a statement takes, written straight into the statement's buffer.
#[derive(Debug)]
struct Row<'a>(&'a Chunk);

impl ToSql for Row<'_> {
    fn to_sql(
        &self,
        _: &Type,
        out: &mut bytes::BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        out.reserve(self.0.encoded_len());
        self.0.encode(|b| out.extend_from_slice(b));
        Ok(IsNull::No)
    }

    accepts!(BYTEA);
    to_sql_checked!();
}
