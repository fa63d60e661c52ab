//! `requestState` of multi-round-trip requests (2026-07-28, SEP-2322), sealed by the server: a
//! handler hands [`crate::RequestContext::input_required`] the state its next round needs,
//! and reads it back with [`crate::RequestContext::request_state`] once the server has
//! checked it.
//!
//! A state is encrypted and authenticated (ChaCha20-Poly1305, a fresh 96-bit nonce from the
//! OS CSPRNG) under the current key of a [`RequestStateKeys`] ring, and names inside it what it
//! is bound to: the principal that asked, the method and the tool or prompt name, and when it
//! expires. Opening it checks each, in that order after the tag; then the server spends its
//! 128-bit id in the store (`forkless_store::Spending::spend`, a compare-and-set every node
//! shares), so a state is accepted once on any node. Every refusal is `-32602` with its
//! [`Refused`] reason in `data.reason`.
//!
//! This module owns sealing and opening. It does not own where keys come from (the
//! configuration: one ring that every node reads, so a state sealed on one node opens on
//! another), the single use (the store's) nor what a handler keeps in a state.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chacha20poly1305::aead::{Aead as _, KeyInit as _, Payload};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce};
use forkless_core::{EntropySource as _, OsEntropy, Timestamp};
use forkless_store::SpendKey;
use serde_json::{Map, Value, json};

use crate::jsonrpc::RpcError;

/// The text a sealed state starts with (and its version).
const PREFIX: &str = "fks1";

/// Bound into every tag, so a ciphertext made for anything else never opens as a state.
const CONTEXT: &[u8] = b"forkless requestState v1";

/// Why a state was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// Not a state this server seals (wrong shape or encoding).
    #[error("malformed")]
    Malformed,
    /// Sealed under a key the ring does not hold (retired, or another deployment's).
    #[error("unknown_key")]
    UnknownKey,
    /// Its tag does not verify: altered, or not sealed by this ring.
    #[error("tampered")]
    Tampered,
    /// Its time to live has passed.
    #[error("expired")]
    Expired,
    /// Sealed for another principal.
    #[error("other_principal")]
    OtherPrincipal,
    /// Sealed for another method or another tool or prompt.
    #[error("other_request")]
    OtherRequest,
    /// Already used once.
    #[error("replayed")]
    Replayed,
    /// Sealed before the store's memory of used states began (a store of one process that
    /// restarted), so the store cannot vouch that it was not used.
    #[error("unvouched")]
    Unvouched,
}

impl Refused {
    /// The JSON-RPC error a request with a refused state is answered with.
    pub fn to_rpc(self) -> RpcError {
        let why = match self {
            Self::Malformed => "is malformed",
            Self::UnknownKey => "was sealed under a key this server does not hold",
            Self::Tampered => "failed its integrity check",
            Self::Expired => "has expired",
            Self::OtherPrincipal => "belongs to another principal",
            Self::OtherRequest => "belongs to another request",
            Self::Replayed => "was already used",
            Self::Unvouched => {
                "predates the server's restart and cannot be vouched for; start the request again"
            }
        };
        RpcError::invalid_params(format!("requestState {why}"))
            .with_data(json!({ "reason": self.to_string() }))
    }
}

/// What a state is bound to: who asked, for which method and which tool or prompt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Binding<'a> {
    pub(crate) principal: Option<&'a str>,
    pub(crate) method: &'a str,
    pub(crate) name: Option<&'a str>,
}

/// The keys states are sealed and opened with: the first seals, every one opens (so a key can
/// be rotated in before the old one is retired). Keys never appear in `Debug`.
#[derive(Clone)]
pub struct RequestStateKeys {
    keys: Arc<Vec<(String, Key)>>,
}

impl fmt::Debug for RequestStateKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ids: Vec<&str> = self.keys.iter().map(|(id, _)| id.as_str()).collect();
        f.debug_struct("RequestStateKeys").field("ids", &ids).finish_non_exhaustive()
    }
}

/// Why a key ring's text was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KeyRingError {
    /// No key at all.
    #[error("the key ring holds no key")]
    Empty,
    /// A line that is not `ID:HEX` with a short id and 64 hex digits.
    #[error("line {0}: expected ID:HEX (an id of 1 to 16 letters, digits, '-' or '_', and 64 hex digits)")]
    Line(usize),
    /// The same id twice.
    #[error("line {0}: key id {1:?} appears twice")]
    Duplicate(usize, String),
}

impl RequestStateKeys {
    /// One key from the OS CSPRNG, id `local`: states open only in this process.
    pub fn generate() -> Self {
        let mut key = [0u8; 32];
        OsEntropy.fill(&mut key);
        Self { keys: Arc::new(vec![("local".to_owned(), Key::from(key))]) }
    }

    /// A ring from text: one `ID:HEX` line per key (64 hex digits), the first sealing; blank
    /// lines and lines starting with `#` are skipped.
    pub fn parse(text: &str) -> Result<Self, KeyRingError> {
        let mut keys: Vec<(String, Key)> = Vec::new();
        for (n, line) in text.lines().enumerate().map(|(i, l)| (i + 1, l.trim())) {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (id, hex) = line.split_once(':').ok_or(KeyRingError::Line(n))?;
            let id_ok = (1..=16).contains(&id.len())
                && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
            let key = decode_hex(hex.trim()).filter(|_| id_ok).ok_or(KeyRingError::Line(n))?;
            if keys.iter().any(|(k, _)| k == id) {
                return Err(KeyRingError::Duplicate(n, id.to_owned()));
            }
            keys.push((id.to_owned(), Key::from(key)));
        }
        if keys.is_empty() {
            return Err(KeyRingError::Empty);
        }
        Ok(Self { keys: Arc::new(keys) })
    }

