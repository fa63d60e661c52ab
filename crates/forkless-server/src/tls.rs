//! The endpoint's own TLS: the certificate and key it serves, read from PEM files and read
//! again when they change, and the rustls configuration that offers HTTP/2 and HTTP/1.1.
//!
//! This module owns the server's identity ([`TlsIdentity`]) and the handshake's settings
//! ([`acceptor`]); serving a connection once the handshake is done is the listener's
//! ([`crate::listener`]), the same on either protocol.
//!
//! A certificate replaced on disk (a renewal by certbot or cert-manager writes both files)
//! is served to the next handshake after it: each handshake looks at the files' modification
//! times, at most once a second, and a pair that loads and matches replaces the one served;
//! one that does not is logged and the old pair stays. [`TlsIdentity::reload`] does the same
//! at once (the CLI calls it on SIGHUP). Connections already open keep the certificate they
//! were handshaken with.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime};

use rustls::crypto::CryptoProvider;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::config::ConfigError;

/// How often a handshake looks at the files at most.
const LOOK_EVERY: Duration = Duration::from_secs(1);

/// The certificate chain and key the endpoint serves, from two PEM files.
#[derive(Debug)]
pub struct TlsIdentity {
    cert: PathBuf,
    key: PathBuf,
    provider: Arc<CryptoProvider>,
    served: RwLock<Arc<CertifiedKey>>,
    looked: Mutex<Looked>,
}

/// When the files were last looked at, and what they were then.
#[derive(Debug)]
struct Looked {
    at: Instant,
    stamp: Stamp,
}

/// The files' modification times and lengths: a change to either is a new pair.
type Stamp = [Option<(SystemTime, u64)>; 2];

fn stamp(cert: &Path, key: &Path) -> Stamp {
    let of = |p: &Path| std::fs::metadata(p).ok().and_then(|m| Some((m.modified().ok()?, m.len())));
    [of(cert), of(key)]
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

impl TlsIdentity {
    /// Read the chain (`cert`: PEM, the leaf first) and its private key (`key`: PEM, PKCS#8,
    /// PKCS#1 RSA or SEC1 EC), checking that they belong together.
    pub fn load(cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Result<Self, ConfigError> {
        let (cert, key) = (cert.into(), key.into());
        let provider = provider();
        let stamp = stamp(&cert, &key);
        let served = read_pair(&cert, &key, &provider)?;
        Ok(Self {
            looked: Mutex::new(Looked { at: Instant::now(), stamp }),
            served: RwLock::new(Arc::new(served)),
            cert,
            key,
            provider,
        })
    }

    /// Read the files again now; on success the next handshake serves the new pair, on
    /// failure the current pair stays and the error says why.
    pub fn reload(&self) -> Result<(), ConfigError> {
        let stamp = stamp(&self.cert, &self.key);
        let fresh = read_pair(&self.cert, &self.key, &self.provider);
        let mut looked = self.looked.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        *looked = Looked { at: Instant::now(), stamp };
        let fresh = fresh?;
        *self.served.write().unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(fresh);
        tracing::info!(cert = %self.cert.display(), "TLS certificate loaded");
        Ok(())
    }

    /// Reload if the files changed since they were last looked at (at most once a second).
    fn refresh(&self) {
        let changed = {
            let mut looked = self.looked.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if looked.at.elapsed() < LOOK_EVERY {
                return;
            }
            looked.at = Instant::now();
            let now = stamp(&self.cert, &self.key);
            let changed = now != looked.stamp;
            if changed {
                looked.stamp = now;
            }
            changed
        };
        if changed && let Err(e) = self.reload() {
            tracing::warn!(error = %e, "TLS files changed but do not load; still serving the previous certificate");
        }
    }

    fn current(&self) -> Arc<CertifiedKey> {
        self.served.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }
}

impl ResolvesServerCert for TlsIdentity {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.refresh();
        Some(self.current())
    }
}

fn read_pair(cert: &Path, key: &Path, provider: &CryptoProvider) -> Result<CertifiedKey, ConfigError> {
    let file_err = |path: &Path, why: String| ConfigError::TlsFile { path: path.to_owned(), why };
    let chain = CertificateDer::pem_file_iter(cert)
        .map_err(|e| file_err(cert, e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| file_err(cert, e.to_string()))?;
    if chain.is_empty() {
        return Err(file_err(cert, "holds no PEM certificate".into()));
    }
    let der = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| file_err(key, format!("holds no usable private key: {e}")))?;
    let signing = provider
        .key_provider
        .load_private_key(der)
        .map_err(|e| file_err(key, format!("holds a private key rustls cannot use: {e}")))?;
    if let Some((not_before, not_after)) = crate::x509::validity(&chain[0]) {
        let now = SystemTime::now();
        if now > not_after || now < not_before {
            return Err(ConfigError::TlsNotValidNow { path: cert.to_owned(), not_before, not_after });
        }
    }
    let pair = CertifiedKey::new(chain, signing);
    pair.keys_match()
        .map_err(|_| ConfigError::TlsKeyMismatch { cert: cert.to_owned(), key: key.to_owned() })?;
    Ok(pair)
}

/// The handshake's settings: `identity` served, HTTP/2 then HTTP/1.1 offered by ALPN.
pub(crate) fn acceptor(identity: Arc<TlsIdentity>) -> Result<tokio_rustls::TlsAcceptor, ConfigError> {
    let mut config = rustls::ServerConfig::builder_with_provider(identity.provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| ConfigError::TlsFile { path: identity.cert.clone(), why: e.to_string() })?
        .with_no_client_auth()
        .with_cert_resolver(identity);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_pair(dir: &Path) -> (PathBuf, PathBuf, Vec<u8>) {
        let made = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
        let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
        std::fs::write(&cert, made.cert.pem()).unwrap();
        std::fs::write(&key, made.signing_key.serialize_pem()).unwrap();
        (cert, key, made.cert.der().to_vec())
    }

    fn served(identity: &TlsIdentity) -> Vec<u8> {
        identity.current().cert[0].to_vec()
    }

    /// As a handshake a second after the last look would.
    fn look_now(identity: &TlsIdentity) {
        identity.looked.lock().unwrap().at = Instant::now() - LOOK_EVERY;
        identity.refresh();
    }

    #[test]
    fn files_changed_on_disk_are_served_once_they_load_and_not_before() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key, first) = write_pair(dir.path());
        let identity = TlsIdentity::load(&cert, &key).unwrap();
        assert_eq!(served(&identity), first);
        // Half-written (the certificate replaced, the key not yet): the old pair stays.
        let made = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
        std::fs::write(&cert, made.cert.pem()).unwrap();
        look_now(&identity);
        assert_eq!(served(&identity), first, "a mismatched pair is not served");
        // Within the second, nothing is looked at.
        std::fs::write(&key, made.signing_key.serialize_pem()).unwrap();
        identity.refresh();
        assert_eq!(served(&identity), first);
        look_now(&identity);
        assert_eq!(served(&identity), made.cert.der().to_vec(), "the complete new pair is served");
    }
}
