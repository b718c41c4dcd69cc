//! Real network links between the nodes of a test, on one machine: one
//! Linux network namespace per node, each joined by a veth pair to a bridge
//! in the root namespace, all on one private /24 the fixture picks.
//!
//! ```text
//!   root namespace:  bridge  10.213.X.1   (the web server, the store, relays)
//!                      |  |  |
//!                   veth veth veth        (one per node, ports of the bridge)
//!                      |  |  |
//!   namespaces:      eth0 eth0 eth0       10.213.X.2, .3, ...  (+ lo)
//! ```
//!
//! Why namespaces rather than more loopback addresses: a process in a
//! namespace has its own routing table, so nothing it does can reach an
//! address outside the /24 and its own loopback, and a link between two
//! nodes can be cut ([`Net::cut`]) without touching any other link. Each
//! namespace routes only the /24 (no default route): nothing leaves the
//! machine, and a lookup of a name the hosts file does not cover fails fast.
//!
//! The kernel here has no netem and the machine no iptables or nft, so a
//! cut is made with `tc` alone (see [`Net::cut`]), and latency is added by
//! a userspace relay ([`crate::relay::Relay`]).
//!
//! Everything is named `cn<pid>x<n>...` (the test process's pid, and a
//! per-process counter so that tests running in parallel threads of one
//! binary do not collide), torn down on drop (also while a test panics),
//! and what a crashed run left behind is removed by the next run
//! ([`Net::create`] deletes objects of that prefix whose pid is dead).

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::net::Ipv4Addr;
use std::process::Stdio;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

/// First two octets of the /24s the fixture picks from (10.213.X.0/24).
const NET_PREFIX: [u8; 2] = [10, 213];
/// Leading letters of every namespace and interface the fixture makes.
const TAG: &str = "cn";
/// At most this many nodes: a node's veth is `<prefix>v<index>`, and an
/// interface name has at most 15 bytes.
const MAX_NODES: usize = 99;
/// The namespace end of every veth.
const NS_IF: &str = "eth0";

/// Serialises picking a /24 and claiming it (the bridge's address), so two
/// tests of one binary never pick the same one.
static CREATE: Mutex<()> = Mutex::new(());

/// One node: a namespace with its end of a veth.
#[derive(Debug)]
struct Node {
    name: String,
    ns: String,
    /// The root-namespace end of the veth, a port of the bridge.
    veth: String,
    addr: Ipv4Addr,
}

/// Namespaces, veths and a bridge for one test; all deleted on drop.
#[derive(Debug)]
pub struct Net {
    bridge: String,
    host: Ipv4Addr,
    nodes: Vec<Node>,
    /// Cut links, as (node index, node index) with the smaller first.
    cuts: Mutex<BTreeSet<(usize, usize)>>,
}

impl Net {
    /// Builds a namespace per name in `nodes` (addresses .2, .3, ... in that
    /// order) and the bridge (.1). `Ok(None)`, after saying why on stderr,
    /// where namespaces cannot be made (not root, or the kernel or the
    /// container refuses): the caller skips its test. With
    /// [`REQUIRE_ENV`]`=1` it panics instead.
    pub fn create(nodes: &[&str]) -> anyhow::Result<Option<Net>> {
        if nodes.is_empty() || nodes.len() > MAX_NODES {
            bail!("a Net has 1 to {MAX_NODES} nodes, not {}", nodes.len());
        }
        let distinct: BTreeSet<&&str> = nodes.iter().collect();
        if distinct.len() != nodes.len() {
            bail!("node names repeat: {nodes:?}");
        }
        // SAFETY: geteuid(2) has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            skip("not running as root");
            return Ok(None);
        }
        let _serial = CREATE.lock().unwrap_or_else(|e| e.into_inner());
        remove_stale();

        static COUNTER: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % (36 * 36);
        let prefix = format!("{TAG}{}x{}", std::process::id(), base36(n));
        let third = pick_subnet()?;
        let host = Ipv4Addr::new(NET_PREFIX[0], NET_PREFIX[1], third, 1);
        let net = Net {
            bridge: format!("{prefix}b"),
            host,
            nodes: nodes
                .iter()
                .enumerate()
                .map(|(i, name)| Node {
                    name: name.to_string(),
                    ns: format!("{prefix}-{}", sanitize(name)),
                    veth: format!("{prefix}v{i}"),
                    addr: Ipv4Addr::new(NET_PREFIX[0], NET_PREFIX[1], third, i as u8 + 2),
                })
                .collect(),
            cuts: Mutex::new(BTreeSet::new()),
        };
        // Leftovers under these exact names are from a dead process that had
        // our pid (the counter keeps our own live Nets apart).
        net.teardown();

