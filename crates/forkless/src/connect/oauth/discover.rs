//! Finding the authorization server of a protected MCP server: its `401` challenge
//! (`WWW-Authenticate: Bearer resource_metadata="…", scope="…"`), the protected resource
//! metadata (RFC 9728) it points to, and that authorization server's metadata (RFC 8414, or
//! OpenID Connect discovery where that is all it publishes).
//!
//! It owns reading those documents, not what is done with them (`super::flow`).

use reqwest::header::{HeaderMap, WWW_AUTHENTICATE};
use serde::Deserialize;

use super::oauth;
use crate::{Error, OAuthStep};

/// What a server's `401` said.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Challenge {
    /// `resource_metadata`: where the protected resource metadata is.
    pub(crate) resource_metadata: Option<String>,
    /// `scope`: the scopes the server wants.
    pub(crate) scope: Option<String>,
}

impl Challenge {
    /// The Bearer challenge among `headers`' `WWW-Authenticate` values, if any.
    pub(crate) fn of(headers: &HeaderMap) -> Option<Self> {
        headers.get_all(WWW_AUTHENTICATE).iter().filter_map(|v| v.to_str().ok()).find_map(Self::parse)
    }

    fn parse(value: &str) -> Option<Self> {
        let rest = value.trim().strip_prefix("Bearer").or_else(|| value.trim().strip_prefix("bearer"))?;
        let mut challenge = Self::default();
        for (name, v) in params(rest) {
            match name.as_str() {
                "resource_metadata" => challenge.resource_metadata = Some(v),
                "scope" => challenge.scope = Some(v),
                _ => {}
            }
        }
        Some(challenge)
    }
}

/// `name="value"` or `name=token` pairs of an auth-param list.
fn params(mut rest: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    loop {
        rest = rest.trim_start_matches([' ', ',']);
        let Some((name, after)) = rest.split_once('=') else { return out };
        let name = name.trim().to_ascii_lowercase();
        let after = after.trim_start();
        let (value, next) = match after.strip_prefix('"') {
            Some(quoted) => {
                let mut value = String::new();
                let mut chars = quoted.char_indices();
                let mut end = quoted.len();
                while let Some((i, c)) = chars.next() {
                    match c {
                        '\\' => {
                            if let Some((_, escaped)) = chars.next() {
                                value.push(escaped);
                            }
                        }
                        '"' => {
                            end = i + 1;
                            break;
                        }
                        c => value.push(c),
                    }
                }
                (value, &quoted[end.min(quoted.len())..])
            }
            None => {
                let end = after.find(',').unwrap_or(after.len());
                (after[..end].trim().to_owned(), &after[end..])
            }
        };
        out.push((name, value));
        rest = next;
    }
}

/// The parts of the protected resource metadata the bridge uses.
#[derive(Clone, Debug, Deserialize)]
pub(crate) struct ResourceMetadata {
    /// The resource's identifier (its canonical URL, RFC 8707's `resource`).
    pub(crate) resource: Option<String>,
    /// Who issues its tokens; the first is used.
    #[serde(default)]
    pub(crate) authorization_servers: Vec<String>,
    /// The scopes it knows.
    #[serde(default)]
    pub(crate) scopes_supported: Vec<String>,
}

/// The parts of the authorization server metadata the bridge uses.
#[derive(Clone, Debug, Deserialize)]
pub(crate) struct ServerMetadata {
    pub(crate) issuer: String,
    pub(crate) authorization_endpoint: String,
    pub(crate) token_endpoint: String,
    pub(crate) registration_endpoint: Option<String>,
    #[serde(default)]
    pub(crate) code_challenge_methods_supported: Vec<String>,
}

/// The resource metadata of the server at `url`: where its challenge says, else at the
/// well-known URL for its path.
pub(crate) async fn resource(
    http: &reqwest::Client,
    url: &reqwest::Url,
    challenge: &Challenge,
) -> Result<ResourceMetadata, Error> {
    let at = match &challenge.resource_metadata {
        Some(at) => at.clone(),
        None => well_known(url, "oauth-protected-resource")?,
    };
    let metadata: ResourceMetadata = fetch(http, &at).await?;
    if metadata.authorization_servers.is_empty() {
        return Err(oauth(OAuthStep::Discovery, format!("{at} names no authorization server")));
    }
    Ok(metadata)
}

