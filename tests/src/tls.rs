//! HTTPS for the test webs: a certificate authority made for the test
//! run, and a server certificate it signs for the web's host names, as the
//! open web's sites have theirs from a public one. The crawler trusts the
//! test CA with `--ca-file` (what an intranet crawl with a private CA does),
//! so nothing of the machine's trust store changes.
//!
//! The server offers HTTP/2 and HTTP/1.1 by ALPN, or HTTP/1.1 alone
//! ([`Offer`]), and keeps sessions for resumption (rustls's defaults).
//! Names given to [`TestCa::with_untrusted`] get a certificate of another
//! CA, chosen by SNI: a site whose certificate a crawler must refuse.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::Context;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::sign::CertifiedKey;

/// What the HTTPS server offers by ALPN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Offer {
    /// `h2` first, then `http/1.1`: the crawler's client takes HTTP/2.
    Http2,
    /// `http/1.1` only.
    Http1,
}

/// A test CA and one server certificate it signed; a name that
/// certificate does not cover gets its own, made when a client first asks
/// for it (by SNI) and kept: a web of 10^5 names needs no certificate
/// naming them all.
pub struct TestCa {
    /// The CA's certificate, PEM: what `--ca-file` names.
    pub ca_pem: String,
    issuer: Arc<CertifiedIssuer<'static, KeyPair>>,
    /// The names the first certificate covers.
    names: Vec<String>,
    server_chain: Vec<CertificateDer<'static>>,
    server_key: Vec<u8>,
    /// Names served with a certificate of another CA, and that certificate.
    untrusted: Option<(Vec<String>, Box<TestCa>)>,
}

impl TestCa {
    /// A new CA, and a certificate for `names` (DNS names; `*.suffix`
    /// allowed) signed by it.
    pub fn new(names: &[String]) -> anyhow::Result<TestCa> {
        Self::named("crawl-tests CA", names)
    }

    /// [`TestCa::new`] with the CA named `ca_name`.
    fn named(ca_name: &str, names: &[String]) -> anyhow::Result<TestCa> {
        let mut ca = CertificateParams::new(Vec::<String>::new())?;
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name.push(DnType::CommonName, ca_name);
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca = Arc::new(CertifiedIssuer::self_signed(ca, KeyPair::generate()?)?);
        let (server_chain, server_key) = sign(&ca, names)?;
        Ok(TestCa {
            ca_pem: ca.pem(),
            issuer: ca,
            names: names.iter().map(|n| n.to_ascii_lowercase()).collect(),
            server_chain,
            server_key,
            untrusted: None,
        })
    }

    /// The same, with `names` served a certificate for them signed by
    /// another CA (one the crawler is not told of: `unknown_issuer`).
    pub fn with_untrusted(mut self, names: &[String]) -> anyhow::Result<TestCa> {
        if !names.is_empty() {
            // Named otherwise: a CA of the same name would be taken for the
            // trusted one, and its signature found bad (`bad_certificate`).
            self.untrusted = Some((names.to_vec(), Box::new(TestCa::named("another CA", names)?)));
        }
        Ok(self)
    }

    fn certified_key(&self, provider: &rustls::crypto::CryptoProvider) -> anyhow::Result<Arc<CertifiedKey>> {
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.server_key.clone()));
        let key = provider.key_provider.load_private_key(key)?;
        Ok(Arc::new(CertifiedKey::new(self.server_chain.clone(), key)))
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
        let resolver = BySni {
            usual: self.certified_key(&provider)?,
            covered: self.names.iter().cloned().collect(),
            issuer: self.issuer.clone(),
            provider: provider.clone(),
            made: Mutex::default(),
            untrusted: match &self.untrusted {
                Some((names, other)) => Some((names.clone(), other.certified_key(&provider)?)),
                None => None,
            },
        };
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(resolver));
        config.alpn_protocols = match offer {
            Offer::Http2 => vec![b"h2".to_vec(), b"http/1.1".to_vec()],
            Offer::Http1 => vec![b"http/1.1".to_vec()],
        };
        Ok(Arc::new(config))
    }
}

/// A certificate for `names` signed by `ca`: (chain, PKCS#8 key).
fn sign(
    ca: &CertifiedIssuer<'static, KeyPair>,
    names: &[String],
) -> anyhow::Result<(Vec<CertificateDer<'static>>, Vec<u8>)> {
    let mut server = CertificateParams::new(names.to_vec())?;
    server
        .distinguished_name
        .push(DnType::CommonName, "crawl-tests web");
    let key = KeyPair::generate()?;
    let cert = server.signed_by(&key, ca)?;
    Ok((vec![cert.der().clone()], key.serialize_der()))
}

/// The server's certificate by the name the client asked for (SNI): the
/// untrusted names' of another CA, the first certificate for the names it
/// covers (and without SNI), else one made for the name and kept.
struct BySni {
    usual: Arc<CertifiedKey>,
    covered: HashSet<String>,
    issuer: Arc<CertifiedIssuer<'static, KeyPair>>,
    provider: Arc<rustls::crypto::CryptoProvider>,
    made: Mutex<HashMap<String, Arc<CertifiedKey>>>,
    untrusted: Option<(Vec<String>, Arc<CertifiedKey>)>,
}

impl std::fmt::Debug for BySni {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BySni")
            .field("covered", &self.covered.len())
            .finish()
    }
}

impl BySni {
    fn made_for(&self, name: &str) -> Option<Arc<CertifiedKey>> {
        let mut made = self.made.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(key) = made.get(name) {
            return Some(key.clone());
        }
        let (chain, key) = sign(&self.issuer, &[name.to_string()]).ok()?;
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key));
        let key = self.provider.key_provider.load_private_key(key).ok()?;
        let certified = Arc::new(CertifiedKey::new(chain, key));
        made.insert(name.to_string(), certified.clone());
        Some(certified)
    }
}

impl rustls::server::ResolvesServerCert for BySni {
    fn resolve(&self, hello: rustls::server::ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let Some(name) = hello.server_name().map(str::to_ascii_lowercase) else {
            return Some(self.usual.clone());
        };
        if let Some((names, key)) = &self.untrusted {
            if names.iter().any(|n| n.eq_ignore_ascii_case(&name)) {
                return Some(key.clone());
            }
        }
        if self.covered.contains(&name) {
            return Some(self.usual.clone());
        }
        self.made_for(&name)
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