        // From here on a failure drops `net`, which deletes what was made.
        if let Err(e) = ip(&["netns", "add", &net.nodes[0].ns]) {
            skip(&format!("{e:#}"));
            return Ok(None);
        }
        // No bridge netfilter on our bridge (a host with iptables rules for
        // bridged traffic, as Docker installs, would otherwise filter it);
        // older iproute2 lacks the options, and then nothing filters anyway
        // on a machine without iptables.
        let bridge = net.bridge.clone();
        if ip(&[
            "link",
            "add",
            &bridge,
            "type",
            "bridge",
            "nf_call_iptables",
            "0",
            "nf_call_ip6tables",
            "0",
            "nf_call_arptables",
            "0",
        ])
        .is_err()
        {
            if let Err(e) = ip(&["link", "add", &bridge, "type", "bridge"]) {
                skip(&format!("{e:#}"));
                return Ok(None);
            }
        }
        let cidr = format!("{host}/24");
        ip(&["addr", "add", &cidr, "dev", &bridge])?;
        ip(&["link", "set", &bridge, "up"])?;
        // Another process may have claimed the same /24 meanwhile.
        let holders = subnet_holders(third)?;
        if holders.iter().any(|h| h != &bridge) {
            bail!("10.213.{third}.0/24 is also on {holders:?}: pick again (run the test again)");
        }
        for i in 0..net.nodes.len() {
            net.add_node(i)?;
        }
        net.wait_forwarding()?;
        Ok(Some(net))
    }

    fn add_node(&self, i: usize) -> anyhow::Result<()> {
        let node = &self.nodes[i];
        if i > 0 {
            ip(&["netns", "add", &node.ns])?;
        }
        ip(&[
            "link", "add", &node.veth, "type", "veth", "peer", "name", NS_IF, "netns", &node.ns,
        ])?;
        ip(&["link", "set", &node.veth, "master", &self.bridge, "up"])?;
        let cidr = format!("{}/24", node.addr);
        // The /24's kernel route is the only route: no default.
        ip(&["-n", &node.ns, "addr", "add", &cidr, "dev", NS_IF])?;
        ip(&["-n", &node.ns, "link", "set", NS_IF, "up"])?;
        // The debug endpoints listen on 127.0.0.1, which needs lo up.
        ip(&["-n", &node.ns, "link", "set", "lo", "up"])?;
        Ok(())
    }

    /// Waits until every veth forwards on the bridge (immediately without
    /// STP, but said rather than assumed).
    fn wait_forwarding(&self) -> anyhow::Result<()> {
        const FORWARDING: &str = "3";
        let deadline = Instant::now() + Duration::from_secs(5);
        for node in &self.nodes {
            let path = format!("/sys/class/net/{}/brport/state", node.veth);
            loop {
                match std::fs::read_to_string(&path) {
                    Ok(s) if s.trim() == FORWARDING => break,
                    // No sysfs (unusual): trust the bridge.
                    Err(_) if !std::path::Path::new("/sys/class/net").exists() => break,
                    state => {
                        if Instant::now() > deadline {
                            bail!("{} is not forwarding on {}: {state:?}", node.veth, self.bridge);
                        }
                        std::thread::sleep(Duration::from_millis(20));
                    }
                }
            }
        }
        Ok(())
    }

    fn node(&self, name: &str) -> anyhow::Result<(usize, &Node)> {
        self.nodes
            .iter()
            .enumerate()
            .find(|(_, n)| n.name == name)
            .with_context(|| format!("no node {name:?} in this Net"))
    }

    /// Node `node`'s address (on its `eth0`).
    ///
    /// # Panics
    /// If there is no such node (a bug in the test).
    pub fn addr(&self, node: &str) -> Ipv4Addr {
        match self.node(node) {
            Ok((_, n)) => n.addr,
            Err(e) => panic!("{e}"),
        }
    }

    /// The bridge's address in the root namespace: where the test's own
    /// servers (the web, the store, relays) listen for the nodes.
    pub fn host_addr(&self) -> Ipv4Addr {
        self.host
    }

    /// The name of node `node`'s namespace (for `ip netns exec`).
    ///
    /// # Panics
    /// If there is no such node.
    pub fn ns(&self, node: &str) -> &str {
        match self.node(node) {
            Ok((_, n)) => &n.ns,
            Err(e) => panic!("{e}"),
        }
    }

    /// The node names, in address order.
    pub fn nodes(&self) -> Vec<&str> {
        self.nodes.iter().map(|n| n.name.as_str()).collect()
    }

    /// `ip netns exec <ns> program`: `program` runs in node `node`'s
    /// namespace. `ip` execs it, so the child's pid is the program's, and
    /// `kill_on_drop` and signals reach it.
    ///
    /// # Panics
    /// If there is no such node.
    pub fn command(&self, node: &str, program: impl AsRef<std::ffi::OsStr>) -> tokio::process::Command {
        ns_command(self.ns(node), program)
    }

    /// Runs `f` on a new thread that has entered node `node`'s namespace,
    /// and returns what it returns. Sockets made in `f` stay in that
    /// namespace wherever they are used afterwards (a listener can be
    /// handed to tokio with `from_std`), which lets a test play a node
    /// without a helper program.
    pub fn run_in<R, F>(&self, node: &str, f: F) -> anyhow::Result<R>
    where
        F: FnOnce() -> R + Send,
        R: Send,
    {
        let path = format!("/run/netns/{}", self.node(node)?.1.ns);
        let file = std::fs::File::open(&path).with_context(|| format!("opening {path}"))?;
        std::thread::scope(|s| {
            s.spawn(move || {
                use std::os::fd::AsRawFd;
                // SAFETY: setns(2) on an fd we own; it changes only this
                // thread's network namespace (allowed in a threaded process).
                if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                    return Err(std::io::Error::last_os_error()).with_context(|| format!("setns {path}"));
                }
                Ok(f())
            })
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
        })
    }

    /// Drops all IPv4 traffic between nodes `a` and `b`, both ways, and
    /// nothing else: each still reaches the host (the web and the store)
    /// and every other node. [`Net::heal`] undoes it.
    ///
    /// How, with `tc` alone (no netem, no iptables here): on each side's
    /// `eth0`, an HTB root qdisc whose default class passes everything,
    /// and a second class whose leaf is `pfifo limit 0` (a queue that can
    /// hold nothing, so it drops every packet); a u32 filter on
    /// `ip dst <peer>` sends the packets for the peer there. Each side
    /// drops what it sends, so both directions are cut. The filter's
    /// priority is the peer's last octet, so each peer's filter can be
    /// removed alone.
    pub fn cut(&self, a: &str, b: &str) -> anyhow::Result<()> {
        let (ia, ib) = self.pair(a, b)?;
        let mut cuts = self.cuts.lock().unwrap_or_else(|e| e.into_inner());
        if cuts.contains(&(ia.min(ib), ia.max(ib))) {
            return Ok(());
        }
        for (from, to) in [(ia, ib), (ib, ia)] {
            if !cuts.iter().any(|&(x, y)| x == from || y == from) {
                self.install_qdisc(from)?;
            }
            let node = &self.nodes[from];
            let peer = self.nodes[to].addr;
            let dst = format!("{peer}/32");
            let prio = peer.octets()[3].to_string();
            tc_in(
                &node.ns,
                &[
                    "filter", "add", "dev", NS_IF, "parent", "1:", "protocol", "ip", "prio", &prio, "u32",
                    "match", "ip", "dst", &dst, "flowid", "1:2",
                ],
            )?;
        }
        cuts.insert((ia.min(ib), ia.max(ib)));
        Ok(())
    }

    /// Undoes [`Net::cut`] of `a` and `b` (nothing when they are not cut);
    /// a side left with no cut gets its original qdisc back.
    pub fn heal(&self, a: &str, b: &str) -> anyhow::Result<()> {
        let (ia, ib) = self.pair(a, b)?;
        let mut cuts = self.cuts.lock().unwrap_or_else(|e| e.into_inner());
        if !cuts.remove(&(ia.min(ib), ia.max(ib))) {
            return Ok(());
        }
        for (from, to) in [(ia, ib), (ib, ia)] {
            let node = &self.nodes[from];
            if cuts.iter().any(|&(x, y)| x == from || y == from) {
                let prio = self.nodes[to].addr.octets()[3].to_string();
                tc_in(
                    &node.ns,
                    &[
                        "filter", "del", "dev", NS_IF, "parent", "1:", "protocol", "ip", "prio", &prio, "u32",
                    ],
                )?;
            } else {
                tc_in(&node.ns, &["qdisc", "del", "dev", NS_IF, "root"])?;
            }
        }
        Ok(())
    }

    /// The HTB root of [`Net::cut`] on node `i`'s `eth0`: class 1:1 (the
    /// default) passes, class 1:2 drops. The rates are far above anything
    /// a test sends, so the default class never shapes; the quantum is
    /// explicit because HTB derives an oversized one from such rates.
    fn install_qdisc(&self, i: usize) -> anyhow::Result<()> {
        let ns = self.nodes[i].ns.as_str();
        tc_in(
            ns,
            &[
                "qdisc", "add", "dev", NS_IF, "root", "handle", "1:", "htb", "default", "1",
            ],
        )?;
        for class in ["1:1", "1:2"] {
            tc_in(
                ns,
                &[
                    "class", "add", "dev", NS_IF, "parent", "1:", "classid", class, "htb", "rate", "100gbit",
                    "quantum", "60000",
                ],
            )?;
        }
        tc_in(
            ns,
            &[
                "qdisc", "add", "dev", NS_IF, "parent", "1:2", "handle", "2:", "pfifo", "limit", "0",
            ],
        )
    }

    fn pair(&self, a: &str, b: &str) -> anyhow::Result<(usize, usize)> {
        let (ia, _) = self.node(a)?;
        let (ib, _) = self.node(b)?;
        if ia == ib {
            bail!("cannot cut node {a:?} from itself");
        }
        Ok((ia, ib))
    }

    /// Deletes everything of this Net that exists, ignoring what does not
    /// (also used before creating, on leftovers under the same names).
    fn teardown(&self) {
        let namespaces: Vec<String> = self.nodes.iter().map(|n| n.ns.clone()).collect();
        let links: Vec<String> = self
            .nodes
            .iter()
            .map(|n| n.veth.clone())
            .chain([self.bridge.clone()])
            .collect();
        delete(&namespaces, &links);
    }
}

