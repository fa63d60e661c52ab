//! OAuth for `forkless connect`: when the server answers `401` with a Bearer challenge, the
//! bridge finds its authorization server, registers itself where it may, has the user
//! authorize it once (a URL on stderr, `$BROWSER` when set, a loopback redirect), keeps the
//! tokens in a file only the user can read, and refreshes the access token before it expires
//! while it runs. Every request then carries the current token ([`OAuth`] is the client's
//! [`Credentials`]); no token is ever written anywhere else.
//!
//! ```text
//! 401 + challenge ─► discover (RFC 9728, RFC 8414) ─► token file: fresh? use it
//!                                                   ─► stale? refresh grant
//!                                                   ─► none? register (RFC 7591) + code + PKCE
//! ```
//!
//! It owns deciding which of those runs; `discover`, `flow` and `tokens` own each step.

mod discover;
mod flow;
mod tokens;

use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use forkless_client::Credentials;
use reqwest::header::HeaderValue;

use crate::{Error, OAuthStep};
use discover::Challenge;
use tokens::Tokens;

/// How `forkless connect` does OAuth (its `--oauth-*` flags).
#[derive(Clone, Debug, Default)]
pub(crate) struct OAuthSettings {
    /// Where the tokens are kept (default: one file per server under `$XDG_STATE_HOME`).
    pub(crate) token_file: Option<PathBuf>,
    /// A client id registered beforehand (default: dynamic registration).
    pub(crate) client_id: Option<String>,
    /// The loopback port of the redirect (default 0: any free port).
    pub(crate) redirect_port: u16,
    /// The scopes to ask for (default: what the server's challenge or metadata names).
    pub(crate) scope: Option<String>,
}

/// An OAuth failure at `step`.
pub(crate) fn oauth(step: OAuthStep, detail: impl Into<String>) -> Error {
    Error::OAuth { step, detail: detail.into() }
}

/// The server's Bearer challenge when it requires a token: an unauthenticated `ping` answered
/// `401`. `None` when it lets the bridge in without one.
pub(crate) async fn challenge(http: &reqwest::Client, url: &str) -> Result<Option<Challenge>, Error> {
    // An unreachable server is reported by the first real request, with its reason.
    Ok(match ping(http, url, None).await {
        Some(resp) if resp.status() == reqwest::StatusCode::UNAUTHORIZED => {
            Some(Challenge::of(resp.headers()).unwrap_or_default())
        }
        _ => None,
    })
}

/// Whether the server at `url` lets a request bearing `token` in (anything but `401`; an
/// unreachable server is taken at its word later).
async fn accepted(http: &reqwest::Client, url: &str, token: &str) -> bool {
    ping(http, url, Some(token)).await.is_none_or(|r| r.status() != reqwest::StatusCode::UNAUTHORIZED)
}

/// A `ping` POSTed to `url` (bearing `token`, if any): the response, if one came.
async fn ping(http: &reqwest::Client, url: &str, token: Option<&str>) -> Option<reqwest::Response> {
    let mut probe = http
        .post(url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .header(reqwest::header::ACCEPT, "application/json, text/event-stream")
        .body(r#"{"jsonrpc":"2.0","id":0,"method":"ping"}"#);
    if let Some(token) = token {
        probe = probe.bearer_auth(token);
    }
    probe.send().await.ok()
}

/// The current access token, kept fresh by a task of its own while the bridge runs.
pub(crate) struct OAuth {
    header: RwLock<HeaderValue>,
}

impl std::fmt::Debug for OAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OAuth(…)")
    }
}

impl Credentials for OAuth {
    fn authorization(&self) -> Option<HeaderValue> {
        Some(self.header.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone())
    }
}

impl OAuth {
    fn set(&self, tokens: &Tokens) -> Result<(), Error> {
        let mut value = HeaderValue::try_from(format!("Bearer {}", tokens.access_token))
            .map_err(|e| oauth(OAuthStep::Token, format!("the access token is not a header value: {e}")))?;
        value.set_sensitive(true);
        *self.header.write().unwrap_or_else(std::sync::PoisonError::into_inner) = value;
        Ok(())
    }
}

