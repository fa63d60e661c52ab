//! What auth costs per request: the same JSON-answered `echo` request through the router,
//! in process, with and without a bearer token to verify (an Ed25519 JWT, its key cached).
//! Read the two as a ratio; figures in `docs/benchmarks.md`.
//!
//! `cargo bench -p forkless-server --bench auth`

use std::hint::black_box;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Body;
use criterion::{Criterion, criterion_group, criterion_main};
use forkless_server::auth::{AuthConfig, JwksSource};
use forkless_server::{AnswerMode, Handler, RequestContext, RpcError, Server, ServerConfig, ServerInfo};
use forkless_store::MemoryStore;
use http::Request;
use http_body_util::BodyExt as _;
use serde_json::{Value, json};
use tower::ServiceExt as _;

const KEY: &str = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIADk8JAut6UlYHtTzERAm92OfFLaO4wqsGN4P4gKoewV\n-----END PRIVATE KEY-----\n";
const X: &str = "jTvnchwpVTeRAyQJl5YyuQUQ55iEI7F3Mao9I4dhbq4";

struct Echo;

impl Handler for Echo {
    fn info(&self) -> ServerInfo {
        ServerInfo { name: "echo".into(), version: "0".into(), capabilities: json!({}), instructions: None }
    }
    async fn handle_request(
        &self,
        _: &str,
        params: Option<Value>,
        _: RequestContext,
    ) -> Result<Value, RpcError> {
        Ok(params.unwrap_or(Value::Null))
    }
}

fn router(auth: Option<AuthConfig>) -> Router {
    let cfg = ServerConfig { answer: AnswerMode::Json, auth, ..ServerConfig::default() };
    Server::new(MemoryStore::new(), Echo, cfg).expect("config").router()
}

fn request(body: &Value, session: Option<&str>, token: Option<&str>) -> Request<Body> {
    let mut r = Request::post("/mcp")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25");
    if let Some(s) = session {
        r = r.header("mcp-session-id", s);
    }
    if let Some(t) = token {
        r = r.header("authorization", format!("Bearer {t}"));
    }
    r.body(Body::from(body.to_string())).unwrap()
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let dir = std::env::temp_dir().join(format!("forkless-auth-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let jwks = dir.join("jwks.json");
    let doc = json!({ "keys": [{ "kty": "OKP", "crv": "Ed25519", "x": X, "kid": "k1", "alg": "EdDSA" }] });
    std::fs::write(&jwks, doc.to_string()).unwrap();
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    let claims = json!({ "iss": "https://issuer.test", "aud": "https://mcp.test/mcp", "sub": "alice", "exp": now + 86_400 });
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::EdDSA);
    header.kid = Some("k1".into());
    let token = jsonwebtoken::encode(
        &header,
        &claims,
        &jsonwebtoken::EncodingKey::from_ed_pem(KEY.as_bytes()).unwrap(),
    )
    .unwrap();
    let auth = AuthConfig::new("https://issuer.test", "https://mcp.test/mcp", JwksSource::File(jwks));
    let init = json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": { "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": "b", "version": "1" } } });
    let echo = json!({ "jsonrpc": "2.0", "id": 1, "method": "echo", "params": { "text": "hello" } });

    let mut group = c.benchmark_group("echo request, JSON answer");
    for (name, auth, token) in
        [("without auth", None, None), ("with a bearer JWT", Some(auth), Some(token.as_str()))]
    {
        let router = router(auth);
        let session = rt.block_on(async {
            let resp = router.clone().oneshot(request(&init, None, token)).await.unwrap();
            assert_eq!(resp.status(), 200, "{name}: initialize");
            resp.headers()["mcp-session-id"].to_str().unwrap().to_owned()
        });
        group.bench_function(name, |b| {
            b.iter(|| {
                rt.block_on(async {
                    let resp = router.clone().oneshot(request(&echo, Some(&session), token)).await.unwrap();
                    assert_eq!(resp.status(), 200);
                    black_box(resp.into_body().collect().await.unwrap().to_bytes());
                });
            });
        });
    }
    group.finish();
    let _ = std::fs::remove_dir_all(dir);
}

criterion_group!(benches, bench);
criterion_main!(benches);