impl Drop for Net {
    /// Kills what still runs in the namespaces, then deletes them, the
    /// veths (with their qdiscs) and the bridge.
    fn drop(&mut self) {
        self.teardown();
    }
}

/// A command that runs `program` in namespace `ns` (see [`Net::command`]).
pub fn ns_command(ns: &str, program: impl AsRef<std::ffi::OsStr>) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new("ip");
    cmd.args(["netns", "exec", ns]).arg(program);
    cmd
}

/// Kills every process in `namespaces`, deletes the namespaces and the
/// `links` (root-namespace interfaces); whatever is already gone is skipped.
fn delete(namespaces: &[String], links: &[String]) {
    let existing = list_namespaces();
    let namespaces: Vec<&String> = namespaces.iter().filter(|n| existing.contains(*n)).collect();
    let mut killed = Vec::new();
    for ns in &namespaces {
        // A namespace lives on while a process is in it, and with it the veth.
        for pid in netns_pids(ns) {
            // SAFETY: kill(2) has no memory-safety preconditions.
            unsafe {
                libc::kill(pid as i32, libc::SIGKILL);
            }
            killed.push(pid);
        }
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while killed.iter().any(|p| alive(*p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let present = list_links();
    for link in links.iter().filter(|l| present.contains(*l)) {
        // Deleting a veth's root end deletes its pair (and the qdiscs on it).
        let _ = ip(&["link", "del", link]);
    }
    for ns in namespaces {
        let _ = ip(&["netns", "del", ns]);
    }
}

/// Whether `pid` runs (a zombie has left its namespaces: not running).
fn alive(pid: u32) -> bool {
    crate::procfs::stat(pid).is_some_and(|s| !s.exited())
}

/// Deletes namespaces and interfaces that a previous run left behind:
/// named `cn<pid>x...` where that pid no longer runs.
fn remove_stale() {
    let me = std::process::id();
    let dead = |name: &str| stale_pid(name).is_some_and(|pid| pid != me && !alive(pid));
    let namespaces: Vec<String> = list_namespaces().into_iter().filter(|n| dead(n)).collect();
    let links: Vec<String> = list_links().into_iter().filter(|n| dead(n)).collect();
    if !namespaces.is_empty() || !links.is_empty() {
        eprintln!("netns: removing leftovers of dead test runs: {namespaces:?} {links:?}");
        delete(&namespaces, &links);
    }
}

/// The pid in a name `cn<pid>x...`.
fn stale_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(TAG)?;
    let digits = rest.find(|c: char| !c.is_ascii_digit())?;
    if digits == 0 || !rest[digits..].starts_with('x') {
        return None;
    }
    rest[..digits].parse().ok()
}

/// A free 10.213.X.0/24: X starts from our pid, and one is free when no
/// interface address and no route of the machine is in it.
fn pick_subnet() -> anyhow::Result<u8> {
    let addrs = command_output("ip", &["-4", "-o", "addr", "show"])?;
    let routes = command_output("ip", &["-4", "route", "show", "table", "all"])?;
    let start = std::process::id() as usize;
    for k in 0..254 {
        // 37 is prime to 254: the walk visits every X once.
        let third = ((start + k * 37) % 254 + 1) as u8;
        let net = format!(" {}.{}.{third}.", NET_PREFIX[0], NET_PREFIX[1]);
        let route = format!("{}.{}.{third}.", NET_PREFIX[0], NET_PREFIX[1]);
        let taken = addrs.lines().any(|l| l.contains(&net))
            || routes
                .lines()
                .any(|l| l.split_whitespace().any(|w| w.starts_with(&route)));
        if !taken {
            return Ok(third);
        }
    }
    bail!("every 10.213.X.0/24 is in use on this machine")
}

/// The interfaces that hold an address in 10.213.`third`.0/24.
fn subnet_holders(third: u8) -> anyhow::Result<Vec<String>> {
    let addrs = command_output("ip", &["-4", "-o", "addr", "show"])?;
    let net = format!(" {}.{}.{third}.", NET_PREFIX[0], NET_PREFIX[1]);
    Ok(addrs
        .lines()
        .filter(|l| l.contains(&net))
        .filter_map(|l| l.split_whitespace().nth(1).map(str::to_string))
        .collect())
}

fn list_namespaces() -> BTreeSet<String> {
    command_output("ip", &["netns", "list"])
        .unwrap_or_default()
        .lines()
        // "name (id: 3)" or "name".
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

fn list_links() -> BTreeSet<String> {
    command_output("ip", &["-o", "link", "show"])
        .unwrap_or_default()
        .lines()
        // "12: name@if2: <...>" or "4: name: <...>".
        .filter_map(|l| l.split(": ").nth(1))
        .map(|n| n.split('@').next().unwrap_or(n).to_string())
        .collect()
}

fn netns_pids(ns: &str) -> Vec<u32> {
    command_output("ip", &["netns", "pids", ns])
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// Runs `ip ARGS`; fails with its stderr.
fn ip(args: &[&str]) -> anyhow::Result<()> {
    command_output("ip", args).map(drop)
}

/// Runs `tc -n NS ARGS` (in namespace `ns`); fails with its stderr.
fn tc_in(ns: &str, args: &[&str]) -> anyhow::Result<()> {
    let mut all = vec!["-n", ns];
    all.extend_from_slice(args);
    command_output("tc", &all).map(drop)
}

/// Runs `program ARGS` to completion and returns its stdout; a failure
/// says the command line and what it printed on stderr.
fn command_output(program: &str, args: &[&str]) -> anyhow::Result<String> {
    let line = || format!("{program} {}", args.join(" "));
    let out = std::process::Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {}", line()))?;
    if !out.status.success() {
        bail!(
            "{} failed ({}): {}",
            line(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Set to `1` (as `.ci/run` does), a test that cannot make its namespaces
/// fails instead of skipping: a skipped test passes, and would hide a CI
/// machine where these tests never run.
pub const REQUIRE_ENV: &str = "CRAWLER_REQUIRE_NETNS";

fn skip(why: &str) {
    if std::env::var(REQUIRE_ENV).is_ok_and(|v| v == "1") {
        panic!("cannot create network namespaces ({why}), and {REQUIRE_ENV}=1 requires them");
    }
    eprintln!("skipping: cannot create network namespaces: {why}");
}

/// `n` in base 36 (two digits at most for the counter's range).
fn base36(mut n: u32) -> String {
    const DIGITS: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    loop {
        out.push(DIGITS[(n % 36) as usize]);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    out.reverse();
    String::from_utf8_lossy(&out).into_owned()
}

/// A node name as a namespace-name part: letters, digits, `-` and `_`.
fn sanitize(name: &str) -> String {
    let mut s = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
            s.push(c);
        } else {
            let _ = write!(s, "_{:x}", u32::from(c));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use std::net::{SocketAddr, TcpListener, TcpStream};

    use super::*;

    #[test]
    fn stale_names_are_parsed() {
        assert_eq!(stale_pid("cn1234x0-d"), Some(1234));
        assert_eq!(stale_pid("cn1234x1zb"), Some(1234));
        assert_eq!(stale_pid("cn1234xav12"), Some(1234));
        assert_eq!(stale_pid("cnx0b"), None);
        assert_eq!(stale_pid("cn12b"), None);
        assert_eq!(stale_pid("eth0"), None);
        assert_eq!(base36(0), "0");
        assert_eq!(base36(36 * 36 - 1), "zz");
        // The longest interface name fits in 15 bytes.
        let longest = format!("{TAG}{}x{}v{}", 4_194_304, base36(36 * 36 - 1), MAX_NODES - 1);
        assert!(longest.len() <= 15, "{longest}");
    }

    /// Whether a TCP connection from inside `from` to `to` is accepted
    /// within `wait` (a listener's backlog completes it without `accept`).
    fn connects(net: &Net, from: &str, to: SocketAddr, wait: Duration) -> bool {
        net.run_in(from, || TcpStream::connect_timeout(&to, wait).is_ok())
            .expect("entering the namespace")
    }

    /// A listener on port `port` of every address of node `node` (kept open
    /// by the returned value).
    fn listen_in(net: &Net, node: &str) -> (TcpListener, SocketAddr) {
        let addr = SocketAddr::from((net.addr(node), 0));
        let l = net
            .run_in(node, || TcpListener::bind(addr))
            .expect("entering the namespace")
            .expect("binding in the namespace");
        let a = l.local_addr().expect("local addr");
        (l, a)
    }

    #[test]
    fn netns_cut_drops_only_the_link_between_two_nodes_and_heal_restores_it() {
        let Some(net) = Net::create(&["a", "b", "c"]).expect("creating the Net") else {
            return;
        };
        let names: Vec<String> = net.nodes.iter().map(|n| n.ns.clone()).collect();
        let host = TcpListener::bind((net.host_addr(), 0)).expect("binding the host address");
        let host = host.local_addr().expect("host addr");
        let listeners: Vec<(TcpListener, SocketAddr)> =
            ["a", "b", "c"].iter().map(|n| listen_in(&net, n)).collect();
        let [a, b, c] = [listeners[0].1, listeners[1].1, listeners[2].1];
        let ok = Duration::from_secs(5);
        let cut = Duration::from_millis(1500);

        assert!(connects(&net, "a", b, ok), "a -> b before the cut");
        assert!(connects(&net, "b", a, ok), "b -> a before the cut");
        // Nothing outside the /24 and loopback is routed from a node.
        let outside: SocketAddr = "192.0.2.1:9".parse().expect("literal");
        assert!(
            !connects(&net, "a", outside, cut),
            "a node reached outside its /24"
        );

        net.cut("a", "b").expect("cut");
        assert!(!connects(&net, "a", b, cut), "a -> b during the cut");
        assert!(!connects(&net, "b", a, cut), "b -> a during the cut");
        assert!(connects(&net, "a", host, ok), "a -> host during the cut");
        assert!(connects(&net, "b", host, ok), "b -> host during the cut");
        assert!(connects(&net, "a", c, ok), "a -> c during the cut");
        assert!(connects(&net, "c", b, ok), "c -> b during the cut");

        // A second cut on the same side, then healing the first only.
        net.cut("a", "c").expect("second cut");
        assert!(!connects(&net, "a", c, cut), "a -> c during its cut");
        net.heal("a", "b").expect("heal");
        assert!(connects(&net, "a", b, ok), "a -> b after the heal");
        assert!(connects(&net, "b", a, ok), "b -> a after the heal");
        assert!(!connects(&net, "c", a, cut), "c -> a still cut");
        net.heal("a", "c").expect("heal");
        assert!(connects(&net, "c", a, ok), "c -> a after the heal");
        assert!(connects(&net, "a", host, ok), "a -> host at the end");

        // Drop removes everything, also with a process left in a namespace.
        let mut sleeper = std::process::Command::new("ip")
            .args(["netns", "exec", &names[1], "sleep", "60"])
            .spawn()
            .expect("starting sleep in a namespace");
        std::thread::sleep(Duration::from_millis(200));
        let bridge = net.bridge.clone();
        drop(listeners);
        drop(net);
        let _ = sleeper.wait();
        let left = list_namespaces();
        assert!(
            names.iter().all(|n| !left.contains(n)),
            "namespaces left: {left:?}"
        );
        let links = list_links();
        assert!(!links.contains(&bridge), "bridge {bridge} left");
        assert!(
            !links.iter().any(|l| l.starts_with(&bridge[..bridge.len() - 1])),
            "links left: {links:?}"
        );
    }

    /// The layout the harness uses: a relay in the root namespace on the
    /// bridge's address, dialled from one node, dialling another.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn netns_relay_on_the_bridge_links_two_nodes() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};

        let Some(net) = Net::create(&["d", "n1"]).expect("creating the Net") else {
            return;
        };
        let (echo, target) = listen_in(&net, "d");
        echo.set_nonblocking(true).expect("non-blocking");
        let echo = tokio::net::TcpListener::from_std(echo).expect("tokio listener");
        tokio::spawn(async move {
            while let Ok((mut s, _)) = echo.accept().await {
                tokio::spawn(async move {
                    let (mut r, mut w) = s.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        });
        let delay = Duration::from_millis(20);
        let relay =
            crate::relay::Relay::start(SocketAddr::from((net.host_addr(), 0)), target, delay).expect("relay");
        let to = relay.addr();
        let client = net
            .run_in("n1", || TcpStream::connect_timeout(&to, Duration::from_secs(5)))
            .expect("entering the namespace")
            .expect("n1 connects to the relay");
        client.set_nonblocking(true).expect("non-blocking");
        let mut client = tokio::net::TcpStream::from_std(client).expect("tokio stream");
        let t = Instant::now();
        client.write_all(b"hello").await.expect("write");
        let mut buf = [0u8; 5];
        client.read_exact(&mut buf).await.expect("read");
        let rtt = t.elapsed();
        assert_eq!(&buf, b"hello");
        assert!(rtt >= 2 * delay, "round trip {rtt:?}");
        let peer = client.local_addr().expect("local addr");
        assert_eq!(
            peer.ip(),
            std::net::IpAddr::V4(net.addr("n1")),
            "the client is n1"
        );
        drop(client);
        drop(relay);
    }

    #[test]
    fn netns_leftovers_of_a_dead_run_are_removed() {
        // SAFETY: geteuid(2) cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            skip("not running as root");
            return;
        }
        // A pid that runs nothing: a child that has exited and been reaped.
        let mut child = std::process::Command::new("true").spawn().expect("spawning true");
        let _ = child.wait();
        let dead = child.id();
        let ns = format!("{TAG}{dead}x0-d");
        let link = format!("{TAG}{dead}x0b");
        if let Err(e) = ip(&["netns", "add", &ns]) {
            skip(&format!("{e:#}"));
            return;
        }
        ip(&["link", "add", &link, "type", "bridge"]).expect("adding a bridge");
        let Some(net) = Net::create(&["x"]).expect("creating the Net") else {
            return;
        };
        assert!(!list_namespaces().contains(&ns), "stale namespace {ns} left");
        assert!(!list_links().contains(&link), "stale bridge {link} left");
        drop(net);
    }
}
