//! Sessions backed by another MCP server (PROTOCOL section 11), through the real server with
//! an in-process backend that behaves as a stdio MCP server does: ids and progress tokens
//! rewritten both ways, messages routed to the right stream, the backend's requests to the
//! client answered, and a backend that exits ending its session (error answers carrying the
//! requests' ids, then 404, never a new backend under the same session).

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use common::{Client, Sse, assert_refused, guard};
use std::time::Duration;

use forkless_core::{EndReason, SessionId};
use forkless_server::backend::{
    BackendConfig, Connector, ExitReason, FromBackend, Link, MessageBackend, Sharing,
};
use forkless_server::{RpcError, Server, ServerConfig};
use forkless_store::MemoryStore;
use forkless_store::Store as _;
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// What the fake backends saw, across all of them.
#[derive(Default)]
struct Seen {
    connects: AtomicUsize,
    /// Every message a backend received, in order.
    received: Mutex<Vec<Value>>,
}

#[derive(Clone, Default)]
struct Fake(Arc<Seen>);

impl Connector for Fake {
    async fn connect(&self, _session: Option<SessionId>) -> Result<Link, RpcError> {
        self.0.connects.fetch_add(1, Ordering::SeqCst);
        let (to_backend, rx) = mpsc::channel(16);
        let (tx, from_backend) = mpsc::channel(16);
        tokio::spawn(fake_server(rx, tx, self.0.clone()));
        Ok(Link {
            to_backend,
            from_backend,
            guard: Box::new(()),
            exit: ExitReason::default(),
            facts: Default::default(),
        })
    }
}

/// A small MCP server: `progress` (three progress notifications, a log message, an answer
/// naming the id and token it saw), `ask` (a sampling request to the client, answered with
/// what the client said), `crash` (exits without answering), `hang` (never answers).
async fn fake_server(mut rx: mpsc::Receiver<Value>, tx: mpsc::Sender<FromBackend>, seen: Arc<Seen>) {
    let mut asking: Option<Value> = None;
    while let Some(m) = rx.recv().await {
        seen.received.lock().unwrap().push(m.clone());
        let id = m["id"].clone();
        let reply = |result: Value| json!({ "jsonrpc": "2.0", "id": id, "result": result });
        match m["method"].as_str() {
            Some("initialize") => {
                let result = json!({
                    "protocolVersion": "2025-06-18",
                    "capabilities": { "tools": {}, "logging": {} },
                    "serverInfo": { "name": "fake", "version": "7" },
                });
                let _ = tx.send((reply(result)).into()).await;
            }
            Some("tools/call") => match m["params"]["name"].as_str() {
                Some("progress") => {
                    let token = m["params"]["_meta"]["progressToken"].clone();
                    for i in 1..=3 {
                        let p = json!({ "progressToken": token, "progress": i, "total": 3 });
                        let _ = tx
                            .send(
                                json!({ "jsonrpc": "2.0", "method": "notifications/progress", "params": p })
                                    .into(),
                            )
                            .await;
                    }
                    let log = json!({ "level": "info", "data": "from the backend" });
                    let _ = tx
                        .send(
                            json!({ "jsonrpc": "2.0", "method": "notifications/message", "params": log })
                                .into(),
                        )
                        .await;
                    let _ = tx
                        .send((reply(json!({ "content": [], "sawId": id, "sawToken": token }))).into())
                        .await;
                }
                Some("ask") => {
                    asking = Some(id.clone());
                    let q = json!({ "jsonrpc": "2.0", "id": "b-1", "method": "sampling/createMessage", "params": { "maxTokens": 1, "messages": [] } });
                    let _ = tx.send((q).into()).await;
                }
                Some("crash") => return,
                _ => {}
            },
            None if m["id"] == "b-1" => {
                if let Some(asked) = asking.take() {
                    let answer = json!({ "content": [], "client": m["result"] });
                    let _ =
                        tx.send((json!({ "jsonrpc": "2.0", "id": asked, "result": answer })).into()).await;
                }
            }
            _ => {}
        }
    }
}

struct Gateway {
    url: String,
    seen: Arc<Seen>,
    store: MemoryStore,
    server: Server<MemoryStore, MessageBackend<Fake>>,
    _shutdown: tokio::sync::oneshot::Sender<()>,
}

