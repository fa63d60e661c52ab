//! The handler's hooks: answering `initialize` itself (or refusing the session), and hearing
//! when a session ends and why.

use std::time::Duration;

use forkless_core::{EndReason, SessionId};
use forkless_server::{Handler, RequestContext, RpcError, Server, ServerConfig, ServerInfo, SessionHandle};
use forkless_store::MemoryStore;
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// Answers `initialize` itself (refusing a client named `refuse`) and reports every end.
struct Hooked {
    ended: mpsc::UnboundedSender<(SessionId, EndReason)>,
}

impl Handler for Hooked {
    fn info(&self) -> ServerInfo {
        ServerInfo {
            name: "from-info".into(),
            version: "1".into(),
            capabilities: json!({}),
            instructions: None,
        }
    }

    async fn initialize(&self, params: &Value, session: SessionHandle) -> Result<ServerInfo, RpcError> {
        if params["clientInfo"]["name"] == "refuse" {
            return Err(RpcError::new(-32000, "this backend refuses you"));
        }
        Ok(ServerInfo {
            name: format!("hooked-for-{}", params["clientInfo"]["name"].as_str().unwrap_or("?")),
            version: "2".into(),
            capabilities: json!({ "tools": {} }),
            instructions: Some(format!("session {}", session.id())),
        })
    }

    async fn handle_request(
        &self,
        method: &str,
        _: Option<Value>,
        _: RequestContext,
    ) -> Result<Value, RpcError> {
        Err(RpcError::method_not_found(method))
    }

    async fn session_ended(&self, session: SessionId, reason: EndReason) {
        let _ = self.ended.send((session, reason));
    }
}

async fn serve() -> (String, mpsc::UnboundedReceiver<(SessionId, EndReason)>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let server =
        Server::new(MemoryStore::new(), Hooked { ended: tx }, ServerConfig::default()).expect("config");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/mcp", listener.local_addr().expect("addr"));
    tokio::spawn(server.serve(listener, std::future::pending()));
    (url, rx)
}

async fn initialize(url: &str, client: &str) -> reqwest::Response {
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": client, "version": "0" } } });
    reqwest::Client::new()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .json(&body)
        .send()
        .await
        .expect("POST initialize")
}

/// A failure guard: the hook is awaited, never slept for.
async fn next_end(rx: &mut mpsc::UnboundedReceiver<(SessionId, EndReason)>) -> (SessionId, EndReason) {
    tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .expect("the hook ran")
        .expect("channel open")
}

#[tokio::test]
async fn a_handler_answers_initialize_and_hears_its_session_end() {
    let (url, mut ended) = serve().await;
    let response = initialize(&url, "alice").await;
    let sid = response.headers()["mcp-session-id"].to_str().expect("ascii").to_owned();
    let answer: Value = response.json().await.expect("JSON");
    let result = &answer["result"];
    assert_eq!(result["serverInfo"]["name"], "hooked-for-alice", "{answer}");
    assert_eq!(result["instructions"], format!("session {sid}"), "the hook saw its session");
    assert_eq!(result["capabilities"]["tools"], json!({}));
    assert_eq!(
        result["capabilities"]["experimental"]["forkless/resume"]["version"], 1,
        "the server adds its own"
    );
    assert_eq!(result["protocolVersion"], "2025-11-25");

    let deleted = reqwest::Client::new()
        .delete(&url)
        .header("mcp-session-id", &sid)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .expect("DELETE");
    assert_eq!(deleted.status(), 200);
    let (session, reason) = next_end(&mut ended).await;
    assert_eq!((session.to_string(), reason), (sid, EndReason::Deleted));
}

#[tokio::test]
async fn a_handler_that_refuses_initialize_ends_the_session() {
    let (url, mut ended) = serve().await;
    let response = initialize(&url, "refuse").await;
    assert!(response.headers().get("mcp-session-id").is_none(), "no session is handed out");
    let answer: Value = response.json().await.expect("JSON");
    assert_eq!(answer["id"], 1);
    assert_eq!(answer["error"]["code"], -32000, "{answer}");
    let (_, reason) = next_end(&mut ended).await;
    assert_eq!(reason, EndReason::Failed);
}
