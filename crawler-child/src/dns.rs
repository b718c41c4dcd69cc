//! Name resolution for the fetcher: host overrides first, then the system
//! resolver, with a small cache so a crawl does not ask the resolver once
//! per request.
//!
//! It is also where the [`AddressPolicy`] holds for names: reqwest dials
//! only what this resolver returns, so answers pointing at internal
//! addresses are dropped here, on the addresses actually dialled, and a name
//! that re-resolves to something else later (DNS rebinding) is checked
//! again. Overrides are the operator's own words and are trusted.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use crate::address_policy::{AddressPolicy, BlockedAddress};
use crate::resolve::HostOverrides;

const CACHE_TTL: Duration = Duration::from_secs(300);

/// When a name was resolved, and to what (every answer, before the policy).
type Cached = (Instant, Vec<SocketAddr>);

type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[derive(Clone)]
pub(crate) struct Resolver {
    overrides: Arc<HostOverrides>,
    policy: AddressPolicy,
    cache: Arc<Mutex<HashMap<String, Cached>>>,
}

impl Resolver {
    pub(crate) fn new(overrides: HostOverrides, policy: AddressPolicy) -> Self {
        Resolver {
            overrides: Arc::new(overrides),
            policy,
            cache: Arc::default(),
        }
    }

    /// The addresses `host` may be dialled at: its override, or the DNS
    /// answers the policy allows. A name whose answers are all refused is
    /// an error holding [`BlockedAddress`] (reqwest keeps it as the source
    /// of its connect error, see `http::FetchError`).
    pub(crate) async fn lookup(&self, host: &str) -> Result<Vec<SocketAddr>, BoxError> {
        if let Some(ip) = self.overrides.lookup(host) {
            return Ok(vec![SocketAddr::new(ip, 0)]);
        }
        let answers = self.resolve_cached(host).await?;
        let mut refused = None;
        let allowed: Vec<SocketAddr> = answers
            .into_iter()
            .filter(|a| match self.policy.check(host, a.ip()) {
                Ok(()) => true,
                Err(e) => {
                    refused.get_or_insert(e);
                    false
                }
            })
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

    async fn resolve_cached(&self, host: &str) -> std::io::Result<Vec<SocketAddr>> {
        if let Some((at, addrs)) = self.cache.lock().ok().and_then(|c| c.get(host).cloned()) {
            if at.elapsed() < CACHE_TTL {
                return Ok(addrs);
            }
        }
        let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, 0)).await?.collect();
        if let Ok(mut c) = self.cache.lock() {
            c.insert(host.to_string(), (Instant::now(), addrs.clone()));
        }
        Ok(addrs)
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
        )
    }

    /// Puts answers in the cache, as if DNS had given them.
    fn answer(r: &Resolver, host: &str, addrs: &[&str]) {
        let addrs = addrs
            .iter()
            .map(|a| SocketAddr::new(a.parse().unwrap(), 0))
            .collect();
        r.cache
            .lock()
            .unwrap()
            .insert(host.into(), (Instant::now(), addrs));
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
