//! How a record lives in the tables: loading one in a single statement, and writing the
//! difference between two versions of it as one pipelined transaction whose first statement
//! is the compare-and-set (`forkless_advance`, see [`crate::schema`]). Everything a write
//! sends goes out at once, so a write costs one round trip whatever it changes; if the
//! compare-and-set fails, the database aborts the transaction and nothing after it applies.
//!
//! It owns the statements and the mapping of database errors, not when to write (that is
//! [`forkless_store::shared`]'s) or what to write (the core's).

use core::future::Future;
use core::pin::Pin;

use deadpool_postgres::ClientWrapper as Client;
use forkless_core::{SessionId, SessionRecord, StreamChange, Timestamp, Wake};
use forkless_store::codec::{decode_header, decode_stream, encode_header, encode_stream};
use forkless_store::shared::{LeaseOp, Loaded, OwnerFacts, Write, Written};
use forkless_store::{Error, Result, SpendKey, Version};
use tokio_postgres::Statement;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;

/// A database failure as the store's error (nothing was applied, or the commit's outcome is
/// unknown; either way a delivered event is never taken back). An error the server reported
/// carries its SQLSTATE and message (`tokio_postgres` shows only "db error").
pub(crate) fn backend(e: tokio_postgres::Error) -> Error {
    Error::Backend(describe(&e))
}

/// `e` as one line for a log: the server's SQLSTATE, message and detail when it sent them.
fn describe(e: &tokio_postgres::Error) -> String {
    let Some(db) = e.as_db_error() else {
        // The causes too: a TLS failure's says what failed (the certificate, the host name).
        let mut line = format!("postgres: {e}");
        let mut source = std::error::Error::source(e);
        while let Some(cause) = source {
            line.push_str(": ");
            line.push_str(&cause.to_string());
            source = cause.source();
        }
        return line;
    };
    let mut line = format!("postgres: {} {}: {}", db.severity(), db.code().code(), db.message());
    if let Some(detail) = db.detail() {
        line.push_str(" (");
        line.push_str(detail);
        line.push(')');
    }
    line
}

/// Milliseconds as the database stores them.
pub(crate) fn millis(t: Timestamp) -> i64 {
    i64::try_from(t.as_millis()).unwrap_or(i64::MAX)
}

const MOVED: &str = "FK001";
const UNKNOWN: &str = "FK002";

/// Load one session and every stream of it in one statement, unless it is still at
/// version `known` (then only the version travels). PostgreSQL never numbers a version
/// twice (a commit is not lost), so every read carries the same history tag, 0.
pub(crate) async fn load_since(client: &Client, id: SessionId, known: Option<Version>) -> Result<Loaded> {
    let stmt = client
        .prepare_cached(
            "SELECT s.version, CASE WHEN s.version = $2 THEN NULL ELSE s.header END, \
             CASE WHEN s.version = $2 THEN NULL \
                  ELSE ARRAY(SELECT meta FROM forkless_streams WHERE session = s.id) END \
             FROM forkless_sessions s WHERE s.id = $1",
        )
        .await
        .map_err(backend)?;
    let known = known.map_or(-1, |v| v.get() as i64);
    let Some(row) = client.query_opt(&stmt, &[&id.as_bytes().as_slice(), &known]).await.map_err(backend)?
    else {
        return Ok(Loaded::Unknown);
    };
    let version = Version::new(row.get::<_, i64>(0) as u64);
    let Some(header) = row.get::<_, Option<&[u8]>>(1) else { return Ok(Loaded::Unchanged) };
    let mut parts = decode_header(header)?;
    for meta in row.get::<_, Vec<&[u8]>>(2) {
        parts.streams.push(decode_stream(meta)?);
    }
    let mut record = parts.build()?;
    record.mark_clean();
    Ok(Loaded::Found { version, record: Box::new(record), tag: Some(0) })
}