/// The metadata of the authorization server `issuer`: RFC 8414's well-known document, or
/// OpenID Connect's. Its `issuer` must be the one asked for (RFC 8414 section 3.3).
pub(crate) async fn server(http: &reqwest::Client, issuer: &str) -> Result<ServerMetadata, Error> {
    let base = reqwest::Url::parse(issuer)
        .map_err(|e| oauth(OAuthStep::Discovery, format!("issuer {issuer}: {e}")))?;
    let mut tried = Vec::new();
    for doc in ["oauth-authorization-server", "openid-configuration"] {
        let at = well_known(&base, doc)?;
        match fetch::<ServerMetadata>(http, &at).await {
            Ok(m) if m.issuer.trim_end_matches('/') == issuer.trim_end_matches('/') => {
                if !m.code_challenge_methods_supported.is_empty()
                    && !m.code_challenge_methods_supported.iter().any(|c| c == "S256")
                {
                    return Err(oauth(
                        OAuthStep::Discovery,
                        format!("{issuer} does not offer PKCE with S256"),
                    ));
                }
                return Ok(m);
            }
            Ok(m) => {
                return Err(oauth(
                    OAuthStep::Discovery,
                    format!("{at} names issuer {}, not {issuer}", m.issuer),
                ));
            }
            Err(e) => tried.push(e.to_string()),
        }
    }
    Err(oauth(OAuthStep::Discovery, format!("no metadata for {issuer}: {}", tried.join("; "))))
}

/// `https://host/.well-known/<doc><path>` for `url` (the path after the well-known part).
fn well_known(url: &reqwest::Url, doc: &str) -> Result<String, Error> {
    let origin = url.origin().ascii_serialization();
    let path = url.path().trim_end_matches('/');
    Ok(format!("{origin}/.well-known/{doc}{path}"))
}

async fn fetch<T: for<'de> Deserialize<'de>>(http: &reqwest::Client, at: &str) -> Result<T, Error> {
    let resp = http.get(at).send().await.map_err(|e| oauth(OAuthStep::Discovery, format!("{at}: {e}")))?;
    if !resp.status().is_success() {
        return Err(oauth(OAuthStep::Discovery, format!("{at}: HTTP {}", resp.status())));
    }
    resp.json()
        .await
        .map_err(|e| oauth(OAuthStep::Discovery, format!("{at}: not the metadata expected: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bearer_challenge_is_read_with_quoted_and_bare_params() {
        let c = Challenge::parse(
            r#"Bearer error="insufficient_scope", scope="a b", resource_metadata="https://x/.well-known/oauth-protected-resource/mcp""#,
        );
        assert_eq!(
            c,
            Some(Challenge {
                resource_metadata: Some("https://x/.well-known/oauth-protected-resource/mcp".into()),
                scope: Some("a b".into()),
            })
        );
        let c = Challenge::parse(r#"Bearer realm=x, scope="q\"uoted""#).unwrap();
        assert_eq!(c.scope.as_deref(), Some("q\"uoted"));
        assert_eq!(Challenge::parse("Basic realm=x"), None);
    }

    #[test]
    fn the_well_known_url_keeps_the_resources_path() {
        let url = reqwest::Url::parse("https://mcp.example.com/v1/mcp").unwrap();
        assert_eq!(
            well_known(&url, "oauth-protected-resource").unwrap(),
            "https://mcp.example.com/.well-known/oauth-protected-resource/v1/mcp"
        );
        let issuer = reqwest::Url::parse("https://auth.example.com").unwrap();
        assert_eq!(
            well_known(&issuer, "oauth-authorization-server").unwrap(),
            "https://auth.example.com/.well-known/oauth-authorization-server"
        );
    }
}
