//! Name resolution for the fetcher: host overrides first, then DNS (the
//! system's resolver or `--dns-server`, see `dns_upstream`) through the
//! child's cache (`dns_cache`: TTLs within bounds, failures kept a short
//! time, one lookup in flight per name, a bounded number of names).
//!
//! A lookup never holds up another name's: each runs in its own task, at
//! most [`LOOKUP_SLOTS`] at once, each asker waiting at most
//! [`ASKER_DEADLINE`]. A slow or dead nameserver delays only the URLs
//! whose names wait on it.
//!
//! It is also where the [`AddressPolicy`] holds for names: reqwest dials
//! only what this resolver returns, so answers pointing at internal
//! addresses are dropped here, on the addresses actually dialled, every
//! time an answer is used (cached or not), so a name that re-resolves to
//! something else later (DNS rebinding) is checked again. Overrides are the
//! operator's own words and are trusted.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use shared::timing::{Op, TimingLog};
use tokio::sync::Semaphore;

use crate::address_policy::{AddressPolicy, BlockedAddress};
use crate::dns_cache::{DnsCache, Limits, Outcome, Source};
use crate::dns_upstream::{Answered, DnsFailure, Upstream};
use crate::metric;
use crate::resolve::HostOverrides;

/// Lookups a child has in flight at once. A lookup costs a task (a
/// blocking thread for the system's resolver) and a socket; 64 of them at
/// 20–100 ms each are about a thousand names a second, above the rate at
/// which a child meets new domains once a crawl runs, though not at a wide
/// crawl's start (see [`SLOT_WAIT`]).
pub(crate) const LOOKUP_SLOTS: usize = 64;
/// The most a lookup takes once it has a slot: the named server's tries
/// (2 × 2 s) and a little more. Past it the name counts as timed out.
const LOOKUP_DEADLINE: Duration = Duration::from_secs(5);
/// The most a lookup waits for a slot. A wide crawl hands a child tens of
/// thousands of new domains within seconds of its start (100,000 domains
/// over 4 children), far more than the slots answer at once; a name that
/// waits its turn is not a name the nameserver failed to answer, so the
/// wait is bounded apart from the lookup, and well above the seconds such
/// a burst takes to drain (64 slots at 20–100 ms: about 1,000 names a
/// second).
const SLOT_WAIT: Duration = Duration::from_secs(60);
/// The most one asker waits for a name: a slot's wait and a lookup, and
/// a little more, so that an asker who joined a lookup late still gets
/// its answer.
const ASKER_DEADLINE: Duration = Duration::from_secs(66);

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The names no override covers: the cache, the source, the slots.
pub(crate) struct Names {
    cache: Arc<DnsCache>,
    upstream: Upstream,
    slots: Arc<Semaphore>,
    timing: TimingLog,
}

impl Names {
    pub(crate) fn new(upstream: Upstream, timing: TimingLog) -> Arc<Names> {
        Arc::new(Names {
            cache: DnsCache::new(Limits::default()),
            upstream,
            slots: Arc::new(Semaphore::new(LOOKUP_SLOTS)),
            timing,
        })
    }

    /// The system's resolver, logging only to metrics (unit tests).
    #[cfg(test)]
    pub(crate) fn system() -> Arc<Names> {
        Self::new(Upstream::System, TimingLog::disabled())
    }

    /// Names kept in the cache, for a gauge.
    pub(crate) fn cached(&self) -> usize {
        self.cache.len()
    }

    /// Lookups in flight, for a gauge.
    pub(crate) fn active(&self) -> usize {
        LOOKUP_SLOTS.saturating_sub(self.slots.available_permits())
    }

    /// `name`'s addresses (every answer, before the policy).
    async fn resolve(self: &Arc<Self>, name: &str) -> Outcome {
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        let this = self.clone();
        let key = name.clone();
        let (outcome, source) = self
            .cache
            .get(&name, ASKER_DEADLINE, move || async move { this.ask(&key).await })
            .await;
        metric::DNS_CACHE.at([source.as_str()]).increment(1);
        if source == Source::Deadline {
            tracing::debug!(name = %name, "DNS: gave up waiting for a lookup");
        }
        outcome
    }

    /// One lookup at the source: a slot within [`SLOT_WAIT`], then the
    /// lookup within [`LOOKUP_DEADLINE`], counted and timed from the slot
    /// on (a name that never got a slot counts as timed out, timed from
    /// its turn in the queue).
    async fn ask(&self, name: &str) -> Answered {
        let queued = Instant::now();
        let slot = match tokio::time::timeout(SLOT_WAIT, self.slots.clone().acquire_owned()).await {
            Ok(Ok(slot)) => slot,
            Ok(Err(_)) => return self.counted(name, queued, Answered::failed(DnsFailure::Error)),
            Err(_) => return self.counted(name, queued, Answered::failed(DnsFailure::Timeout)),
        };
        let start = Instant::now();
        let answered = tokio::time::timeout(LOOKUP_DEADLINE, self.upstream.lookup(name, slot))
            .await
            .unwrap_or_else(|_| Answered::failed(DnsFailure::Timeout));
        self.counted(name, start, answered)
    }

    /// Counts and times a lookup's outcome, from `start`.
    fn counted(&self, name: &str, start: Instant, answered: Answered) -> Answered {
        let outcome = match &answered.result {
            Ok(_) => "ok",
            Err(f) => f.as_str(),
        };
        metric::DNS_LOOKUPS.at([outcome]).increment(1);
        self.timing
            .record(Op::DnsLookup, start.elapsed(), outcome, Some(name), None);
        answered
    }

    /// Keeps `addrs` as `name`'s answer, as if DNS had given it.
    #[cfg(test)]
    pub(crate) fn put(&self, name: &str, addrs: Vec<IpAddr>) {
        self.cache.put(name, addrs);
    }
}

