//! Durable before delivery, over real processes (PROTOCOL section 6): a client reads a stream,
//! the server is killed (`kill -9`, or it aborts itself in the middle of a group sync) and
//! restarted on the same data directory, in both durability modes.
//!
//! The oracle is the client's whole view, not the resume answer alone: every event id the
//! client accepted before the crash must still name byte-identical data afterwards (a replay
//! from the stream's start must begin with exactly what the client saw), the events after it
//! must continue without gap or duplicate, and a request whose handler died must be answered
//! with an error carrying its own id. This is the failure of an earlier release: in batched
//! mode a client saw `<S>.10`, the crash lost it, and recovery gave `<S>.10` to the lost
//! request's error answer, so a resume from `<S>.10` answered 200 with nothing.

mod support;

use serde_json::{Value, json};
use support::view::{View, accept, assert_orphan_answer, header, is_response_to, read_until};
use support::{Serve, Session, SseReader, fresh_data_dir, guard};

/// A durable server's data directory and flags, for restarts on the same files.
struct Data {
    dir: String,
    mode: &'static str,
    /// Delivery before durability put back (the store's test hook): the negative control.
    early: bool,
}

impl Data {
    fn new(mode: &'static str) -> Self {
        Self { dir: fresh_data_dir().display().to_string(), mode, early: false }
    }

    /// The same server with the rule broken.
    fn early(self) -> Self {
        Self { early: true, ..self }
    }

    /// `forkless serve` on these files at `listen`, with `env` besides.
    async fn serve(&self, listen: &str, env: &[(&str, &str)]) -> Serve {
        let mut env = env.to_vec();
        if self.early {
            env.push(("FORKLESS_TEST_EARLY_DELIVERY", "1"));
        }
        Serve::start_with_env(listen, &self.args(), &env).await
    }

    /// Files whose write-ahead log is the smallest the store uses at its length (64 KiB, two
    /// regions of 32 KiB, about a hundred events each), so that a run fills both regions
    /// many times over and checkpoints one on the checkpoint thread while the other fills:
    /// a first server creates the files and stops cleanly (nothing to replay), then the log
    /// is replaced by a small one of zeros.
    async fn with_small_log(mode: &'static str) -> Self {
        let data = Self::new(mode);
        let serve = data.serve("127.0.0.1:0", &[]).await;
        serve.signal("TERM");
        let (status, _) = serve.wait().await;
        assert!(status.success(), "a clean stop");
        let log = std::path::Path::new(&data.dir).join("forkless.redb.wal");
        assert!(log.metadata().expect("the log").len() > 64 << 10);
        std::fs::write(&log, vec![0u8; 64 << 10]).expect("a small log");
        data
    }

    /// With the rule broken, a batch window of 200 ms: an event read before its sync is then
    /// lost to nearly every kill (with the default 5 ms, the suite's load let all ten rounds
    /// of a control pass now and then).
    fn args(&self) -> Vec<&str> {
        let mut args = vec!["--data-dir", self.dir.as_str(), "--durability", self.mode];
        if self.early && self.mode == "batched" {
            args.extend(["--batch-window", "200"]);
        }
        args
    }
}

/// A resume from `cursor`: 200, a proven continuation of `stream`.
async fn resume(session: &Session, stream: &str, cursor: &str) -> SseReader {
    let response = session.resume(cursor, Some(stream)).await;
    assert_eq!(header(&response, "mcp-stream-resumed"), "true", "a proven continuation from {cursor}");
    assert_eq!(header(&response, "mcp-stream-id"), stream, "the same stream identity");
    SseReader::new(response)
}

/// The whole-view oracle: a replay of `stream` from its start begins with exactly what the
/// client saw before the crash (same ids, same bytes). Returns the replay.
async fn replay_names_the_same_events(
    session: &Session,
    stream: &str,
    seen: &View,
    until: impl Fn(&Value) -> bool,
) -> View {
    let mut reader = resume(session, stream, &format!("{stream}.0")).await;
    let mut replay = View::new();
    while replay.len() < seen.len() {
        let event = guard("replayed event", reader.next_event_or_end()).await.expect("replay ended early");
        accept(&mut replay, &event);
    }
    for (before, after) in seen.iter().zip(&replay) {
        assert_eq!(before, after, "an id the client saw before the crash must name the same event after it");
    }
    read_until(&mut reader, &mut replay, until).await;
    replay
}

