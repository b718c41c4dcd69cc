//! Which addresses a crawler may connect to: not the machine it runs on,
//! nor the networks behind it (server-side request forgery).
//!
//! A page on the open web can link to `http://127.0.0.1:27017/`,
//! `http://169.254.169.254/latest/meta-data/` or a name whose DNS answer is
//! `10.0.0.5`. A crawler that follows such links makes requests from inside
//! the operator's network on the page author's behalf: to the store, to
//! debug endpoints, to a cloud metadata service. So by default every
//! address that is not globally reachable is refused: loopback, private
//! (RFC 1918), link-local, CGNAT, unique-local, multicast, unspecified,
//! broadcast and the other IANA special-purpose or reserved blocks, and the
//! IPv6 forms that carry such an IPv4 address inside them (IPv4-mapped,
//! IPv4-compatible, NAT64, 6to4, Teredo), which a dual-stack socket, a
//! translator or a relay would deliver to that IPv4 address.
//!
//! The check belongs on the address actually dialled (after DNS), not on
//! the URL's text: a name can resolve to anything, and differently from
//! one lookup to the next (DNS rebinding).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The special-purpose block an address belongs to, named for a failure
/// message (`"loopback 127.0.0.0/8"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Range {
    pub name: &'static str,
    pub cidr: &'static str,
}

impl std::fmt::Display for Range {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.name, self.cidr)
    }
}

/// IPv4 blocks that are not globally reachable (IANA IPv4 Special-Purpose
/// Address Registry, RFC 6890 and successors), as (first octets, prefix
/// length, name, CIDR). Checked in order; broadcast comes before 240/4,
/// which contains it, so it gets its own name.
const V4_BLOCKED: &[([u8; 4], u32, &str, &str)] = &[
    ([0, 0, 0, 0], 8, "unspecified (\"this network\")", "0.0.0.0/8"),
    ([10, 0, 0, 0], 8, "private", "10.0.0.0/8"),
    (
        [100, 64, 0, 0],
        10,
        "shared address space (CGNAT)",
        "100.64.0.0/10",
    ),
    ([127, 0, 0, 0], 8, "loopback", "127.0.0.0/8"),
    (
        [169, 254, 0, 0],
        16,
        "link-local (cloud metadata)",
        "169.254.0.0/16",
    ),
    ([172, 16, 0, 0], 12, "private", "172.16.0.0/12"),
    ([192, 0, 0, 0], 24, "IETF protocol assignments", "192.0.0.0/24"),
    ([192, 0, 2, 0], 24, "documentation (TEST-NET-1)", "192.0.2.0/24"),
    (
        [192, 88, 99, 0],
        24,
        "6to4 relay anycast (deprecated)",
        "192.88.99.0/24",
    ),
    ([192, 168, 0, 0], 16, "private", "192.168.0.0/16"),
    ([198, 18, 0, 0], 15, "benchmarking", "198.18.0.0/15"),
    (
        [198, 51, 100, 0],
        24,
        "documentation (TEST-NET-2)",
        "198.51.100.0/24",
    ),
    (
        [203, 0, 113, 0],
        24,
        "documentation (TEST-NET-3)",
        "203.0.113.0/24",
    ),
    ([224, 0, 0, 0], 4, "multicast", "224.0.0.0/4"),
    ([255, 255, 255, 255], 32, "broadcast", "255.255.255.255/32"),
    ([240, 0, 0, 0], 4, "reserved", "240.0.0.0/4"),
];

