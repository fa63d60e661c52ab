//! One handler API for input, whatever the revision (`RequestContext::ask`): the same handler
//! code asks on the request's stream in a 2025 session, and over rounds of
//! `InputRequiredResult` in 2026-07-28, where earlier answers travel sealed in `requestState`.

mod common;

use common::{Sse, TestServer};
use serde_json::{Value, json};

/// A 2026-07-28 POST of `two-questions` with `extra` params; the JSON-RPC answer.
async fn round(server: &TestServer, extra: Value) -> Value {
    let mut params = json!({
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": { "elicitation": {}, "roots": {} },
        },
    });
    if let (Some(p), Value::Object(extra)) = (params.as_object_mut(), extra) {
        p.extend(extra);
    }
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "two-questions", "params": params });
    let resp = reqwest::Client::new()
        .post(&server.url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "two-questions")
        .body(body.to_string())
        .send()
        .await
        .expect("send");
    let text = resp.text().await.expect("body");
    let last = text.lines().filter_map(|l| l.strip_prefix("data:")).next_back().unwrap_or(&text);
    serde_json::from_str(last.trim()).expect("JSON-RPC")
}

#[tokio::test]
async fn in_2026_each_unanswered_question_is_a_round_and_earlier_answers_are_kept_sealed() {
    let server = TestServer::default().await;
    let first = round(&server, json!({})).await;
    let r = &first["result"];
    assert_eq!(r["resultType"], "input_required", "{first}");
    assert_eq!(
        r["inputRequests"],
        json!({ "a": { "method": "elicitation/create", "params": { "message": "first?" } } })
    );
    let answer_a = json!({ "action": "accept", "content": { "x": 1 } });
    let second =
        round(&server, json!({ "inputResponses": { "a": answer_a }, "requestState": r["requestState"] }))
            .await;
    let r2 = &second["result"];
    assert_eq!(r2["inputRequests"], json!({ "b": { "method": "roots/list", "params": {} } }), "{second}");
    // The last round sends only b's answer: a's comes back from the sealed state.
    let done = round(
        &server,
        json!({ "inputResponses": { "b": { "roots": [] } }, "requestState": r2["requestState"] }),
    )
    .await;
    assert_eq!(done["result"]["a"], answer_a, "{done}");
    assert_eq!(done["result"]["b"], json!({ "roots": [] }), "{done}");
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    // The second round's state was used up by the last round.
    let again = round(
        &server,
        json!({ "inputResponses": { "b": { "roots": [] } }, "requestState": r2["requestState"] }),
    )
    .await;
    assert_eq!(again["error"]["data"]["reason"], "replayed", "{again}");
}

#[tokio::test]
async fn in_a_2025_session_the_same_handler_asks_on_the_stream() {
    let server = TestServer::default().await;
    let mut c = server.client();
    c.initialize().await;
    let mut sse = Sse::new(c.call(7, "two-questions", json!({})).await);
    let mut answers = Vec::new();
    for (method, result) in [
        ("elicitation/create", json!({ "action": "accept", "content": { "x": 1 } })),
        ("roots/list", json!({ "roots": [] })),
    ] {
        let asked = sse.next_content().await.expect("a server-to-client request").json();
        assert_eq!(asked["method"], method, "{asked}");
        let answer = json!({ "jsonrpc": "2.0", "id": asked["id"], "result": result });
        assert_eq!(c.post_raw(&answer).await.status(), 202);
        answers.push(result);
    }
    let done = sse.next_content().await.expect("the answer").json();
    assert_eq!(done["id"], 7);
    assert_eq!(done["result"], json!({ "a": answers[0], "b": answers[1] }), "{done}");
}
