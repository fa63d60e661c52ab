//! OAuth resource server: tokens the test signs, checked against a JWKS the test serves over
//! HTTP. Valid, expired, not yet valid, wrong audience, wrong issuer, unknown key id (and key
//! rotation), `alg: none`, a forged signature, a missing scope; the challenge and the
//! protected resource metadata; a session created by one subject invisible to another on
//! POST, GET, DELETE and resume; and a JWKS over `https://` from a private CA.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{Client, TestServer, assert_refused};
use forkless_server::ServerConfig;
use forkless_server::auth::{AuthConfig, JwksSource};
use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
use serde_json::{Value, json};

const K1: &str = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIADk8JAut6UlYHtTzERAm92OfFLaO4wqsGN4P4gKoewV\n-----END PRIVATE KEY-----\n";
const K1_X: &str = "jTvnchwpVTeRAyQJl5YyuQUQ55iEI7F3Mao9I4dhbq4";
const K2: &str = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIIlpQ+25QvHol5pyuOlM4C/6digaBXE8Zh2Dn6trlrjX\n-----END PRIVATE KEY-----\n";
const K2_X: &str = "49h4twaxtSbss_ija80hxETn6CxUrp3DTqw8u10yxtE";
const ISSUER: &str = "https://issuer.test";
const AUDIENCE: &str = "https://mcp.test/mcp";

fn jwk(kid: &str, x: &str) -> Value {
    json!({ "kty": "OKP", "crv": "Ed25519", "x": x, "kid": kid, "alg": "EdDSA", "use": "sig" })
}

/// A JWKS endpoint whose document the test can change, counting fetches.
struct Issuer {
    url: String,
    doc: Arc<Mutex<Value>>,
    fetches: Arc<AtomicU64>,
}