#[derive(Clone)]
pub(crate) struct Resolver {
    overrides: Arc<HostOverrides>,
    policy: AddressPolicy,
    names: Arc<Names>,
}

impl Resolver {
    pub(crate) fn new(overrides: HostOverrides, policy: AddressPolicy, names: Arc<Names>) -> Self {
        Resolver {
            overrides: Arc::new(overrides),
            policy,
            names,
        }
    }

    pub(crate) fn names(&self) -> &Names {
        &self.names
    }

    /// The addresses `host` may be dialled at: its override, or the DNS
    /// answers the policy allows. A name whose answers are all refused is
    /// an error holding [`BlockedAddress`], and one without answers an
    /// error holding [`DnsFailure`] (reqwest keeps either as the source of
    /// its connect error, see `http::FetchError`).
    pub(crate) async fn lookup(&self, host: &str) -> Result<Vec<SocketAddr>, BoxError> {
        if let Some(ip) = self.overrides.lookup(host) {
            return Ok(vec![SocketAddr::new(ip, 0)]);
        }
        let answers = self.names.resolve(host).await?;
        let mut refused = None;
        let allowed: Vec<SocketAddr> = answers
            .iter()
            .filter(|a| match self.policy.check(host, **a) {
                Ok(()) => true,
                Err(e) => {
                    refused.get_or_insert(e);
                    false
                }
            })
            .map(|a| SocketAddr::new(*a, 0))
            .collect();
        match refused {
            Some(blocked) if allowed.is_empty() => Err(Box::new(blocked) as BoxError),
            _ => Ok(allowed),
        }
    }

    /// The addresses `host` may be dialled at, in the order they are
    /// tried, and whether the operator named it (an override), for
    /// per-server pacing (`crate::server_pace`).
    pub(crate) async fn server(&self, host: &str) -> Option<(Vec<IpAddr>, bool)> {
        if let Some(ip) = self.overrides.lookup(host) {
            return Some((vec![ip], true));
        }
        let addrs = self.lookup(host).await.ok()?;
        Some((addrs.into_iter().map(|a| a.ip()).collect(), false))
    }
}

impl Resolve for Resolver {
    fn resolve(&self, name: Name) -> Resolving {
        let this = self.clone();
        Box::pin(async move {
            let addrs = this.lookup(name.as_str()).await?;
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}

/// The [`DnsFailure`] behind an error, if the name gave no address.
pub(crate) fn dns_cause(e: &(dyn std::error::Error + 'static)) -> Option<DnsFailure> {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if let Some(f) = err.downcast_ref::<DnsFailure>() {
            return Some(*f);
        }
        cur = err.source();
    }
    None
}

/// The [`BlockedAddress`] behind an error, if the policy is why it failed.
pub(crate) fn blocked_cause<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a BlockedAddress> {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if let Some(b) = err.downcast_ref::<BlockedAddress>() {
            return Some(b);
        }
        cur = err.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolver(overrides: &[&str], allow: bool) -> Resolver {
        let entries: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
        let o = HostOverrides::from_args(&entries, &[] as &[&str]).unwrap();
        Resolver::new(
            o,
            AddressPolicy {
                allow_private_networks: allow,
            },
            Names::system(),
        )
    }

    /// Puts answers in the cache, as if DNS had given them.
    fn answer(r: &Resolver, host: &str, addrs: &[&str]) {
        r.names
            .put(host, addrs.iter().map(|a| a.parse().unwrap()).collect());
    }

    #[tokio::test]
    async fn internal_answers_are_dropped_and_none_left_is_refused() {
        let r = resolver(&[], false);
        answer(
            &r,
            "mixed.test",
            &["10.0.0.1", "93.184.216.34", "::1", "2606:4700::1"],
        );
        let got: Vec<String> = r
            .lookup("mixed.test")
            .await
            .unwrap()
            .iter()
            .map(|a| a.ip().to_string())
            .collect();
        assert_eq!(got, ["93.184.216.34", "2606:4700::1"]);

        answer(&r, "inside.test", &["169.254.169.254", "::ffff:127.0.0.1"]);
        let err = r.lookup("inside.test").await.unwrap_err();
        let blocked = blocked_cause(err.as_ref()).expect("a BlockedAddress");
        assert_eq!(blocked.host, "inside.test");
        assert_eq!(blocked.range.cidr, "169.254.0.0/16");
    }

    #[tokio::test]
    async fn localhost_from_the_system_resolver_is_refused() {
        // /etc/hosts maps localhost to loopback: no override, so refused.
        let err = resolver(&[], false).lookup("localhost").await.unwrap_err();
        assert!(blocked_cause(err.as_ref()).is_some(), "{err}");
        assert!(!resolver(&[], true).lookup("localhost").await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn overrides_are_trusted() {
        let r = resolver(&["web.test:80:127.0.0.1", "*.lab.test:*:10.1.2.3"], false);
        let got = r.lookup("web.test").await.unwrap();
        assert_eq!(got, [SocketAddr::new("127.0.0.1".parse().unwrap(), 0)]);
        assert_eq!(r.lookup("a.lab.test").await.unwrap().len(), 1);
    }

    #[test]
    fn a_blocked_address_is_found_down_an_error_chain() {
        #[derive(Debug, thiserror::Error)]
        #[error("connect failed")]
        struct Outer(#[source] BoxError);
        let inner = AddressPolicy::default()
            .check("x", "10.0.0.1".parse().unwrap())
            .unwrap_err();
        let outer = Outer(Box::new(inner));
        assert!(blocked_cause(&outer).is_some());
        let plain = std::io::Error::other("dns failed");
        assert!(blocked_cause(&plain).is_none());
    }
}