async fn gateway(sharing: Sharing) -> Gateway {
    gateway_with(sharing, ServerConfig::default()).await
}

async fn gateway_with(sharing: Sharing, config: ServerConfig) -> Gateway {
    let backend = BackendConfig { sharing, ..BackendConfig::default() };
    gateway_on(MemoryStore::new(), Fake::default(), backend, config).await
}

async fn gateway_on(store: MemoryStore, fake: Fake, backend: BackendConfig, config: ServerConfig) -> Gateway {
    let seen = fake.0.clone();
    let handler = MessageBackend::new(fake, backend);
    let server = Server::new(store.clone(), handler, config).expect("valid config");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let kept = server.clone();
    tokio::spawn(server.serve(listener, async move {
        let _ = rx.await;
    }));
    Gateway { url, seen, store, server: kept, _shutdown: tx }
}

async fn session(url: &str) -> (Client, Value) {
    let mut c = Client::new(url);
    let init = c.initialize().await;
    (c, init)
}

fn call(id: Value, tool: &str, token: Option<&str>) -> Value {
    let mut params = json!({ "name": tool, "arguments": {} });
    if let Some(token) = token {
        params["_meta"] = json!({ "progressToken": token });
    }
    json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params })
}

#[tokio::test]
async fn initialize_is_forwarded_and_the_backends_answer_is_the_sessions() {
    let g = gateway(Sharing::PerSession).await;
    let (_c, init) = session(&g.url).await;
    let result = &init["result"];
    assert_eq!(result["serverInfo"], json!({ "name": "fake", "version": "7" }));
    assert_eq!(result["capabilities"]["tools"], json!({}));
    // The backend speaks an older revision than the client asked for, and the answer says so.
    assert_eq!(result["capabilities"]["experimental"]["forkless/backend"]["protocolVersion"], "2025-06-18");
    assert!(result["capabilities"]["experimental"]["forkless/resume"].is_object());
    let received = g.seen.received.lock().unwrap().clone();
    assert_eq!(received[0]["method"], "initialize");
    assert_eq!(received[0]["params"]["clientInfo"]["name"], "t", "the client's own initialize");
    assert_eq!(received[1]["method"], "notifications/initialized");
}

#[tokio::test]
async fn progress_goes_on_its_requests_stream_under_the_clients_token_and_id() {
    let g = gateway(Sharing::PerSession).await;
    let (c, _) = session(&g.url).await;
    let mut standalone = Sse::new(c.resume(None, None).await);
    let mut sse = Sse::new(c.post_raw(&call(json!("client-1"), "progress", Some("tok"))).await);
    let events = sse.rest().await;
    let kinds: Vec<Value> = events.iter().map(|e| e.json()).collect();
    assert_eq!(kinds.len(), 4, "three progress notifications and the answer: {kinds:?}");
    for (i, p) in kinds[..3].iter().enumerate() {
        assert_eq!(p["method"], "notifications/progress");
        assert_eq!(p["params"]["progressToken"], "tok", "the client's token, not the backend's");
        assert_eq!(p["params"]["progress"], i as u64 + 1, "in the order sent");
    }
    let answer = &kinds[3];
    assert_eq!(answer["id"], "client-1", "the client's id");
    // The backend saw ids and tokens of forkless's, never the client's.
    assert!(answer["result"]["sawId"].is_u64(), "{answer}");
    assert!(answer["result"]["sawToken"].as_str().is_some_and(|t| t.starts_with("fl-")), "{answer}");
    // The log message names no request: it goes on the standalone stream.
    let log = standalone.next_content().await.expect("the log message");
    assert_eq!(log.json()["method"], "notifications/message");
    assert_eq!(log.json()["params"]["data"], "from the backend");
}

#[tokio::test]
async fn the_backends_request_reaches_the_client_and_its_answer_goes_back() {
    let g = gateway(Sharing::PerSession).await;
    let (c, _) = session(&g.url).await;
    let mut sse = Sse::new(c.post_raw(&call(json!(5), "ask", None)).await);
    let ask = sse.next_content().await.expect("the sampling request").json();
    assert_eq!(ask["method"], "sampling/createMessage");
    assert_ne!(ask["id"], "b-1", "the server's own id for it");
    let answer =
        json!({ "jsonrpc": "2.0", "id": ask["id"], "result": { "role": "assistant", "text": "hi" } });
    assert_eq!(c.post_raw(&answer).await.status(), 202);
    let done = sse.next_content().await.expect("the tool's answer").json();
    assert_eq!(done["id"], 5);
    assert_eq!(done["result"]["client"]["text"], "hi", "the client's answer reached the backend");
}