    fn cipher(&self, id: &str) -> Option<ChaCha20Poly1305> {
        self.keys.iter().find(|(k, _)| k == id).map(|(_, key)| ChaCha20Poly1305::new(key))
    }
}

fn decode_hex(hex: &str) -> Option<[u8; 32]> {
    let digits = hex.as_bytes();
    if digits.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, pair) in digits.chunks(2).enumerate() {
        let text = std::str::from_utf8(pair).ok()?;
        out[i] = u8::from_str_radix(text, 16).ok()?;
    }
    Some(out)
}

/// Sealing and opening, with the settings of [`crate::ServerConfig::request_state`].
#[derive(Debug)]
pub(crate) struct RequestStates {
    keys: RequestStateKeys,
    ttl: Duration,
}

/// A state that opened for its binding: what it carries, and what spending it needs.
#[derive(Debug, PartialEq)]
pub(crate) struct Opened {
    pub(crate) state: Value,
    /// The answers gathered in earlier rounds ([`crate::RequestContext::ask`]).
    pub(crate) answers: Map<String, Value>,
    /// Its one-time id.
    pub(crate) key: SpendKey,
    /// When it was sealed.
    pub(crate) issued: Timestamp,
    /// When it expires.
    pub(crate) until: Timestamp,
}

impl RequestStates {
    pub(crate) fn new(cfg: &RequestStateConfig) -> Self {
        Self { keys: cfg.keys.clone(), ttl: cfg.ttl }
    }

    /// `state` and the `answers` gathered so far, sealed for `binding`, valid for the
    /// configured time to live from `now`.
    pub(crate) fn seal(
        &self,
        state: &Value,
        answers: &Map<String, Value>,
        binding: &Binding<'_>,
        now: Timestamp,
    ) -> String {
        let (key_id, _) = &self.keys.keys[0];
        let mut id = [0u8; 16];
        OsEntropy.fill(&mut id);
        let inner = json!({
            "id": URL_SAFE_NO_PAD.encode(id),
            "iat": now.as_millis(),
            "exp": now.saturating_add(self.ttl).as_millis(),
            "p": binding.principal,
            "m": binding.method,
            "n": binding.name,
            "s": state,
            "a": answers,
        });
        let mut nonce = [0u8; 12];
        OsEntropy.fill(&mut nonce);
        let cipher = self.keys.cipher(key_id).expect("the sealing key is in the ring");
        let sealed = cipher
            .encrypt(&Nonce::from(nonce), Payload { msg: inner.to_string().as_bytes(), aad: &aad(key_id) })
            .expect("ChaCha20-Poly1305 seals any message under 256 GiB");
        let mut body = nonce.to_vec();
        body.extend_from_slice(&sealed);
        format!("{PREFIX}.{key_id}.{}", URL_SAFE_NO_PAD.encode(body))
    }

    /// The state `text` carries, if it was sealed for `binding` and has not expired (whether it
    /// was used before is the store's to say: [`Opened::key`]).
    pub(crate) fn open(&self, text: &str, binding: &Binding<'_>, now: Timestamp) -> Result<Opened, Refused> {
        let mut parts = text.splitn(3, '.');
        let (Some(PREFIX), Some(key_id), Some(body)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(Refused::Malformed);
        };
        let body = URL_SAFE_NO_PAD.decode(body).map_err(|_| Refused::Malformed)?;
        if body.len() < 12 + 16 {
            return Err(Refused::Malformed);
        }
        let cipher = self.keys.cipher(key_id).ok_or(Refused::UnknownKey)?;
        let (nonce, sealed) = body.split_at(12);
        let nonce = Nonce::try_from(nonce).map_err(|_| Refused::Malformed)?;
        let plain = cipher
            .decrypt(&nonce, Payload { msg: sealed, aad: &aad(key_id) })
            .map_err(|_| Refused::Tampered)?;
        let inner: Value = serde_json::from_slice(&plain).map_err(|_| Refused::Malformed)?;
        let expires = Timestamp::from_millis(inner["exp"].as_u64().ok_or(Refused::Malformed)?);
        if expires <= now {
            return Err(Refused::Expired);
        }
        if inner["p"].as_str() != binding.principal {
            return Err(Refused::OtherPrincipal);
        }
        if inner["m"].as_str() != Some(binding.method) || inner["n"].as_str() != binding.name {
            return Err(Refused::OtherRequest);
        }
        let id = inner["id"].as_str().and_then(|s| URL_SAFE_NO_PAD.decode(s).ok());
        let id: [u8; 16] = id.and_then(|v| v.try_into().ok()).ok_or(Refused::Malformed)?;
        let issued = Timestamp::from_millis(inner["iat"].as_u64().ok_or(Refused::Malformed)?);
        let answers = inner["a"].as_object().cloned().unwrap_or_default();
        Ok(Opened { state: inner["s"].clone(), answers, key: SpendKey(id), issued, until: expires })
    }
}

fn aad(key_id: &str) -> Vec<u8> {
    [CONTEXT, b".", key_id.as_bytes()].concat()
}

/// How `requestState` is sealed. A field of [`crate::ServerConfig`].
#[derive(Clone, Debug)]
pub struct RequestStateConfig {
    /// The key ring. Default: one key from the OS CSPRNG ([`RequestStateKeys::generate`]),
    /// which only this process holds; nodes behind one load balancer need one ring they all
    /// read ([`RequestStateKeys::parse`]).
    pub keys: RequestStateKeys,
    /// How long a sealed state may be answered. Default 10 minutes.
    pub ttl: Duration,
}

impl Default for RequestStateConfig {
    fn default() -> Self {
        Self { keys: RequestStateKeys::generate(), ttl: Duration::from_secs(600) }
    }
}

#[cfg(test)]
mod tests;