/// The scenario: a tool call's own stream, cut by `kill -9` after `#10`.
async fn post_stream_survives_kill_9(data: Data) {
    let serve = data.serve("127.0.0.1:0", &[]).await;
    let addr = serve.addr();
    let (mut session, _) = Session::open(&serve.url).await;
    let (request, response) = session
        .send(
            "tools/call",
            json!({ "name": "start-notification-stream", "arguments": { "interval": 50, "count": 30 } }),
        )
        .await;
    let stream = header(&response, "mcp-stream-id");
    let mut reader = SseReader::new(response);
    let mut seen = View::new();
    let stopped = read_until(&mut reader, &mut seen, |m| {
        m["params"]["data"].as_str().is_some_and(|d| d.ends_with("#10"))
    })
    .await;
    assert!(stopped, "read up to #10");
    serve.signal("KILL");
    serve.wait().await;

    let _serve = data.serve(&addr, &[]).await;
    // The client's resume from the last id it holds continues right after it...
    let last = seen.last().expect("events").0.clone();
    let mut after = View::new();
    let mut reader = resume(&session, &stream, &last).await;
    // (`accept` judges seqs from the cursor on.)
    after.push(seen.last().cloned().expect("cursor"));
    assert!(read_until(&mut reader, &mut after, is_response_to(&request)).await, "the request is answered");
    assert!(after.len() > 1, "the resume was not answered with nothing");
    assert_orphan_answer(&after, &request, "restarted");
    // ...and every id it saw still names what it saw.
    let replay = replay_names_the_same_events(&session, &stream, &seen, is_response_to(&request)).await;
    assert_eq!(replay[seen.len() - 1..], after[..], "one history, however it is read");
}

/// The session's standalone GET stream, receiving background events across the crash; the
/// client reads `count` of them first.
async fn standalone_stream_survives_kill_9(data: Data, count: usize) {
    let serve = data.serve("127.0.0.1:0", &[]).await;
    let addr = serve.addr();
    let (mut session, _) = Session::open(&serve.url).await;
    let get = session.get_stream().await;
    let stream = header(&get, "mcp-stream-id");
    let mut reader = SseReader::new(get);
    let started =
        session.call_tool("start-background-stream", json!({ "interval": 2, "count": 10_000 })).await;
    assert!(started.result()["isError"] != json!(true), "{:?}", started.result());
    let mut seen = View::new();
    while seen.len() < count {
        let event = guard("next event", reader.next_event_or_end()).await.expect("stream ended early");
        accept(&mut seen, &event);
    }
    serve.signal("KILL");
    serve.wait().await;

    let _serve = data.serve(&addr, &[]).await;
    let last = seen.last().expect("events").0.clone();
    let mut reader = resume(&session, &stream, &last).await;
    // New background events follow whatever survived, numbered from #1 again.
    let fresh = session.call_tool("start-background-stream", json!({ "interval": 1, "count": 3 })).await;
    assert!(fresh.result()["isError"] != json!(true), "{:?}", fresh.result());
    let mut after = vec![seen.last().cloned().expect("cursor")];
    // The third of the new run (the survivors are all numbered above the count read).
    let background_third = |m: &Value| m["params"]["data"].as_str().is_some_and(|d| d.ends_with(" #3"));
    assert!(read_until(&mut reader, &mut after, background_third).await, "new events follow");
    drop(reader);
    let replay = replay_names_the_same_events(&session, &stream, &seen, background_third).await;
    assert_eq!(replay[seen.len() - 1..], after[..], "one history, however it is read");
}

/// The server aborts itself while a group is being made durable (after its log entry is
/// encoded, before its sync returns): nothing of that group may have been delivered.
async fn abort_during_a_group_sync(data: Data, group: &str) {
    let serve = data.serve("127.0.0.1:0", &[("FORKLESS_TEST_ABORT_IN_SYNC", group)]).await;
    let addr = serve.addr();
    let (mut session, _) = Session::open(&serve.url).await;
    let (request, response) = session
        .send(
            "tools/call",
            json!({ "name": "start-notification-stream", "arguments": { "interval": 2, "count": 10_000 } }),
        )
        .await;
    let stream = header(&response, "mcp-stream-id");
    let mut reader = SseReader::new(response);
    let mut seen = View::new();
    // The body ends (the connection is cut) when the process aborts.
    let answered = read_until(&mut reader, &mut seen, is_response_to(&request)).await;
    assert!(!answered, "the process aborted before the call finished");
    let (status, _) = serve.wait().await;
    assert!(!status.success(), "aborted");
    assert!(!seen.is_empty(), "some events were delivered before the abort");

    let _serve = data.serve(&addr, &[]).await;
    let replay = replay_names_the_same_events(&session, &stream, &seen, is_response_to(&request)).await;
    assert_orphan_answer(&replay, &request, "restarted");
}

