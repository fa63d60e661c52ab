//! Getting tokens: dynamic client registration (RFC 7591) where the authorization server
//! offers it, the authorization-code grant with PKCE (S256) through a loopback redirect
//! (RFC 8252), the resource named in every request (RFC 8707), and the refresh grant.
//!
//! It owns the exchanges with the authorization server, not where tokens are kept
//! (`super::tokens`) or sent (`super`).

use base64::Engine as _;
use forkless_core::{EntropySource as _, OsEntropy};
use serde::Deserialize;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use super::discover::ServerMetadata;
use super::oauth;
use super::tokens::{Tokens, now};
use crate::{Error, OAuthStep};

/// What the user is shown to authorize the bridge, and how long the bridge waits.
pub(crate) const AUTHORIZE_WAIT: std::time::Duration = std::time::Duration::from_secs(300);

/// 32 random bytes from the OS, base64url: a PKCE verifier or a `state`.
fn random() -> String {
    let mut bytes = [0u8; 32];
    OsEntropy.fill(&mut bytes);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// The S256 challenge of `verifier`.
pub(crate) fn challenge(verifier: &str) -> String {
    let digest = <sha2::Sha256 as sha2::Digest>::digest(verifier.as_bytes());
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest)
}

/// Register the bridge as a public client with `redirect_uri`: its `client_id`.
pub(crate) async fn register(
    http: &reqwest::Client,
    server: &ServerMetadata,
    redirect_uri: &str,
) -> Result<String, Error> {
    let Some(endpoint) = &server.registration_endpoint else {
        return Err(oauth(
            OAuthStep::Registration,
            format!("{} offers no dynamic client registration; give --oauth-client-id", server.issuer),
        ));
    };
    let body = serde_json::json!({
        "client_name": "forkless connect",
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    });
    let resp = http
        .post(endpoint)
        .json(&body)
        .send()
        .await
        .map_err(|e| oauth(OAuthStep::Registration, e.to_string()))?;
    if !resp.status().is_success() {
        let status = resp.status();
        let text = resp.text().await.unwrap_or_default();
        return Err(oauth(OAuthStep::Registration, format!("{endpoint}: HTTP {status}: {text}")));
    }
    #[derive(Deserialize)]
    struct Registered {
        client_id: String,
    }
    let registered: Registered =
        resp.json().await.map_err(|e| oauth(OAuthStep::Registration, format!("{endpoint}: {e}")))?;
    Ok(registered.client_id)
}

/// A loopback listener waiting for the authorization server's redirect.
pub(crate) struct Redirect {
    listener: tokio::net::TcpListener,
    /// `http://127.0.0.1:PORT/callback`.
    pub(crate) uri: String,
}

impl Redirect {
    /// Listen on `127.0.0.1:port` (0: any free port).
    pub(crate) async fn bind(port: u16) -> Result<Self, Error> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await.map_err(|e| {
            oauth(
                OAuthStep::Authorization,
                format!("cannot listen on 127.0.0.1:{port} for the redirect: {e}"),
            )
        })?;
        let port = listener.local_addr().map_err(|e| oauth(OAuthStep::Authorization, e.to_string()))?.port();
        Ok(Self { listener, uri: format!("http://127.0.0.1:{port}/callback") })
    }

    /// Wait for the redirect carrying `state`: its `code`. Other requests (a browser's
    /// favicon) are answered 404 and waited past.
    async fn code(&self, state: &str) -> Result<String, Error> {
        loop {
            let (mut conn, _) =
                self.listener.accept().await.map_err(|e| oauth(OAuthStep::Authorization, e.to_string()))?;
            let mut head = vec![0u8; 8192];
            let n = conn.read(&mut head).await.unwrap_or(0);
            let line = String::from_utf8_lossy(&head[..n]).lines().next().unwrap_or_default().to_owned();
            let target = line.split(' ').nth(1).unwrap_or_default();
            let Some(query) = target.strip_prefix("/callback?") else {
                let _ = conn
                    .write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                    .await;
                continue;
            };
            let params: std::collections::HashMap<String, String> =
                form_urlencoded::parse(query.as_bytes()).into_owned().collect();
            let (status, page, outcome) = match (params.get("state"), params.get("code"), params.get("error"))
            {
                (Some(s), Some(code), _) if s == state => (
                    "200 OK",
                    "forkless connect is authorized; you can close this window.",
                    Some(Ok(code.clone())),
                ),
                (Some(s), _, Some(error)) if s == state => (
                    "400 Bad Request",
                    "The authorization was refused.",
                    Some(Err(oauth(
                        OAuthStep::Authorization,
                        format!("the authorization server refused: {error}"),
                    ))),
                ),
                // A redirect with another state (a stale tab) is waited past.
                _ => ("400 Bad Request", "This redirect is not the one forkless connect waits for.", None),
            };
            let response = format!(
                "HTTP/1.1 {status}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{page}",
                page.len()
            );
            let _ = conn.write_all(response.as_bytes()).await;
            if let Some(outcome) = outcome {
                return outcome;
            }
        }
    }
}

