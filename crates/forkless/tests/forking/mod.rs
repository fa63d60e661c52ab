//! A deliberately forking MCP server for the negative tests of `check` and `chaos`.

#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

use axum::body::Body;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

/// A deliberately forking server: it answers every GET, with or without `Last-Event-ID`, by
/// opening a new stream numbered from its own event 1 again: the seed's failure.
pub async fn server() -> String {
    async fn mcp(body: String) -> Response {
        let message: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
        let id = message.get("id").cloned();
        let method = message["method"].as_str().unwrap_or_default();
        let Some(id) = id else { return StatusCode::ACCEPTED.into_response() };
        let json_answer = |result: Value| {
            let mut response =
                axum::Json(json!({ "jsonrpc": "2.0", "id": id, "result": result })).into_response();
            response.headers_mut().insert("mcp-session-id", "fake-session".parse().expect("header"));
            response
        };
        match method {
            "initialize" => json_answer(json!({
                "protocolVersion": "2025-11-25",
                "capabilities": { "tools": {} },
                "serverInfo": { "name": "forking-fake", "version": "0" }
            })),
            "tools/list" => json_answer(json!({ "tools": [{
                "name": "start-notification-stream",
                "inputSchema": { "type": "object" }
            }]})),
            "tools/call" => {
                let count = message["params"]["arguments"]["count"].as_u64().unwrap_or(10);
                numbered(count, Some(id), "notification")
            }
            _ => json_answer(json!({})),
        }
    }
    async fn get() -> Response {
        numbered(20, None, "background notification")
    }
    let app = axum::Router::new().route("/mcp", post(mcp).get(get));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}/mcp")
}

/// `<label> #1..#count` as SSE events with ids `1..`, 10 ms apart, then the response to `id`.
fn numbered(count: u64, id: Option<Value>, label: &'static str) -> Response {
    let events = futures::stream::unfold(1u64, move |n| {
        let id = id.clone();
        async move {
            if n > count + 1 {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
            let data = if n <= count {
                json!({ "jsonrpc": "2.0", "method": "notifications/message",
                        "params": { "level": "info", "data": format!("{label} #{n}") } })
            } else {
                let id = id?;
                json!({ "jsonrpc": "2.0", "id": id, "result": { "content": [] } })
            };
            Some((Ok::<_, std::io::Error>(format!("id: {n}\ndata: {data}\n\n")), n + 1))
        }
    });
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from_stream(events))
        .expect("response")
}