/// IPv6 blocks that are not globally reachable and carry no IPv4 address
/// of their own, as (first segments, prefix length, name, CIDR). The
/// unspecified and loopback addresses are single addresses, checked first.
const V6_BLOCKED: &[([u16; 8], u32, &str, &str)] = &[
    (
        [0x0064, 0xff9b, 1, 0, 0, 0, 0, 0],
        48,
        "local-use NAT64",
        "64:ff9b:1::/48",
    ),
    ([0x0100, 0, 0, 0, 0, 0, 0, 0], 64, "discard-only", "100::/64"),
    (
        [0x2001, 0x0db8, 0, 0, 0, 0, 0, 0],
        32,
        "documentation",
        "2001:db8::/32",
    ),
    ([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7, "unique local (ULA)", "fc00::/7"),
    ([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10, "link-local", "fe80::/10"),
    (
        [0xfec0, 0, 0, 0, 0, 0, 0, 0],
        10,
        "site-local (deprecated)",
        "fec0::/10",
    ),
    ([0xff00, 0, 0, 0, 0, 0, 0, 0], 8, "multicast", "ff00::/8"),
];

/// The block that makes `ip` off limits, or `None` for an address a
/// crawler may connect to.
pub(crate) fn blocked_range(ip: IpAddr) -> Option<Range> {
    match ip {
        IpAddr::V4(v4) => blocked_v4(v4),
        IpAddr::V6(v6) => blocked_v6(v6),
    }
}

fn blocked_v4(ip: Ipv4Addr) -> Option<Range> {
    let bits = u32::from(ip);
    V4_BLOCKED
        .iter()
        .find(|(net, len, _, _)| prefix_matches(bits.into(), u32::from_be_bytes(*net).into(), *len, 32))
        .map(|&(_, _, name, cidr)| Range { name, cidr })
}

fn blocked_v6(ip: Ipv6Addr) -> Option<Range> {
    if ip.is_unspecified() {
        return Some(Range {
            name: "unspecified",
            cidr: "::/128",
        });
    }
    if ip.is_loopback() {
        return Some(Range {
            name: "loopback",
            cidr: "::1/128",
        });
    }
    if let Some((v4, form)) = embedded_v4(ip) {
        // Allowed when the IPv4 address inside is: ::ffff:8.8.8.8 is 8.8.8.8.
        return blocked_v4(v4).map(|_| form);
    }
    if let Some((server, client)) = teredo(ip) {
        // A relay tunnels to the client's address; the server takes part in
        // setting the tunnel up. Either one internal makes it internal.
        let form = Range {
            name: "Teredo of an internal address",
            cidr: "2001::/32",
        };
        return (blocked_v4(server).is_some() || blocked_v4(client).is_some()).then_some(form);
    }
    let bits = u128::from(ip);
    V6_BLOCKED
        .iter()
        .find(|(net, len, _, _)| prefix_matches(bits, u128::from(Ipv6Addr::from(*net)), *len, 128))
        .map(|&(_, _, name, cidr)| Range { name, cidr })
}

/// The IPv4 address an IPv6 address stands for, and the form it takes:
/// IPv4-mapped `::ffff:a.b.c.d` (a dual-stack socket connects to a.b.c.d),
/// IPv4-compatible `::a.b.c.d` (deprecated, RFC 4291), NAT64
/// `64:ff9b::a.b.c.d` (RFC 6052: a translator forwards to a.b.c.d) and 6to4
/// `2002:AABB:CCDD::/48` (RFC 3056: a relay tunnels to a.b.c.d).
fn embedded_v4(ip: Ipv6Addr) -> Option<(Ipv4Addr, Range)> {
    let s = ip.segments();
    let low = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    let form = |name, cidr| Range { name, cidr };
    match s {
        [0, 0, 0, 0, 0, 0xffff, _, _] => Some((low, form("IPv4-mapped internal address", "::ffff:0:0/96"))),
        [0, 0, 0, 0, 0, 0, _, _] => Some((low, form("IPv4-compatible internal address", "::/96"))),
        [0x0064, 0xff9b, 0, 0, 0, 0, _, _] => {
            Some((low, form("NAT64 of an internal address", "64:ff9b::/96")))
        }
        [0x2002, hi, lo, ..] => {
            let v4 = Ipv4Addr::new((hi >> 8) as u8, hi as u8, (lo >> 8) as u8, lo as u8);
            Some((v4, form("6to4 of an internal address", "2002::/16")))
        }
        _ => None,
    }
}

/// The Teredo server and client IPv4 addresses of `2001:0:SSSS:SSSS:flags:
/// port:CCCC:CCCC` (RFC 4380): the server in clear, the client's mapped
/// address with every bit inverted (so that NATs do not rewrite it).
fn teredo(ip: Ipv6Addr) -> Option<(Ipv4Addr, Ipv4Addr)> {
    match ip.segments() {
        [0x2001, 0, s0, s1, _, _, c0, c1] => Some((
            Ipv4Addr::from((u32::from(s0) << 16) | u32::from(s1)),
            Ipv4Addr::from(!((u32::from(c0) << 16) | u32::from(c1))),
        )),
        _ => None,
    }
}

/// Whether the first `len` of `width` bits of `addr` and `net` agree.
fn prefix_matches(addr: u128, net: u128, len: u32, width: u32) -> bool {
    let shift = width - len;
    addr >> shift == net >> shift
}

/// The address rule of one crawl: refuse internal addresses unless the
/// operator allowed them (`--allow-private-networks`, for an intranet crawl).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct AddressPolicy {
    pub allow_private_networks: bool,
}

impl AddressPolicy {
    /// `Err` when `ip` may not be dialled; `host` is the name it came from
    /// (for the message), or the literal itself.
    pub(crate) fn check(&self, host: &str, ip: IpAddr) -> Result<(), BlockedAddress> {
        if self.allow_private_networks {
            return Ok(());
        }
        match blocked_range(ip) {
            None => Ok(()),
            Some(range) => Err(BlockedAddress {
                host: host.to_string(),
                ip,
                range,
            }),
        }
    }
}

/// A connection refused by [`AddressPolicy`]. Travels as the error of the
/// fetcher's DNS resolver, so it can be told apart from a failed lookup.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "refused to connect to {host} ({ip}): {range} is an internal address \
     (--allow-private-networks allows it)"
)]
pub(crate) struct BlockedAddress {
    pub host: String,
    pub ip: IpAddr,
    pub range: Range,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocked(s: &str) -> Option<&'static str> {
        blocked_range(s.parse().unwrap()).map(|r| r.cidr)
    }

    #[test]
    fn internal_ipv4_blocks_are_refused_at_both_ends() {
        for (first, last, cidr) in [
            ("0.0.0.0", "0.255.255.255", "0.0.0.0/8"),
            ("10.0.0.0", "10.255.255.255", "10.0.0.0/8"),
            ("100.64.0.0", "100.127.255.255", "100.64.0.0/10"),
            ("127.0.0.0", "127.255.255.255", "127.0.0.0/8"),
            ("169.254.0.0", "169.254.255.255", "169.254.0.0/16"),
            ("172.16.0.0", "172.31.255.255", "172.16.0.0/12"),
            ("192.0.0.0", "192.0.0.255", "192.0.0.0/24"),
            ("192.0.2.0", "192.0.2.255", "192.0.2.0/24"),
            ("192.88.99.0", "192.88.99.255", "192.88.99.0/24"),
            ("192.168.0.0", "192.168.255.255", "192.168.0.0/16"),
            ("198.18.0.0", "198.19.255.255", "198.18.0.0/15"),
            ("198.51.100.0", "198.51.100.255", "198.51.100.0/24"),
            ("203.0.113.0", "203.0.113.255", "203.0.113.0/24"),
            ("224.0.0.0", "239.255.255.255", "224.0.0.0/4"),
            ("240.0.0.0", "255.255.255.254", "240.0.0.0/4"),
        ] {
            assert_eq!(blocked(first), Some(cidr), "{first}");
            assert_eq!(blocked(last), Some(cidr), "{last}");
        }
        assert_eq!(blocked("255.255.255.255"), Some("255.255.255.255/32"));
        assert_eq!(blocked("127.0.0.2"), Some("127.0.0.0/8"));
        assert_eq!(blocked("169.254.169.254"), Some("169.254.0.0/16"));
        let metadata = blocked_range("169.254.169.254".parse().unwrap()).unwrap();
        assert!(metadata.to_string().contains("metadata"), "{metadata}");
    }

    #[test]
    fn the_neighbours_of_internal_blocks_are_public() {
        for ip in [
            "1.1.1.1",
            "8.8.8.8",
            "9.255.255.255",
            "11.0.0.0",
            "100.63.255.255",
            "100.128.0.0",
            "126.255.255.255",
            "128.0.0.0",
            "169.253.255.255",
            "169.255.0.0",
            "172.15.255.255",
            "172.32.0.0",
            "192.0.1.0",
            "192.0.3.0",
            "192.88.98.255",
            "192.167.255.255",
            "192.169.0.0",
            "198.17.255.255",
            "198.20.0.0",
            "198.51.99.255",
            "203.0.112.255",
            "203.0.114.0",
            "223.255.255.255",
            "93.184.216.34",
        ] {
            assert_eq!(blocked(ip), None, "{ip}");
        }
    }

    #[test]
    fn internal_ipv6_blocks_are_refused() {
        for (ip, cidr) in [
            ("::", "::/128"),
            ("::1", "::1/128"),
            ("fe80::1", "fe80::/10"),
            ("febf:ffff::1", "fe80::/10"),
            ("fec0::1", "fec0::/10"),
            ("fc00::1", "fc00::/7"),
            ("fd12:3456:789a::1", "fc00::/7"),
            ("ff02::1", "ff00::/8"),
            ("ff0e::fb", "ff00::/8"),
            ("2001:db8::1", "2001:db8::/32"),
            ("100::1", "100::/64"),
            ("64:ff9b:1::1", "64:ff9b:1::/48"),
        ] {
            assert_eq!(blocked(ip), Some(cidr), "{ip}");
        }
    }

    #[test]
    fn public_ipv6_is_allowed() {
        for ip in [
            "2606:4700:4700::1111",
            "2001:4860:4860::8888",
            "2a00:1450:4001:80b::200e",
            "2001:db9::1",
            "fbff:ffff::1",
            "fe7f::1",
            "100:0:0:1::1",
            "64:ff9a::1",
        ] {
            assert_eq!(blocked(ip), None, "{ip}");
        }
    }

    #[test]
    fn ipv6_forms_of_internal_ipv4_addresses_are_refused() {
        for (ip, cidr) in [
            ("::ffff:127.0.0.1", "::ffff:0:0/96"),
            ("::ffff:7f00:2", "::ffff:0:0/96"),
            ("::ffff:169.254.169.254", "::ffff:0:0/96"),
            ("::ffff:10.1.2.3", "::ffff:0:0/96"),
            ("::ffff:0.0.0.0", "::ffff:0:0/96"),
            ("::127.0.0.1", "::/96"),
            ("::192.168.1.1", "::/96"),
            ("::0.0.0.2", "::/96"),
            ("64:ff9b::127.0.0.1", "64:ff9b::/96"),
            ("64:ff9b::a9fe:a9fe", "64:ff9b::/96"),
            ("64:ff9b::172.16.0.1", "64:ff9b::/96"),
            ("2002:7f00:1::", "2002::/16"),
            ("2002:a00:1::1", "2002::/16"),
            ("2002:c0a8:101:1::1", "2002::/16"),
            ("2002:a9fe:a9fe::", "2002::/16"),
            // Teredo: client 127.0.0.1 is stored inverted as 80ff:fffe.
            ("2001:0:4136:e378:8000:63bf:80ff:fffe", "2001::/32"),
            // Client 169.254.169.254 (inverted 5601:5601).
            ("2001:0:4136:e378::5601:5601", "2001::/32"),
            // A public client behind an internal Teredo server 10.0.0.1.
            ("2001:0:a00:1:8000:63bf:f7f7:f7f7", "2001::/32"),
        ] {
            assert_eq!(blocked(ip), Some(cidr), "{ip}");
        }
    }

    #[test]
    fn ipv6_forms_of_public_ipv4_addresses_are_allowed() {
        for ip in [
            "::ffff:8.8.8.8",
            "::ffff:93.184.216.34",
            "::8.8.8.8",
            "64:ff9b::8.8.8.8",
            "64:ff9b::101:101",
            "2002:808:808::1",
            "2002:5db8:d822::",
            // Teredo: server 65.54.227.120, client 8.8.8.8 (inverted f7f7:f7f7).
            "2001:0:4136:e378:8000:63bf:f7f7:f7f7",
        ] {
            assert_eq!(blocked(ip), None, "{ip}");
        }
    }

    #[test]
    fn the_policy_refuses_unless_private_networks_are_allowed() {
        let ip: IpAddr = "127.0.0.2".parse().unwrap();
        let err = AddressPolicy::default().check("localhost", ip).unwrap_err();
        assert_eq!(err.range.cidr, "127.0.0.0/8");
        let msg = err.to_string();
        for part in ["localhost", "127.0.0.2", "loopback", "--allow-private-networks"] {
            assert!(msg.contains(part), "{msg}");
        }
        let open = AddressPolicy {
            allow_private_networks: true,
        };
        assert_eq!(open.check("localhost", ip), Ok(()));
        let public: IpAddr = "8.8.8.8".parse().unwrap();
        assert_eq!(AddressPolicy::default().check("dns.google", public), Ok(()));
    }
}
