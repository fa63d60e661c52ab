//! OAuth 2.1 resource server (MCP authorization, revisions 2025-06-18 and later): bearer JWTs
//! checked against the issuer's keys, the challenge a client without a valid token gets, and
//! the protected resource metadata (RFC 9728) that tells it where to get one.
//!
//! This module owns deciding who a request is. A valid token yields the principal
//! `issuer` + `subject` (not the token, which refreshes), which the session binding then
//! compares (in the request path): another principal's session looks exactly like an unknown
//! one. The token itself goes nowhere past this check: handlers never see request headers.
//!
//! ```text
//!  no Authorization: Bearer      → 401, WWW-Authenticate: Bearer resource_metadata="…"
//!  bad, expired, foreign token   → 401, … error="invalid_token"
//!  valid, a required scope absent → 403, … error="insufficient_scope", scope="…"
//!  valid                          → the request goes on as principal (iss, sub)
//! ```

mod jwks;

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, HeaderName, HeaderValue, header};
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Validation, decode, decode_header};
use serde::Deserialize;
use serde_json::{Value, json};

pub use crate::error::AuthRefusal as Refusal;
use crate::error::Error;
pub use jwks::JwksSource;
use jwks::{Jwks, KeyError};

/// What tokens must say. Every field is required but `scopes` and the durations.
#[derive(Clone, Debug)]
pub struct AuthConfig {
    /// The authorization server (`iss` of every token; listed in the resource metadata).
    pub issuer: String,
    /// This resource's canonical URL (RFC 8707): every token's `aud` must name it, and the
    /// metadata URL is derived from it. For example `https://mcp.example.com/mcp`.
    pub audience: String,
    /// Where the issuer's keys are.
    pub jwks: JwksSource,
    /// Scopes every request needs (all of them; from `scope` or `scp`). Default none.
    pub scopes: Vec<String>,
    /// A CA file (PEM) trusted for a `https://` JWKS URL, in addition to the system's roots
    /// (and `SSL_CERT_FILE`'s). Default none.
    pub jwks_ca_file: Option<std::path::PathBuf>,
    /// Refresh the keys for an unknown key id at most this often. Default 30 s.
    pub jwks_min_refresh: Duration,
    /// Clock skew allowed on `exp` and `nbf`. Default 30 s.
    pub leeway: Duration,
}

impl AuthConfig {
    /// Tokens from `issuer` for `audience`, verified with the keys at `jwks`; the defaults
    /// for the rest.
    pub fn new(issuer: impl Into<String>, audience: impl Into<String>, jwks: JwksSource) -> Self {
        Self {
            issuer: issuer.into(),
            audience: audience.into(),
            jwks,
            scopes: Vec::new(),
            jwks_ca_file: None,
            jwks_min_refresh: Duration::from_secs(30),
            leeway: Duration::from_secs(30),
        }
    }

    /// The path of the protected resource metadata for the audience (RFC 9728 section 3.1:
    /// the well-known prefix, then the resource's path).
    pub fn metadata_path(&self) -> String {
        let path = self.audience.parse::<http::Uri>().map(|u| u.path().to_owned()).unwrap_or_default();
        let path = path.trim_end_matches('/');
        format!("/.well-known/oauth-protected-resource{path}")
    }

    /// The metadata's URL, as the challenge names it.
    fn metadata_url(&self) -> String {
        match self.audience.parse::<http::Uri>() {
            Ok(u) => match (u.scheme_str(), u.authority()) {
                (Some(scheme), Some(authority)) => format!("{scheme}://{authority}{}", self.metadata_path()),
                _ => self.metadata_path(),
            },
            Err(_) => self.metadata_path(),
        }
    }
}

#[derive(Deserialize)]
struct Claims {
    iss: String,
    sub: String,
    exp: u64,
    #[serde(default)]
    scope: Option<String>,
    #[serde(default)]
    scp: Option<Value>,
}

impl Claims {
    fn scopes(&self) -> Vec<&str> {
        let mut out: Vec<&str> = self.scope.as_deref().map(|s| s.split(' ').collect()).unwrap_or_default();
        if let Some(Value::Array(items)) = &self.scp {
            out.extend(items.iter().filter_map(Value::as_str));
        }
        out
    }
}

/// Checks bearer tokens for one resource.
pub struct Authenticator {
    cfg: AuthConfig,
    jwks: Jwks,
    /// Tokens verified already, with their principal and `exp`: a client sends the same
    /// token on every request, and its signature need not be checked again until it expires.
    verified: std::sync::Mutex<std::collections::HashMap<String, (String, u64)>>,
}

/// Verified tokens remembered at most (the memory is dropped whole when full).
const VERIFIED_CACHE: usize = 10_000;

fn unix_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticator").field("cfg", &self.cfg).finish_non_exhaustive()
    }
}

/// The header the check sets for the rest of the request path, after removing any copy the
/// client sent: the verified principal, escaped to visible ASCII.
pub(crate) const VERIFIED_PRINCIPAL: HeaderName = HeaderName::from_static("x-forkless-verified-principal");

impl Authenticator {
    /// An authenticator for `cfg`; the keys are fetched when the first token needs them.
    pub fn new(cfg: AuthConfig) -> Self {
        let jwks = Jwks::new(cfg.jwks.clone(), cfg.jwks_min_refresh, cfg.jwks_ca_file.as_deref());
        Self { cfg, jwks, verified: std::sync::Mutex::default() }
    }

