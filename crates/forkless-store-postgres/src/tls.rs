//! TLS to PostgreSQL, as libpq's `sslmode` means it, with rustls.
//!
//! This module owns reading the TLS parameters out of the connection URL (`sslmode`,
//! `sslrootcert`, `sslcert`, `sslkey`; tokio-postgres does not know the last three nor the
//! verifying modes) and the connector that makes each connection's handshake. Connecting and
//! pooling are the crate root's.
//!
//! | `sslmode` | TLS | the server's certificate |
//! |---|---|---|
//! | `disable` | never | - |
//! | `prefer` (the default, as in libpq) | if the server offers it | not verified (logged) |
//! | `require` | always | not verified (logged), unless `sslrootcert` is given: then as `verify-ca` |
//! | `verify-ca` | always | chains to a trusted root |
//! | `verify-full` | always | chains to a trusted root and names the host |
//!
//! Trusted roots: [`forkless_tls`]'s rule, the system's (or the file `SSL_CERT_FILE` names)
//! plus `sslrootcert`.

use std::path::PathBuf;
use std::sync::Arc;

mod connector;
pub use connector::{Connector, MakeTls, TlsStream};

use forkless_store::Error;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, SignatureScheme};

/// libpq's `sslmode`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SslMode {
    /// No TLS.
    Disable,
    /// TLS if the server offers it, unverified.
    #[default]
    Prefer,
    /// TLS, unverified.
    Require,
    /// TLS, the certificate chaining to a trusted root.
    VerifyCa,
    /// TLS, the certificate chaining to a trusted root and naming the host.
    VerifyFull,
}

/// The TLS parameters of a connection URL.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsParams {
    /// `sslmode`.
    pub mode: SslMode,
    /// `sslrootcert`: more trusted roots (PEM); `system` adds none.
    pub root_cert: Option<PathBuf>,
    /// `sslcert` and `sslkey`: a client certificate and its key (PEM).
    pub client: Option<(PathBuf, PathBuf)>,
}

fn bad(what: String) -> Error {
    Error::Backend(format!("postgres TLS: {what}"))
}

/// Take the TLS parameters out of `url` (a `postgres://` URL); the rest, with `sslmode`
/// put as tokio-postgres knows it, is returned for tokio-postgres.
pub fn split_url(url: &str) -> Result<(String, TlsParams), Error> {
    let Some((base, query)) = url.split_once('?') else { return Ok((url.to_owned(), TlsParams::default())) };
    let mut params = TlsParams::default();
    let (mut cert, mut key) = (None, None);
    let mut kept = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        match name {
            "sslmode" => {
                params.mode = match value {
                    "disable" => SslMode::Disable,
                    "allow" | "prefer" => SslMode::Prefer,
                    "require" => SslMode::Require,
                    "verify-ca" => SslMode::VerifyCa,
                    "verify-full" => SslMode::VerifyFull,
                    other => {
                        return Err(bad(format!(
                            "unknown sslmode {other:?} (disable, prefer, require, verify-ca or verify-full)"
                        )));
                    }
                }
            }
            "sslrootcert" if value != "system" => params.root_cert = Some(PathBuf::from(value)),
            "sslrootcert" => {}
            "sslcert" => cert = Some(PathBuf::from(value)),
            "sslkey" => key = Some(PathBuf::from(value)),
            _ => kept.push(pair),
        }
    }
    params.client = match (cert, key) {
        (Some(cert), Some(key)) => Some((cert, key)),
        (None, None) => None,
        _ => return Err(bad("sslcert and sslkey go together".into())),
    };
    if params.mode == SslMode::Require && params.root_cert.is_some() {
        params.mode = SslMode::VerifyCa;
    }
    let mode = match params.mode {
        SslMode::Disable => "disable",
        SslMode::Prefer => "prefer",
        SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => "require",
    };
    kept.push(match mode {
        "disable" => "sslmode=disable",
        "prefer" => "sslmode=prefer",
        _ => "sslmode=require",
    });
    Ok((format!("{base}?{}", kept.join("&")), params))
}

