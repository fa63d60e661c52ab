//! Which servers forkless trusts over TLS: one rule for every outgoing connection it makes
//! (PostgreSQL, Redis, the JWKS fetch, the MCP client, `forkless check` and `chaos`).
//!
//! **The rule:** the system's roots, as OpenSSL, curl and Python find them (the platform's
//! bundle, or the files `SSL_CERT_FILE` and `SSL_CERT_DIR` name when they are set), plus the
//! CA file named for that connection (`sslrootcert`, `--redis-ca`, `--ca-file`,
//! `--auth-jwks-ca`). A connection's own CA file adds to the system's roots; it never
//! replaces them. Verification is never turned off silently: the connections that can turn
//! it off (libpq's `sslmode=prefer|require`, `--redis-insecure`) say so in the log.
//!
//! This crate owns the rule and reading PEM files ([`pem`]); what a connection does with its
//! settings (libpq's `sslmode`, `rediss://`, ALPN) is its own crate's. The server side of TLS
//! (the endpoint's certificate) is `forkless-server`'s.

pub mod pem;
pub mod roots;

#[cfg(feature = "reqwest")]
pub mod http;

#[cfg(feature = "testing")]
pub mod testing;

use std::path::PathBuf;

/// What went wrong reading trust material; every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file holds no PEM certificate, or one that cannot be parsed.
    #[error("{path}: {what}")]
    Certificates {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        what: String,
    },
    /// The file holds no private key this process can use.
    #[error("{path}: no usable private key (PEM: PKCS#8, PKCS#1 RSA or SEC1 EC): {what}")]
    Key {
        /// The file.
        path: PathBuf,
        /// What the parser said.
        what: String,
    },
}
