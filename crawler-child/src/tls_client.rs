//! The child's TLS client: what reqwest would build (the platform's
//! verifier with `--ca-file`'s roots added, HTTP/2 and HTTP/1.1 by ALPN),
//! built here to count handshakes (`crate::handshakes`) and to size the
//! session cache for a crawl's many sites.

use std::sync::Arc;

use rustls::client::{ClientSessionMemoryCache, Resumption};
use rustls::pki_types::CertificateDer;

use crate::handshakes::{CountingKeyLog, CountingStore, CountingVerifier, Handshakes};

/// Servers whose session tickets a child keeps for resumption. reqwest's
/// default (rustls's `Resumption::default`, `ClientSessionMemoryCache::new(256)`)
/// keeps 32 servers, 256 over rustls's 8 tickets a server, the oldest first out: too
/// few for a child visiting hundreds of sites a minute, whose connection
/// to a site may close between two pages (a server's keep-alive limit or
/// timeout) and must then be resumed rather than begun again. Bounded, so
/// a child's memory stays flat in the number of sites (a few KB a server:
/// its tickets and certificate chain).
const SESSION_SERVERS: usize = 2048;
/// rustls keeps up to this many TLS 1.3 tickets per server.
const TICKETS_PER_SERVER: usize = 8;

/// The client configuration for reqwest's `tls_backend_preconfigured`,
/// counting into `counts`.
pub(crate) fn config(
    extra_roots: Vec<CertificateDer<'static>>,
    counts: Arc<Handshakes>,
) -> anyhow::Result<rustls::ClientConfig> {
    // Installed by `shared::http_client::builder`; installed here too so
    // the order of calls does not matter.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let provider = rustls::crypto::CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(rustls::crypto::ring::default_provider()));
    let verifier = if extra_roots.is_empty() {
        rustls_platform_verifier::Verifier::new(provider.clone())?
    } else {
        rustls_platform_verifier::Verifier::new_with_extra_roots(extra_roots, provider.clone())?
    };
    let verifier = Arc::new(CountingVerifier {
        inner: Arc::new(verifier),
        counts: counts.clone(),
    });
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    let store = CountingStore {
        inner: Arc::new(ClientSessionMemoryCache::new(
            SESSION_SERVERS * TICKETS_PER_SERVER,
        )),
        counts: counts.clone(),
    };
    config.resumption = Resumption::store(Arc::new(store));
    config.key_log = Arc::new(CountingKeyLog { counts });
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}