/// Tokens for the server at `url`, which answered with `challenge`: from the token file,
/// refreshed, or authorized by the user; then kept fresh. `server` speaks to the MCP server
/// (with its own headers), `http` to the authorization server (without them).
pub(crate) async fn sign_in(
    server: &reqwest::Client,
    http: &reqwest::Client,
    url: &str,
    challenge: &Challenge,
    settings: &OAuthSettings,
) -> Result<Arc<OAuth>, Error> {
    let parsed = reqwest::Url::parse(url).map_err(|e| oauth(OAuthStep::Discovery, format!("{url}: {e}")))?;
    let resource_metadata = discover::resource(server, &parsed, challenge).await?;
    let resource = resource_metadata.resource.clone().unwrap_or_else(|| url.to_owned());
    let file = match &settings.token_file {
        Some(file) => file.clone(),
        None => tokens::default_file(&resource)?,
    };
    let mut kept = tokens::load(&file, &resource)?;
    // A kept token the server no longer takes (revoked, or its issuer's key changed) is
    // dropped: asked again, as if there were none.
    if let Some(t) = &kept
        && t.fresh(tokens::now())
        && !accepted(server, url, &t.access_token).await
    {
        tracing::info!("the server refuses the kept token; authorizing again");
        kept = None;
    }
    let tokens = match kept {
        Some(t) if t.fresh(tokens::now()) => t,
        Some(t) => match flow::refresh(http, &t).await {
            Ok(t) => {
                tokens::save(&file, &t)?;
                t
            }
            Err(e) => {
                tracing::info!(error = %e, "the kept tokens could not be refreshed; authorizing again");
                authorize(http, &resource_metadata, &resource, challenge, settings, &file).await?
            }
        },
        None => authorize(http, &resource_metadata, &resource, challenge, settings, &file).await?,
    };
    let credentials = Arc::new(OAuth { header: RwLock::new(HeaderValue::from_static("Bearer -")) });
    credentials.set(&tokens)?;
    tokio::spawn(keep_fresh(http.clone(), tokens, file, Arc::clone(&credentials)));
    Ok(credentials)
}

/// The whole authorization: find the authorization server, register, have the user
/// authorize, keep the tokens.
async fn authorize(
    http: &reqwest::Client,
    resource_metadata: &discover::ResourceMetadata,
    resource: &str,
    challenge: &Challenge,
    settings: &OAuthSettings,
    file: &std::path::Path,
) -> Result<Tokens, Error> {
    let issuer = &resource_metadata.authorization_servers[0];
    let server = discover::server(http, issuer).await?;
    let redirect = flow::Redirect::bind(settings.redirect_port).await?;
    let client_id = match &settings.client_id {
        Some(id) => id.clone(),
        None => flow::register(http, &server, &redirect.uri).await?,
    };
    let joined = resource_metadata.scopes_supported.join(" ");
    let scope = settings
        .scope
        .as_deref()
        .or(challenge.scope.as_deref())
        .or((!joined.is_empty()).then_some(joined.as_str()));
    let tokens = flow::authorize(http, &server, &client_id, &redirect, resource, scope).await?;
    tokens::save(file, &tokens)?;
    tracing::info!(file = %file.display(), "authorized; tokens kept for the next launch");
    Ok(tokens)
}

/// Refresh the access token before it expires, for as long as the bridge runs. A failed
/// refresh is tried again shortly; the requests meanwhile carry the token they have.
async fn keep_fresh(http: reqwest::Client, mut tokens: Tokens, file: PathBuf, credentials: Arc<OAuth>) {
    loop {
        let Some(at) = tokens.refresh_at() else { return };
        if tokens.refresh_token.is_none() {
            return;
        }
        tokio::time::sleep(Duration::from_secs(at.saturating_sub(tokens::now()).max(1))).await;
        match flow::refresh(&http, &tokens).await {
            Ok(next) => {
                if let Err(e) = tokens::save(&file, &next).and_then(|()| credentials.set(&next)) {
                    tracing::warn!(error = %e, "keeping the refreshed token failed");
                }
                tokens = next;
            }
            Err(e) => {
                tracing::warn!(error = %e, "refreshing the access token failed; trying again in 30 s");
                tokio::time::sleep(Duration::from_secs(30)).await;
            }
        }
    }
}
