//! `forkless serve --node-id` on a shared store, as real processes: a node id is served by one
//! live process at a time; a zombie (a process stopped with SIGSTOP until its lease lapsed,
//! while another process took its node id) stops serving when it resumes instead of writing
//! under a lease it no longer holds; and when a session's owner is killed mid-stream, the
//! client resumes on another node, reads every event it had not seen exactly once, and gets
//! its lost request answered with the request's id once that node takes the session over;
//! and a node cut off from the database (a TCP proxy the test cuts) stops before its lease
//! can lapse while another takes its sessions over. Each runs on PostgreSQL and on Redis. And
//! a node whose every database connection is terminated mid-stream (PostgreSQL's
//! `pg_terminate_backend`, Redis's `CLIENT KILL`) loses and duplicates nothing.

mod support;

use std::process::Stdio;
use std::time::Duration;

use support::shared::{Backend, SharedStore};
use support::view::{Streaming, is_response_to, read_to_5, read_until, resume_to_orphan_answer};
use support::{Serve, SseReader};
use tokio::io::{AsyncBufReadExt, BufReader};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_forkless")
}

/// Start `serve` with `args`; its banner's process, or what it printed on stderr if it exited.
async fn try_start(args: &[&str]) -> Result<tokio::process::Child, String> {
    let mut child = tokio::process::Command::new(bin())
        .arg("serve")
        .args(["--listen", "127.0.0.1:0"])
        .args(args)
        .env("RUST_LOG", "off")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn forkless serve");
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    match support::guard("a start-up line or an exit", stdout.next_line()).await.unwrap() {
        Some(line) if line.contains("listening on") => Ok(child),
        _ => {
            let out = child.wait_with_output().await.unwrap();
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }
}

/// One `#[tokio::test]` per shared store for the check `$check(Backend)`.
macro_rules! on_each_store {
    ($check:ident, $postgres:ident, $redis:ident) => {
        #[tokio::test]
        async fn $postgres() {
            $check(Backend::Postgres).await;
        }
        #[tokio::test]
        async fn $redis() {
            $check(Backend::Redis).await;
        }
    };
}

on_each_store!(
    zombie,
    a_node_id_is_served_by_one_process_and_a_resumed_zombie_stops_on_postgres,
    a_node_id_is_served_by_one_process_and_a_resumed_zombie_stops_on_redis
);

async fn zombie(backend: Backend) {
    let Some(db) = SharedStore::fresh(backend).await else { return };
    let store = db.store.clone();
    let args = ["--store", &store, "--node-id", "n1", "--lease-ttl", "1000"];
    let first = Serve::start(&args).await;

    // While the first holds the lease, a second process with the same id is refused.
    let refused = try_start(&args).await.expect_err("a held node id is refused");
    assert!(refused.contains("node id n1 is held by another live process"), "{refused}");

    // The first stops answering (SIGSTOP) and its lease lapses; a second process takes over.
    first.signal("STOP");
    let second = support::guard("the second process takes the lapsed lease", async {
        loop {
            match try_start(&args).await {
                Ok(child) => return child,
                Err(why) if why.contains("is held by another live process") => {
                    tokio::time::sleep(Duration::from_millis(100)).await
                }
                Err(other) => panic!("unexpected refusal: {other}"),
            }
        }
    })
    .await;

    // Resumed, the zombie finds its lease gone and stops rather than serve on.
    first.signal("CONT");
    let (status, rest) = first.wait().await;
    assert!(!status.success(), "the zombie exits with an error: {status:?}");
    assert!(rest.iter().any(|l| l.contains("store failure: node lease lost")), "{rest:?}");
    drop(second);
}

#[tokio::test]
async fn node_id_needs_a_shared_store() {
    let out = std::process::Command::new(bin())
        .args(["serve", "--store", "memory", "--node-id", "n1"])
        .env("RUST_LOG", "off")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--node-id needs a shared store"));
}

on_each_store!(
    owner_killed,
    an_owner_killed_mid_stream_is_taken_over_and_its_request_answered_with_its_id_on_postgres,
    an_owner_killed_mid_stream_is_taken_over_and_its_request_answered_with_its_id_on_redis
);

async fn owner_killed(backend: Backend) {
    let Some(db) = SharedStore::fresh(backend).await else { return };
    let node = |name: &'static str| {
        [
            "--store".to_owned(),
            db.store.clone(),
            "--node-id".into(),
            name.into(),
            "--lease-ttl".into(),
            "1000".into(),
        ]
    };
    let (na, nb) = (node("na"), node("nb"));
    let a = Serve::start(&na.iter().map(String::as_str).collect::<Vec<_>>()).await;
    let b = Serve::start(&nb.iter().map(String::as_str).collect::<Vec<_>>()).await;
    let Streaming { mut session, request, stream, seen, reader: _connected } = read_to_5(&a.url, 30).await;
    // Node a, the session's owner, dies; the client goes to node b.
    a.signal("KILL");
    a.wait().await;
    session.url = b.url.clone();
    resume_to_orphan_answer(&session, &seen, &stream, &request, "node b, taking the session over,").await;
    // /metrics on node b tells what happened.
    let metrics = reqwest::get(b.url.replace("/mcp", "/metrics")).await.unwrap().text().await.unwrap();
    assert!(metrics.contains("forkless_takeovers_total 1\n"), "{metrics}");
    assert!(metrics.contains("forkless_node_lease_held 1\n"), "{metrics}");
    assert!(metrics.contains("# TYPE forkless_store_batches_total counter"), "{metrics}");
}

