//! Requests of the current revision (2026-07-28, no session) for the task and keyed-request
//! tests: the `_meta` every request carries, its headers, and the JSON-RPC answer read from a
//! JSON body or the last `data:` of an SSE body.

use serde_json::{Value, json};

/// The `_meta` of a 2026-07-28 request that declared the tasks extension.
pub fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": { "extensions": { "io.modelcontextprotocol/tasks": {} } },
    })
}

/// POST `method` with `params` (its `_meta` set to [`meta`]); the JSON-RPC answer.
pub async fn rpc(http: &reqwest::Client, url: &str, method: &str, mut params: Value) -> Value {
    params["_meta"] = meta();
    let name = params.get("taskId").or_else(|| params.get("name")).and_then(Value::as_str).map(str::to_owned);
    let mut rb = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method);
    if let Some(name) = name {
        rb = rb.header("mcp-name", name);
    }
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params });
    let text = rb.body(body.to_string()).send().await.expect("send").text().await.expect("body");
    let last = text.lines().filter_map(|l| l.strip_prefix("data:")).next_back().unwrap_or(&text);
    serde_json::from_str(last.trim()).unwrap_or_else(|e| panic!("not a JSON-RPC answer ({e}): {text}"))
}

/// Call `tool` with `arguments`: the id of the task it became.
pub async fn create_task(http: &reqwest::Client, url: &str, tool: &str, arguments: Value) -> String {
    let v = rpc(http, url, "tools/call", json!({ "name": tool, "arguments": arguments })).await;
    assert_eq!(v["result"]["resultType"], "task", "{tool} became a task: {v}");
    v["result"]["taskId"].as_str().expect("a task id").to_owned()
}
