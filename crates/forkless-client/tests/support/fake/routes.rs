//! The fake's HTTP side: POST, GET and DELETE on `/mcp`, and SSE bodies read from a
//! stream's log from the connection's cursor.

use super::*;

/// A fresh 16-character stream id in the base64url alphabet (canonical: its last character
/// carries whole bits, since 96 bits are exactly 16 characters).
pub(super) fn new_stream(w: &mut World) -> String {
    w.next_stream += 1;
    let id = format!("stream{:010}", w.next_stream);
    w.streams.insert(id.clone(), StreamLog { events: vec![(0, String::new())], complete: false });
    id
}

pub(super) fn push(w: &mut World, stream: &str, data: String) {
    let log = w.streams.get_mut(stream).expect("stream exists");
    let seq = log.events.last().map_or(0, |(s, _)| s + 1);
    log.events.push((seq, data));
}

pub(super) fn complete(w: &mut World, stream: &str) {
    if let Some(log) = w.streams.get_mut(stream) {
        log.complete = true;
    }
}

pub(super) fn not_found(reason: &str) -> Response {
    let body = json!({"jsonrpc":"2.0","error":{"code":-32001,"message":"session ended; start a new session","data":{"reason":reason}}});
    (StatusCode::NOT_FOUND, [("content-type", "application/json")], body.to_string()).into_response()
}

pub(super) fn session_check(w: &World, headers: &HeaderMap) -> Result<(), Box<Response>> {
    let sent = headers.get("mcp-session-id").and_then(|v| v.to_str().ok());
    if let Some(reason) = &w.ended {
        return Err(Box::new(not_found(reason)));
    }
    match (sent, &w.session) {
        (Some(s), Some(ours)) if s == ours => Ok(()),
        (None, _) => Err(Box::new((StatusCode::BAD_REQUEST, "missing session").into_response())),
        _ => Err(Box::new(not_found("unknown_session"))),
    }
}

pub(super) async fn post(State(fake): State<Arc<Fake>>, headers: HeaderMap, body: Bytes) -> Response {
    let msg: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let mut w = fake.world();
    w.recorded.push(Recorded { method: Method::POST, headers: headers.clone(), body: Some(msg.clone()) });
    fake.changed.notify_waiters();
    let method = msg.get("method").and_then(Value::as_str).unwrap_or_default().to_owned();
    if method == "initialize" {
        w.sessions_created += 1;
        let session = format!("session-{}", w.sessions_created);
        w.session = Some(session.clone());
        w.ended = None;
        let mut resume = json!({"version": 1});
        if let Some(g) = fake.config.init_grace_ms {
            resume["graceMs"] = g.into();
        }
        // Echo the requested revision, as a server that speaks them all would.
        let version = msg.pointer("/params/protocolVersion").cloned().unwrap_or_else(|| "2025-11-25".into());
        let result = json!({
            "protocolVersion": version,
            "capabilities": {"tools": {}, "experimental": {"forkless/resume": resume}},
            "serverInfo": {"name": "fake", "version": "0"},
        });
        let reply = json!({"jsonrpc":"2.0","id": msg["id"], "result": result});
        return (
            StatusCode::OK,
            [("content-type", "application/json"), ("mcp-session-id", session.as_str())],
            reply.to_string(),
        )
            .into_response();
    }
    if let Err(r) = session_check(&w, &headers) {
        return *r;
    }
    // A response from the client to one of our requests.
    if msg.get("method").is_none() {
        let id = msg["id"].as_str().unwrap_or_default().to_owned();
        if let Some(stream) = w.asks.remove(&id) {
            let answer = msg.get("result").cloned().unwrap_or(Value::Null);
            let call_id = w.streams[&stream].events.iter().find_map(|(_, d)| {
                serde_json::from_str::<Value>(d).ok().and_then(|v| v.get("call_id").cloned())
            });
            let reply = json!({"jsonrpc":"2.0","id": call_id, "result": {"content": [{"type":"text","text": answer.to_string()}]}});
            push(&mut w, &stream, reply.to_string());
            complete(&mut w, &stream);
            drop(w);
            fake.changed.notify_waiters();
        }
        return StatusCode::ACCEPTED.into_response();
    }
    if msg.get("id").is_none() {
        return StatusCode::ACCEPTED.into_response();
    }
    let id = msg["id"].clone();
    let params = msg.get("params").cloned().unwrap_or(Value::Null);
    let tool = params["name"].as_str().unwrap_or_default().to_owned();
    let args = params.get("arguments").cloned().unwrap_or(Value::Null);
    let done =
        |text: &str| json!({"jsonrpc":"2.0","id": id, "result": {"content": [{"type":"text","text": text}]}});
    if method != "tools/call" || tool == "json" {
        let reply = done("json");
        return (StatusCode::OK, [("content-type", "application/json")], reply.to_string()).into_response();
    }
    let stream = new_stream(&mut w);
    match tool.as_str() {
        "numbered" => {
            let count = args["count"].as_u64().unwrap_or(3);
            for n in 1..=count {
                let note = json!({"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data": format!("#{n}")}});
                push(&mut w, &stream, note.to_string());
            }
            push(&mut w, &stream, done("done").to_string());
            complete(&mut w, &stream);
        }
        "progress" => {
            let token = params.pointer("/_meta/progressToken").cloned().unwrap_or(Value::Null);
            for n in 1..=3 {
                let p = json!({"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken": token, "progress": n, "total": 3}});
                push(&mut w, &stream, p.to_string());
            }
            push(&mut w, &stream, done("done").to_string());
            complete(&mut w, &stream);
        }
        "ask" => {
            let ask_id = format!("srv-{stream}");
            w.asks.insert(ask_id.clone(), stream.clone());
            // remember the call id in a harmless notification, for the final answer
            let marker = json!({"jsonrpc":"2.0","method":"notifications/message","params":{"level":"debug","data":"asking"},"call_id": id});
            push(&mut w, &stream, marker.to_string());
            let ask = json!({"jsonrpc":"2.0","id": ask_id, "method":"roots/list"});
            push(&mut w, &stream, ask.to_string());
        }
        "hang" => {
            // Never answers: for timeouts and cancellation.
        }
        _ => {
            push(&mut w, &stream, done("unknown tool").to_string());
            complete(&mut w, &stream);
        }
    }
    let conn = w.post_conns.pop_front().unwrap_or(Conn::Full);
    drop(w);
    sse_response(&fake, stream, 0, false, conn)
}