    /// How many times the keys were fetched.
    pub fn jwks_fetches(&self) -> u64 {
        self.jwks.fetches.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The principal a request's bearer token proves (issuer and subject), or why not.
    pub(crate) async fn verify(&self, headers: &HeaderMap) -> Result<String, Refusal> {
        let token = bearer(headers).ok_or(Refusal::Missing)?;
        let leeway = self.cfg.leeway.as_secs();
        {
            let cache = self.verified.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some((principal, exp)) = cache.get(token) {
                // Expiry is checked on every use; everything else held when it was verified.
                if unix_now() <= exp.saturating_add(leeway) {
                    return Ok(principal.clone());
                }
                return Err(Refusal::Expired);
            }
        }
        let head = decode_header(token).map_err(|_| Refusal::Invalid)?;
        let kid = head.kid.ok_or(Refusal::UnknownKey)?;
        let key = self.jwks.key(&kid).await.map_err(|e| match e {
            KeyError::Unknown => Refusal::UnknownKey,
            KeyError::Unavailable(why) => {
                tracing::warn!(error = %why, "issuer keys unavailable");
                Refusal::KeysUnavailable
            }
        })?;
        // Pinned: the key's one algorithm, whatever the token's header claims.
        let mut validation = Validation::new(key.algorithm);
        validation.set_issuer(&[&self.cfg.issuer]);
        validation.set_audience(&[&self.cfg.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.validate_nbf = true;
        validation.leeway = leeway;
        let data = decode::<Claims>(token, &key.key, &validation).map_err(|e| match e.kind() {
            ErrorKind::ExpiredSignature => Refusal::Expired,
            ErrorKind::ImmatureSignature => Refusal::NotYetValid,
            ErrorKind::InvalidIssuer => Refusal::WrongIssuer,
            ErrorKind::InvalidAudience => Refusal::WrongAudience,
            _ => Refusal::Invalid,
        })?;
        let granted = data.claims.scopes();
        if !self.cfg.scopes.iter().all(|s| granted.contains(&s.as_str())) {
            return Err(Refusal::InsufficientScope);
        }
        let principal = principal_of(&data.claims.iss, &data.claims.sub);
        let mut cache = self.verified.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if cache.len() >= VERIFIED_CACHE {
            cache.clear();
        }
        cache.insert(token.to_owned(), (principal.clone(), data.claims.exp));
        Ok(principal)
    }

    /// The `WWW-Authenticate` value for `refusal`.
    pub(crate) fn challenge(&self, refusal: Refusal) -> HeaderValue {
        let metadata = self.cfg.metadata_url();
        let text = match refusal {
            Refusal::Missing => format!("Bearer resource_metadata=\"{metadata}\""),
            Refusal::InsufficientScope => format!(
                "Bearer error=\"insufficient_scope\", scope=\"{}\", resource_metadata=\"{metadata}\"",
                self.cfg.scopes.join(" ")
            ),
            other => format!(
                "Bearer error=\"invalid_token\", error_description=\"{}\", resource_metadata=\"{metadata}\"",
                other.as_str()
            ),
        };
        HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static("Bearer"))
    }

    /// The protected resource metadata document (RFC 9728).
    pub fn metadata(&self) -> Value {
        let mut doc = json!({
            "resource": self.cfg.audience,
            "authorization_servers": [self.cfg.issuer],
            "bearer_methods_supported": ["header"],
        });
        if !self.cfg.scopes.is_empty() {
            doc["scopes_supported"] = json!(self.cfg.scopes);
        }
        doc
    }

    /// The metadata's path on this server.
    pub fn metadata_path(&self) -> String {
        self.cfg.metadata_path()
    }
}

/// The token of `Authorization: Bearer <token>` (the scheme case-insensitive, one header).
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let mut values = headers.get_all(header::AUTHORIZATION).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return None;
    }
    let text = value.to_str().ok()?;
    let (scheme, token) = text.split_once(' ')?;
    (scheme.eq_ignore_ascii_case("bearer") && !token.trim().is_empty()).then(|| token.trim())
}

/// `issuer` and `subject` as one principal string (a NUL cannot occur in either as JSON
/// text decoded from a token, so the pair is unambiguous).
fn principal_of(issuer: &str, subject: &str) -> String {
    format!("{issuer}\u{0}{subject}")
}

/// Visible ASCII for a header value: other bytes (and `%`) as `%XX`.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_graphic() && b != b'%' {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The middleware in front of the MCP endpoint: verify, then let the request through as its
/// principal, or answer the refusal.
pub(crate) async fn require_token(
    State(auth): State<Arc<Authenticator>>,
    mut request: Request,
    next: Next,
) -> Response {
    match admit(&auth, &mut request).await {
        Ok(()) => next.run(request).await,
        Err(refused) => refused,
    }
}

/// Let `request` in with its verified principal (a header only this server sets), or the
/// refusal its client gets.
pub(crate) async fn admit(auth: &Authenticator, request: &mut Request) -> Result<(), Response> {
    request.headers_mut().remove(VERIFIED_PRINCIPAL);
    match auth.verify(request.headers()).await {
        Ok(principal) => {
            if let Ok(value) = HeaderValue::from_str(&escape(&principal)) {
                request.headers_mut().insert(VERIFIED_PRINCIPAL, value);
            }
            Ok(())
        }
        Err(refusal) => {
            let challenge = auth.challenge(refusal);
            Err(Error::Unauthorized { refusal, challenge }.into_response())
        }
    }
}
