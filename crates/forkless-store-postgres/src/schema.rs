//! The database schema and its versioned migrations, applied in order on connect under an
//! advisory lock (so nodes starting together migrate once). A database whose schema is newer
//! than this build knows is refused by name, never written to.
//!
//! ```text
//! forkless_schema   (version, name)                                   one row per migration applied
//! forkless_sessions (id, version, header, wake_liveness, wake_stream_idle, wake_activity, wake_ended, owner)
//! forkless_streams  (session, stream, meta)                           one row per stream
//! forkless_chunks   (session, stream, last, first, events)            one row per chunk of retained events
//! forkless_nodes    (node, token, expires_at, advertise)              one row per node lease
//! forkless_spent    (key, until_ms)                                   one row per one-time key spent
//! forkless_interest (session, node)                                   one row per session a node tails
//! forkless_tasks    (id, version, record, node, open, expires_ms)     one row per task (tasks extension)
//! ```
//!
//! `header` and `meta` are [`forkless_store::codec`] rows, and `events` a chunk of that codec:
//! the consecutive events `first ..= last` of one stream that one group commit stored (up to
//! 256 events), keyed by its last event so "the events after a cursor" is one index range
//! from the chunk holding the next one (migration 7; before it, one row per event); the four `wake_*` columns are a
//! record's [`Wake`](forkless_core::Wake) anchors in milliseconds, each indexed, so "due at
//! `now`" is four index range scans. Streams cascade from their session and chunks go with
//! their stream (a trigger), so dropping either drops what it held. `forkless_advance` is the compare-and-set:
//! it moves a session from the version a write was computed on to the next, or aborts the
//! write's transaction with SQLSTATE `FK001` (another writer moved it) or `FK002` (no such
//! session). `forkless_advance_many` (migration 2; one statement since migration 8) does the same
//! for every session of a group commit, naming the first that moved in the error's detail, and
//! keeps a session's header where the batch passes none (appends never change it).
//!
//! It owns the tables and their evolution, not the statements that use them (see
//! `crate::rows`).

use forkless_store::{Error, Result};
use tokio_postgres::Client;

use crate::rows::backend;