/// Insert a new session and its streams. [`Error::SessionExists`] if the id is taken.
pub(crate) async fn insert(client: &Client, record: &SessionRecord, owner: Option<&str>) -> Result<()> {
    let sid = record.id();
    let id = sid.as_bytes().as_slice();
    let header = encode_header(record);
    let w = Columns::of(&record.wake());
    let (streams, metas) = stream_rows(record.streams());
    let insert = client
        .prepare_cached(
            "INSERT INTO forkless_sessions (id, version, header, wake_liveness, wake_stream_idle, \
             wake_activity, wake_ended, owner) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .await
        .map_err(backend)?;
    let upsert = client.prepare_cached(UPSERT_STREAMS).await.map_err(backend)?;
    let version = Version::INITIAL.get() as i64;
    // Prepared statements are sent on their first poll, so the pipeline goes out in order.
    let begin = client.batch_execute("BEGIN");
    let session_args: [&(dyn ToSql + Sync); 8] =
        [&id, &version, &header, &w.0[0], &w.0[1], &w.0[2], &w.0[3], &owner];
    let stream_args: [&(dyn ToSql + Sync); 3] = [&id, &streams, &metas];
    let session = client.execute(&insert, &session_args);
    let rows = client.execute(&upsert, &stream_args);
    let commit = client.batch_execute("COMMIT");
    let outcome = futures::try_join!(begin, session, rows, commit);
    match outcome {
        Ok(_) => Ok(()),
        Err(e) => {
            rollback(client).await;
            if e.code() == Some(&SqlState::UNIQUE_VIOLATION) {
                Err(Error::SessionExists)
            } else {
                Err(backend(e))
            }
        }
    }
}

const UPSERT_STREAMS: &str = "INSERT INTO forkless_streams (session, stream, meta) \
     SELECT $1, s, m FROM unnest($2::bytea[], $3::bytea[]) AS t(s, m) \
     ON CONFLICT (session, stream) DO UPDATE SET meta = EXCLUDED.meta";

pub(crate) type Pending<'a> = Pin<Box<dyn Future<Output = Result<(), tokio_postgres::Error>> + Send + 'a>>;

/// One statement of a pipeline.
pub(crate) fn run<'a>(
    client: &'a Client,
    stmt: &'a Statement,
    args: Vec<&'a (dyn ToSql + Sync)>,
) -> Pending<'a> {
    Box::pin(async move { client.execute(stmt, &args).await.map(drop) })
}

const ADVANCE: &str = "SELECT forkless_advance($1, $2, $3, $4, $5, $6, $7)";
const DROP_STREAMS: &str = "DELETE FROM forkless_streams WHERE session = $1 AND stream = ANY($2)";
const TRIM: &str = "DELETE FROM forkless_chunks c USING unnest($2::bytea[], $3::bigint[]) AS t(s, low) \
     WHERE c.session = $1 AND c.stream = t.s AND c.last < t.low";
const DROP_EVENTS: &str = "DELETE FROM forkless_chunks WHERE session = $1";
const NOTIFY: &str = "SELECT pg_notify('forkless', $1)";

/// Apply `w` in one transaction, sent as one pipeline.
pub(crate) async fn write(client: &Client, w: Write<'_>) -> Result<Written> {
    let sid = w.new.id();
    let id = sid.as_bytes().as_slice();
    let header = encode_header(w.new);
    let wake = Columns::of(&w.new.wake());
    let expected = w.expected.get() as i64;
    let mut removed: Vec<Vec<u8>> = Vec::new();
    let mut changed = Vec::new();
    let mut trims: (Vec<Vec<u8>>, Vec<i64>) = (Vec::new(), Vec::new());
    for change in w.new.changes_since(w.old) {
        let (low_before, meta) = match change {
            StreamChange::Removed(_) => {
                removed.push(change.id().as_bytes().to_vec());
                continue;
            }
            StreamChange::Added(meta) => (forkless_core::Seq::FIRST, meta),
            StreamChange::Changed { before, after } => (before.low_water(), after),
        };
        changed.push(meta);
        if meta.low_water() > low_before {
            trims.0.push(meta.id().as_bytes().to_vec());
            trims.1.push(meta.low_water().get() as i64);
        }
    }
    let (streams, metas) = stream_rows(changed.iter().copied());
    let prepare = |sql| client.prepare_cached(sql);
    let advance = prepare(ADVANCE).await.map_err(backend)?;
    let drop_streams = prepare(DROP_STREAMS).await.map_err(backend)?;
    let upsert = prepare(UPSERT_STREAMS).await.map_err(backend)?;
    let trim = prepare(TRIM).await.map_err(backend)?;
    let drop_events = prepare(DROP_EVENTS).await.map_err(backend)?;
    let notify = prepare(NOTIFY).await.map_err(backend)?;
    let ended = w.new.session().ended().is_some();
    // Prepared statements are sent on their first poll, so the pipeline goes out in order,
    // `BEGIN` first and `COMMIT` last.
    let mut steps: Vec<Pending<'_>> = Vec::with_capacity(9);
    steps.push(Box::pin(client.batch_execute("BEGIN")));
    let args: [&(dyn ToSql + Sync); 7] =
        [&id, &expected, &header, &wake.0[0], &wake.0[1], &wake.0[2], &wake.0[3]];
    steps.push(run(client, &advance, args.to_vec()));
    if !removed.is_empty() {
        steps.push(run(client, &drop_streams, vec![&id, &removed]));
    }
    if !streams.is_empty() {
        steps.push(run(client, &upsert, vec![&id, &streams, &metas]));
    }
    if !trims.0.is_empty() {
        steps.push(run(client, &trim, vec![&id, &trims.0, &trims.1]));
    }
    if ended {
        steps.push(run(client, &drop_events, vec![&id]));
    }
    if let Some(hint) = &w.hint {
        steps.push(run(client, &notify, vec![hint]));
    }
    steps.push(Box::pin(client.batch_execute("COMMIT")));
    match futures::future::try_join_all(steps).await {
        Ok(_) => Ok(Written::Committed),
        Err(e) => {
            rollback(client).await;
            match e.code().map(SqlState::code) {
                Some(MOVED) => Ok(Written::Moved),
                Some(UNKNOWN) => Err(Error::SessionUnknown),
                _ => Err(backend(e)),
            }
        }
    }
}

