//! The decision table's rows over real HTTP, the seed scenario (row 5) among them.

use super::*;

#[tokio::test]
async fn row1_delivers_events_emitted_before_the_first_get() {
    let srv = TestServer::default().await;
    let mut c = srv.client();
    c.initialize().await;
    emit_standalone(&c, 3).await;
    let mut sse = open_standalone(&c).await;
    assert_eq!(sse.grace_ms.as_deref(), Some("10000"));
    for i in 1..=3 {
        let e = sse.next_content().await.unwrap();
        assert_eq!((e.seq(), e.i()), (i, Some(i)));
        assert_eq!(e.json()["method"], "notifications/message");
    }
}

#[tokio::test]
async fn row1_with_an_evicted_log_is_cursor_evicted() {
    let mut cfg = ServerConfig::default();
    cfg.core.limits.stream_max_events = 2;
    let srv = TestServer::start(cfg).await;
    let mut c = srv.client();
    c.initialize().await;
    emit_standalone(&c, 3).await;
    assert_refused(c.resume(None, None).await, 404, -32001, "cursor_evicted").await;
}

#[tokio::test]
async fn row2_a_second_plain_get_is_409_and_the_live_one_is_untouched() {
    let srv = TestServer::default().await;
    let mut c = srv.client();
    c.initialize().await;
    let mut live = open_standalone(&c).await;
    let e = assert_refused(c.resume(None, None).await, 409, -32002, "stream_attached").await;
    assert!(e["message"].is_string());
    emit_standalone(&c, 1).await;
    let e = live.next_content().await.unwrap();
    assert_eq!((e.seq(), e.i()), (1, Some(1)));
}

#[tokio::test]
async fn row3_reset_contract_fences_the_old_stream_and_opens_a_new_one() {
    let srv = TestServer::default().await;
    let mut c = srv.client();
    c.initialize().await; // declares the reset contract
    let mut first = open_standalone(&c).await;
    let old = first.stream_id.clone().unwrap();
    emit_standalone(&c, 2).await;
    assert_eq!(first.next_content().await.unwrap().seq(), 1);
    drop(first);
    // The writer notices the closed connection at its next write.
    emit_standalone(&c, 1).await;
    wait_standalone_detached(&srv, &c).await;

    let mut second = open_standalone(&c).await;
    let new = second.stream_id.clone().unwrap();
    assert_ne!(new, old, "a new stream identity");
    let record = srv.record(c.sid()).await;
    assert!(record.stream(old.parse().unwrap()).is_some_and(|s| s.is_fenced()), "the old stream is fenced");
    emit_standalone(&c, 1).await;
    let e = second.next_content().await.unwrap();
    assert_eq!(e.seq(), 1, "the new stream starts at 1");
    assert!(e.id.unwrap().starts_with(&new));

    // Row 8: the fenced stream cannot be resumed.
    assert_refused(c.resume(Some(&format!("{old}.2")), Some(&old)).await, 404, -32001, "stream_fenced").await;
}

#[tokio::test]
async fn row4_content_seen_without_reset_contract_or_a_token_without_cursor() {
    let srv = TestServer::default().await;
    let mut c = srv.client();
    c.initialize_with("2025-11-25", json!({})).await;
    let mut sse = open_standalone(&c).await;
    emit_standalone(&c, 1).await;
    assert_eq!(sse.next_content().await.unwrap().seq(), 1);
    drop(sse);
    emit_standalone(&c, 1).await;
    wait_standalone_detached(&srv, &c).await;
    assert_refused(c.resume(None, None).await, 404, -32001, "cursor_missing").await;
    assert_refused(c.call(1, "echo", json!({})).await, 404, -32001, "cursor_missing").await;

    let mut c = srv.client();
    c.initialize().await;
    assert_refused(c.resume(None, Some("AAAAAAAAAAAAAAAA")).await, 404, -32001, "cursor_missing").await;
}

#[tokio::test]
async fn row5_the_seed_scenario_bare_41_ends_the_session_and_later_emits_fail() {
    let srv = TestServer::default().await;
    let mut c = srv.client();
    c.initialize_with("2025-06-18", json!({})).await;
    let mut sse = Sse::new(c.resume(None, None).await);
    let first = sse.next_block().await.unwrap();
    assert_eq!((first.id, first.data, first.retry), (None, None, Some(1000)), "no priming before 2025-11-25");
    emit_standalone(&c, 45).await;
    let mut last = 0;
    while last < 41 {
        last = sse.next_content().await.unwrap().seq();
    }
    drop(sse); // the connection drops at event 41
    // The seed's client reconnects with its own counter and without the token.
    assert_refused(c.resume(Some("41"), None).await, 404, -32001, "cursor_malformed").await;
    assert_refused(c.call(2, "echo", json!({})).await, 404, -32001, "cursor_malformed").await;
    let handle = srv.controls.session();
    let reason = EndReason::Rejected(RejectReason::CursorMalformed);
    assert_eq!(handle.ended(), Some(reason));
    assert_eq!(
        handle.notify("notifications/message", json!({})).await,
        Err(SendError::SessionEnded { reason })
    );
    assert!(srv.record(c.sid()).await.session().ended().is_some());
}

