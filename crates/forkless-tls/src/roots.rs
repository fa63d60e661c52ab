//! The trust anchors of an outgoing connection: the system's roots (or `SSL_CERT_FILE`'s and
//! `SSL_CERT_DIR`'s, when set, as OpenSSL reads them) plus the connection's own CA file.
//!
//! It owns which certificates are trusted; how a connection verifies with them (host name or
//! chain only) is the connection's.

use std::path::Path;

use rustls::RootCertStore;
use rustls::pki_types::CertificateDer;

use crate::Error;

/// The system's roots, read once per call (a few hundred kilobytes on most systems): the
/// certificates that do not parse are left out, as every TLS client does.
fn system() -> Vec<CertificateDer<'static>> {
    rustls_native_certs::load_native_certs().certs
}

/// The rule's certificates for a connection whose own CA file is `extra`.
pub fn certificates(extra: Option<&Path>) -> Result<Vec<CertificateDer<'static>>, Error> {
    let mut certs = system();
    if let Some(path) = extra {
        certs.extend(crate::pem::certificates(path)?);
    }
    Ok(certs)
}

/// The rule as a rustls root store. A CA file whose certificate rustls cannot use as a trust
/// anchor is an error naming the file; a system root that cannot be used is left out.
pub fn store(extra: Option<&Path>) -> Result<RootCertStore, Error> {
    let mut roots = RootCertStore::empty();
    roots.add_parsable_certificates(system());
    if let Some(path) = extra {
        for cert in crate::pem::certificates(path)? {
            roots.add(cert).map_err(|e| Error::Certificates {
                path: path.to_owned(),
                what: format!("not a usable trust anchor: {e}"),
            })?;
        }
    }
    Ok(roots)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_file_adds_to_the_systems_roots_and_never_replaces_them() {
        let dir = tempfile::tempdir().unwrap();
        let ca = crate::testing::TestCa::new(dir.path());
        let system = system().len();
        let with_ca = certificates(Some(&ca.ca_file)).unwrap();
        assert_eq!(with_ca.len(), system + 1);
        assert_eq!(with_ca.last(), crate::pem::certificates(&ca.ca_file).unwrap().last());
        // The store holds the CA too (system roots rustls cannot parse are left out).
        let plain = store(None).unwrap().len();
        assert_eq!(store(Some(&ca.ca_file)).unwrap().len(), plain + 1);
    }
}
