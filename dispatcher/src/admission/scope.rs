//! Which hosts a crawl may go to, from its seeds.

use std::collections::HashSet;

use url::{Host, Url};

/// `--scope`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ScopeKind {
    /// The seeds' exact hosts (and ports).
    Seeds,
    /// The seeds' sites: their registered domains and every subdomain
    /// (a seed on www.example.co.uk lets in shop.example.co.uk, not
    /// other.co.uk), decided with the Public Suffix List.
    Site,
    /// Anything linked.
    Any,
}

/// The hosts in scope.
pub(crate) struct Scope {
    kind: ScopeKind,
    /// Domains (`Seeds`) or registered domains (`Site`) of the seeds.
    allowed: HashSet<String>,
}

impl Scope {
    pub(crate) fn new(kind: ScopeKind) -> Scope {
        Scope {
            kind,
            allowed: HashSet::new(),
        }
    }

    /// A seed: its host (or site) is in scope.
    pub(crate) fn seed(&mut self, url: &Url, domain: &str) {
        match self.kind {
            ScopeKind::Seeds => {
                self.allowed.insert(domain.to_string());
            }
            ScopeKind::Site => {
                self.allowed.insert(site_of(url).to_string());
            }
            ScopeKind::Any => {}
        }
    }

    /// Whether `url` (of domain `domain`) is in scope.
    pub(crate) fn contains(&self, url: &Url, domain: &str) -> bool {
        match self.kind {
            ScopeKind::Seeds => self.allowed.contains(domain),
            ScopeKind::Site => self.allowed.contains(site_of(url)),
            ScopeKind::Any => true,
        }
    }
}

/// A URL's site: the registered domain of its host name (the Public
/// Suffix List's "eTLD+1": `www.example.co.uk` → `example.co.uk`), the
/// name itself where the list gives none (`localhost`, a bare suffix),
/// and an address as it is. Ports do not matter: a site's hosts often
/// serve on several.
pub(crate) fn site_of(url: &Url) -> &str {
    match url.host() {
        Some(Host::Domain(name)) => psl::domain_str(name).unwrap_or(name),
        // Addresses as written (`[::1]` with its brackets).
        Some(Host::Ipv4(_) | Host::Ipv6(_)) => url.host_str().unwrap_or_default(),
        None => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    fn scope(kind: ScopeKind, seeds: &[&str]) -> Scope {
        let mut s = Scope::new(kind);
        for seed in seeds {
            let url = u(seed);
            s.seed(&url, &shared::urls::domain_of(&url));
        }
        s
    }

    fn has(s: &Scope, url: &str) -> bool {
        let url = u(url);
        s.contains(&url, &shared::urls::domain_of(&url))
    }

    #[test]
    fn sites_come_from_the_public_suffix_list() {
        assert_eq!(site_of(&u("http://www.example.co.uk/")), "example.co.uk");
        assert_eq!(site_of(&u("https://a.b.example.com:8443/x")), "example.com");
        // A private suffix of the list: each user's pages are a site.
        assert_eq!(site_of(&u("http://alice.github.io/")), "alice.github.io");
        assert_eq!(site_of(&u("http://site3.test:8080/")), "site3.test");
        assert_eq!(site_of(&u("http://localhost/")), "localhost");
        assert_eq!(site_of(&u("http://127.0.0.1:81/")), "127.0.0.1");
        assert_eq!(site_of(&u("http://[::1]/")), "[::1]");
    }

    #[test]
    fn seeds_scope_is_exact_hosts_and_ports() {
        let s = scope(
            ScopeKind::Seeds,
            &["http://www.example.com/", "http://a.test:81/"],
        );
        assert!(has(&s, "http://www.example.com/x"));
        assert!(!has(&s, "http://shop.example.com/"));
        assert!(has(&s, "http://a.test:81/y"));
        assert!(!has(&s, "http://a.test/y"));
    }

    #[test]
    fn site_scope_takes_subdomains_not_neighbours() {
        let s = scope(
            ScopeKind::Site,
            &["http://www.example.co.uk/", "http://alice.github.io/"],
        );
        assert!(has(&s, "https://shop.example.co.uk:8080/x"));
        assert!(has(&s, "http://example.co.uk/"));
        assert!(!has(&s, "http://other.co.uk/"));
        assert!(!has(&s, "http://bob.github.io/"));
        assert!(has(&s, "http://docs.alice.github.io/"));
    }

    #[test]
    fn any_takes_all() {
        let s = scope(ScopeKind::Any, &[]);
        assert!(has(&s, "http://anything.example/"));
    }
}