async fn issuer(keys: Vec<Value>) -> Issuer {
    let doc = Arc::new(Mutex::new(json!({ "keys": keys })));
    let fetches = Arc::new(AtomicU64::new(0));
    let (d, f) = (doc.clone(), fetches.clone());
    let app = axum::Router::new().route(
        "/jwks",
        axum::routing::get(move || {
            let (d, f) = (d.clone(), f.clone());
            async move {
                f.fetch_add(1, Ordering::SeqCst);
                axum::Json(d.lock().unwrap().clone())
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/jwks", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    Issuer { url, doc, fetches }
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

fn claims(sub: &str) -> Value {
    json!({ "iss": ISSUER, "aud": AUDIENCE, "sub": sub, "exp": now() + 600, "iat": now() })
}

fn sign(key: &str, kid: &str, claims: &Value) -> String {
    let mut header = Header::new(Algorithm::EdDSA);
    header.kid = Some(kid.to_owned());
    encode(&header, claims, &EncodingKey::from_ed_pem(key.as_bytes()).unwrap()).unwrap()
}

fn token(sub: &str) -> String {
    sign(K1, "k1", &claims(sub))
}

async fn server(issuer: &Issuer, tune: impl FnOnce(&mut AuthConfig)) -> TestServer {
    let mut auth = AuthConfig::new(ISSUER, AUDIENCE, JwksSource::Url(issuer.url.clone()));
    auth.jwks_min_refresh = Duration::ZERO;
    tune(&mut auth);
    TestServer::start(ServerConfig { auth: Some(auth), ..ServerConfig::default() }).await
}

/// A client whose every request carries `token`.
fn client_with(server: &TestServer, token: &str) -> Client {
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert("authorization", format!("Bearer {token}").parse().unwrap());
    let mut c = server.client();
    c.http = reqwest::Client::builder().default_headers(headers).build().unwrap();
    c
}

async fn initialize_status(server: &TestServer, token: Option<&str>) -> reqwest::Response {
    let c = match token {
        Some(t) => client_with(server, t),
        None => server.client(),
    };
    let body = json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": { "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": "t", "version": "1" } } });
    c.post_raw(&body).await
}

#[tokio::test]
async fn no_token_gets_401_naming_the_resource_metadata_which_is_served() {
    let issuer = issuer(vec![jwk("k1", K1_X)]).await;
    let server = server(&issuer, |_| {}).await;
    let resp = initialize_status(&server, None).await;
    assert_eq!(resp.status(), 401);
    let challenge = resp.headers()["www-authenticate"].to_str().unwrap().to_owned();
    assert_eq!(
        challenge,
        "Bearer resource_metadata=\"https://mcp.test/.well-known/oauth-protected-resource/mcp\""
    );
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["data"]["reason"], "token_missing");
    for path in ["/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"] {
        let doc: Value =
            reqwest::get(format!("{}{path}", server.base())).await.unwrap().json().await.unwrap();
        assert_eq!(doc["resource"], AUDIENCE);
        assert_eq!(doc["authorization_servers"], json!([ISSUER]));
    }
    assert_eq!(issuer.fetches.load(Ordering::SeqCst), 0, "no token, no key fetch");
}

#[tokio::test]
async fn every_bad_token_is_refused_with_its_reason_and_a_valid_one_is_served() {
    let issuer = issuer(vec![jwk("k1", K1_X)]).await;
    let server = server(&issuer, |_| {}).await;
    let with = |f: &dyn Fn(&mut Value)| {
        let mut c = claims("alice");
        f(&mut c);
        sign(K1, "k1", &c)
    };
    let none = {
        // alg: none, unsigned.
        use base64::Engine as _;
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let head = b64.encode(br#"{"alg":"none","typ":"JWT","kid":"k1"}"#);
        format!("{head}.{}.", b64.encode(claims("alice").to_string()))
    };
    let cases: Vec<(String, &str)> = vec![
        (with(&|c| c["exp"] = json!(now() - 3600)), "token_expired"),
        (with(&|c| c["nbf"] = json!(now() + 3600)), "token_not_yet_valid"),
        (with(&|c| c["aud"] = json!("https://other.test/mcp")), "token_wrong_audience"),
        (with(&|c| c["iss"] = json!("https://evil.test")), "token_wrong_issuer"),
        (sign(K1, "k9", &claims("alice")), "token_unknown_key"),
        (sign(K2, "k1", &claims("alice")), "token_invalid"),
        (none, "token_invalid"),
        ("not.a.jwt".to_owned(), "token_invalid"),
    ];
    for (token, reason) in cases {
        let resp = initialize_status(&server, Some(&token)).await;
        assert_eq!(resp.status(), 401, "{reason}");
        let challenge = resp.headers()["www-authenticate"].to_str().unwrap().to_owned();
        assert!(challenge.contains("error=\"invalid_token\""), "{challenge}");
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["error"]["data"]["reason"], reason);
    }
    assert_eq!(initialize_status(&server, Some(&token("alice"))).await.status(), 200);
}

#[tokio::test]
async fn a_rotated_key_is_fetched_once_and_made_up_key_ids_do_not_flood_the_issuer() {
    let issuer = issuer(vec![jwk("k1", K1_X)]).await;
    let server = server(&issuer, |_| {}).await;
    // Twenty first requests at once: one fetch between them.
    let mut calls = Vec::new();
    for n in 0..20 {
        let t = token(&format!("user{n}"));
        let s = client_with(&server, &t);
        calls.push(tokio::spawn(async move {
            let body = json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize",
                "params": { "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": "t", "version": "1" } } });
            s.post_raw(&body).await.status().as_u16()
        }));
    }
    for c in calls {
        assert_eq!(c.await.unwrap(), 200);
    }
    assert_eq!(issuer.fetches.load(Ordering::SeqCst), 1, "single flight");
    // The issuer rotates to k2: a token signed with it makes one more fetch and is served.
    *issuer.doc.lock().unwrap() = json!({ "keys": [jwk("k1", K1_X), jwk("k2", K2_X)] });
    let rotated = sign(K2, "k2", &claims("alice"));
    assert_eq!(initialize_status(&server, Some(&rotated)).await.status(), 200);
    assert_eq!(issuer.fetches.load(Ordering::SeqCst), 2);

    // With a minimum interval, made-up key ids within it cost no fetch.
    let limited = server_with_interval(&issuer).await;
    assert_eq!(initialize_status(&limited, Some(&token("bob"))).await.status(), 200);
    let before = issuer.fetches.load(Ordering::SeqCst);
    for n in 0..10 {
        let bogus = sign(K1, &format!("made-up-{n}"), &claims("bob"));
        assert_eq!(initialize_status(&limited, Some(&bogus)).await.status(), 401);
    }
    assert_eq!(issuer.fetches.load(Ordering::SeqCst), before, "no refresh within the minimum interval");
}

async fn server_with_interval(issuer: &Issuer) -> TestServer {
    server(issuer, |a| a.jwks_min_refresh = Duration::from_secs(600)).await
}

#[tokio::test]
async fn a_missing_scope_gets_403_insufficient_scope() {
    let issuer = issuer(vec![jwk("k1", K1_X)]).await;
    let server = server(&issuer, |a| a.scopes = vec!["mcp:tools".into()]).await;
    let resp = initialize_status(&server, Some(&token("alice"))).await;
    assert_eq!(resp.status(), 403);
    let challenge = resp.headers()["www-authenticate"].to_str().unwrap().to_owned();
    assert!(
        challenge.contains("error=\"insufficient_scope\"") && challenge.contains("scope=\"mcp:tools\""),
        "{challenge}"
    );
    let mut scoped = claims("alice");
    scoped["scope"] = json!("openid mcp:tools");
    assert_eq!(initialize_status(&server, Some(&sign(K1, "k1", &scoped))).await.status(), 200);
}

#[tokio::test]
async fn a_session_is_invisible_to_another_subject_on_every_method() {
    let issuer = issuer(vec![jwk("k1", K1_X)]).await;
    let server = server(&issuer, |_| {}).await;
    let mut alice = client_with(&server, &token("alice"));
    alice.initialize().await;
    // Alice's stream has an event, so a resume has a real cursor.
    let resp = alice.call(1, "standalone", json!({ "n": 1 })).await;
    assert_eq!(resp.status(), 200);
    let _ = resp.text().await;
    let record = server.record(alice.sid()).await;
    let cursor = format!("{}.1", record.standalone().id());
    let mut bob = client_with(&server, &token("bob"));
    bob.session = alice.session.clone();
    bob.version = alice.version.clone();
    assert_refused(bob.call(2, "echo", json!({})).await, 404, -32001, "session_unknown").await;
    assert_refused(bob.resume(None, None).await, 404, -32001, "session_unknown").await;
    assert_refused(bob.resume(Some(&cursor), None).await, 404, -32001, "session_unknown").await;
    assert_refused(bob.delete().await, 404, -32001, "session_unknown").await;
    // The same subject from another issuer is another principal too: refused at the token.
    // Alice goes on.
    assert_eq!(alice.call(3, "echo", json!({ "still": "mine" })).await.status(), 200);
}

/// A token verified once is remembered, but never past its `exp`: the clock is checked on
/// every request. (The test waits for the token to expire: time passing is the event.)
#[tokio::test]
async fn a_remembered_token_stops_working_when_it_expires() {
    let issuer = issuer(vec![jwk("k1", K1_X)]).await;
    let server = server(&issuer, |a| a.leeway = Duration::ZERO).await;
    let mut short = claims("alice");
    short["exp"] = json!(now() + 1);
    let token = sign(K1, "k1", &short);
    assert_eq!(initialize_status(&server, Some(&token)).await.status(), 200);
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let resp = initialize_status(&server, Some(&token)).await;
    assert_eq!(resp.status(), 401);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["data"]["reason"], "token_expired");
}

