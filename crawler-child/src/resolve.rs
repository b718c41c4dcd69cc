//! Host-name overrides, like curl's `--resolve` and `/etc/hosts`.
//!
//! They let a test web of many host names live on 127.0.0.0/8 without
//! touching the machine's resolver. Names not overridden resolve normally.

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::Path;

use anyhow::{bail, Context};

/// Name → address overrides. `*.suffix` entries match every sub-domain.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostOverrides {
    exact: HashMap<String, IpAddr>,
    /// (".suffix", addr), longest suffix first.
    wildcard: Vec<(String, IpAddr)>,
}

impl HostOverrides {
    /// Parses curl-style `HOST:PORT:ADDR` entries (the port is accepted for
    /// compatibility and ignored: the override applies to every port) and
    /// hosts files (`ADDR NAME [NAME...]`, `#` comments).
    pub fn from_args(resolve: &[String], hosts_files: &[impl AsRef<Path>]) -> anyhow::Result<Self> {
        let mut o = HostOverrides::default();
        for entry in resolve {
            let (host, addr) = parse_curl_entry(entry)?;
            o.insert(&host, addr);
        }
        for file in hosts_files {
            let file = file.as_ref();
            let text = std::fs::read_to_string(file)
                .with_context(|| format!("reading hosts file {}", file.display()))?;
            o.add_hosts_text(&text)
                .with_context(|| format!("in hosts file {}", file.display()))?;
        }
        Ok(o)
    }

    pub(crate) fn add_hosts_text(&mut self, text: &str) -> anyhow::Result<()> {
        for (n, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or_default();
            let mut words = line.split_whitespace();
            let Some(addr) = words.next() else { continue };
            let addr: IpAddr = addr
                .parse()
                .with_context(|| format!("line {}: bad address {addr:?}", n + 1))?;
            for name in words {
                self.insert(name, addr);
            }
        }
        Ok(())
    }

    pub(crate) fn insert(&mut self, host: &str, addr: IpAddr) {
        let host = host.to_ascii_lowercase();
        if let Some(suffix) = host.strip_prefix('*') {
            self.wildcard.push((suffix.to_string(), addr));
            self.wildcard.sort_by_key(|(s, _)| std::cmp::Reverse(s.len()));
        } else {
            self.exact.insert(host, addr);
        }
    }

    pub(crate) fn lookup(&self, host: &str) -> Option<IpAddr> {
        let host = host.to_ascii_lowercase();
        if let Some(addr) = self.exact.get(&host) {
            return Some(*addr);
        }
        self.wildcard
            .iter()
            .find(|(suffix, _)| host.ends_with(suffix.as_str()))
            .map(|(_, addr)| *addr)
    }
}

fn parse_curl_entry(entry: &str) -> anyhow::Result<(String, IpAddr)> {
    let mut parts = entry.splitn(3, ':');
    let (Some(host), Some(port), Some(addr)) = (parts.next(), parts.next(), parts.next()) else {
        bail!("--resolve {entry:?}: expected HOST:PORT:ADDR");
    };
    if host.is_empty() || (port != "*" && port.parse::<u16>().is_err()) {
        bail!("--resolve {entry:?}: expected HOST:PORT:ADDR");
    }
    let addr = addr.trim_start_matches('[').trim_end_matches(']');
    let addr: IpAddr = addr
        .parse()
        .with_context(|| format!("--resolve {entry:?}: bad address"))?;
    Ok((host.to_string(), addr))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn curl_entries_hosts_files_and_wildcards() {
        let mut o = HostOverrides::from_args(
            &[
                "Site1.test:8080:127.0.0.2".into(),
                "*.web.test:*:127.0.0.3".into(),
            ],
            &[] as &[&str],
        )
        .unwrap();
        o.add_hosts_text("# comment\n127.0.0.4 a.test b.test # trailing\n\n::1 six.test\n")
            .unwrap();
        assert_eq!(o.lookup("site1.test"), Some("127.0.0.2".parse().unwrap()));
        assert_eq!(o.lookup("x.WEB.test"), Some("127.0.0.3".parse().unwrap()));
        assert_eq!(o.lookup("b.test"), Some("127.0.0.4".parse().unwrap()));
        assert_eq!(o.lookup("six.test"), Some("::1".parse().unwrap()));
        assert_eq!(o.lookup("example.com"), None);
    }

    #[test]
    fn bad_entries_are_clear_errors() {
        for bad in ["nohost", "a.test:notaport:127.0.0.1", "a.test:80:not-an-ip"] {
            let err = HostOverrides::from_args(&[bad.into()], &[] as &[&str]).unwrap_err();
            assert!(err.to_string().contains("--resolve"), "{err}");
        }
        let mut o = HostOverrides::default();
        assert!(o.add_hosts_text("999.1.1.1 x.test").is_err());
    }
}
