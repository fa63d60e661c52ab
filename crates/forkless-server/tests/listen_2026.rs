//! Listen notifications (2026-07-28): what a handler announces reaches each open
//! `subscriptions/listen` stream whose acknowledged filter admits it, tagged with the stream's
//! subscription id, and no other stream.

mod common;

use common::TestServer;
use futures::StreamExt as _;
use serde_json::{Value, json};

fn meta() -> Value {
    json!({ "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {} })
}

fn post(server: &TestServer, method: &str, id: &str, params: Value) -> reqwest::RequestBuilder {
    let mut params = params;
    params["_meta"] = meta();
    let body = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
    common::request_2026(server, method).body(body.to_string())
}

/// An open listen stream: its SSE data lines, one JSON message at a time.
struct Listen {
    chunks: futures::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    text: String,
}

impl Listen {
    async fn open(server: &TestServer, id: &str, filter: Value) -> Self {
        let resp = post(server, "subscriptions/listen", id, json!({ "notifications": filter }))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        Self { chunks: resp.bytes_stream().boxed(), text: String::new() }
    }

    async fn next(&mut self) -> Value {
        common::guard("a message on the listen stream", async {
            loop {
                if let Some(end) = self.text.find("\n\n") {
                    let block: String = self.text.drain(..end + 2).collect();
                    if let Some(data) = block.lines().find_map(|l| l.strip_prefix("data:")) {
                        return serde_json::from_str(data.trim()).unwrap();
                    }
                    continue; // a keep-alive comment
                }
                let chunk = self.chunks.next().await.expect("the stream is open").unwrap();
                self.text.push_str(std::str::from_utf8(&chunk).unwrap());
            }
        })
        .await
    }
}

async fn announce(server: &TestServer, method: &str, params: Value) {
    let resp =
        post(server, "announce", "a", json!({ "method": method, "params": params })).send().await.unwrap();
    let text = resp.text().await.unwrap();
    assert!(text.contains("\"result\""), "{text}");
}

#[tokio::test]
async fn each_listener_gets_what_its_filter_admits_tagged_with_its_subscription() {
    let server = TestServer::default().await;
    let mut tools = Listen::open(&server, "tools", json!({ "toolsListChanged": true })).await;
    let mut file = Listen::open(&server, "file", json!({ "resourceSubscriptions": ["file:///a"] })).await;
    assert_eq!(tools.next().await["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(
        file.next().await["params"]["notifications"],
        json!({ "resourceSubscriptions": ["file:///a"] })
    );

    announce(&server, "notifications/tools/list_changed", json!({})).await;
    announce(&server, "notifications/resources/updated", json!({ "uri": "file:///b" })).await;
    announce(&server, "notifications/resources/updated", json!({ "uri": "file:///a" })).await;

    let got = tools.next().await;
    assert_eq!(got["method"], "notifications/tools/list_changed", "{got}");
    assert_eq!(got["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], "tools");
    // The file listener skipped the tools change and the other file: its first is its own.
    let got = file.next().await;
    assert_eq!(got["method"], "notifications/resources/updated", "{got}");
    assert_eq!(got["params"]["uri"], "file:///a", "{got}");
    assert_eq!(got["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], "file");
}