pub(super) async fn get(State(fake): State<Arc<Fake>>, headers: HeaderMap) -> Response {
    let mut w = fake.world();
    w.recorded.push(Recorded { method: Method::GET, headers: headers.clone(), body: None });
    fake.changed.notify_waiters();
    if let Err(r) = session_check(&w, &headers) {
        return *r;
    }
    let conn = w.get_conns.pop_front().unwrap_or(Conn::Full);
    let Some(lei) = headers.get("last-event-id").and_then(|v| v.to_str().ok()).map(str::to_owned) else {
        let stream = match &w.standalone {
            Some(s) => s.clone(),
            None => {
                let s = new_stream(&mut w);
                w.standalone = Some(s.clone());
                s
            }
        };
        drop(w);
        return sse_response(&fake, stream, 0, false, conn);
    };
    let Some((stream, seq)) = fake.parse_event_id(&lei) else {
        w.ended = Some("cursor_malformed".into());
        return not_found("cursor_malformed");
    };
    if !w.streams.contains_key(&stream) {
        w.ended = Some("stream_unknown".into());
        return not_found("stream_unknown");
    }
    let answer = w.resume_answers.pop_front().unwrap_or(Resume::Honest);
    match answer {
        Resume::Honest => {
            drop(w);
            sse_response(&fake, stream, seq + 1, true, conn)
        }
        Resume::ReplayFrom(from) => {
            drop(w);
            sse_response(&fake, stream, from, true, conn)
        }
        Resume::ResumedFalse => {
            drop(w);
            sse_response(&fake, stream, 0, false, conn)
        }
        Resume::OtherStream => {
            // A different stream carrying a copy of the old one's log.
            let other = new_stream(&mut w);
            let (events, complete) = {
                let log = &w.streams[&stream];
                (log.events.clone(), log.complete)
            };
            let log = w.streams.get_mut(&other).expect("just created");
            log.events = events;
            log.complete = complete;
            drop(w);
            sse_response(&fake, other, 1, true, conn)
        }
        Resume::NotFound(reason) => {
            w.ended = Some(reason.into());
            not_found(reason)
        }
        Resume::Status(code) => StatusCode::from_u16(code).expect("status").into_response(),
    }
}

pub(super) async fn delete(State(fake): State<Arc<Fake>>, headers: HeaderMap) -> Response {
    let mut w = fake.world();
    w.recorded.push(Recorded { method: Method::DELETE, headers: headers.clone(), body: None });
    fake.changed.notify_waiters();
    if let Err(r) = session_check(&w, &headers) {
        return *r;
    }
    w.ended = Some("deleted".into());
    drop(w);
    fake.changed.notify_waiters();
    StatusCode::OK.into_response()
}

/// An SSE response reading `stream`'s log from `from`, live, per `conn`.
pub(super) fn sse_response(
    fake: &Arc<Fake>,
    stream: String,
    from: u64,
    resumed: bool,
    conn: Conn,
) -> Response {
    let reader = Reader { fake: fake.clone(), stream: stream.clone(), next: from, sent: 0, conn };
    let body = futures::stream::unfold(reader, |mut r| async move {
        let bytes = r.next_chunk().await?;
        Some((Ok::<_, Infallible>(bytes), r))
    });
    let mut resp = Response::new(Body::from_stream(body));
    let h = resp.headers_mut();
    h.insert("content-type", HeaderValue::from_static("text/event-stream"));
    h.insert("cache-control", HeaderValue::from_static("no-cache"));
    if fake.config.dialect == Dialect::Forkless {
        h.insert("mcp-stream-id", HeaderValue::from_str(&stream).expect("ascii"));
        h.insert("mcp-stream-resumed", HeaderValue::from_static(if resumed { "true" } else { "false" }));
        h.insert("mcp-stream-grace-ms", HeaderValue::from(fake.config.grace_ms));
    }
    resp
}

struct Reader {
    fake: Arc<Fake>,
    stream: String,
    next: u64,
    sent: usize,
    conn: Conn,
}

impl Reader {
    async fn next_chunk(&mut self) -> Option<Bytes> {
        loop {
            match self.conn {
                Conn::CloseAfter(n) if self.sent >= n => return None,
                Conn::HangAfter(n) if self.sent >= n => futures::future::pending::<()>().await,
                _ => {}
            }
            let changed = self.fake.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            {
                let w = self.fake.world();
                if w.ended.is_some() {
                    return None;
                }
                let log = w.streams.get(&self.stream)?;
                if let Some((seq, data)) = log.events.iter().find(|(s, _)| *s == self.next).cloned() {
                    self.next += 1;
                    self.sent += 1;
                    let id = self.fake.event_id(&self.stream, seq);
                    let text = if seq == 0 {
                        format!("id: {id}\nretry: {}\ndata:\n\n", self.fake.config.retry_ms)
                    } else {
                        format!("id: {id}\ndata: {data}\n\n")
                    };
                    return Some(Bytes::from(text));
                }
                if log.complete {
                    return None;
                }
            }
            changed.await;
        }
    }
}
