//! TLS to Redis and Redis Cluster (`rediss://`), with rustls: which roots are trusted, a
//! client certificate, and the one explicit way not to verify.
//!
//! It owns turning a URL and [`RedisTls`] into a client; what is sent over it is the rest of
//! the crate's. Trusted roots: [`forkless_tls`]'s rule, the system's (or the file
//! `SSL_CERT_FILE` names) plus the CA file, if any (Redis deployments usually run a private
//! CA; it adds to the system's roots, as everywhere in forkless).

use std::path::{Path, PathBuf};

use forkless_store::Error;

/// TLS settings for a `rediss://` URL.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RedisTls {
    /// Also trust this CA (PEM) for the server's certificate, beside the system's roots.
    pub ca_file: Option<PathBuf>,
    /// A client certificate and its key (PEM), for a Redis that asks for one
    /// (`tls-auth-clients yes`).
    pub client: Option<(PathBuf, PathBuf)>,
    /// How much of the server's certificate is verified (default: all of it).
    pub verify: Verify,
}

/// How much of the server's certificate is verified.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Verify {
    /// The chain and the host name.
    #[default]
    Full,
    /// **Explicitly chosen, and logged at every connect:** nothing is verified (redis's
    /// `#insecure`): the connection is encrypted, but anyone on the path can pose as the
    /// server. For a test deployment's self-signed certificate, never for production.
    Off,
}

fn read(path: &Path) -> Result<Vec<u8>, Error> {
    std::fs::read(path).map_err(|e| Error::Backend(format!("redis TLS: {}: {e}", path.display())))
}

/// A URL as redis reads it, with its certificates: worked out once per store, for the
/// client and, on a cluster, the cluster client.
pub(crate) struct Prepared {
    url: String,
    certs: Option<redis::TlsCertificates>,
}

/// `url` and `tls` as redis takes them (the certificate files read, the choice not to verify
/// logged).
pub(crate) fn prepare(url: &str, tls: &RedisTls) -> Result<Prepared, Error> {
    if !url.starts_with("rediss://") {
        if *tls != RedisTls::default() {
            return Err(Error::Backend(format!(
                "redis TLS settings given for {url}, which is not a rediss:// URL"
            )));
        }
        return Ok(Prepared { url: url.to_owned(), certs: None });
    }
    // redis builds its rustls settings with the process's default provider, which cannot be
    // chosen by itself when more than one is compiled in: the one forkless uses everywhere.
    // (Already installed, by this or by the application: kept.)
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let url = match tls.verify {
        Verify::Full => url.to_owned(),
        Verify::Off => {
            tracing::warn!("redis: the server's certificate is not verified, as asked (--redis-insecure)");
            format!("{url}#insecure")
        }
    };
    let client_tls = match &tls.client {
        Some((cert, key)) => {
            // Parsed here too, so a bad file is named now rather than at the first connect.
            let bad = |e: forkless_tls::Error| Error::Backend(format!("redis TLS client certificate: {e}"));
            forkless_tls::pem::certificates(cert).map_err(bad)?;
            forkless_tls::pem::private_key(key).map_err(bad)?;
            Some(redis::ClientTlsConfig { client_cert: read(cert)?, client_key: read(key)? })
        }
        None => None,
    };
    // redis trusts the roots it is given *instead of* the system's: given the rule's whole
    // set, as PEM (the only form it takes). Without a CA file it loads the system's itself.
    let root_cert = match tls.ca_file.as_deref() {
        Some(ca) => {
            let roots = forkless_tls::roots::certificates(Some(ca))
                .map_err(|e| Error::Backend(format!("redis TLS: {e}")))?;
            Some(forkless_tls::pem::encode(&roots))
        }
        None => None,
    };
    Ok(Prepared { url, certs: Some(redis::TlsCertificates { client_tls, root_cert }) })
}

impl Prepared {
    /// A client for one Redis.
    pub(crate) fn client(&self) -> Result<redis::Client, Error> {
        let bad = |e: redis::RedisError| Error::Backend(format!("redis: {}: {e}", self.url));
        match &self.certs {
            None => redis::Client::open(self.url.as_str()).map_err(bad),
            Some(certs) => redis::Client::build_with_tls(self.url.as_str(), certs.clone()).map_err(bad),
        }
    }

    /// A client for the cluster this URL's Redis belongs to.
    pub(crate) fn cluster(&self) -> redis::RedisResult<redis::cluster::ClusterClient> {
        let builder = redis::cluster::ClusterClientBuilder::new(vec![self.url.as_str()]);
        match &self.certs {
            Some(certs) => builder.certs(certs.clone()).build(),
            None => builder.build(),
        }
    }
}
