//! Reading what the database committed: a stream's metadata and events after a cursor
//! (decoded from the chunks that hold them), the sizes retention asks for, one stream's
//! metadata, and the sessions due for a sweep. Every read is one statement, so the metadata
//! the shared layer checks and the events it returns come from one snapshot.
//!
//! It owns these queries, not the checks (the read fence is the shared layer's, through
//! [`forkless_store::check_read`], and the wake-ups the core's
//! [`Wake`](forkless_core::Wake) arithmetic).

use bytes::Bytes;
use deadpool_postgres::ClientWrapper as Client;
use forkless_core::{Schedule, Seq, SessionId, Stream, StreamId, Timestamp};
use forkless_store::codec::{decode_stream, push_chunk_events, push_chunk_sizes};
use forkless_store::shared::Read;
use forkless_store::{Error, Result};

use crate::rows::{backend, millis};

/// A read returns at most this many events, whatever it asks for (a writer asks for a few
/// hundred).
const MAX_READ: usize = 1 << 20;

/// `stream`'s committed metadata and up to `max` of its committed events after `after`.
pub(crate) async fn read(
    client: &Client,
    session: SessionId,
    stream: StreamId,
    after: Seq,
    max: usize,
) -> Result<Read> {
    // The chunks holding events after the cursor, up to the `max`-th: those ending after it
    // and starting at or before `after + max`, in order.
    let stmt = client
        .prepare_cached(
            "SELECT st.meta, c.first, c.events FROM forkless_streams st LEFT JOIN LATERAL \
             (SELECT first, events FROM forkless_chunks ch WHERE ch.session = st.session AND ch.stream = st.stream \
              AND ch.last > $3 AND ch.first <= $3 + $4 ORDER BY ch.last LIMIT $4) c ON true \
             WHERE st.session = $1 AND st.stream = $2",
        )
        .await
        .map_err(backend)?;
    let (s, st) = (session.as_bytes().as_slice(), stream.as_bytes().as_slice());
    let after_n = after.get() as i64;
    let max = max.min(MAX_READ);
    let limit = max as i64;
    let rows = client.query(&stmt, &[&s, &st, &after_n, &limit]).await.map_err(backend)?;
    let Some(first) = rows.first() else { return Err(absent(client, session).await) };
    let meta = decode_stream(first.get::<_, &[u8]>(0))?.build();
    let mut events = Vec::with_capacity(max.min(256));
    for row in &rows {
        let Some(first) = row.get::<_, Option<i64>>(1) else { break };
        let chunk = Bytes::copy_from_slice(row.get::<_, &[u8]>(2));
        push_chunk_events(Seq::new(first as u64), &chunk, after, max, &mut events)?;
    }
    Ok(Read { meta, events })
}

/// One stream's committed metadata.
pub(crate) async fn stream(client: &Client, session: SessionId, stream: StreamId) -> Result<Stream> {
    let stmt = client
        .prepare_cached("SELECT meta FROM forkless_streams WHERE session = $1 AND stream = $2")
        .await
        .map_err(backend)?;
    let (s, st) = (session.as_bytes().as_slice(), stream.as_bytes().as_slice());
    match client.query_opt(&stmt, &[&s, &st]).await.map_err(backend)? {
        Some(row) => Ok(decode_stream(row.get::<_, &[u8]>(0))?.build()),
        None => Err(absent(client, session).await),
    }
}

/// Why a stream row is missing: its session is unknown, or only the stream is.
async fn absent(client: &Client, session: SessionId) -> Error {
    let stmt = match client.prepare_cached("SELECT 1 FROM forkless_sessions WHERE id = $1").await {
        Ok(stmt) => stmt,
        Err(e) => return backend(e),
    };
    match client.query_opt(&stmt, &[&session.as_bytes().as_slice()]).await {
        Ok(Some(_)) => Error::StreamUnknown,
        Ok(None) => Error::SessionUnknown,
        Err(e) => backend(e),
    }
}

/// The payload sizes of `stream`'s oldest `n` committed events from `from` on, oldest first.
pub(crate) async fn oldest_sizes(
    client: &Client,
    session: SessionId,
    stream: StreamId,
    from: Seq,
    n: u64,
) -> Result<Vec<u64>> {
    let stmt = client
        .prepare_cached(
            "SELECT first, events FROM forkless_chunks WHERE session = $1 AND stream = $2 \
             AND last >= $4 ORDER BY last LIMIT $3",
        )
        .await
        .map_err(backend)?;
    let (s, st) = (session.as_bytes().as_slice(), stream.as_bytes().as_slice());
    let want = usize::try_from(n).unwrap_or(usize::MAX);
    let limit = i64::try_from(n).unwrap_or(i64::MAX);
    let from_n = from.get() as i64;
    let rows = client.query(&stmt, &[&s, &st, &limit, &from_n]).await.map_err(backend)?;
    let mut sizes = Vec::new();
    for row in &rows {
        let first = Seq::new(row.get::<_, i64>(0) as u64);
        push_chunk_sizes(first, row.get::<_, &[u8]>(1), from, want, &mut sizes)?;
    }
    Ok(sizes)
}

/// The sessions due at `now`: four index range scans, one per [`forkless_core::Wake`] anchor.
pub(crate) async fn due(client: &Client, now: Timestamp, schedule: &Schedule) -> Result<Vec<SessionId>> {
    let stmt = client
        .prepare_cached(
            "SELECT id FROM forkless_sessions WHERE wake_liveness <= $1 \
             UNION SELECT id FROM forkless_sessions WHERE wake_stream_idle <= $2 \
             UNION SELECT id FROM forkless_sessions WHERE wake_activity <= $3 \
             UNION SELECT id FROM forkless_sessions WHERE wake_ended <= $4",
        )
        .await
        .map_err(backend)?;
    // An anchor `t` is due when `t + ttl <= now`, that is `t <= now - ttl`; nothing is when
    // `ttl` exceeds `now`.
    let before = |ttl: core::time::Duration| {
        let ttl = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
        let now = millis(now);
        if ttl > now { -1 } else { now - ttl }
    };
    let bounds = [
        millis(now),
        before(schedule.stream_ttl),
        before(schedule.session_idle_ttl),
        before(schedule.tombstone_ttl),
    ];
    let rows =
        client.query(&stmt, &[&bounds[0], &bounds[1], &bounds[2], &bounds[3]]).await.map_err(backend)?;
    ids(&rows)
}

/// Every stored session id.
pub(crate) async fn sessions(client: &Client) -> Result<Vec<SessionId>> {
    let stmt = client.prepare_cached("SELECT id FROM forkless_sessions").await.map_err(backend)?;
    let rows = client.query(&stmt, &[]).await.map_err(backend)?;
    ids(&rows)
}

/// The session ids in the first column of `rows`.
fn ids(rows: &[tokio_postgres::Row]) -> Result<Vec<SessionId>> {
    rows.iter()
        .map(|r| {
            let id: &[u8] = r.get(0);
            id.try_into()
                .map(SessionId::from_bytes)
                .map_err(|_| Error::Corrupt("session id of wrong length".into()))
        })
        .collect()
}
