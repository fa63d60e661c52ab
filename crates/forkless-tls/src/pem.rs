//! Certificates and keys from PEM files, with the file's name in every error.
//!
//! It owns reading; which certificates are trusted is [`crate::roots`]'s.

use std::path::Path;

use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::Error;

/// Every certificate in `path` (a chain, or a bundle of roots); an error if it holds none.
pub fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, Error> {
    let bytes = std::fs::read(path).map_err(|source| Error::Read { path: path.to_owned(), source })?;
    let certs = CertificateDer::pem_slice_iter(&bytes).collect::<Result<Vec<_>, _>>().map_err(|e| {
        Error::Certificates { path: path.to_owned(), what: format!("not PEM certificates: {e}") }
    })?;
    if certs.is_empty() {
        return Err(Error::Certificates { path: path.to_owned(), what: "holds no PEM certificate".into() });
    }
    Ok(certs)
}

/// The private key in `path`.
pub fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, Error> {
    let bytes = std::fs::read(path).map_err(|source| Error::Read { path: path.to_owned(), source })?;
    PrivateKeyDer::from_pem_slice(&bytes)
        .map_err(|e| Error::Key { path: path.to_owned(), what: e.to_string() })
}

/// `certs` as PEM text (for libraries that take trust anchors as PEM bytes only).
pub fn encode(certs: &[CertificateDer<'_>]) -> Vec<u8> {
    use base64::Engine as _;
    let mut out = String::new();
    for cert in certs {
        out.push_str("-----BEGIN CERTIFICATE-----\n");
        let b64 = base64::engine::general_purpose::STANDARD.encode(cert.as_ref());
        for line in b64.as_bytes().chunks(64) {
            out.push_str(std::str::from_utf8(line).unwrap_or_default());
            out.push('\n');
        }
        out.push_str("-----END CERTIFICATE-----\n");
    }
    out.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bundle_reads_back_as_the_certificates_it_was_made_of() {
        let dir = tempfile::tempdir().unwrap();
        let ca = crate::testing::TestCa::new(dir.path());
        let (cert, _) = ca.server(&["localhost"], "one");
        let mut certs = certificates(&ca.ca_file).unwrap();
        certs.extend(certificates(&cert).unwrap());
        let bundle = dir.path().join("bundle.pem");
        std::fs::write(&bundle, encode(&certs)).unwrap();
        assert_eq!(certificates(&bundle).unwrap(), certs);
    }

    #[test]
    fn every_error_names_its_file_and_what_is_wrong() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.pem");
        assert!(certificates(&missing).unwrap_err().to_string().contains("missing.pem"));
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "no pem here\n").unwrap();
        let err = certificates(&empty).unwrap_err().to_string();
        assert!(err.contains("empty.pem") && err.contains("no PEM certificate"), "{err}");
        let err = private_key(&empty).unwrap_err().to_string();
        assert!(err.contains("empty.pem") && err.contains("no usable private key"), "{err}");
        let ca = crate::testing::TestCa::new(dir.path());
        let (_, key) = ca.server(&["localhost"], "k");
        private_key(&key).expect("a key the test CA made");
    }
}