on_each_store!(
    partitioned,
    a_node_cut_off_from_the_database_stops_and_another_takes_its_sessions_over_on_postgres,
    a_node_cut_off_from_the_database_stops_and_another_takes_its_sessions_over_on_redis
);

async fn partitioned(backend: Backend) {
    let Some(db) = SharedStore::fresh(backend).await else { return };
    let partition = support::relay::Relay::start(db.port()).await;
    let via_proxy = db.via(partition.port);
    let a = Serve::start(&["--store", &via_proxy, "--node-id", "na", "--lease-ttl", "1000"]).await;
    let b = Serve::start(&["--store", &db.store, "--node-id", "nb", "--lease-ttl", "1000"]).await;
    let Streaming { mut session, request, stream, seen, reader } = read_to_5(&a.url, 60).await;
    drop(reader);

    // The partition: node a can no longer reach the database. It must stop before its lease
    // can lapse, rather than serve on.
    partition.cut();
    let (status, rest) = a.wait().await;
    assert!(!status.success(), "node a stops: {status:?}");
    assert!(rest.iter().any(|l| l.contains("node lease lost")), "{rest:?}");

    // Node b takes the session over; the client resumes there and gets every event it had
    // not seen exactly once, then its request's answer carrying its id.
    session.url = b.url.clone();
    resume_to_orphan_answer(&session, &seen, &stream, &request, "node b").await;
}

#[tokio::test]
async fn database_connections_terminated_mid_stream_lose_and_duplicate_nothing() {
    let Some(db) = forkless_store_postgres::testing::fresh().await else { return };
    let node = Serve::start(&["--store", &db.url, "--node-id", "na", "--lease-ttl", "3000"]).await;
    let streaming = read_to_5(&node.url, 40).await;

    // Every connection the node holds to its database is terminated.
    let (admin, conn) = tokio_postgres::connect(&db.url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    let killed: i64 = admin
        .query_one(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE datname = current_database() AND pid <> pg_backend_pid()",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(killed > 0, "the node's connections were terminated");
    read_on_through_resumes(streaming).await;
}

#[tokio::test]
async fn redis_connections_killed_mid_stream_lose_and_duplicate_nothing() {
    // A Redis of this test's own, so that killing every client kills only this node's.
    let Some(redis) =
        forkless_store_redis::testing::PrivateRedis::start(&["--save", "", "--appendonly", "no"])
    else {
        return;
    };
    let node = Serve::start(&["--store", &redis.url(), "--node-id", "na", "--lease-ttl", "3000"]).await;
    let streaming = read_to_5(&node.url, 40).await;

    // Every connection the node holds to Redis is killed: its commands' and its hint
    // subscription's.
    for kind in ["normal", "pubsub"] {
        assert!(redis.kill_clients(kind) > 0, "the node's {kind} connections were killed");
    }
    read_on_through_resumes(streaming).await;
}

/// The client reads on (resuming whenever its stream ends) until its request is answered:
/// every event exactly once, in order (`accept` asserts it), and a typed answer.
async fn read_on_through_resumes(streaming: Streaming) {
    let Streaming { session, request, stream, mut seen, mut reader } = streaming;
    let mut answered = read_until(&mut reader, &mut seen, is_response_to(&request)).await;
    while !answered {
        let last = seen.last().expect("events").0.clone();
        let response = session.resume(&last, Some(&stream)).await;
        assert_eq!(response.status(), 200, "the resume is answered");
        let mut reader = SseReader::new(response);
        answered = read_until(&mut reader, &mut seen, is_response_to(&request)).await;
    }
    let (_, last) = seen.last().expect("the answer");
    let answer: serde_json::Value = serde_json::from_str(last).unwrap();
    assert_eq!(answer["id"], request, "{answer}");
    assert!(answer.get("result").is_some() || answer["error"]["code"].is_i64(), "a typed answer: {answer}");
    let count = seen.len() - 1;
    assert!(count >= 5, "the notifications before the answer: {count}");
}

on_each_store!(
    restarted_at_once,
    a_node_killed_and_restarted_at_once_waits_for_its_lease_and_serves_on_postgres,
    a_node_killed_and_restarted_at_once_waits_for_its_lease_and_serves_on_redis
);

/// A node killed with `kill -9` and started again at once under the same id (what systemd or
/// Kubernetes does) waits for the dead process's lease to lapse and then serves: no crash loop.
async fn restarted_at_once(backend: Backend) {
    let Some(db) = SharedStore::fresh(backend).await else { return };
    let store = db.store.clone();
    let args = ["--store", &store, "--node-id", "n1", "--lease-ttl", "1000"];
    let first = Serve::start(&args).await;
    first.signal("KILL");
    let _ = first.wait().await;
    let killed = std::time::Instant::now();
    let second = try_start(&args).await.unwrap_or_else(|e| panic!("the restart waits, then serves: {e}"));
    let took = killed.elapsed();
    eprintln!("serving again {took:?} after the kill (lease 1000 ms)");
    // Within the lease time (its lapse) and the wait's pace, with room for a busy machine.
    assert!(took < Duration::from_millis(3_000), "{took:?}");
    drop(second);
}
