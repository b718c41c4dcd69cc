//! Where a name's addresses come from when no override names it: the
//! system's resolver (`getaddrinfo`), or a nameserver the operator named
//! (`--dns-server`), asked directly.
//!
//! The system's resolver stays the default because it is what the machine
//! is configured to do: `/etc/nsswitch.conf` (`/etc/hosts` first, mDNS,
//! LDAP, ...), a local stub such as systemd-resolved. Reading
//! `/etc/resolv.conf` ourselves would skip all of that silently. It is a
//! blocking call, so it runs on tokio's blocking threads, and only as many
//! at once as the resolver's slots allow (`crate::dns`). It gives no TTL:
//! its answers are kept for [`SYSTEM_TTL`].
//!
//! A named nameserver is asked over UDP (TCP when an answer is truncated)
//! by hickory's resolver, which randomises query ids and source ports and
//! checks that an answer matches its question: what a crawl pointed at a
//! local caching resolver needs, with the answers' TTLs. Only that server
//! is asked; `/etc/hosts` is not read (give it as `--hosts-file` to keep
//! its names). Its own cache is off: `crate::dns_cache` is the one cache,
//! so its bounds and counts hold for both sources.

use std::ffi::CString;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use hickory_resolver::config::{NameServerConfig, ResolveHosts, ResolverConfig, ResolverOpts};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::net::{DnsError, NetError, NoRecords};
use hickory_resolver::proto::op::ResponseCode;
use hickory_resolver::proto::rr::RecordType;
use hickory_resolver::TokioResolver;
use link::protocol::FailureKind;
use tokio::sync::OwnedSemaphorePermit;

/// How long an answer of the system's resolver is kept (it gives no TTL):
/// the cache's bounds still apply.
pub(crate) const SYSTEM_TTL: Duration = Duration::from_secs(300);

/// One try's wait for a named nameserver's answer; it gets [`ATTEMPTS`]
/// (a lost UDP datagram is common, a second try usually answers).
const TRY_TIMEOUT: Duration = Duration::from_secs(2);
const ATTEMPTS: usize = 2;

/// Why a name gave no address to dial.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum DnsFailure {
    /// NXDOMAIN: the name does not exist.
    #[error("DNS: no such name (NXDOMAIN)")]
    NxDomain,
    /// The name exists and has no A or AAAA records.
    #[error("DNS: the name has no address (no A or AAAA records)")]
    NoAddress,
    /// SERVFAIL, REFUSED or another error answer (and the system
    /// resolver's "temporary failure", which glibc gives for a SERVFAIL
    /// and for a timeout alike).
    #[error("DNS: the nameserver failed to answer (SERVFAIL or another error)")]
    ServFail,
    /// No answer in time.
    #[error("DNS: no answer in time")]
    Timeout,
    /// Anything else: a name that is not one, a socket error.
    #[error("DNS: lookup failed")]
    Error,
}

impl DnsFailure {
    /// The URL's failure (see `shared::failure`).
    pub(crate) fn kind(self) -> FailureKind {
        match self {
            DnsFailure::NxDomain | DnsFailure::NoAddress => FailureKind::DnsNotFound,
            DnsFailure::ServFail | DnsFailure::Error => FailureKind::DnsFailed,
            DnsFailure::Timeout => FailureKind::DnsTimeout,
        }
    }

    /// Bounded label for metrics and timing logs.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            DnsFailure::NxDomain => "nxdomain",
            DnsFailure::NoAddress => "no_address",
            DnsFailure::ServFail => "servfail",
            DnsFailure::Timeout => "timeout",
            DnsFailure::Error => "error",
        }
    }

    /// Whether the name itself has no address (an authoritative "no"),
    /// rather than the lookup having failed.
    pub(crate) fn is_negative_answer(self) -> bool {
        matches!(self, DnsFailure::NxDomain | DnsFailure::NoAddress)
    }
}

/// What one lookup answered, and for how long the source says it holds
/// (`None`: it did not say).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Answered {
    pub result: Result<Vec<IpAddr>, DnsFailure>,
    pub ttl: Option<Duration>,
}

