//! The issuer's signing keys (a JWKS), fetched when first needed and again when a token names
//! a key id the cache does not hold (key rotation): one fetch at a time however many requests
//! wait for it (single flight), and no more often than a minimum interval, so a stream of
//! tokens with made-up key ids cannot turn into a stream of fetches.
//!
//! This module owns the cache and its refresh. What a token must say is [`super`]'s.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::RwLock;
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, JwkSet, KeyAlgorithm};
use jsonwebtoken::{Algorithm, DecodingKey};

/// Where the keys come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JwksSource {
    /// Fetched over HTTP(S) (the issuer's `jwks_uri`).
    Url(String),
    /// Read from a file (a JWKS document).
    File(PathBuf),
}

/// One verification key and the one algorithm it verifies.
#[derive(Clone)]
pub(crate) struct Key {
    pub(crate) key: DecodingKey,
    pub(crate) algorithm: Algorithm,
}

/// Why no key was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum KeyError {
    /// The JWKS holds no key with this id (after a refresh, or a refresh was not allowed yet).
    Unknown,
    /// The JWKS could not be fetched or read.
    Unavailable(String),
}

pub(crate) struct Jwks {
    source: JwksSource,
    min_refresh: Duration,
    /// The client for a URL source, or why the trust settings could not make one (every
    /// fetch then fails with it; verification is never dropped to get a client).
    http: Result<reqwest::Client, String>,
    keys: RwLock<HashMap<String, Key>>,
    /// Held while fetching (the single flight); the instant of the last fetch.
    fetched: tokio::sync::Mutex<Option<Instant>>,
    /// Fetches made (for `/metrics` and tests).
    pub(crate) fetches: std::sync::atomic::AtomicU64,
}

impl Jwks {
    /// Keys from `source`, fetched over TLS trusting the system's roots plus `ca_file`
    /// (`forkless_tls`'s rule).
    pub(crate) fn new(source: JwksSource, min_refresh: Duration, ca_file: Option<&std::path::Path>) -> Self {
        let builder = reqwest::Client::builder().timeout(Duration::from_secs(10));
        let http = forkless_tls::http::trusting(builder, ca_file)
            .map_err(|e| format!("the JWKS CA file: {e}"))
            .and_then(|b| b.build().map_err(|e| format!("an HTTP client for the JWKS: {e}")));
        Self {
            source,
            min_refresh,
            http,
            keys: RwLock::default(),
            fetched: tokio::sync::Mutex::new(None),
            fetches: std::sync::atomic::AtomicU64::new(0),
        }
    }

    fn cached(&self, kid: &str) -> Option<Key> {
        self.keys.read().unwrap_or_else(std::sync::PoisonError::into_inner).get(kid).cloned()
    }

    /// The key `kid` names: from the cache, or after one refresh.
    pub(crate) async fn key(&self, kid: &str) -> Result<Key, KeyError> {
        if let Some(key) = self.cached(kid) {
            return Ok(key);
        }
        let mut fetched = self.fetched.lock().await;
        // Whoever held the lock before may have fetched it.
        if let Some(key) = self.cached(kid) {
            return Ok(key);
        }
        if fetched.is_some_and(|at| at.elapsed() < self.min_refresh) {
            return Err(KeyError::Unknown);
        }
        *fetched = Some(Instant::now());
        self.fetches.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let set = self.fetch().await.map_err(KeyError::Unavailable)?;
        let keys = keys_of(&set);
        tracing::info!(keys = keys.len(), "JWKS fetched");
        let found = keys.get(kid).cloned();
        *self.keys.write().unwrap_or_else(std::sync::PoisonError::into_inner) = keys;
        found.ok_or(KeyError::Unknown)
    }

    async fn fetch(&self) -> Result<JwkSet, String> {
        match &self.source {
            JwksSource::File(path) => {
                let text =
                    std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
                serde_json::from_str(&text).map_err(|e| format!("{} is not a JWKS: {e}", path.display()))
            }
            JwksSource::Url(url) => {
                let http = self.http.as_ref().map_err(Clone::clone)?;
                let resp = http.get(url).send().await.map_err(|e| format!("fetching {url}: {e}"))?;
                if !resp.status().is_success() {
                    return Err(format!("fetching {url}: HTTP {}", resp.status()));
                }
                resp.json().await.map_err(|e| format!("{url} is not a JWKS: {e}"))
            }
        }
    }
}

/// The signature keys of `set` with a key id, each pinned to one algorithm: the one its JWK
/// names, else the usual one of its type. Symmetric keys are never accepted (a resource
/// server shares no secret with the issuer).
fn keys_of(set: &JwkSet) -> HashMap<String, Key> {
    let mut out = HashMap::new();
    for jwk in &set.keys {
        let Some(kid) = jwk.common.key_id.clone() else { continue };
        let named = jwk.common.key_algorithm.and_then(|a| match a {
            KeyAlgorithm::RS256 => Some(Algorithm::RS256),
            KeyAlgorithm::RS384 => Some(Algorithm::RS384),
            KeyAlgorithm::RS512 => Some(Algorithm::RS512),
            KeyAlgorithm::PS256 => Some(Algorithm::PS256),
            KeyAlgorithm::PS384 => Some(Algorithm::PS384),
            KeyAlgorithm::PS512 => Some(Algorithm::PS512),
            KeyAlgorithm::ES256 => Some(Algorithm::ES256),
            KeyAlgorithm::ES384 => Some(Algorithm::ES384),
            KeyAlgorithm::EdDSA => Some(Algorithm::EdDSA),
            _ => None,
        });
        let usual = match &jwk.algorithm {
            AlgorithmParameters::RSA(_) => Some(Algorithm::RS256),
            AlgorithmParameters::EllipticCurve(p) => match p.curve {
                EllipticCurve::P256 => Some(Algorithm::ES256),
                EllipticCurve::P384 => Some(Algorithm::ES384),
                _ => None,
            },
            AlgorithmParameters::OctetKeyPair(_) => Some(Algorithm::EdDSA),
            _ => None,
        };
        let symmetric = matches!(jwk.algorithm, AlgorithmParameters::OctetKey(_));
        let (Some(algorithm), false) = (named.or(usual), symmetric) else { continue };
        if let Ok(key) = DecodingKey::from_jwk(jwk) {
            out.insert(kid, Key { key, algorithm });
        }
    }
    out
}