/// Run the authorization-code grant: show the user where to authorize (stderr, and
/// `$BROWSER` when set), wait for the redirect, exchange the code. `scope` and `resource`
/// go into the request as given.
pub(crate) async fn authorize(
    http: &reqwest::Client,
    server: &ServerMetadata,
    client_id: &str,
    redirect: &Redirect,
    resource: &str,
    scope: Option<&str>,
) -> Result<Tokens, Error> {
    let (verifier, state) = (random(), random());
    let mut url = reqwest::Url::parse(&server.authorization_endpoint)
        .map_err(|e| oauth(OAuthStep::Discovery, format!("authorization_endpoint: {e}")))?;
    {
        let mut q = url.query_pairs_mut();
        q.append_pair("response_type", "code")
            .append_pair("client_id", client_id)
            .append_pair("redirect_uri", &redirect.uri)
            .append_pair("code_challenge", &challenge(&verifier))
            .append_pair("code_challenge_method", "S256")
            .append_pair("state", &state)
            .append_pair("resource", resource);
        if let Some(scope) = scope {
            q.append_pair("scope", scope);
        }
    }
    eprintln!("forkless connect: to authorize access to {resource}, open {url}");
    if let Some(browser) = std::env::var_os("BROWSER")
        && let Err(e) = std::process::Command::new(&browser).arg(url.as_str()).spawn()
    {
        tracing::warn!(error = %e, "could not start $BROWSER");
    }
    let code = tokio::time::timeout(AUTHORIZE_WAIT, redirect.code(&state)).await.map_err(|_| {
        oauth(OAuthStep::Authorization, format!("no authorization within {} s", AUTHORIZE_WAIT.as_secs()))
    })??;
    let form = [
        ("grant_type", "authorization_code"),
        ("code", code.as_str()),
        ("redirect_uri", redirect.uri.as_str()),
        ("client_id", client_id),
        ("code_verifier", verifier.as_str()),
        ("resource", resource),
    ];
    let issued = token_request(http, &server.token_endpoint, &form).await?;
    Ok(issued.into_tokens(resource, server, client_id))
}

/// Refresh `tokens` with their refresh token: the new tokens.
pub(crate) async fn refresh(http: &reqwest::Client, tokens: &Tokens) -> Result<Tokens, Error> {
    let Some(refresh_token) = &tokens.refresh_token else {
        return Err(oauth(OAuthStep::Refresh, "no refresh token"));
    };
    let form = [
        ("grant_type", "refresh_token"),
        ("refresh_token", refresh_token.as_str()),
        ("client_id", tokens.client_id.as_str()),
        ("resource", tokens.resource.as_str()),
    ];
    let issued = token_request(http, &tokens.token_endpoint, &form)
        .await
        .map_err(|e| oauth(OAuthStep::Refresh, e.to_string()))?;
    let mut next = issued.into_tokens_like(tokens);
    // A server that does not rotate refresh tokens keeps the old one valid.
    if next.refresh_token.is_none() {
        next.refresh_token.clone_from(&tokens.refresh_token);
    }
    Ok(next)
}

/// A token endpoint's answer.
#[derive(Deserialize)]
struct Issued {
    access_token: String,
    #[serde(default)]
    token_type: Option<String>,
    expires_in: Option<u64>,
    refresh_token: Option<String>,
}

impl Issued {
    fn into_tokens(self, resource: &str, server: &ServerMetadata, client_id: &str) -> Tokens {
        let issued_at = now();
        Tokens {
            resource: resource.to_owned(),
            issuer: server.issuer.clone(),
            token_endpoint: server.token_endpoint.clone(),
            client_id: client_id.to_owned(),
            access_token: self.access_token,
            refresh_token: self.refresh_token,
            issued_at,
            expires_at: self.expires_in.map(|s| issued_at + s),
        }
    }

    fn into_tokens_like(self, old: &Tokens) -> Tokens {
        let issued_at = now();
        Tokens {
            access_token: self.access_token,
            refresh_token: self.refresh_token,
            issued_at,
            expires_at: self.expires_in.map(|s| issued_at + s),
            ..old.clone()
        }
    }
}

async fn token_request(
    http: &reqwest::Client,
    endpoint: &str,
    form: &[(&str, &str)],
) -> Result<Issued, Error> {
    let body = form_urlencoded::Serializer::new(String::new()).extend_pairs(form).finish();
    let resp = http
        .post(endpoint)
        .header(reqwest::header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .header(reqwest::header::ACCEPT, "application/json")
        .body(body)
        .send()
        .await
        .map_err(|e| oauth(OAuthStep::Token, format!("{endpoint}: {e}")))?;
    let status = resp.status();
    let text = resp.text().await.map_err(|e| oauth(OAuthStep::Token, format!("{endpoint}: {e}")))?;
    if !status.is_success() {
        return Err(oauth(OAuthStep::Token, format!("{endpoint}: HTTP {status}: {text}")));
    }
    let issued: Issued = serde_json::from_str(&text)
        .map_err(|e| oauth(OAuthStep::Token, format!("{endpoint}: not a token response ({e})")))?;
    if issued.token_type.as_deref().is_some_and(|t| !t.eq_ignore_ascii_case("bearer")) {
        return Err(oauth(
            OAuthStep::Token,
            format!("{endpoint}: token type {:?}, not Bearer", issued.token_type),
        ));
    }
    Ok(issued)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_s256_challenge_is_rfc_7636s() {
        // RFC 7636 appendix B.
        assert_eq!(
            challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
        let (a, b) = (random(), random());
        assert_ne!(a, b);
        assert_eq!(a.len(), 43, "32 bytes, base64url: a verifier of 43 characters");
    }
}
