//! Where every HTTP client of the crawler is built.
//!
//! reqwest is built without a TLS crypto provider of its own: its default,
//! aws-lc-rs, is a second crypto library in C, about 100 CPU seconds of
//! every clean build, beside the *ring* that the MongoDB driver links
//! already. [`builder`] installs rustls's *ring* provider as the process
//! default before it hands out a builder. A client built any other way
//! would panic when built (reqwest finds no provider), so `clippy.toml`
//! forbids `reqwest::Client::builder` and `reqwest::Client::new` outside
//! this file.

/// A reqwest client builder, with the TLS crypto provider installed.
pub fn builder() -> reqwest::ClientBuilder {
    // An error only says a provider is installed already (by an earlier call).
    let _ = rustls::crypto::ring::default_provider().install_default();
    #[allow(clippy::disallowed_methods)]
    reqwest::Client::builder()
}

/// The certificates of a PEM bundle file (`--ca-file`), to trust beside
/// the system's roots (the crawler child's TLS client adds them to its
/// verifier).
pub fn roots_from_pem_file(
    path: &std::path::Path,
) -> anyhow::Result<Vec<rustls::pki_types::CertificateDer<'static>>> {
    use anyhow::Context;
    use rustls::pki_types::pem::PemObject;
    let pem = std::fs::read(path).with_context(|| format!("reading the CA file {}", path.display()))?;
    let certs = rustls::pki_types::CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow::anyhow!("the CA file {} is not PEM certificates: {e}", path.display()))?;
    anyhow::ensure!(
        !certs.is_empty(),
        "the CA file {} holds no certificate (expected PEM: -----BEGIN CERTIFICATE-----)",
        path.display()
    );
    Ok(certs)
}

#[cfg(test)]
mod tests {
    #[test]
    fn clients_build_with_tls_every_time() {
        // Twice: the second install finds the provider there.
        for _ in 0..2 {
            let client = super::builder().https_only(true).build();
            assert!(client.is_ok(), "{:?}", client.err());
        }
        assert!(rustls::crypto::CryptoProvider::get_default().is_some());
    }

    /// An `https` request starts a TLS handshake with the installed
    /// provider: the peer's first bytes are a TLS handshake record (a
    /// ClientHello). The peer then hangs up, so the request fails.
    #[tokio::test]
    async fn https_requests_speak_tls() {
        use tokio::io::AsyncReadExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let peer = tokio::spawn(async move {
            let (mut conn, _) = listener.accept().await.unwrap();
            let mut head = [0u8; 6];
            conn.read_exact(&mut head).await.unwrap();
            head
        });
        let client = super::builder().no_proxy().build().unwrap();
        let request = client
            .get(format!("https://{addr}/"))
            .timeout(std::time::Duration::from_secs(10))
            .send()
            .await;
        assert!(request.is_err());
        let head = tokio::time::timeout(std::time::Duration::from_secs(10), peer)
            .await
            .unwrap()
            .unwrap();
        // Content type 22 (handshake), TLS 1.x, then message type 1 (ClientHello).
        assert_eq!((head[0], head[1], head[5]), (22, 3, 1), "{head:?}");
    }
}
