//! HTTPS for the test webs: a certificate authority made for the test
//! run, and a server certificate it signs for the web's host names, as the
//! open web's sites have theirs from a public one. The crawler trusts the
//! test CA with `--ca-file` (what an intranet crawl with a private CA does),
//! so nothing of the machine's trust store changes.
//!
//! The server offers HTTP/2 and HTTP/1.1 by ALPN, or HTTP/1.1 alone
//! ([`Offer`]), and keeps sessions for resumption (rustls's defaults).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// What the HTTPS server offers by ALPN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Offer {
    /// `h2` first, then `http/1.1`: the crawler's client takes HTTP/2.
    Http2,
    /// `http/1.1` only.
    Http1,
}

/// A test CA and one server certificate it signed.
pub struct TestCa {
    /// The CA's certificate, PEM: what `--ca-file` names.
    pub ca_pem: String,
    server_chain: Vec<CertificateDer<'static>>,
    server_key: Vec<u8>,
}

impl TestCa {
    /// A new CA, and a certificate for `names` (DNS names; `*.suffix`
    /// allowed) signed by it.
    pub fn new(names: &[String]) -> anyhow::Result<TestCa> {
        let mut ca = CertificateParams::new(Vec::<String>::new())?;
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name.push(DnType::CommonName, "crawl-tests CA");
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate()?)?;
        let mut server = CertificateParams::new(names.to_vec())?;
        server
            .distinguished_name
            .push(DnType::CommonName, "crawl-tests web");
        let key = KeyPair::generate()?;
        let cert = server.signed_by(&key, &ca)?;
        Ok(TestCa {
            ca_pem: ca.pem(),
            server_chain: vec![cert.der().clone()],
            server_key: key.serialize_der(),
        })
    }

    /// Writes the CA's certificate to `dir/test-ca.pem`, for `--ca-file`.
    pub fn write_ca(&self, dir: &Path) -> anyhow::Result<PathBuf> {
        let path = dir.join("test-ca.pem");
        std::fs::write(&path, &self.ca_pem).with_context(|| format!("writing {}", path.display()))?;
        Ok(path)
    }

    /// The server side: the certificate, what ALPN offers, *ring* crypto.
    pub fn server_config(&self, offer: Offer) -> anyhow::Result<Arc<rustls::ServerConfig>> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.server_key.clone()));
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(self.server_chain.clone(), key)?;
        config.alpn_protocols = match offer {
            Offer::Http2 => vec![b"h2".to_vec(), b"http/1.1".to_vec()],
            Offer::Http1 => vec![b"http/1.1".to_vec()],
        };
        Ok(Arc::new(config))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::client::danger::ServerCertVerifier;

    #[test]
    fn the_server_certificate_chains_to_the_test_ca() {
        let ca = TestCa::new(&["site0.test".into(), "*.lab.test".into()]).unwrap();
        assert!(ca.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls_pemfile_certs(&ca.ca_pem) {
            roots.add(cert).unwrap();
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .unwrap();
        let now = rustls::pki_types::UnixTime::now();
        for name in ["site0.test", "a.lab.test"] {
            let name = rustls::pki_types::ServerName::try_from(name).unwrap();
            verifier
                .verify_server_cert(&ca.server_chain[0], &[], &name, &[], now)
                .unwrap_or_else(|e| panic!("{name:?}: {e}"));
        }
        let other = rustls::pki_types::ServerName::try_from("elsewhere.test").unwrap();
        assert!(verifier
            .verify_server_cert(&ca.server_chain[0], &[], &other, &[], now)
            .is_err());
        assert!(ca.server_config(Offer::Http2).is_ok());
    }

    /// The DER certificates of a PEM text.
    fn rustls_pemfile_certs(pem: &str) -> Vec<CertificateDer<'static>> {
        use rustls::pki_types::pem::PemObject;
        CertificateDer::pem_slice_iter(pem.as_bytes())
            .map(|c| c.unwrap())
            .collect()
    }
}