#[tokio::test]
async fn a_backend_that_exits_answers_its_requests_with_their_ids_then_404_and_is_not_restarted() {
    let mut config = ServerConfig::default();
    config.core.keep_alive = Duration::from_millis(50);
    config.core.retry_interval = Duration::from_millis(50);
    config.core.grace = Duration::from_millis(100);
    config.core.retry_budget = Duration::from_millis(300);
    let g = gateway_with(Sharing::PerSession, config).await;
    let (c, _) = session(&g.url).await;
    let post = c.post_raw(&call(json!(9), "crash", None)).await;
    let stream = post.headers().get("mcp-stream-id").expect("a request stream").to_str().unwrap().to_owned();
    let mut sse = Sse::new(post);
    let answer = sse.next_content().await.expect("the error answer");
    let body = answer.json();
    assert_eq!(body["id"], 9, "{body}");
    assert_eq!(body["error"]["data"]["reason"], "backend_exited", "{body}");
    assert!(sse.next_content().await.is_none(), "the stream ends with its answer");
    // At once, the next request is refused: the session is never served by another backend.
    assert_refused(c.post_raw(&call(json!(10), "progress", None)).await, 404, -32001, "backend_exited").await;
    // A client that lost the answer can still resume its stream and read it, for the budget.
    let before =
        answer.id.as_deref().and_then(|id| id.rsplit_once('.')).map(|(s, _)| format!("{s}.0")).unwrap();
    let mut again = Sse::new(c.resume(Some(&before), Some(&stream)).await);
    assert_eq!(again.next_content().await.expect("the answer again").json(), body);
    // Then the session ends in the store, with the reason.
    let sid: SessionId = c.sid().parse().unwrap();
    guard("the session to end in the store", async {
        loop {
            let record = g.store.load(sid).await.unwrap().expect("stored").value;
            if let Some(reason) = record.session().ended() {
                assert_eq!(reason, EndReason::BackendExited);
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert_refused(c.resume(None, None).await, 404, -32001, "backend_exited").await;
    assert_eq!(g.seen.connects.load(Ordering::SeqCst), 1, "no backend started again for the session");
}

#[tokio::test]
async fn shared_backend_is_started_once_and_sessions_see_only_their_own_progress() {
    let g = gateway(Sharing::Shared).await;
    let (a, _) = session(&g.url).await;
    let (b, _) = session(&g.url).await;
    // The same client id and token in both sessions: rewritten, they cannot collide.
    let body = call(json!(1), "progress", Some("same"));
    let (ra, rb) = tokio::join!(a.post_raw(&body), b.post_raw(&body));
    let (mut sa, mut sb) = (Sse::new(ra), Sse::new(rb));
    let (ea, eb) = tokio::join!(sa.rest(), sb.rest());
    for events in [&ea, &eb] {
        let msgs: Vec<Value> = events.iter().map(|e| e.json()).collect();
        assert_eq!(msgs.len(), 4, "its own three progress notifications and answer, nothing else: {msgs:?}");
        assert!(msgs[..3].iter().all(|m| m["params"]["progressToken"] == "same"));
        assert_eq!(msgs[3]["id"], 1);
    }
    let saw = |events: &[common::Event]| events[3].json()["result"]["sawId"].clone();
    assert_ne!(saw(&ea), saw(&eb), "the backend saw two different ids");
    assert_eq!(g.seen.connects.load(Ordering::SeqCst), 1, "one backend for every session");
    let inits = g.seen.received.lock().unwrap().iter().filter(|m| m["method"] == "initialize").count();
    assert_eq!(inits, 1, "initialized once, by forkless");
    // Each call's log message named no request: dropped (neither client got it), and counted.
    let stats = g.server.handler().stats();
    assert_eq!(stats.unattributed.load(Ordering::SeqCst), 2);

    // A request from the shared backend to a client is refused at the backend, not guessed.
    let events = Sse::new(a.post_raw(&call(json!(2), "ask", None)).await).rest().await;
    let msgs: Vec<Value> = events.iter().map(|e| e.json()).collect();
    assert_eq!(msgs.len(), 1, "no sampling request reached the client, only the answer: {msgs:?}");
    assert_eq!(msgs[0]["id"], 2);
    assert_eq!(stats.refused_requests.load(Ordering::SeqCst), 1);
    let refusal =
        g.seen.received.lock().unwrap().iter().find(|m| m["id"] == "b-1").cloned().expect("answered");
    assert_eq!(refusal["error"]["code"], -32601, "{refusal}");
}

#[tokio::test]
async fn a_backed_handler_refuses_the_stateless_revision_so_clients_fall_back() {
    let g = gateway(Sharing::PerSession).await;
    let mut c = Client::new(&g.url);
    c.version = Some("2026-07-28".into());
    let e = assert_refused(
        c.call(1, "server/discover", json!({})).await,
        400,
        -32022,
        "protocol_version_unsupported",
    )
    .await;
    let supported = e["data"]["supported"].as_array().expect("the revisions served").clone();
    assert!(!supported.contains(&json!("2026-07-28")), "{supported:?}");
    assert!(supported.contains(&json!("2025-11-25")), "{supported:?}");
}

#[tokio::test]
async fn a_cancelled_request_is_cancelled_at_the_backend_under_the_backends_id() {
    let g = gateway(Sharing::PerSession).await;
    let (c, _) = session(&g.url).await;
    let body = call(json!("mine"), "hang", None);
    let post = c.post_raw(&body);
    let cancel = async {
        // Once the backend has the request, the client withdraws it.
        let forwarded = guard("the request to reach the backend", async {
            loop {
                let id = g
                    .seen
                    .received
                    .lock()
                    .unwrap()
                    .iter()
                    .find(|m| m["params"]["name"] == "hang")
                    .map(|m| m["id"].clone());
                if let Some(id) = id {
                    return id;
                }
                tokio::task::yield_now().await;
            }
        })
        .await;
        let note = json!({ "jsonrpc": "2.0", "method": "notifications/cancelled", "params": { "requestId": "mine" } });
        assert_eq!(c.post_raw(&note).await.status(), 202);
        forwarded
    };
    let (resp, forwarded) = tokio::join!(post, cancel);
    assert!(Sse::new(resp).rest().await.is_empty(), "a withdrawn request gets no answer");
    let told = guard("the backend to be told", async {
        loop {
            let received = g.seen.received.lock().unwrap().clone();
            if let Some(told) = received.into_iter().find(|m| m["method"] == "notifications/cancelled") {
                return told;
            }
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert_eq!(told["params"]["requestId"], forwarded, "under the id the backend knows it by");
}

#[tokio::test]
async fn a_restorable_session_gets_a_new_backend_elsewhere_initialized_as_its_client_was() {
    let (store, fake) = (MemoryStore::new(), Fake::default());
    let backend = BackendConfig { restorable: forkless_server::Restorable::Yes, ..BackendConfig::default() };
    let first = gateway_on(store.clone(), fake.clone(), backend, ServerConfig::default()).await;
    let (c, _) = session(&first.url).await;
    // Another process on the same store: the session goes on there, on a new backend.
    let second = gateway_on(store, fake.clone(), backend, ServerConfig::default()).await;
    let mut elsewhere = Client::new(&second.url);
    elsewhere.session = c.session.clone();
    elsewhere.version = c.version.clone();
    let events = Sse::new(elsewhere.post_raw(&call(json!(3), "progress", Some("t"))).await).rest().await;
    assert_eq!(events.last().expect("an answer").json()["id"], 3);
    assert_eq!(fake.0.connects.load(Ordering::SeqCst), 2, "a new backend for the restored session");
    let inits: Vec<Value> =
        fake.0.received.lock().unwrap().iter().filter(|m| m["method"] == "initialize").cloned().collect();
    assert_eq!(inits.len(), 2);
    assert_eq!(
        inits[1]["params"]["clientInfo"], inits[0]["params"]["clientInfo"],
        "initialized as its client was"
    );
    assert_eq!(inits[1]["params"]["protocolVersion"], "2025-11-25");
}
