//! The TLS handshakes a child makes, counted full and resumed
//! (`crawler_tls_handshakes_total{kind}`), and those that failed, by why
//! (`crawler_tls_failures_total{why}`), with running totals in the timing
//! log's gauge lines: as the child sees them, not as a server says.
//!
//! reqwest keeps its connections to itself, so the counts come from the
//! three places rustls calls out to during a handshake, all wrapped here:
//! - the certificate verifier ([`CountingVerifier`]): a full handshake
//!   verifies the server's certificate exactly once, a resumed one never
//!   (resumption continues the earlier session's trust). A verified
//!   certificate is a full handshake, counted then (even if the handshake
//!   then fails: its cost was paid).
//! - the session store ([`CountingStore`]): rustls calls `set_kx_hint` once
//!   at the end of every TLS 1.3 handshake, full or resumed. One that ends
//!   with no verified certificate waiting for its server name was resumed.
//! - the key log ([`CountingKeyLog`], nothing is written anywhere): rustls
//!   logs `CLIENT_RANDOM` once per TLS 1.2 handshake, full or resumed; a
//!   full one verifies the server's key exchange signature in the same
//!   call on the same thread just before, which a resumed one does not.
//!
//! Exact for handshakes that complete. Where it could be wrong: a full
//! TLS 1.3 handshake that fails after its certificate verified (a bad
//! signature or Finished) leaves its name waiting, so that name's next
//! resumed handshake counts as neither; [`WAITING_CAP`] bounds what such
//! leftovers hold.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{ClientSessionStore, Tls12ClientSessionValue, Tls13ClientSessionValue};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, NamedGroup, SignatureScheme};

use crate::metric;

/// At most this many server names wait for their handshake to end; past
/// it the map is cleared (only failed handshakes leave names behind).
const WAITING_CAP: usize = 4096;

thread_local! {
    /// The name whose certificate was just verified on this thread, until
    /// the signature check that follows it in the same call.
    static JUST_VERIFIED: RefCell<Option<ServerName<'static>>> = const { RefCell::new(None) };
    /// A TLS 1.2 full handshake's signature checked on this thread, until
    /// its `CLIENT_RANDOM` (same call).
    static TLS12_FULL: Cell<bool> = const { Cell::new(false) };
}

/// Handshakes so far, shared by the three wrappers.
#[derive(Default)]
pub(crate) struct Handshakes {
    full: AtomicU64,
    resumed: AtomicU64,
    /// TLS 1.3: names with a verified certificate whose handshake has not
    /// ended yet, and how many.
    waiting: Mutex<HashMap<ServerName<'static>, u32>>,
    /// Requests whose handshake failed, by why (a bounded label).
    failed: Mutex<BTreeMap<&'static str, u64>>,
}

impl fmt::Debug for Handshakes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (full, resumed) = self.totals();
        write!(f, "Handshakes {{ full: {full}, resumed: {resumed} }}")
    }
}

impl Handshakes {
    /// (full, resumed) so far.
    pub(crate) fn totals(&self) -> (u64, u64) {
        (
            self.full.load(Ordering::Relaxed),
            self.resumed.load(Ordering::Relaxed),
        )
    }

    /// Requests whose handshake failed so far, by why.
    pub(crate) fn failures(&self) -> BTreeMap<&'static str, u64> {
        self.failed.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// A request's handshake failed, for `why` (`crawler_tls_failures_total`).
    pub(crate) fn failed(&self, why: &'static str) {
        metric::TLS_FAILURES.at([why]).increment(1);
        *self
            .failed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(why)
            .or_default() += 1;
    }

    fn full(&self) {
        self.full.fetch_add(1, Ordering::Relaxed);
        metric::TLS_HANDSHAKES.at(["full"]).increment(1);
    }

