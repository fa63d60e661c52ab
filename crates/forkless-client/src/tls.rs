//! Which servers the client's TLS trusts: [`forkless_tls`]'s one rule (the system's roots, or
//! `SSL_CERT_FILE`'s, plus the connection's CA file), applied to the `reqwest` client this
//! crate, `forkless check` and `chaos` use. Verification is never turned off.

use std::path::Path;

use crate::Error;

/// `builder` trusting the system's roots, `SSL_CERT_FILE`'s and `ca_file`'s certificates.
pub fn trusting(
    builder: reqwest::ClientBuilder,
    ca_file: Option<&Path>,
) -> Result<reqwest::ClientBuilder, Error> {
    forkless_tls::http::trusting(builder, ca_file).map_err(|e| Error::Tls(e.to_string()))
}
