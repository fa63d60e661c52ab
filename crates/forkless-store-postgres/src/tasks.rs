//! Task rows (table `forkless_tasks`, see [`crate::schema`]): one statement per operation, a
//! replace guarded by the version it was read at, so the database is the compare-and-set.
//! A statement outside a transaction commits before it returns: what the shared layer needs
//! to answer `CreateTaskResult` only once `tasks/get` resolves on every node.
//!
//! It owns these statements, not the rows' encoding (`forkless_store::codec`) nor what a task
//! is (`forkless_core`).

use deadpool_postgres::ClientWrapper as Client;
use forkless_core::{TaskId, Timestamp};
use forkless_store::shared::TaskRow;
use forkless_store::{Error, Result, Version};

use crate::rows::backend;

fn task_id(bytes: &[u8]) -> Result<TaskId> {
    let bytes: [u8; 16] =
        bytes.try_into().map_err(|_| Error::Corrupt("a task id of the wrong length".into()))?;
    Ok(TaskId::from_bytes(bytes))
}

fn millis(t: Timestamp) -> i64 {
    i64::try_from(t.as_millis()).unwrap_or(i64::MAX)
}

/// A task's record and version.
pub(crate) async fn load(client: &Client, id: TaskId) -> Result<Option<(Version, Vec<u8>)>> {
    let stmt = client
        .prepare_cached("SELECT version, record FROM forkless_tasks WHERE id = $1")
        .await
        .map_err(backend)?;
    let row = client.query_opt(&stmt, &[&id.as_bytes().as_slice()]).await.map_err(backend)?;
    Ok(row.map(|r| (Version::new(r.get::<_, i64>(0) as u64), r.get(1))))
}

/// Insert (`expected` none) or replace at `expected`; whether it did.
pub(crate) async fn put(client: &Client, row: TaskRow<'_>, expected: Option<Version>) -> Result<bool> {
    let id = row.id.as_bytes().as_slice();
    let expires = millis(row.expires);
    let n = match expected {
        None => {
            let stmt = client
                .prepare_cached(
                    "INSERT INTO forkless_tasks (id, version, record, node, open, expires_ms) \
                     VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (id) DO NOTHING",
                )
                .await
                .map_err(backend)?;
            let v = Version::INITIAL.get() as i64;
            client.execute(&stmt, &[&id, &v, &row.record, &row.node, &row.open, &expires]).await
        }
        Some(expected) => {
            let stmt = client
                .prepare_cached(
                    "UPDATE forkless_tasks SET version = $2 + 1, record = $3, node = $4, open = $5, \
                     expires_ms = $6 WHERE id = $1 AND version = $2",
                )
                .await
                .map_err(backend)?;
            let v = expected.get() as i64;
            client.execute(&stmt, &[&id, &v, &row.record, &row.node, &row.open, &expires]).await
        }
    };
    Ok(n.map_err(backend)? == 1)
}

/// Open tasks whose node is `node`.
pub(crate) async fn open(client: &Client, node: Option<&str>) -> Result<Vec<TaskId>> {
    let stmt = client
        .prepare_cached("SELECT id FROM forkless_tasks WHERE open AND node IS NOT DISTINCT FROM $1")
        .await
        .map_err(backend)?;
    let rows = client.query(&stmt, &[&node]).await.map_err(backend)?;
    rows.iter().map(|r| task_id(r.get(0))).collect()
}

/// Open tasks whose node holds no live lease (on the database's clock).
pub(crate) async fn lapsed(client: &Client) -> Result<Vec<(TaskId, String)>> {
    let stmt = client
        .prepare_cached(
            "SELECT t.id, t.node FROM forkless_tasks t WHERE t.open AND t.node IS NOT NULL AND NOT EXISTS \
             (SELECT 1 FROM forkless_nodes n WHERE n.node = t.node AND n.expires_at >= clock_timestamp())",
        )
        .await
        .map_err(backend)?;
    let rows = client.query(&stmt, &[]).await.map_err(backend)?;
    rows.iter().map(|r| Ok((task_id(r.get(0))?, r.get(1)))).collect()
}

/// Delete the tasks whose time to live ended before `now`.
pub(crate) async fn expire(client: &Client, now: Timestamp) -> Result<u64> {
    let stmt =
        client.prepare_cached("DELETE FROM forkless_tasks WHERE expires_ms < $1").await.map_err(backend)?;
    client.execute(&stmt, &[&millis(now)]).await.map_err(backend)
}
