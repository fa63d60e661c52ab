//! What the store's state turns into: a lost history, a store that cannot serve, a failing
//! store, an opening never confirmed.

use super::*;

/// A session its store ended because the store lost history (a Redis restarted from an
/// older snapshot) is refused like any ended session: 404 with reason `history_lost`, never
/// served on under its id.
#[tokio::test]
async fn a_session_whose_history_was_lost_is_refused_with_its_reason() {
    let srv = TestServer::default().await;
    let mut c = srv.client();
    c.initialize().await;
    let id: forkless_core::SessionId = c.session.clone().unwrap().parse().unwrap();
    // Ended now, so its tombstone outlives the test: ended at an instant long past, the
    // sweeper may remove it first and the session would read as unknown.
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis();
    let now = forkless_core::Timestamp::from_millis(u64::try_from(now).unwrap());
    forkless_store::transact(&srv.store, id, |r| r.on_end(forkless_core::EndReason::HistoryLost, now))
        .await
        .unwrap();
    assert_refused(c.call(1, "echo", json!({})).await, 404, -32001, "history_lost").await;
}

/// `/healthz` asks the store: 503 with its reason while it cannot serve, 200 once it can.
#[tokio::test]
async fn healthz_reports_the_store() {
    use forkless_store::{Fault, FaultyStore, MemoryStore};
    let store = FaultyStore::new(MemoryStore::new());
    let handler = common::TestHandler { controls: common::Controls::new() };
    let server = forkless_server::Server::new(store.clone(), handler, json_mode()).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(server.serve(listener, std::future::pending()));
    store.inject(Fault::Health);
    let down = reqwest::get(format!("{base}/healthz")).await.unwrap();
    assert_eq!(down.status(), 503);
    let body: Value = down.json().await.unwrap();
    assert_eq!(body["status"], "unavailable");
    assert!(body["store"].as_str().is_some_and(|s| s.contains("injected fault: health")), "{body}");
    let up = reqwest::get(format!("{base}/healthz")).await.unwrap();
    assert_eq!(up.status(), 200, "the next check finds the store serving");
}

#[tokio::test]
async fn a_failing_store_is_a_typed_503_and_other_sessions_carry_on() {
    use forkless_store::{Fault, FaultyStore, MemoryStore};
    let store = FaultyStore::new(MemoryStore::new());
    let controls = common::Controls::new();
    let handler = common::TestHandler { controls: controls.clone() };
    let cfg = json_mode();
    let server = forkless_server::Server::new(store.clone(), handler, cfg).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(server.serve(listener, std::future::pending()));
    let mut a = Client::new(&url);
    a.initialize().await;
    let mut b = Client::new(&url);
    b.initialize().await;

    store.inject(Fault::Load);
    assert_refused(a.call(1, "echo", json!({})).await, 503, -32603, "store_unavailable").await;
    assert_eq!(b.call(1, "echo", json!({})).await.status(), 200, "another session is undisturbed");

    store.inject(Fault::Append);
    let v: Value = a.call(2, "count", json!({ "n": 1 })).await.json().await.unwrap();
    assert_eq!(v["error"]["code"], -32603, "the handler got a typed SendError::Store: {v}");
    assert!(v["error"]["message"].as_str().unwrap().contains("store"));
    assert_eq!(a.call(3, "echo", json!({})).await.status(), 200, "the session survives a failed append");
}

/// A POST whose stream opening is applied but never confirmed to it (its client went away
/// while the store synced, say) answers with an error; its handler, still running, must then
/// put its answer on that stream all the same, or the stream would stay open, counting
/// against the session's limit, for the rest of the session.
#[tokio::test]
async fn a_stream_opened_for_a_post_that_went_away_still_gets_its_answer() {
    use forkless_store::{Fault, FaultyStore, MemoryStore};
    let store = FaultyStore::new(MemoryStore::new());
    let controls = common::Controls::new();
    let handler = common::TestHandler { controls: controls.clone() };
    let server = forkless_server::Server::new(store.clone(), handler, ServerConfig::default()).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(server.serve(listener, std::future::pending()));
    let mut c = Client::new(&url);
    c.initialize().await;
    let sid: forkless_core::SessionId = c.sid().parse().unwrap();

    // `gated` waits for the gate, so the POST opens the stream itself: that opening is the
    // next compare-and-set, written but reported as failed.
    store.inject(Fault::CompareAndSetUnacknowledged);
    assert_refused(
        c.call(1, "gated", json!({ "first": 0, "rest": 0 })).await,
        503,
        -32603,
        "store_unavailable",
    )
    .await;
    controls.gate.add_permits(1);

    let answered = |r: &forkless_core::SessionRecord| {
        r.streams().any(|s| {
            s.kind() == forkless_core::StreamKind::Request && s.is_completed() && s.high_water().get() == 1
        })
    };
    common::guard("the handler's answer on the opened stream", async {
        loop {
            let record = store.load(sid).await.unwrap().unwrap().value;
            if answered(&record) {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    })
    .await;
}

/// An answer at once takes the one append every event takes (the outbox's): it is counted in
/// `forkless_events_appended_total` like a notification and stored as its stream's final
/// event (it once went to the store beside the outbox, uncounted).
#[tokio::test]
async fn an_answer_at_once_is_counted_like_every_appended_event() {
    let srv = TestServer::default().await;
    let mut c = srv.client();
    c.initialize().await;
    let before = common::counter(&common::metrics(&srv).await, "forkless_events_appended_total");
    for id in 1..=3 {
        let events = Sse::new(c.call(id, "echo", json!({ "n": id })).await).rest().await;
        let answer = events.last().expect("the answer").json();
        assert_eq!(answer["id"], json!(id), "{answer}");
    }
    let after = common::counter(&common::metrics(&srv).await, "forkless_events_appended_total");
    assert_eq!(after - before, 3, "one appended event per answer");
}