/// Every migration, in order: its version (the position, from 1) and its name.
pub(crate) const MIGRATIONS: &[(&str, &str)] = &[
    ("sessions, streams and events", V1),
    ("group commit: many sessions advanced at once", V2),
    ("node leases", V3),
    ("session owners", V4),
    ("advertised node addresses", V5),
    ("spent one-time keys", V6),
    ("events stored in chunks", V7),
    ("group commit: sessions advanced in one statement, unchanged headers kept", V8),
    ("tail interest: hints only for sessions another node watches", V9),
    ("tasks", V10),
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: i32 = MIGRATIONS.len() as i32;

const LOCK_KEY: i64 = 0x666f_726b_6c65_7373; // "forkless"

const V1: &str = r#"
CREATE TABLE forkless_sessions (
    id bytea PRIMARY KEY,
    version bigint NOT NULL,
    header bytea NOT NULL,
    wake_liveness bigint,
    wake_stream_idle bigint,
    wake_activity bigint,
    wake_ended bigint
);
CREATE INDEX forkless_sessions_wake_liveness ON forkless_sessions (wake_liveness) WHERE wake_liveness IS NOT NULL;
CREATE INDEX forkless_sessions_wake_stream_idle ON forkless_sessions (wake_stream_idle) WHERE wake_stream_idle IS NOT NULL;
CREATE INDEX forkless_sessions_wake_activity ON forkless_sessions (wake_activity) WHERE wake_activity IS NOT NULL;
CREATE INDEX forkless_sessions_wake_ended ON forkless_sessions (wake_ended) WHERE wake_ended IS NOT NULL;
CREATE TABLE forkless_streams (
    session bytea NOT NULL REFERENCES forkless_sessions (id) ON DELETE CASCADE,
    stream bytea NOT NULL,
    meta bytea NOT NULL,
    PRIMARY KEY (session, stream)
);
CREATE TABLE forkless_events (
    session bytea NOT NULL,
    stream bytea NOT NULL,
    seq bigint NOT NULL,
    payload bytea NOT NULL,
    PRIMARY KEY (session, stream, seq),
    FOREIGN KEY (session, stream) REFERENCES forkless_streams (session, stream) ON DELETE CASCADE
);
CREATE FUNCTION forkless_advance(p_id bytea, p_expected bigint, p_header bytea, p_liveness bigint,
                                 p_stream_idle bigint, p_activity bigint, p_ended bigint)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    UPDATE forkless_sessions
       SET version = p_expected + 1, header = p_header, wake_liveness = p_liveness,
           wake_stream_idle = p_stream_idle, wake_activity = p_activity, wake_ended = p_ended
     WHERE id = p_id AND version = p_expected;
    IF NOT FOUND THEN
        IF EXISTS (SELECT 1 FROM forkless_sessions WHERE id = p_id) THEN
            RAISE EXCEPTION 'forkless: the session moved on' USING ERRCODE = 'FK001';
        END IF;
        RAISE EXCEPTION 'forkless: unknown session' USING ERRCODE = 'FK002';
    END IF;
END $$;
"#;

const V2: &str = r#"
CREATE FUNCTION forkless_advance_many(p_ids bytea[], p_expected bigint[], p_next bigint[], p_headers bytea[],
                                      p_liveness bigint[], p_stream_idle bigint[], p_activity bigint[],
                                      p_ended bigint[])
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    i integer;
BEGIN
    FOR i IN 1 .. coalesce(array_length(p_ids, 1), 0) LOOP
        UPDATE forkless_sessions
           SET version = p_next[i], header = p_headers[i], wake_liveness = p_liveness[i],
               wake_stream_idle = p_stream_idle[i], wake_activity = p_activity[i], wake_ended = p_ended[i]
         WHERE id = p_ids[i] AND version = p_expected[i];
        IF NOT FOUND THEN
            RAISE EXCEPTION 'forkless: the session moved on' USING ERRCODE = 'FK001',
                DETAIL = encode(p_ids[i], 'hex');
        END IF;
    END LOOP;
END $$;
"#;

const V3: &str = r#"
CREATE TABLE forkless_nodes (
    node text PRIMARY KEY,
    token text NOT NULL,
    expires_at timestamptz NOT NULL
);
"#;

const V4: &str = r#"
ALTER TABLE forkless_sessions ADD COLUMN owner text;
CREATE INDEX forkless_sessions_owner ON forkless_sessions (owner) WHERE owner IS NOT NULL;
"#;

const V5: &str = r#"
ALTER TABLE forkless_nodes ADD COLUMN advertise text;
"#;

const V6: &str = r#"
CREATE TABLE forkless_spent (key bytea PRIMARY KEY, until_ms bigint NOT NULL);
CREATE INDEX forkless_spent_until ON forkless_spent (until_ms);
"#;

const V7: &str = r#"
CREATE TABLE forkless_chunks (
    session bytea NOT NULL,
    stream bytea NOT NULL,
    last bigint NOT NULL,
    first bigint NOT NULL,
    events bytea NOT NULL,
    PRIMARY KEY (session, stream, last)
);
-- A stream's chunks go with it (a trigger, not a foreign key: a key would check every chunk
-- inserted, and a group commit inserts many; a stream is dropped seldom).
CREATE FUNCTION forkless_drop_chunks() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM forkless_chunks WHERE session = OLD.session AND stream = OLD.stream;
    RETURN OLD;
END $$;
CREATE TRIGGER forkless_streams_drop_chunks AFTER DELETE ON forkless_streams
    FOR EACH ROW EXECUTE FUNCTION forkless_drop_chunks();
CREATE FUNCTION forkless_truncate_chunks() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE forkless_chunks;
    RETURN NULL;
END $$;
CREATE TRIGGER forkless_streams_truncate_chunks AFTER TRUNCATE ON forkless_streams
    FOR EACH STATEMENT EXECUTE FUNCTION forkless_truncate_chunks();
INSERT INTO forkless_chunks (session, stream, last, first, events)
    SELECT session, stream, seq, seq, int4send(octet_length(payload)) || payload FROM forkless_events;
DROP TABLE forkless_events;
"#;

const V8: &str = r#"
CREATE OR REPLACE FUNCTION forkless_advance_many(p_ids bytea[], p_expected bigint[], p_next bigint[],
                                                 p_headers bytea[], p_liveness bigint[], p_stream_idle bigint[],
                                                 p_activity bigint[], p_ended bigint[])
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    advanced bytea[];
    moved bytea;
