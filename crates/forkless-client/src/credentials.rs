//! Who the client is to the server: the `Authorization` header each request carries, asked
//! for afresh on every request, so credentials that change while the client runs (an OAuth
//! access token refreshed before it expires) reach every later request and every reconnect.
//!
//! It owns the hook, not any way of getting a token (an application's, or `forkless connect`'s
//! OAuth flow).

use reqwest::header::HeaderValue;

/// The source of a client's `Authorization` header.
pub trait Credentials: Send + Sync + 'static {
    /// The header for the next request; `None` sends none.
    fn authorization(&self) -> Option<HeaderValue>;
}

/// A fixed bearer token.
#[derive(Clone)]
pub struct Bearer(HeaderValue);

impl Bearer {
    /// `Authorization: Bearer <token>`; `None` when the token is not a valid header value.
    pub fn new(token: &str) -> Option<Self> {
        let mut value = HeaderValue::try_from(format!("Bearer {token}")).ok()?;
        value.set_sensitive(true);
        Some(Self(value))
    }
}

impl std::fmt::Debug for Bearer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Bearer(…)")
    }
}

impl Credentials for Bearer {
    fn authorization(&self) -> Option<HeaderValue> {
        Some(self.0.clone())
    }
}

/// Add `credentials`' header to `rb`.
pub(crate) fn apply(
    rb: reqwest::RequestBuilder,
    credentials: Option<&std::sync::Arc<dyn Credentials>>,
) -> reqwest::RequestBuilder {
    match credentials.and_then(|c| c.authorization()) {
        Some(value) => rb.header(reqwest::header::AUTHORIZATION, value),
        None => rb,
    }
}