#[tokio::test]
async fn batched_post_stream_after_kill_9_keeps_every_id_the_client_saw() {
    post_stream_survives_kill_9(Data::new("batched")).await;
}

#[tokio::test]
async fn immediate_post_stream_after_kill_9_keeps_every_id_the_client_saw() {
    post_stream_survives_kill_9(Data::new("immediate")).await;
}

#[tokio::test]
async fn batched_standalone_stream_after_kill_9_keeps_every_id_the_client_saw() {
    standalone_stream_survives_kill_9(Data::new("batched"), 40).await;
}

#[tokio::test]
async fn immediate_standalone_stream_after_kill_9_keeps_every_id_the_client_saw() {
    standalone_stream_survives_kill_9(Data::new("immediate"), 40).await;
}

/// The same with checkpoints running on their own thread beside the log the whole time (the
/// log's regions fill every few hundred milliseconds here). A `kill -9` seldom lands while
/// one runs; that case, with entries in both regions after the checkpoint, is pinned
/// deterministically in `forkless-store-redb`'s `tests/durable/checkpoint.rs`.
#[tokio::test]
async fn batched_standalone_stream_through_many_checkpoints_after_kill_9_keeps_every_id() {
    standalone_stream_survives_kill_9(Data::with_small_log("batched").await, 1_000).await;
}

#[tokio::test]
async fn immediate_standalone_stream_through_many_checkpoints_after_kill_9_keeps_every_id() {
    standalone_stream_survives_kill_9(Data::with_small_log("immediate").await, 1_000).await;
}

#[tokio::test]
async fn batched_abort_during_a_group_sync_delivered_nothing_of_that_group() {
    abort_during_a_group_sync(Data::new("batched"), "12").await;
}

#[tokio::test]
async fn immediate_abort_during_a_group_sync_delivered_nothing_of_that_group() {
    abort_during_a_group_sync(Data::new("immediate"), "40").await;
}

/// How many runs a negative control gets to catch the broken rule.
const ATTEMPTS: usize = 10;

/// The negative control: the scenarios above against the same server with delivery before
/// durability put back (the store's test hook, in the server process). Whether an oracle sees
/// it depends on where the crash lands against the group being synced (and, for an abort,
/// on whether the early events reached the client before the connection died), so each
/// control gets [`ATTEMPTS`] runs and must catch it in one. Measured over eight rounds of the
/// four, with the suite's parallelism: a run misses it about one time in six (the batched
/// streams) to one in two (the immediate abort, whose group is a single event); a caught run
/// takes under a second. The immediate-mode kills never catch it (the window between delivery
/// and the log write is microseconds, and `kill -9` keeps what was written), so those are not
/// asserted (`docs/durability.md`).
async fn caught_with_early_delivery<F: Future<Output = ()> + Send + 'static>(run: impl Fn() -> F) -> bool {
    for _ in 0..ATTEMPTS {
        if tokio::spawn(run()).await.is_err() {
            return true;
        }
    }
    false
}

#[tokio::test]
async fn negative_control_early_delivery_is_caught_by_the_batched_standalone_stream() {
    let run = || standalone_stream_survives_kill_9(Data::new("batched").early(), 40);
    assert!(caught_with_early_delivery(run).await, "an event delivered before its sync was lost by kill -9");
}

#[tokio::test]
async fn negative_control_early_delivery_is_caught_by_a_batched_abort_in_a_group_sync() {
    let run = || abort_during_a_group_sync(Data::new("batched").early(), "12");
    assert!(caught_with_early_delivery(run).await, "the aborted group's events were delivered");
}

#[tokio::test]
async fn negative_control_early_delivery_is_caught_by_an_immediate_abort_in_a_group_sync() {
    let run = || abort_during_a_group_sync(Data::new("immediate").early(), "40");
    assert!(caught_with_early_delivery(run).await, "the aborted group's events were delivered");
}

#[tokio::test]
async fn negative_control_early_delivery_is_caught_by_the_batched_tool_call_stream() {
    let run = || post_stream_survives_kill_9(Data::new("batched").early());
    assert!(caught_with_early_delivery(run).await, "an event delivered before its sync was lost by kill -9");
}