/// The JWKS served over `https://` with a certificate from a CA of the test's own: fetched
/// when the CA is named (`jwks_ca_file`, beside the system's roots), refused without it:
/// verification is never dropped to reach the keys.
#[tokio::test]
async fn a_jwks_over_https_is_fetched_trusting_its_ca_file_and_refused_without_it() {
    let dir = tempfile::tempdir().unwrap();
    let ca = forkless_tls::testing::TestCa::new(dir.path());
    let (cert, key) = ca.server(&["localhost"], "issuer");
    let certs = forkless_tls::pem::certificates(&cert).unwrap();
    let key = forkless_tls::pem::private_key(&key).unwrap();
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("https://localhost:{}/jwks", listener.local_addr().unwrap().port());
    let document = json!({ "keys": [jwk("k1", K1_X)] }).to_string();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, document) = (acceptor.clone(), document.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else { return };
                let service = hyper::service::service_fn(move |_req| {
                    let body = http_body_util::Full::new(bytes::Bytes::from(document.clone()));
                    async move { Ok::<_, std::convert::Infallible>(hyper::Response::new(body)) }
                });
                let io = hyper_util::rt::TokioIo::new(tls);
                let _ = hyper::server::conn::http1::Builder::new().serve_connection(io, service).await;
            });
        }
    });
    let start = |ca_file: Option<std::path::PathBuf>| {
        let mut auth = AuthConfig::new(ISSUER, AUDIENCE, JwksSource::Url(url.clone()));
        auth.jwks_min_refresh = Duration::ZERO;
        auth.jwks_ca_file = ca_file;
        TestServer::start(ServerConfig { auth: Some(auth), ..ServerConfig::default() })
    };
    let trusting = start(Some(ca.ca_file.clone())).await;
    assert_eq!(initialize_status(&trusting, Some(&token("alice"))).await.status(), 200);
    let untrusting = start(None).await;
    let resp = initialize_status(&untrusting, Some(&token("alice"))).await;
    let status = resp.status();
    let body = resp.text().await.unwrap();
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("issuer_keys_unavailable"), "{body}");
}
