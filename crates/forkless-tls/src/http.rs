//! The rule applied to a `reqwest` client (the MCP client, `check`, `chaos`, the JWKS fetch).
//!
//! reqwest's platform verifier already trusts the system's roots (on Linux: or
//! `SSL_CERT_FILE`'s); the certificates of `SSL_CERT_FILE` are added again so that the rule
//! holds where the platform's store ignores the variable (macOS, Windows), and the
//! connection's CA file is added to them.

use std::path::Path;

use crate::Error;

fn reqwest_certificates(path: &Path) -> Result<Vec<reqwest::Certificate>, Error> {
    crate::pem::certificates(path)?
        .iter()
        .map(|der| {
            reqwest::Certificate::from_der(der.as_ref())
                .map_err(|e| Error::Certificates { path: path.to_owned(), what: e.to_string() })
        })
        .collect()
}

/// `builder` trusting the system's roots, `SSL_CERT_FILE`'s and `ca_file`'s certificates.
pub fn trusting(
    builder: reqwest::ClientBuilder,
    ca_file: Option<&Path>,
) -> Result<reqwest::ClientBuilder, Error> {
    let mut extra = Vec::new();
    if let Some(env) = std::env::var_os("SSL_CERT_FILE").filter(|v| !v.is_empty()) {
        extra.extend(reqwest_certificates(Path::new(&env))?);
    }
    if let Some(path) = ca_file {
        extra.extend(reqwest_certificates(path)?);
    }
    Ok(if extra.is_empty() { builder } else { builder.tls_certs_merge(extra) })
}
