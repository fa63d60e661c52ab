//! A small OAuth 2.1 authorization server for the tests of `forkless connect`: metadata
//! (RFC 8414), dynamic client registration (RFC 7591), the authorization endpoint (it approves
//! at once, as a user clicking "allow" would, and redirects with a code), the token endpoint
//! (the code grant checked against its PKCE S256 challenge, redirect URI, client and
//! resource; the refresh grant), tokens signed with the test issuers' key. It counts what it
//! was asked, for the tests' assertions.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use base64::Engine as _;
use serde_json::{Value, json};

/// What the server was asked, so far.
#[derive(Clone, Debug, Default)]
pub struct Counts {
    pub registrations: usize,
    pub authorizations: usize,
    pub codes_exchanged: usize,
    pub refreshes: usize,
    /// Requests that carried an `X-Api-Key` (a header meant for the MCP server only).
    pub foreign_headers: usize,
}

#[derive(Default)]
struct Inner {
    issuer: String,
    audience: String,
    clients: HashMap<String, Vec<String>>,
    codes: HashMap<String, (String, String, String)>,
    refresh_tokens: HashMap<String, String>,
    counts: Counts,
    next: u64,
}

/// A running authorization server.
#[derive(Clone)]
pub struct AuthorizationServer {
    /// Its issuer URL, `http://127.0.0.1:PORT`.
    pub issuer: String,
    inner: Arc<Mutex<Inner>>,
}

impl AuthorizationServer {
    /// Start one issuing tokens for `audience` (the MCP server's URL).
    pub async fn start(audience: &str) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let issuer = format!("http://{}", listener.local_addr().expect("addr"));
        let inner = Arc::new(Mutex::new(Inner {
            issuer: issuer.clone(),
            audience: audience.to_owned(),
            ..Inner::default()
        }));
        let app = axum::Router::new()
            .route("/.well-known/oauth-authorization-server", get(metadata))
            .route("/register", post(register))
            .route("/authorize", get(authorize))
            .route("/token", post(token))
            .with_state(Arc::clone(&inner));
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { issuer, inner }
    }

    /// What it was asked so far.
    pub fn counts(&self) -> Counts {
        self.inner.lock().unwrap().counts.clone()
    }
}

type Shared = State<Arc<Mutex<Inner>>>;

/// Count a request carrying a header meant for the MCP server.
fn note(inner: &Mutex<Inner>, headers: &HeaderMap) {
    if headers.contains_key("x-api-key") {
        inner.lock().unwrap().counts.foreign_headers += 1;
    }
}

async fn metadata(State(inner): Shared, headers: HeaderMap) -> axum::Json<Value> {
    note(&inner, &headers);
    let issuer = inner.lock().unwrap().issuer.clone();
    axum::Json(json!({
        "issuer": issuer,
        "authorization_endpoint": format!("{issuer}/authorize"),
        "token_endpoint": format!("{issuer}/token"),
        "registration_endpoint": format!("{issuer}/register"),
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none"],
    }))
}

async fn register(State(inner): Shared, headers: HeaderMap, axum::Json(body): axum::Json<Value>) -> Response {
    note(&inner, &headers);
    let uris: Vec<String> = body["redirect_uris"]
        .as_array()
        .map(|a| a.iter().filter_map(|u| u.as_str().map(str::to_owned)).collect())
        .unwrap_or_default();
    if uris.is_empty() || body["token_endpoint_auth_method"] != "none" {
        return (StatusCode::BAD_REQUEST, axum::Json(json!({ "error": "invalid_client_metadata" })))
            .into_response();
    }
    let mut s = inner.lock().unwrap();
    s.next += 1;
    let id = format!("client-{}", s.next);
    s.clients.insert(id.clone(), uris.clone());
    s.counts.registrations += 1;
    (StatusCode::CREATED, axum::Json(json!({ "client_id": id, "redirect_uris": uris }))).into_response()
}

async fn authorize(State(inner): Shared, uri: Uri) -> Response {
    let q: HashMap<String, String> =
        form_urlencoded::parse(uri.query().unwrap_or_default().as_bytes()).into_owned().collect();
    let mut s = inner.lock().unwrap();
    let field = |k: &str| q.get(k).cloned().unwrap_or_default();
    let (client, redirect) = (field("client_id"), field("redirect_uri"));
    let registered = s.clients.get(&client).is_some_and(|uris| uris.contains(&redirect));
    let audience = s.audience.clone();
    if !registered
        || field("response_type") != "code"
        || field("code_challenge_method") != "S256"
        || field("code_challenge").is_empty()
        || field("resource") != audience
    {
        return (StatusCode::BAD_REQUEST, format!("refused: {q:?}")).into_response();
    }
    s.next += 1;
    let code = format!("code-{}", s.next);
    s.codes.insert(code.clone(), (client, redirect.clone(), field("code_challenge")));
    s.counts.authorizations += 1;
    Redirect::to(&format!("{redirect}?code={code}&state={}", field("state"))).into_response()
}

async fn token(State(inner): Shared, headers: HeaderMap, body: String) -> Response {
    note(&inner, &headers);
    let form: HashMap<String, String> = form_urlencoded::parse(body.as_bytes()).into_owned().collect();
    let field = |k: &str| form.get(k).cloned().unwrap_or_default();
    let mut s = inner.lock().unwrap();
    let refused = |why: &str| {
        (StatusCode::BAD_REQUEST, axum::Json(json!({ "error": "invalid_grant", "error_description": why })))
            .into_response()
    };
    if field("resource") != s.audience {
        return refused("the resource is not this server's audience");
    }
    let client = match field("grant_type").as_str() {
        "authorization_code" => {
            let Some((client, redirect, challenge)) = s.codes.remove(&field("code")) else {
                return refused("unknown or used code");
            };
            let digest = <sha2::Sha256 as sha2::Digest>::digest(field("code_verifier").as_bytes());
            let expected = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest);
            if expected != challenge || redirect != field("redirect_uri") || client != field("client_id") {
                return refused("PKCE, redirect URI or client mismatch");
            }
            s.counts.codes_exchanged += 1;
            client
        }
        "refresh_token" => {
            let Some(client) = s.refresh_tokens.remove(&field("refresh_token")) else {
                return refused("unknown refresh token");
            };
            if client != field("client_id") {
                return refused("another client's refresh token");
            }
            s.counts.refreshes += 1;
            client
        }
        _ => return refused("unsupported grant type"),
    };
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    s.next += 1;
    let claims = json!({ "iss": s.issuer, "aud": s.audience, "sub": "alice", "exp": now + 3600, "iat": now, "jti": format!("t-{}", s.next) });
    let refresh = format!("refresh-{}", s.next);
    s.refresh_tokens.insert(refresh.clone(), client);
    axum::Json(json!({
        "access_token": super::sign(&claims),
        "token_type": "Bearer",
        "expires_in": 3600,
        "refresh_token": refresh,
    }))
    .into_response()
}