    fn resumed(&self) {
        self.resumed.fetch_add(1, Ordering::Relaxed);
        metric::TLS_HANDSHAKES.at(["resumed"]).increment(1);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ServerName<'static>, u32>> {
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A TLS 1.3 certificate and signature verified for `name`.
    fn tls13_verified(&self, name: ServerName<'static>) {
        let mut waiting = self.lock();
        if waiting.len() >= WAITING_CAP {
            waiting.clear();
        }
        *waiting.entry(name).or_default() += 1;
    }

    /// A TLS 1.3 handshake with `name` ended.
    fn tls13_ended(&self, name: &ServerName<'static>) {
        let mut waiting = self.lock();
        match waiting.get_mut(name) {
            Some(n) if *n > 1 => *n -= 1,
            Some(_) => {
                waiting.remove(name);
            }
            None => {
                drop(waiting);
                self.resumed();
            }
        }
    }

    /// A TLS 1.2 handshake's master secret is known.
    fn tls12_ended(&self) {
        if !TLS12_FULL.with(|f| f.replace(false)) {
            self.resumed();
        }
    }
}

/// The verifier that checks certificates, counting full handshakes.
#[derive(Debug)]
pub(crate) struct CountingVerifier {
    pub(crate) inner: Arc<dyn ServerCertVerifier>,
    pub(crate) counts: Arc<Handshakes>,
}

impl ServerCertVerifier for CountingVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let verified =
            self.inner
                .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)?;
        self.counts.full();
        JUST_VERIFIED.with(|v| *v.borrow_mut() = Some(server_name.to_owned()));
        Ok(verified)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let valid = self.inner.verify_tls12_signature(message, cert, dss)?;
        if JUST_VERIFIED.with(|v| v.borrow_mut().take()).is_some() {
            TLS12_FULL.with(|f| f.set(true));
        }
        Ok(valid)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let valid = self.inner.verify_tls13_signature(message, cert, dss)?;
        if let Some(name) = JUST_VERIFIED.with(|v| v.borrow_mut().take()) {
            self.counts.tls13_verified(name);
        }
        Ok(valid)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }

    fn requires_raw_public_keys(&self) -> bool {
        self.inner.requires_raw_public_keys()
    }

    fn root_hint_subjects(&self) -> Option<&[rustls::DistinguishedName]> {
        self.inner.root_hint_subjects()
    }
}

/// The session cache (rustls's, in memory), seeing TLS 1.3 handshakes end.
#[derive(Debug)]
pub(crate) struct CountingStore {
    pub(crate) inner: Arc<dyn ClientSessionStore>,
    pub(crate) counts: Arc<Handshakes>,
}

impl ClientSessionStore for CountingStore {
    fn set_kx_hint(&self, server_name: ServerName<'static>, group: NamedGroup) {
        self.counts.tls13_ended(&server_name);
        self.inner.set_kx_hint(server_name, group);
    }

    fn kx_hint(&self, server_name: &ServerName<'_>) -> Option<NamedGroup> {
        self.inner.kx_hint(server_name)
    }

    fn set_tls12_session(&self, server_name: ServerName<'static>, value: Tls12ClientSessionValue) {
        self.inner.set_tls12_session(server_name, value);
    }

    fn tls12_session(&self, server_name: &ServerName<'_>) -> Option<Tls12ClientSessionValue> {
        self.inner.tls12_session(server_name)
    }

    fn remove_tls12_session(&self, server_name: &ServerName<'static>) {
        self.inner.remove_tls12_session(server_name);
    }

    fn insert_tls13_ticket(&self, server_name: ServerName<'static>, value: Tls13ClientSessionValue) {
        self.inner.insert_tls13_ticket(server_name, value);
    }

    fn take_tls13_ticket(&self, server_name: &ServerName<'static>) -> Option<Tls13ClientSessionValue> {
        self.inner.take_tls13_ticket(server_name)
    }
}

/// A key log that logs nothing: it only sees TLS 1.2 handshakes end.
#[derive(Debug)]
pub(crate) struct CountingKeyLog {
    pub(crate) counts: Arc<Handshakes>,
}

impl rustls::KeyLog for CountingKeyLog {
    fn log(&self, label: &str, _client_random: &[u8], _secret: &[u8]) {
        if label == "CLIENT_RANDOM" {
            self.counts.tls12_ended();
        }
    }

    fn will_log(&self, label: &str) -> bool {
        label == "CLIENT_RANDOM"
    }
}
