//! Name resolution for the fetcher: host overrides first, then the system
//! resolver, with a small cache so a crawl does not ask the resolver once
//! per request.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use shared::resolve::HostOverrides;

const CACHE_TTL: Duration = Duration::from_secs(300);

/// When a name was resolved, and to what.
type Cached = (Instant, Vec<SocketAddr>);

#[derive(Clone)]
pub struct Resolver {
    overrides: Arc<HostOverrides>,
    cache: Arc<Mutex<HashMap<String, Cached>>>,
}

impl Resolver {
    pub fn new(overrides: HostOverrides) -> Self {
        Resolver {
            overrides: Arc::new(overrides),
            cache: Arc::default(),
        }
    }
}

impl Resolve for Resolver {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_string();
        if let Some(ip) = self.overrides.lookup(&host) {
            let addrs: Addrs = Box::new(std::iter::once(SocketAddr::new(ip, 0)));
            return Box::pin(async move { Ok(addrs) });
        }
        let cache = self.cache.clone();
        Box::pin(async move {
            if let Some((at, addrs)) = cache.lock().ok().and_then(|c| c.get(&host).cloned()) {
                if at.elapsed() < CACHE_TTL {
                    return Ok(Box::new(addrs.into_iter()) as Addrs);
                }
            }
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            if let Ok(mut c) = cache.lock() {
                c.insert(host, (Instant::now(), addrs.clone()));
            }
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}