#[tokio::test]
async fn row6_another_sessions_stream_is_unknown() {
    let srv = TestServer::default().await;
    let mut a = srv.client();
    a.initialize().await;
    let mut b = srv.client();
    b.initialize().await;
    let b_sse = open_standalone(&b).await;
    let foreign = b_sse.stream_id.clone().unwrap();
    assert_refused(
        a.resume(Some(&format!("{foreign}.0")), Some(&foreign)).await,
        404,
        -32001,
        "stream_unknown",
    )
    .await;
    let mut c = srv.client();
    c.initialize().await;
    assert_refused(c.resume(Some("AAAAAAAAAAAAAAAA.0"), None).await, 404, -32001, "stream_unknown").await;
}

#[tokio::test]
async fn row7_token_mismatch_and_strict_token_missing() {
    let srv = TestServer::default().await;
    let mut c = srv.client();
    c.initialize().await;
    let sse = open_standalone(&c).await;
    let stream = sse.stream_id.clone().unwrap();
    drop(sse);
    let resp = c.resume(Some(&format!("{stream}.0")), Some("AAAAAAAAAAAAAAAA")).await;
    assert_refused(resp, 404, -32001, "token_mismatch").await;

    let mut cfg = ServerConfig::default();
    cfg.core.mode = ResumeMode::Strict;
    let strict = TestServer::start(cfg).await;
    let mut c = strict.client();
    c.initialize().await;
    let sse = open_standalone(&c).await;
    let stream = sse.stream_id.clone().unwrap();
    drop(sse);
    assert_refused(c.resume(Some(&format!("{stream}.0")), None).await, 404, -32001, "token_missing").await;
}

#[tokio::test]
async fn row9_a_cursor_beyond_the_high_water_mark() {
    let srv = TestServer::default().await;
    let mut c = srv.client();
    c.initialize().await;
    let sse = open_standalone(&c).await;
    let stream = sse.stream_id.clone().unwrap();
    drop(sse);
    assert_refused(c.resume(Some(&format!("{stream}.99")), Some(&stream)).await, 404, -32001, "cursor_ahead")
        .await;
}

#[tokio::test]
async fn row10_events_after_the_cursor_were_evicted() {
    let mut cfg = ServerConfig::default();
    cfg.core.limits.stream_max_events = 2;
    let srv = TestServer::start(cfg).await;
    let mut c = srv.client();
    c.initialize().await;
    let mut sse = open_standalone(&c).await;
    let stream = sse.stream_id.clone().unwrap();
    emit_standalone(&c, 1).await;
    assert_eq!(sse.next_content().await.unwrap().seq(), 1);
    drop(sse);
    emit_standalone(&c, 3).await; // keeps 3 and 4; 2 is gone
    let resp = c.resume(Some(&format!("{stream}.1")), Some(&stream)).await;
    assert_refused(resp, 404, -32001, "cursor_evicted").await;
}

#[tokio::test]
async fn row11_resume_after_a_disconnect_replays_then_goes_live() {
    let srv = TestServer::default().await;
    let mut c = srv.client();
    c.initialize().await;
    let mut sse = open_standalone(&c).await;
    let stream = sse.stream_id.clone().unwrap();
    emit_standalone(&c, 3).await;
    assert_eq!(sse.next_content().await.unwrap().seq(), 1);
    assert_eq!(sse.next_content().await.unwrap().seq(), 2);
    drop(sse);

    let mut resumed = Sse::new(c.resume(Some(&format!("{stream}.2")), Some(&stream)).await);
    assert_eq!(resumed.resumed.as_deref(), Some("true"));
    assert_eq!(resumed.stream_id.as_deref(), Some(stream.as_str()));
    let first = resumed.next_block().await.unwrap();
    assert_eq!(
        (first.data, first.retry),
        (None, Some(1000)),
        "a resumed stream starts with retry, no priming"
    );
    let e = resumed.next_content().await.unwrap();
    assert_eq!((e.seq(), e.i()), (3, Some(3)));
    emit_standalone(&c, 1).await;
    assert_eq!(resumed.next_content().await.unwrap().seq(), 4);

    let text = reqwest::get(format!("{}/metrics", srv.base())).await.unwrap().text().await.unwrap();
    assert!(text.contains("forkless_get_outcomes_total{outcome=\"resumed\",reason=\"continuation\"} 1"));
    assert!(text.contains("forkless_replay_events_count 1"));
}

#[tokio::test]
async fn row11_a_resume_displaces_a_live_connection_whose_writer_stops() {
    let srv = TestServer::default().await;
    let mut c = srv.client();
    c.initialize().await;
    let mut a = open_standalone(&c).await;
    let stream = a.stream_id.clone().unwrap();
    emit_standalone(&c, 2).await;
    assert_eq!(a.next_content().await.unwrap().seq(), 1);
    assert_eq!(a.next_content().await.unwrap().seq(), 2);

    let mut b = Sse::new(c.resume(Some(&format!("{stream}.2")), Some(&stream)).await);
    assert_eq!(b.resumed.as_deref(), Some("true"));
    // A's writer stops before its next write: its body ends with nothing more.
    assert!(a.rest().await.is_empty(), "the displaced connection gets nothing more");
    emit_standalone(&c, 1).await;
    let e = b.next_content().await.unwrap();
    assert_eq!((e.seq(), e.i()), (3, Some(1)));
}
