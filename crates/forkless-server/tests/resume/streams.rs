//! POST streams resumed by GET, polling, server-to-client requests, deletion, keep-alives,
//! principals, shutdown, racing resumes and answers ready at once.

use super::*;

#[tokio::test]
async fn a_post_stream_cut_midway_is_resumed_by_get_exactly_once() {
    let srv = TestServer::default().await;
    let mut c = srv.client();
    c.initialize().await;
    let mut post = Sse::new(c.call(7, "gated", json!({ "first": 3, "rest": 4 })).await);
    let stream = post.stream_id.clone().unwrap();
    assert_eq!(post.resumed.as_deref(), Some("false"));
    let priming = post.next_block().await.unwrap();
    assert_eq!(priming.id.as_deref(), Some(format!("{stream}.0").as_str()));
    for i in 1..=3 {
        assert_eq!(post.next_content().await.unwrap().i(), Some(i));
    }
    drop(post); // cut mid-way; the request goes on (2025 revisions)
    srv.controls.gate.add_permits(1);

    let mut resumed = Sse::new(c.resume(Some(&format!("{stream}.3")), Some(&stream)).await);
    assert_eq!(resumed.resumed.as_deref(), Some("true"));
    assert_eq!(resumed.stream_id.as_deref(), Some(stream.as_str()));
    let rest = resumed.rest().await;
    let seqs: Vec<u64> = rest.iter().map(common::Event::seq).collect();
    assert_eq!(seqs, vec![4, 5, 6, 7, 8], "every remaining event exactly once, then the response");
    let is: Vec<Option<u64>> = rest[..4].iter().map(common::Event::i).collect();
    assert_eq!(is, vec![Some(4), Some(5), Some(6), Some(7)]);
    let response = rest[4].json();
    assert_eq!((response["id"].clone(), response["result"].clone()), (json!(7), json!({ "done": 7 })));

    // A completed stream stays resumable: replay then end.
    let mut again = Sse::new(c.resume(Some(&format!("{stream}.6")), Some(&stream)).await);
    assert_eq!(again.rest().await.iter().map(common::Event::seq).collect::<Vec<_>>(), vec![7, 8]);
}

#[tokio::test]
async fn polling_closes_the_connection_with_retry_and_the_stream_resumes() {
    let cfg = ServerConfig { poll_after: Some(Duration::from_millis(200)), ..ServerConfig::default() };
    let srv = TestServer::start(cfg).await;
    let mut c = srv.client();
    c.initialize().await;
    emit_standalone(&c, 2).await;
    let mut sse = open_standalone(&c).await;
    let stream = sse.stream_id.clone().unwrap();
    let mut blocks = Vec::new();
    while let Some(b) = sse.next_block().await {
        blocks.push(b);
    }
    let seqs: Vec<u64> = blocks.iter().filter(|b| b.data.is_some()).map(common::Event::seq).collect();
    assert_eq!(seqs, vec![1, 2]);
    let last = blocks.last().unwrap();
    assert_eq!((last.retry, last.data.as_ref()), (Some(1000), None), "retry: before the server closes");
    emit_standalone(&c, 1).await;
    let mut resumed = Sse::new(c.resume(Some(&format!("{stream}.2")), Some(&stream)).await);
    assert_eq!(resumed.resumed.as_deref(), Some("true"));
    assert_eq!(resumed.next_content().await.unwrap().seq(), 3);

    // A POST stream polled before its response: resumed via GET, the response arrives.
    let mut post = Sse::new(c.call(9, "gated", json!({ "first": 1, "rest": 0 })).await);
    let pstream = post.stream_id.clone().unwrap();
    let seen: Vec<u64> = post.rest().await.iter().map(common::Event::seq).collect();
    assert_eq!(seen, vec![1], "the connection closed before the response");
    srv.controls.gate.add_permits(1);
    let mut resumed = Sse::new(c.resume(Some(&format!("{pstream}.1")), Some(&pstream)).await);
    let rest = resumed.rest().await;
    assert_eq!(rest.len(), 1);
    assert_eq!(rest[0].json()["result"], json!({ "done": 1 }));
}

