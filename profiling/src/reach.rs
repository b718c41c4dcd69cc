//! Where another machine reaches a process's debug server, from the
//! address it reports (`/debug/cluster`) and its node's name: what
//! `cluster-profile` connects to and what the dispatcher's `/debug/targets`
//! hands Prometheus.

use std::net::SocketAddr;

/// `host:port` for `debug_addr` on `node`: the address itself, but a
/// wildcard bind address (`0.0.0.0`, `::`) says nothing about where to
/// connect, so the node's name stands for the host.
pub fn reachable_addr(debug_addr: &str, node: &str) -> String {
    match debug_addr.parse::<SocketAddr>() {
        Ok(addr) if addr.ip().is_unspecified() => format!("{node}:{}", addr.port()),
        _ => debug_addr.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wildcard_address_is_reached_at_the_nodes_name() {
        assert_eq!(reachable_addr("127.0.0.1:1234", "n1"), "127.0.0.1:1234");
        assert_eq!(reachable_addr("[::1]:1234", "n1"), "[::1]:1234");
        assert_eq!(reachable_addr("0.0.0.0:1234", "n1"), "n1:1234");
        assert_eq!(reachable_addr("[::]:1234", "n1"), "n1:1234");
    }
}
