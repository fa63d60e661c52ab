//! Which servers the client's TLS trusts: one rule for every outgoing connection forkless
//! makes with `reqwest` (this client, `forkless check` and `chaos`).
//!
//! The system's roots (the platform verifier), plus the certificates of the file named by
//! `SSL_CERT_FILE` (the variable OpenSSL, curl and Python read), plus those of a CA file
//! named for this connection (`--ca-file`). Verification is never turned off. It owns the rule,
//! not the HTTP client it configures.

use std::path::Path;

use crate::Error;

/// Certificates read from a PEM file: its name in the error when it cannot be read or holds
/// none.
fn certificates(path: &Path) -> Result<Vec<reqwest::Certificate>, Error> {
    let pem = std::fs::read(path).map_err(|e| Error::Tls(format!("{}: {e}", path.display())))?;
    let certs = reqwest::Certificate::from_pem_bundle(&pem)
        .map_err(|e| Error::Tls(format!("{}: not a PEM certificate bundle: {e}", path.display())))?;
    if certs.is_empty() {
        return Err(Error::Tls(format!("{}: holds no PEM certificate", path.display())));
    }
    Ok(certs)
}

/// `builder` trusting the system's roots, `SSL_CERT_FILE`'s and `ca_file`'s certificates.
pub fn trusting(
    builder: reqwest::ClientBuilder,
    ca_file: Option<&Path>,
) -> Result<reqwest::ClientBuilder, Error> {
    let mut extra = Vec::new();
    if let Some(env) = std::env::var_os("SSL_CERT_FILE").filter(|v| !v.is_empty()) {
        extra.extend(certificates(Path::new(&env))?);
    }
    if let Some(path) = ca_file {
        extra.extend(certificates(path)?);
    }
    Ok(if extra.is_empty() { builder } else { builder.tls_certs_merge(extra) })
}