impl Answered {
    pub(crate) fn failed(failure: DnsFailure) -> Self {
        Answered {
            result: Err(failure),
            ttl: None,
        }
    }
}

pub(crate) enum Upstream {
    System,
    Server(Box<TokioResolver>),
}

impl Upstream {
    /// The system's resolver, or the nameserver at `server` (UDP, and TCP
    /// for truncated answers).
    pub(crate) fn new(server: Option<SocketAddr>) -> anyhow::Result<Upstream> {
        let Some(server) = server else {
            return Ok(Upstream::System);
        };
        let mut ns = NameServerConfig::udp_and_tcp(server.ip());
        for c in &mut ns.connections {
            c.port = server.port();
        }
        let mut opts = ResolverOpts::default();
        opts.cache_size = 0;
        opts.timeout = TRY_TIMEOUT;
        opts.attempts = ATTEMPTS;
        opts.use_hosts_file = ResolveHosts::Never;
        // Names are asked as given (made absolute), never with a search domain.
        opts.ndots = 0;
        let resolver = hickory_resolver::Resolver::builder_with_config(
            ResolverConfig::from_name_servers(vec![ns]),
            TokioRuntimeProvider::default(),
        )
        .with_options(opts)
        .build()?;
        Ok(Upstream::Server(Box::new(resolver)))
    }

    /// `name`'s addresses: IPv4 first; IPv6 only when the name has no A
    /// record (one query per lookup for most names). `slot` is held until
    /// the lookup is over: for the system's resolver, until its blocking
    /// call returns, even after the caller stopped waiting, so the slots
    /// bound the threads that wait on it too.
    pub(crate) async fn lookup(&self, name: &str, slot: OwnedSemaphorePermit) -> Answered {
        match self {
            Upstream::System => system_lookup(name, slot).await,
            Upstream::Server(r) => {
                let absolute = format!("{}.", name.trim_end_matches('.'));
                match ask(r, &absolute, RecordType::A).await {
                    Answered {
                        result: Err(DnsFailure::NoAddress),
                        ..
                    } => ask(r, &absolute, RecordType::AAAA).await,
                    a => a,
                }
            }
        }
    }
}

/// One question to the named server, with CNAME chains followed (a
/// resolver answers with the chain and its end; the TTL is the chain's
/// shortest).
async fn ask(r: &TokioResolver, name: &str, rtype: RecordType) -> Answered {
    match r.lookup(name, rtype).await {
        Ok(lookup) => {
            let addrs: Vec<IpAddr> = lookup
                .answers()
                .iter()
                .filter(|rec| rec.record_type() == rtype)
                .filter_map(|rec| rec.data.ip_addr())
                .collect();
            let ttl = lookup
                .valid_until()
                .saturating_duration_since(std::time::Instant::now());
            if addrs.is_empty() {
                return Answered {
                    result: Err(DnsFailure::NoAddress),
                    ttl: Some(ttl),
                };
            }
            Answered {
                result: Ok(addrs),
                ttl: Some(ttl),
            }
        }
        Err(e) => {
            let (failure, ttl) = classify(&e);
            Answered {
                result: Err(failure),
                ttl,
            }
        }
    }
}

/// The failure, and its negative TTL when the answer carried one (an SOA).
fn classify(e: &NetError) -> (DnsFailure, Option<Duration>) {
    match e {
        NetError::Dns(DnsError::NoRecordsFound(NoRecords {
            response_code,
            negative_ttl,
            ..
        })) => {
            let ttl = negative_ttl.map(|s| Duration::from_secs(u64::from(s)));
            match *response_code {
                ResponseCode::NXDomain => (DnsFailure::NxDomain, ttl),
                ResponseCode::NoError => (DnsFailure::NoAddress, ttl),
                _ => (DnsFailure::ServFail, None),
            }
        }
        NetError::Dns(DnsError::ResponseCode(_)) => (DnsFailure::ServFail, None),
        NetError::Timeout => (DnsFailure::Timeout, None),
        // hickory reports a server that never answered, after its tries,
        // as "no connections" or a busy pool.
        NetError::NoConnections | NetError::Busy => (DnsFailure::Timeout, None),
        NetError::Io(io) if io.kind() == std::io::ErrorKind::TimedOut => (DnsFailure::Timeout, None),
        _ => (DnsFailure::Error, None),
    }
}