/// End whatever transaction a failed pipeline left open (the `COMMIT` it sent already ended
/// an aborted one; this is for a pipeline cut short).
pub(crate) async fn rollback(client: &Client) {
    if !client.is_closed() {
        let _ = client.batch_execute("ROLLBACK").await;
    }
}

/// Ids and rows of `streams`, as the two arrays `UPSERT_STREAMS` takes.
fn stream_rows<'a>(streams: impl Iterator<Item = &'a forkless_core::Stream>) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    streams.map(|s| (s.id().as_bytes().to_vec(), encode_stream(s))).unzip()
}

/// The four wake columns of a record.
pub(crate) struct Columns(pub(crate) [Option<i64>; 4]);

impl Columns {
    pub(crate) fn of(w: &Wake) -> Self {
        Self([w.liveness, w.stream_idle, w.activity, w.ended].map(|t| t.map(millis)))
    }
}

/// Forget a session (its streams and events cascade), and deliver `hint` with it.
pub(crate) async fn remove(client: &Client, id: SessionId, hint: Option<String>) -> Result<()> {
    let stmt = client.prepare_cached("DELETE FROM forkless_sessions WHERE id = $1").await.map_err(backend)?;
    client.execute(&stmt, &[&id.as_bytes().as_slice()]).await.map_err(backend)?;
    if let Some(hint) = hint {
        // Other nodes' watchers re-read, find the session gone and stop.
        let notify = client.prepare_cached(NOTIFY).await.map_err(backend)?;
        client.execute(&notify, &[&hint]).await.map_err(backend)?;
    }
    Ok(())
}

/// A node lease operation, on the database's clock (`clock_timestamp()`).
pub(crate) async fn lease(client: &Client, op: LeaseOp<'_>) -> Result<bool> {
    let ms = |d: std::time::Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
    match op {
        LeaseOp::Acquire { node, token, ttl, advertise } => {
            let ttl = ms(ttl);
            changed_one(
                client,
                "INSERT INTO forkless_nodes (node, token, expires_at, advertise) \
                 VALUES ($1, $2, clock_timestamp() + $3::bigint * interval '1 millisecond', $4) \
                 ON CONFLICT (node) DO UPDATE SET token = EXCLUDED.token, expires_at = EXCLUDED.expires_at, \
                 advertise = EXCLUDED.advertise \
                 WHERE forkless_nodes.expires_at < clock_timestamp() OR forkless_nodes.token = EXCLUDED.token",
                &[&node as &(dyn ToSql + Sync), &token, &ttl, &advertise],
            )
            .await
        }
        LeaseOp::Renew { node, token, ttl, in_hand } => {
            let (ttl, in_hand) = (ms(ttl), ms(in_hand));
            changed_one(
                client,
                "UPDATE forkless_nodes SET expires_at = clock_timestamp() + $3::bigint * interval '1 millisecond' \
                 WHERE node = $1 AND token = $2 \
                 AND expires_at >= clock_timestamp() + $4::bigint * interval '1 millisecond'",
                &[&node as &(dyn ToSql + Sync), &token, &ttl, &in_hand],
            )
            .await
        }
        LeaseOp::Release { node, token } => {
            changed_one(
                client,
                "DELETE FROM forkless_nodes WHERE node = $1 AND token = $2",
                &[&node as &(dyn ToSql + Sync), &token],
            )
            .await
        }
    }
}