#[tokio::test]
async fn server_to_client_requests_progress_and_cancellation() {
    let srv = TestServer::default().await;
    let mut c = srv.client();
    c.initialize().await;

    let mut ask = Sse::new(c.call(1, "ask", json!({})).await);
    let request = ask.next_content().await.unwrap().json();
    assert_eq!(request["method"], "roots/list");
    let answer = json!({ "jsonrpc": "2.0", "id": request["id"], "result": { "roots": [] } });
    assert_eq!(c.post_raw(&answer).await.status(), 202);
    let response = ask.next_content().await.unwrap().json();
    assert_eq!(response["result"], json!({ "roots": [] }));

    let mut p = Sse::new(c.call(2, "progress", json!({ "_meta": { "progressToken": "tok" } })).await);
    let note = p.next_content().await.unwrap().json();
    assert_eq!(note["method"], "notifications/progress");
    assert_eq!(
        note["params"],
        json!({ "progressToken": "tok", "progress": 1.0, "total": 2.0, "message": "half" })
    );
    assert_eq!(p.next_content().await.unwrap().json()["result"]["token"], "tok");

    let mut wait = Sse::new(c.call(3, "wait", json!({})).await);
    wait.next_block().await.unwrap(); // priming: the request is running
    let cancel =
        json!({ "jsonrpc": "2.0", "method": "notifications/cancelled", "params": { "requestId": 3 } });
    assert_eq!(c.post_raw(&cancel).await.status(), 202);
    assert!(wait.rest().await.is_empty(), "a cancelled request gets no response; its stream completes");
    assert_eq!(*srv.controls.cancelled.lock().unwrap(), vec![json!(3)]);
}