/// The connection string tokio-postgres reads and the connector for it, from a URL with
/// TLS parameters (what the store connects with; for tools and tests that connect
/// themselves).
pub fn connector_for(url: &str) -> Result<(String, MakeTls), Error> {
    let (url, params) = split_url(url)?;
    Ok((url, MakeTls(client_config(&params)?)))
}

/// The rustls settings for `params` (`None` for `sslmode=disable`).
pub(crate) fn client_config(params: &TlsParams) -> Result<Option<Arc<rustls::ClientConfig>>, Error> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let verifier: Arc<dyn ServerCertVerifier> = match params.mode {
        SslMode::Disable => return Ok(None),
        SslMode::Prefer | SslMode::Require => {
            // Once per process: every store (and each test's) connects with it again.
            static SAID: std::sync::Once = std::sync::Once::new();
            SAID.call_once(|| {
                tracing::warn!(
                    "postgres: sslmode={} encrypts without verifying the server's certificate (libpq's meaning); verify-full verifies it",
                    if params.mode == SslMode::Prefer { "prefer (the default)" } else { "require" }
                );
            });
            Arc::new(Unverified(provider.clone()))
        }
        SslMode::VerifyCa | SslMode::VerifyFull => {
            let roots = forkless_tls::roots::store(params.root_cert.as_deref())
                .map_err(|e| bad(format!("sslrootcert {e}")))?;
            let roots = Arc::new(roots);
            let webpki = rustls::client::WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
                .build()
                .map_err(|e| bad(format!("no trusted roots: {e}")))?;
            if params.mode == SslMode::VerifyCa { Arc::new(AnyName(webpki)) } else { webpki }
        }
    };
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| bad(e.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    let config = match &params.client {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => {
            let chain = forkless_tls::pem::certificates(cert).map_err(|e| bad(format!("sslcert {e}")))?;
            let key = forkless_tls::pem::private_key(key).map_err(|e| bad(format!("sslkey {e}")))?;
            builder.with_client_auth_cert(chain, key).map_err(|e| bad(format!("sslcert/sslkey: {e}")))?
        }
    };
    Ok(Some(Arc::new(config)))
}

/// `verify-ca`: the chain is verified, the name is not.
#[derive(Debug)]
struct AnyName(Arc<rustls::client::WebPkiServerVerifier>);

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.0.verify_server_cert(end_entity, intermediates, server_name, ocsp, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// `prefer` and `require`: the handshake's signatures are checked, the certificate is not.
#[derive(Debug)]
struct Unverified(Arc<CryptoProvider>);

impl ServerCertVerifier for Unverified {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_url_keeps_what_tokio_postgres_reads_and_gives_up_what_it_does_not() {
        let (url, p) =
            split_url("postgres://u@h/db?sslmode=verify-full&sslrootcert=/ca.crt&application_name=x")
                .unwrap();
        assert_eq!(url, "postgres://u@h/db?application_name=x&sslmode=require");
        assert_eq!(
            (p.mode, p.root_cert.as_deref()),
            (SslMode::VerifyFull, Some(std::path::Path::new("/ca.crt")))
        );
        let (url, p) = split_url("postgres://u@h/db").unwrap();
        assert_eq!((url.as_str(), p.mode), ("postgres://u@h/db", SslMode::Prefer));
        let (_, p) = split_url("postgres://h/db?sslmode=require&sslrootcert=/ca.crt").unwrap();
        assert_eq!(
            p.mode,
            SslMode::VerifyCa,
            "require with a root certificate verifies the chain, as libpq does"
        );
        let (url, p) = split_url("postgres://h/db?sslmode=disable").unwrap();
        assert_eq!((url.as_str(), p.mode), ("postgres://h/db?sslmode=disable", SslMode::Disable));
        assert!(
            split_url("postgres://h/db?sslmode=verify").unwrap_err().to_string().contains("unknown sslmode")
        );
        assert!(split_url("postgres://h/db?sslcert=/c").unwrap_err().to_string().contains("go together"));
        let (_, p) = split_url("postgres://h/db?sslcert=/c&sslkey=/k&sslrootcert=system").unwrap();
        assert_eq!((p.client.is_some(), p.root_cert), (true, None));
    }
}
