//! The durable store across real process restarts: `kill -9` mid-stream, a graceful stop,
//! and many restarts in a row. A client that resumes with its cursor gets every event it had
//! not yet received exactly once and in order, then new events on the same stream; a cursor
//! beyond what survived is answered `cursor_ahead` (404), never with a stream.

mod support;

use serde_json::{Value, json};
use support::{Serve, Session, SseReader, fresh_data_dir, guard};

/// Where the server keeps its data, and how durable (immediate: nothing sent is lost).
struct Data {
    store: String,
}

impl Data {
    fn new() -> Self {
        Self { store: format!("redb:{}", fresh_data_dir().join("forkless.redb").display()) }
    }

    fn args(&self) -> [&str; 4] {
        ["--store", &self.store, "--durability", "immediate"]
    }
}

/// `(seq, N)` of a background notification event `"... #N"`.
fn numbered(event: &support::SseEvent, message: &Value) -> (u64, u64) {
    let seq = event.id.as_deref().and_then(|id| id.rsplit_once('.')).map(|(_, s)| s.parse().expect("seq"));
    let text =
        message["params"]["data"].as_str().unwrap_or_else(|| panic!("not a log notification: {message}"));
    let n = text.rsplit_once('#').map(|(_, n)| n.parse().expect("number")).expect("numbered text");
    (seq.expect("event id"), n)
}

fn header(response: &reqwest::Response, name: &str) -> String {
    response.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned()
}

/// Read `count` background notifications; returns their `(seq, N)`.
async fn read_numbered(reader: &mut SseReader, count: usize) -> Vec<(u64, u64)> {
    let mut out = Vec::with_capacity(count);
    while out.len() < count {
        let (event, message) = guard("next event", reader.next_message()).await.expect("stream ended early");
        out.push(numbered(&event, &message));
    }
    out
}

/// Resume the standalone stream after a restart and check what arrives: first the
/// survivors after `cursor` (consecutive seqs, consecutive old numbers), then `fresh`
/// new notifications numbered from 1. Returns the new cursor (last seq).
async fn resume_and_check(session: &mut Session, stream: &str, cursor: (u64, u64), fresh: u64) -> (u64, u64) {
    let response = session.resume(&format!("{stream}.{}", cursor.0), Some(stream)).await;
    assert_eq!(header(&response, "mcp-stream-resumed"), "true", "a proven continuation");
    assert_eq!(header(&response, "mcp-stream-id"), stream, "the same stream identity");
    let mut reader = SseReader::new(response);
    let started =
        session.call_tool("start-background-stream", json!({ "interval": 1, "count": fresh })).await;
    assert!(started.result()["isError"] != json!(true), "{:?}", started.result());
    let (mut seq, mut old, mut new) = (cursor.0, cursor.1, 0);
    while new < fresh {
        let (event, message) = guard("next event", reader.next_message()).await.expect("stream ended early");
        let (s, n) = numbered(&event, &message);
        assert_eq!(s, seq + 1, "seqs continue without gap or duplicate");
        seq = s;
        if new == 0 && n == old + 1 && n != 1 {
            old = n; // a survivor from before the restart
        } else {
            assert_eq!(n, new + 1, "new notifications follow the survivors, in order");
            new = n;
        }
    }
    (seq, new)
}

/// Start a session on `serve`, open its GET stream, start a long background stream, and
/// read `count` notifications. Returns the session, the stream id and the cursor.
async fn stream_some(serve: &Serve, count: usize) -> (Session, String, (u64, u64)) {
    let (mut session, _) = Session::open(&serve.url).await;
    let get = session.get_stream().await;
    let stream = header(&get, "mcp-stream-id");
    let mut reader = SseReader::new(get);
    let started =
        session.call_tool("start-background-stream", json!({ "interval": 2, "count": 10_000 })).await;
    assert!(started.result()["isError"] != json!(true), "{:?}", started.result());
    let seen = read_numbered(&mut reader, count).await;
    for (i, &(seq, n)) in seen.iter().enumerate() {
        assert_eq!((seq, n), (i as u64 + 1, i as u64 + 1));
    }
    (session, stream, *seen.last().expect("read some"))
}

#[tokio::test]
async fn after_kill_9_a_resume_delivers_every_durable_event_exactly_once_then_new_ones() {
    let data = Data::new();
    let serve = Serve::start(&data.args()).await;
    let addr = serve.addr();
    let (mut session, stream, cursor) = stream_some(&serve, 30).await;
    serve.signal("KILL");
    let (status, _) = serve.wait().await;
    assert!(!status.success(), "killed");

    let serve = Serve::start_at(&addr, &data.args()).await;
    resume_and_check(&mut session, &stream, cursor, 5).await;
    drop(serve);
}

#[tokio::test]
async fn after_a_graceful_stop_a_resume_continues_the_stream() {
    let data = Data::new();
    let serve = Serve::start(&data.args()).await;
    let addr = serve.addr();
    let (mut session, stream, cursor) = stream_some(&serve, 20).await;
    serve.terminate();
    let (status, _) = serve.wait().await;
    assert!(status.success(), "a graceful stop exits 0");

    let _serve = Serve::start_at(&addr, &data.args()).await;
    resume_and_check(&mut session, &stream, cursor, 5).await;
}

#[tokio::test]
async fn many_restarts_in_a_row_with_a_resume_each_time() {
    let data = Data::new();
    let serve = Serve::start(&data.args()).await;
    let addr = serve.addr();
    let (mut session, stream, mut cursor) = stream_some(&serve, 10).await;
    let mut serve = serve;
    for round in 0..5 {
        if round % 2 == 0 {
            serve.signal("KILL");
        } else {
            serve.terminate();
        }
        serve.wait().await;
        serve = Serve::start_at(&addr, &data.args()).await;
        cursor = resume_and_check(&mut session, &stream, cursor, 3).await;
    }
}

#[tokio::test]
async fn a_cursor_beyond_what_survived_is_rejected_cursor_ahead() {
    let data = Data::new();
    let serve = Serve::start(&data.args()).await;
    let addr = serve.addr();
    let (session, stream, cursor) = stream_some(&serve, 5).await;
    serve.signal("KILL");
    serve.wait().await;
    let _serve = Serve::start_at(&addr, &data.args()).await;
    // A cursor past the surviving high-water mark (as a batched-mode client could hold).
    let ahead = format!("{stream}.{}", cursor.0 + 1_000_000);
    let response = guard(
        "resume",
        reqwest::Client::new()
            .get(&session.url)
            .header("accept", "text/event-stream")
            .header("mcp-session-id", &session.id)
            .header("mcp-protocol-version", support::REVISION)
            .header("last-event-id", &ahead)
            .header("mcp-stream-id", &stream)
            .send(),
    )
    .await
    .expect("GET");
    assert_eq!(response.status(), 404, "never answered with a stream");
    let body: Value = response.json().await.expect("JSON-RPC error body");
    assert_eq!(body["error"]["data"]["reason"], "cursor_ahead");
    assert!(body.get("id").is_none(), "the error has no id");
}