#[tokio::test]
async fn delete_ends_open_streams_and_fails_later_emits() {
    let srv = TestServer::default().await;
    let mut c = srv.client();
    c.initialize().await;
    let mut sse = open_standalone(&c).await;
    emit_standalone(&c, 1).await;
    assert_eq!(sse.next_content().await.unwrap().seq(), 1);
    let mut waiting = Sse::new(c.call(9, "wait", json!({})).await);
    waiting.next_block().await.unwrap();
    assert_eq!(c.delete().await.status(), 200);
    assert!(sse.rest().await.is_empty(), "the open stream ends");
    assert!(waiting.rest().await.is_empty(), "the request stream ends");
    common::guard("the running request to be cancelled", async {
        while srv.controls.cancelled.lock().unwrap().is_empty() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert_eq!(*srv.controls.cancelled.lock().unwrap(), vec![json!(9)]);
    let err = srv.controls.session().notify("x", Value::Null).await.unwrap_err();
    assert_eq!(err, SendError::SessionEnded { reason: EndReason::Deleted });
}

#[tokio::test]
async fn keep_alives_flow_and_idle_sessions_end_through_the_sweeper() {
    let mut cfg = ServerConfig { sweep_interval: Duration::from_millis(20), ..ServerConfig::default() };
    cfg.core.keep_alive = Duration::from_millis(50);
    cfg.core.grace = Duration::from_millis(500);
    cfg.core.retry_interval = Duration::from_millis(100);
    cfg.core.retry_budget = Duration::from_secs(2);
    cfg.core.limits.session_idle_ttl = Duration::from_millis(300);
    let srv = TestServer::start(cfg).await;
    let mut c = srv.client();
    c.initialize().await;
    let mut sse = Sse::new(c.resume(None, None).await);
    sse.next_block().await.unwrap();
    let mut comments = 0;
    while comments < 3 {
        comments += usize::from(sse.next_block().await.unwrap().comment);
    }
    drop(sse);
    // Once nothing is attached and nothing is requested, the session idles out.
    let mut idle = srv.client();
    idle.initialize().await;
    srv.wait_record(idle.sid(), "the idle session to end", |r| r.session().ended().is_some()).await;
    assert_refused(idle.call(1, "echo", json!({})).await, 404, -32001, "idle_expired").await;
}

#[tokio::test]
async fn principal_binding_hides_other_principals_sessions() {
    let cfg = ServerConfig {
        principal: Some(forkless_server::PrincipalFn::new(|h| {
            h.get("authorization").and_then(|v| v.to_str().ok()).map(str::to_owned)
        })),
        ..ServerConfig::default()
    };
    let srv = TestServer::start(cfg).await;
    let mut c = srv.client();
    let body = json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": { "protocolVersion": "2025-11-25", "capabilities": {} } });
    let resp = c.post().header("authorization", "Bearer alice").body(body.to_string()).send().await.unwrap();
    c.session = Some(resp.headers()["mcp-session-id"].to_str().unwrap().to_owned());
    let echo = json!({ "jsonrpc": "2.0", "id": 1, "method": "ping" }).to_string();
    let resp = c.post().header("authorization", "Bearer mallory").body(echo.clone()).send().await.unwrap();
    assert_refused(resp, 404, -32001, "session_unknown").await;
    let resp = c.post().header("authorization", "Bearer alice").body(echo).send().await.unwrap();
    assert_eq!(resp.status(), 200);
}

#[tokio::test]
async fn graceful_shutdown_ends_open_sse_streams_promptly() {
    let mut srv = TestServer::default().await;
    let mut c = srv.client();
    c.initialize().await;
    let mut get = open_standalone(&c).await;
    let mut post = Sse::new(c.call(1, "wait", json!({})).await);
    post.next_block().await.unwrap();
    let started = tokio::time::Instant::now();
    srv.shutdown().await.expect("serve returns Ok");
    assert!(started.elapsed() < Duration::from_secs(4), "well inside the 5 s drain timeout");
    assert!(get.rest().await.is_empty());
    assert!(post.rest().await.is_empty());
}

#[tokio::test]
async fn emitting_after_the_response_is_stream_completed() {
    let srv = TestServer::default().await;
    let mut c = srv.client();
    c.initialize().await;
    let mut sse = Sse::new(c.call(1, "echo", json!({ "x": 1 })).await);
    assert_eq!(sse.rest().await.len(), 1);
    let ctx = srv.controls.last_ctx.lock().unwrap().clone().unwrap();
    assert_eq!(ctx.notify("late", json!({})).await, Err(SendError::StreamCompleted));
    assert_eq!(ctx.progress(1.0, None, None).await, Ok(()), "no progress token: nothing to send");
}

#[tokio::test]
async fn racing_resumes_of_one_stream_never_fork_it() {
    let srv = TestServer::default().await;
    let mut c = srv.client();
    c.initialize().await;
    let mut a = open_standalone(&c).await;
    let stream = a.stream_id.clone().unwrap();
    emit_standalone(&c, 2).await;
    assert_eq!(a.next_content().await.unwrap().seq(), 1);
    assert_eq!(a.next_content().await.unwrap().seq(), 2);
    let lei = format!("{stream}.2");
    let (b, d) = tokio::join!(c.resume(Some(&lei), Some(&stream)), c.resume(Some(&lei), Some(&stream)));
    let (mut b, mut d) = (Sse::new(b), Sse::new(d));
    assert_eq!((b.resumed.as_deref(), d.resumed.as_deref()), (Some("true"), Some("true")));
    emit_standalone(&c, 3).await;
    // Exactly one connection holds the stream; the others end without another event.
    assert!(a.rest().await.is_empty());
    let (from_b, from_d) = tokio::join!(
        async {
            let mut got = Vec::new();
            while got.len() < 3 {
                match b.next_content().await {
                    Some(e) => got.push(e.seq()),
                    None => break,
                }
            }
            got
        },
        async {
            let mut got = Vec::new();
            while got.len() < 3 {
                match d.next_content().await {
                    Some(e) => got.push(e.seq()),
                    None => break,
                }
            }
            got
        }
    );
    let mut outcomes = [from_b, from_d];
    outcomes.sort();
    assert_eq!(outcomes, [vec![], vec![3, 4, 5]], "one continuation, never two");
}

/// A handler that answers on its first poll without sending anything first: its stream is
/// opened, filled and released in one append, and the POST carries the whole stream as a
/// finished body (with a length; no writer serves it). A client that loses the body resumes
/// the stream from its priming event like any other.
#[tokio::test]
async fn an_answer_ready_at_once_is_a_finished_body_that_resumes() {
    let srv = TestServer::default().await;
    let mut c = srv.client();
    c.initialize().await;
    let resp = c.call(1, "echo", json!({ "x": 1 })).await;
    assert!(resp.headers().get("content-length").is_some(), "a finished body has a length");
    assert!(resp.headers().get("transfer-encoding").is_none());
    let mut sse = Sse::new(resp);
    // PROTOCOL section 3 holds for a finished body as for any SSE answer.
    assert_eq!(sse.resumed.as_deref(), Some("false"));
    assert_eq!(sse.grace_ms.as_deref(), Some("10000"));
    let stream = sse.stream_id.clone().unwrap();
    let priming = sse.next_block().await.expect("priming");
    assert_eq!((priming.id.clone(), priming.retry), (Some(format!("{stream}.0")), Some(1000)));
    let answer = sse.next_content().await.expect("the answer");
    assert_eq!((answer.seq(), answer.json()["result"].clone()), (1, json!({ "x": 1 })));
    assert!(sse.next_block().await.is_none(), "and the body ends");

    let record = srv.record(c.sid()).await;
    let s = record.streams().find(|s| s.id().to_string() == stream).expect("the stream is stored");
    assert!(s.is_completed() && s.high_water().get() == 1);
    assert!(matches!(s.attachment(), Some(Attachment::Detached(_))), "and nothing holds it");

    let mut again = Sse::new(c.resume(Some(&format!("{stream}.0")), Some(&stream)).await);
    assert_eq!(again.resumed.as_deref(), Some("true"));
    let replayed = again.rest().await;
    assert_eq!(replayed, vec![answer], "the lost answer, once");
}

/// Before 2025-11-25 a new stream has no priming event: a finished body starts with `retry:`
/// alone, then the answer, whose id still names the stream.
#[tokio::test]
async fn an_answer_ready_at_once_before_2025_11_25_starts_with_retry_alone() {
    let srv = TestServer::default().await;
    let mut c = srv.client();
    c.initialize_with("2025-06-18", json!({})).await;
    let resp = c.call(1, "echo", json!({ "x": 2 })).await;
    assert!(resp.headers().get("content-length").is_some(), "a finished body");
    let mut sse = Sse::new(resp);
    let stream = sse.stream_id.clone().unwrap();
    let first = sse.next_block().await.expect("the preamble");
    assert_eq!((first.id, first.data, first.retry), (None, None, Some(1000)), "no priming before 2025-11-25");
    let answer = sse.next_block().await.expect("the answer");
    assert_eq!(answer.id, Some(format!("{stream}.1")));
    assert_eq!(answer.json()["result"], json!({ "x": 2 }));
    assert!(sse.next_block().await.is_none());
}

/// A handler not done on its first poll but within the linger (`answer_linger`) is answered
/// as one ready at once: one finished body, its stream stored, completed and resumable. With
/// no linger (the negative control) the same answer goes on a stream opened first.
#[tokio::test]
async fn an_answer_ready_within_the_linger_is_a_finished_body() {
    for (linger, finished) in [(Duration::from_secs(30), true), (Duration::ZERO, false)] {
        let (srv, c) = lingering(linger).await;
        let resp = c.call(1, "yield", json!({})).await;
        assert_eq!(resp.headers().get("content-length").is_some(), finished, "linger {linger:?}");
        let mut sse = Sse::new(resp);
        let stream = sse.stream_id.clone().unwrap();
        let answer = sse.next_content().await.expect("the answer");
        assert_eq!((answer.seq(), answer.json()["result"].clone()), (1, json!({ "yielded": true })));
        assert!(sse.next_block().await.is_none(), "and the body ends");
        srv.wait_record(c.sid(), "the answered stream to be released", |r| {
            r.streams().any(|s| {
                s.id().to_string() == stream
                    && s.is_completed()
                    && s.high_water().get() == 1
                    && matches!(s.attachment(), Some(Attachment::Detached(_)))
            })
        })
        .await;
        let mut again = Sse::new(c.resume(Some(&format!("{stream}.0")), Some(&stream)).await);
        assert_eq!(again.rest().await, vec![answer], "the answer once, on resume");
    }
}

/// A server whose POSTs linger `linger` for their answers, and an initialized client.
async fn lingering(linger: Duration) -> (TestServer, Client) {
    let srv = TestServer::start(ServerConfig { answer_linger: linger, ..ServerConfig::default() }).await;
    let mut c = srv.client();
    c.initialize().await;
    (srv, c)
}

/// A handler that sends something while its POST lingers ends the linger: what it sent goes
/// out at once on the opened stream, while the handler still runs (without the stream's
/// opening ending it, the head would wait out the 30 s linger).
#[tokio::test]
async fn a_message_sent_during_the_linger_goes_out_at_once() {
    let (srv, c) = lingering(Duration::from_secs(30)).await;
    let call = c.call(1, "gated", json!({ "first": 2, "rest": 1 }));
    let resp = tokio::time::timeout(Duration::from_secs(5), call).await.expect("the head within the linger");
    assert!(resp.headers().get("content-length").is_none(), "a stream, not a finished body");
    let mut sse = Sse::new(resp);
    for i in 1..=2 {
        assert_eq!(sse.next_content().await.unwrap().i(), Some(i), "sent before the handler is done");
    }
    srv.controls.gate.add_permits(1);
    let rest = sse.rest().await;
    assert_eq!(rest[0].i(), Some(3));
    assert_eq!(rest[1].json()["result"], json!({ "done": 3 }));
}

/// A client that leaves while its POST lingers loses nothing the store holds: the answer is
/// stored on the request's stream when the handler is done.
#[tokio::test]
async fn an_answer_whose_client_left_during_the_linger_is_stored() {
    let (srv, c) = lingering(Duration::from_secs(30)).await;
    let gone = c
        .post()
        .timeout(Duration::from_millis(200))
        .json(&json!({
        "jsonrpc": "2.0", "id": 5, "method": "wait", "params": {} }))
        .send()
        .await;
    assert!(gone.is_err(), "the client gave up before the head");
    srv.controls.gate.add_permits(1);
    srv.wait_record(c.sid(), "the answer to be stored", |r| {
        r.streams().any(|s| s.is_completed() && s.high_water().get() == 1)
    })
    .await;
}

/// A handler that sends on its stream before answering, even within its first poll, opens
/// the stream and is served by its writer: everything arrives, in order.
#[tokio::test]
async fn a_handler_that_sends_first_is_served_by_the_writer() {
    let srv = TestServer::default().await;
    let mut c = srv.client();
    c.initialize().await;
    let resp = c.call(1, "count", json!({ "n": 2 })).await;
    assert!(resp.headers().get("content-length").is_none(), "a stream, not a finished body");
    let events = Sse::new(resp).rest().await;
    let seqs: Vec<u64> = events.iter().map(common::Event::seq).collect();
    assert_eq!(seqs, vec![1, 2, 3]);
    assert_eq!((events[0].i(), events[1].i()), (Some(1), Some(2)));
    assert_eq!(events[2].json()["result"], json!({ "done": 2 }));
}

/// A session whose every request stream is open cannot take another: the request is refused
/// before its handler runs (not after, when its answer would have nowhere to go).
#[tokio::test]
async fn a_request_without_room_for_its_stream_is_refused_before_it_runs() {
    let mut cfg = ServerConfig::default();
    cfg.core.limits.session_max_streams = 1;
    let srv = TestServer::start(cfg).await;
    let mut c = srv.client();
    c.initialize().await;
    let mut waiting = Sse::new(c.call(1, "wait", json!({})).await);
    waiting.next_block().await.expect("priming: the waiting request holds the one stream");
    assert_refused(c.call(2, "echo", json!({})).await, 429, -32603, "limit_reached").await;
    let last = srv.controls.last_ctx.lock().unwrap().clone().unwrap();
    assert_eq!(last.request_id(), &json!(1), "the refused request's handler never ran");
}
