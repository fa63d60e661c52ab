//! For tests (feature `testing`): a certificate authority of a test's own, and the server and
//! client certificates it signs, written as PEM files a server or a client is pointed at.
//!
//! Every certificate is made fresh (rcgen, new keys each time), so nothing secret is checked
//! in. It owns making certificates; starting servers with them is each test's.

use std::path::{Path, PathBuf};

/// A CA whose certificate is `ca_file`, signing certificates into its directory.
pub struct TestCa {
    /// The CA's certificate (PEM): what a client or a server is told to trust.
    pub ca_file: PathBuf,
    dir: PathBuf,
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
}

impl std::fmt::Debug for TestCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestCa").field("ca_file", &self.ca_file).finish_non_exhaustive()
    }
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

impl TestCa {
    /// A new CA, its certificate written to `dir/ca.crt`.
    pub fn new(dir: &Path) -> Self {
        Self::named(dir, "ca")
    }

    /// A new CA, its certificate written to `dir/{stem}.crt` (two CAs in one directory are
    /// two stems).
    pub fn named(dir: &Path, stem: &str) -> Self {
        let key = rcgen::KeyPair::generate().expect("a CA key");
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.distinguished_name.push(rcgen::DnType::CommonName, format!("forkless test CA {stem}"));
        let cert = params.self_signed(&key).expect("a self-signed CA certificate");
        let ca_file = dir.join(format!("{stem}.crt"));
        write(&ca_file, &cert.pem());
        Self { ca_file, dir: dir.to_owned(), issuer: rcgen::Issuer::new(params, key) }
    }

    /// A server certificate for `names` (host names or IP addresses), written to
    /// `{stem}.crt` and `{stem}.key` beside the CA's; their paths. It may serve as a client
    /// certificate too (a Redis Cluster's nodes present theirs to each other).
    pub fn server(&self, names: &[&str], stem: &str) -> (PathBuf, PathBuf) {
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let mut params = rcgen::CertificateParams::new(names).expect("server names");
        params.extended_key_usages =
            vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth, rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        self.sign(params, stem)
    }

    /// A client certificate whose subject's common name is `common_name` (PostgreSQL's
    /// `cert` authentication compares it with the user name), written as [`Self::server`]'s.
    pub fn client(&self, common_name: &str, stem: &str) -> (PathBuf, PathBuf) {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("client parameters");
        params.distinguished_name.push(rcgen::DnType::CommonName, common_name);
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        self.sign(params, stem)
    }

    fn sign(&self, params: rcgen::CertificateParams, stem: &str) -> (PathBuf, PathBuf) {
        let key = rcgen::KeyPair::generate().expect("a key");
        let cert = params.signed_by(&key, &self.issuer).expect("a certificate signed by the test CA");
        let (cert_file, key_file) =
            (self.dir.join(format!("{stem}.crt")), self.dir.join(format!("{stem}.key")));
        write(&cert_file, &cert.pem());
        write(&key_file, &key.serialize_pem());
        (cert_file, key_file)
    }
}
