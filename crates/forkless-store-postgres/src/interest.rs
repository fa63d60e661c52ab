//! Tail interest in the database (migration 9): one `forkless_interest (session, node)` row
//! per session a node watches without owning it, and the group commit's hint statement that
//! sends a session's hint only if another node declared interest in it or the writer does not
//! own it (see [`forkless_store::shared`]'s `interest` for the rule it keeps).
//!
//! A declaration takes a shared lock on its session's row, which a group commit holds for
//! update: a declaration made while a batch holds the session waits for its commit (so the
//! stream read after it sees the batch), and a batch that locks the session after a
//! declaration committed evaluates its hints in a later statement, whose snapshot (READ
//! COMMITTED) sees the interest. Interest rows go with their session (a cascading key).
//!
//! It owns these statements, not when a node declares or withdraws.

use deadpool_postgres::ClientWrapper as Client;
use forkless_core::SessionId;
use forkless_store::Result;
use forkless_store::shared::Declared;

use crate::rows::backend;

/// A batch's hints for any node: `$1` the hints, `$2` their sessions, `$3` the writer's node
/// id (NULL without a lease: then only sessions some node owns or tails hint), `$4` its name in
/// interest rows.
pub(crate) const NOTIFY_FILTERED: &str = "SELECT pg_notify('forkless', t.h) \
     FROM unnest($1::text[], $2::bytea[]) AS t(h, s) \
     WHERE EXISTS (SELECT 1 FROM forkless_sessions x WHERE x.id = t.s AND x.owner IS DISTINCT FROM $3) \
        OR EXISTS (SELECT 1 FROM forkless_interest i WHERE i.session = t.s AND i.node <> $4)";

/// The shared lock is taken only when the node tails (`FOR SHARE` locks only the rows its
/// `WHERE` keeps): an owner's declaration locks and writes nothing, so it commits no WAL.
const DECLARE: &str = "WITH s AS (SELECT id FROM forkless_sessions \
                  WHERE id = $1 AND ($3::text IS NULL OR owner IS DISTINCT FROM $3) FOR SHARE), \
     declared AS (INSERT INTO forkless_interest (session, node) SELECT id, $2 FROM s \
                  ON CONFLICT (session, node) DO NOTHING) \
     SELECT EXISTS (SELECT 1 FROM s), EXISTS (SELECT 1 FROM forkless_sessions WHERE id = $1)";

const WITHDRAW: &str = "DELETE FROM forkless_interest WHERE node = $1 AND session = ANY($2::bytea[])";

/// Declare that `node` tails `session` unless `owner` owns it; `None` if it is unknown.
pub(crate) async fn declare(
    client: &Client,
    session: SessionId,
    node: &str,
    owner: Option<&str>,
) -> Result<Option<Declared>> {
    let stmt = client.prepare_cached(DECLARE).await.map_err(backend)?;
    let row =
        client.query_one(&stmt, &[&session.as_bytes().as_slice(), &node, &owner]).await.map_err(backend)?;
    Ok(match (row.get(0), row.get(1)) {
        (true, _) => Some(Declared::Tailing),
        (false, true) => Some(Declared::Owner),
        (false, false) => None,
    })
}

/// Withdraw `node`'s interest in `sessions`.
pub(crate) async fn withdraw(client: &Client, node: &str, sessions: &[SessionId]) -> Result<()> {
    let ids: Vec<&[u8]> = sessions.iter().map(|s| s.as_bytes().as_slice()).collect();
    let stmt = client.prepare_cached(WITHDRAW).await.map_err(backend)?;
    client.execute(&stmt, &[&node, &ids]).await.map_err(backend)?;
    Ok(())
}