BEGIN
    -- Locked in id order (the ids come sorted): two batches never wait on each other in a cycle.
    PERFORM 1 FROM forkless_sessions WHERE id = ANY(p_ids) ORDER BY id FOR UPDATE;
    WITH done AS (
        UPDATE forkless_sessions s
           SET version = t.next, header = coalesce(t.header, s.header), wake_liveness = t.liveness,
               wake_stream_idle = t.stream_idle, wake_activity = t.activity, wake_ended = t.ended
          FROM unnest(p_ids, p_expected, p_next, p_headers, p_liveness, p_stream_idle, p_activity, p_ended)
               AS t(id, expected, next, header, liveness, stream_idle, activity, ended)
         WHERE s.id = t.id AND s.version = t.expected
     RETURNING s.id)
    SELECT coalesce(array_agg(id), '{}') INTO advanced FROM done;
    IF coalesce(array_length(advanced, 1), 0) < coalesce(array_length(p_ids, 1), 0) THEN
        SELECT t.id INTO moved FROM unnest(p_ids) WITH ORDINALITY AS t(id, i)
         WHERE t.id <> ALL(advanced) ORDER BY t.i LIMIT 1;
        RAISE EXCEPTION 'forkless: the session moved on' USING ERRCODE = 'FK001',
            DETAIL = encode(moved, 'hex');
    END IF;
END $$;
"#;

const V9: &str = r#"
CREATE TABLE forkless_interest (
    session bytea NOT NULL REFERENCES forkless_sessions (id) ON DELETE CASCADE,
    node text NOT NULL,
    PRIMARY KEY (session, node)
);
"#;

// A task's row: its record (`forkless_store::codec::encode_task`), and the columns it is found
// by: its node while it runs (restart and takeover look there), whether it is open, and when
// its time to live ends (expiry deletes by that index).
const V10: &str = r#"
CREATE TABLE forkless_tasks (
    id bytea PRIMARY KEY,
    version bigint NOT NULL,
    record bytea NOT NULL,
    node text,
    open boolean NOT NULL,
    expires_ms bigint NOT NULL
);
CREATE INDEX forkless_tasks_open ON forkless_tasks (node) WHERE open;
CREATE INDEX forkless_tasks_expires ON forkless_tasks (expires_ms);
"#;

/// Bring the database to [`SCHEMA_VERSION`], or refuse one that is newer.
pub(crate) async fn migrate(client: &mut Client) -> Result<()> {
    migrate_to(client, SCHEMA_VERSION).await
}

/// Bring the database to schema version `target` (at most [`SCHEMA_VERSION`]: tests make a
/// database as an older build left it), or refuse one newer than this build knows.
pub(crate) async fn migrate_to(client: &mut Client, target: i32) -> Result<()> {
    let txn = client.transaction().await.map_err(backend)?;
    txn.execute("SELECT pg_advisory_xact_lock($1)", &[&LOCK_KEY]).await.map_err(backend)?;
    txn.batch_execute(
        "CREATE TABLE IF NOT EXISTS forkless_schema (version integer PRIMARY KEY, name text NOT NULL, \
         applied_at timestamptz NOT NULL DEFAULT now())",
    )
    .await
    .map_err(backend)?;
    let row = txn
        .query_one("SELECT coalesce(max(version), 0), (SELECT name FROM forkless_schema ORDER BY version DESC LIMIT 1) FROM forkless_schema", &[])
        .await
        .map_err(backend)?;
    let found: i32 = row.get(0);
    if found > SCHEMA_VERSION {
        let name: Option<String> = row.get(1);
        return Err(Error::Corrupt(format!(
            "the database holds forkless schema version {found} (\"{}\"), newer than the version \
             {SCHEMA_VERSION} this build knows; run a newer forkless against it",
            name.unwrap_or_default()
        )));
    }
    let target = usize::try_from(target.min(SCHEMA_VERSION)).unwrap_or(0);
    for (i, (name, sql)) in MIGRATIONS.iter().enumerate().take(target).skip(found as usize) {
        let version = i as i32 + 1;
        txn.batch_execute(sql).await.map_err(backend)?;
        txn.execute("INSERT INTO forkless_schema (version, name) VALUES ($1, $2)", &[&version, name])
            .await
            .map_err(backend)?;
        tracing::info!(version, name, "postgres schema migrated");
    }
    txn.commit().await.map_err(backend)
}