/// Run a statement that changes at most one row; whether it did.
async fn changed_one(client: &Client, sql: &'static str, params: &[&(dyn ToSql + Sync)]) -> Result<bool> {
    let stmt = client.prepare_cached(sql).await.map_err(backend)?;
    Ok(client.execute(&stmt, params).await.map_err(backend)? == 1)
}

/// Who owns `session`: its owner, the address it advertised, whether its lease is live.
pub(crate) async fn owner(client: &Client, session: SessionId) -> Result<Option<OwnerFacts>> {
    let stmt = client
        .prepare_cached(
            "SELECT s.owner, n.advertise, coalesce(n.expires_at >= clock_timestamp(), false) \
             FROM forkless_sessions s LEFT JOIN forkless_nodes n ON n.node = s.owner \
             WHERE s.id = $1 AND s.owner IS NOT NULL",
        )
        .await
        .map_err(backend)?;
    let row = client.query_opt(&stmt, &[&session.as_bytes().as_slice()]).await.map_err(backend)?;
    Ok(row.map(|r| OwnerFacts { node: r.get(0), advertise: r.get(1), live: r.get(2) }))
}

/// The sessions `node` owns.
pub(crate) async fn owned(client: &Client, node: &str) -> Result<Vec<SessionId>> {
    let stmt =
        client.prepare_cached("SELECT id FROM forkless_sessions WHERE owner = $1").await.map_err(backend)?;
    let rows = client.query(&stmt, &[&node]).await.map_err(backend)?;
    rows.iter().map(|r| session_id(r.get(0))).collect()
}

/// The sessions whose owner holds no live lease, with that owner.
pub(crate) async fn ownerless(client: &Client) -> Result<Vec<(SessionId, String)>> {
    let stmt = client
        .prepare_cached(
            "SELECT s.id, s.owner FROM forkless_sessions s WHERE s.owner IS NOT NULL AND NOT EXISTS \
             (SELECT 1 FROM forkless_nodes n WHERE n.node = s.owner AND n.expires_at >= clock_timestamp())",
        )
        .await
        .map_err(backend)?;
    let rows = client.query(&stmt, &[]).await.map_err(backend)?;
    rows.iter().map(|r| Ok((session_id(r.get(0))?, r.get(1)))).collect()
}

/// Make `to` the owner of `session` if `from` still owns it.
pub(crate) async fn claim(client: &Client, session: SessionId, from: &str, to: &str) -> Result<bool> {
    let stmt = client
        .prepare_cached("UPDATE forkless_sessions SET owner = $3 WHERE id = $1 AND owner = $2")
        .await
        .map_err(backend)?;
    Ok(client.execute(&stmt, &[&session.as_bytes().as_slice(), &from, &to]).await.map_err(backend)? == 1)
}

/// Send `hint` to every node's listener (`NOTIFY`, outside any write).
pub(crate) async fn notify(client: &Client, hint: &str) -> Result<()> {
    let stmt = client.prepare_cached(NOTIFY).await.map_err(backend)?;
    client.execute(&stmt, &[&hint]).await.map_err(backend)?;
    Ok(())
}

/// Store one-time `key` unless it is stored (the primary key makes that one atomic step),
/// first deleting a few keys whose time passed, so the table holds what is live.
pub(crate) async fn spend(client: &Client, key: SpendKey, until: Timestamp, now: Timestamp) -> Result<bool> {
    let expired = client
        .prepare_cached(
            "DELETE FROM forkless_spent WHERE key IN \
             (SELECT key FROM forkless_spent WHERE until_ms <= $1 LIMIT 64)",
        )
        .await
        .map_err(backend)?;
    client.execute(&expired, &[&millis(now)]).await.map_err(backend)?;
    let insert = client
        .prepare_cached(
            "INSERT INTO forkless_spent (key, until_ms) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING",
        )
        .await
        .map_err(backend)?;
    Ok(client.execute(&insert, &[&key.0.as_slice(), &millis(until)]).await.map_err(backend)? == 1)
}

fn session_id(bytes: &[u8]) -> Result<SessionId> {
    bytes
        .try_into()
        .map(SessionId::from_bytes)
        .map_err(|_| Error::Corrupt("session id of wrong length".into()))
}