async fn system_lookup(name: &str, slot: OwnedSemaphorePermit) -> Answered {
    let Ok(c_name) = CString::new(name) else {
        return Answered::failed(DnsFailure::Error);
    };
    let blocking = tokio::task::spawn_blocking(move || {
        let result = getaddrinfo(&c_name);
        drop(slot);
        result
    });
    match blocking.await {
        Ok(result) => Answered {
            ttl: result.is_ok().then_some(SYSTEM_TTL),
            result,
        },
        Err(_) => Answered::failed(DnsFailure::Error),
    }
}

/// The system's answer for `name`, with its error code kept (std and
/// tokio turn it into text): one address per entry, in the order given.
fn getaddrinfo(name: &std::ffi::CStr) -> Result<Vec<IpAddr>, DnsFailure> {
    // SAFETY: a zeroed addrinfo is the documented "no hints" value.
    let mut hints: libc::addrinfo = unsafe { std::mem::zeroed() };
    hints.ai_socktype = libc::SOCK_STREAM;
    hints.ai_family = libc::AF_UNSPEC;
    let mut list: *mut libc::addrinfo = std::ptr::null_mut();
    // SAFETY: valid NUL-terminated name, null service, valid hints and out pointer.
    let rc = unsafe { libc::getaddrinfo(name.as_ptr(), std::ptr::null(), &hints, &mut list) };
    if rc != 0 {
        return Err(match rc {
            libc::EAI_NONAME => DnsFailure::NxDomain,
            libc::EAI_NODATA => DnsFailure::NoAddress,
            libc::EAI_AGAIN | libc::EAI_FAIL => DnsFailure::ServFail,
            _ => DnsFailure::Error,
        });
    }
    let mut addrs = Vec::new();
    let mut cur = list;
    while !cur.is_null() {
        // SAFETY: `cur` is an entry of the list getaddrinfo returned, not freed yet.
        let ai = unsafe { &*cur };
        if !ai.ai_addr.is_null() {
            // SAFETY: ai_addr points at a sockaddr of the family ai_family says.
            let ip = unsafe {
                match ai.ai_family {
                    libc::AF_INET => {
                        let sin = &*(ai.ai_addr as *const libc::sockaddr_in);
                        Some(IpAddr::V4(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr))))
                    }
                    libc::AF_INET6 => {
                        let sin6 = &*(ai.ai_addr as *const libc::sockaddr_in6);
                        Some(IpAddr::V6(Ipv6Addr::from(sin6.sin6_addr.s6_addr)))
                    }
                    _ => None,
                }
            };
            if let Some(ip) = ip.filter(|ip| !addrs.contains(ip)) {
                addrs.push(ip);
            }
        }
        cur = ai.ai_next;
    }
    // SAFETY: the list getaddrinfo returned, freed once.
    unsafe { libc::freeaddrinfo(list) };
    if addrs.is_empty() {
        return Err(DnsFailure::NoAddress);
    }
    Ok(addrs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[tokio::test]
    async fn the_system_resolver_reads_etc_hosts() {
        let slot = Arc::new(tokio::sync::Semaphore::new(1))
            .acquire_owned()
            .await
            .unwrap();
        let a = Upstream::System.lookup("localhost", slot).await;
        let addrs = a.result.unwrap();
        assert!(addrs.iter().all(|ip| ip.is_loopback()), "{addrs:?}");
        assert_eq!(a.ttl, Some(SYSTEM_TTL));
    }

    #[test]
    fn failures_map_to_kinds() {
        assert_eq!(DnsFailure::NxDomain.kind(), FailureKind::DnsNotFound);
        assert_eq!(DnsFailure::NoAddress.kind(), FailureKind::DnsNotFound);
        assert_eq!(DnsFailure::ServFail.kind(), FailureKind::DnsFailed);
        assert_eq!(DnsFailure::Timeout.kind(), FailureKind::DnsTimeout);
    }
}
