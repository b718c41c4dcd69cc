//! Per-server politeness: one gap between requests to one IP address,
//! whatever host names they are for.
//!
//! A domain's pace (`politeness`) keeps one host name polite; a server of
//! a thousand names (virtual hosting, a site of many sub-domains) would
//! still see a thousand requests a gap. So the dispatcher gives every
//! domain of one server to one supervisor, the supervisor gives them to
//! one child (its placement is by server), and the server is paced here,
//! in memory, as a domain is. A request to a paced server holds the
//! server's turn from its start until its response has ended, and the next
//! starts at least the gap later: the server sees one request at a time
//! from the whole crawl, never two closer than the gap, whenever it logs
//! them.
//!
//! A gate met for the first time starts one gap from now, not at once:
//! the server's names may have been crawled by another child until just
//! now (its node left, or a name moved), and that child's last request
//! is not known here.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use shared::timing::{Op, TimingLog};

use crate::prune::Pruning;
use tokio::sync::MutexGuard;
use tokio::time::Instant;

/// The longest gap kept: a flag's value is clamped to it, so instant
/// arithmetic cannot overflow.
const MAX_GAP: Duration = Duration::from_secs(3600);

/// The address a domain's requests go to, and how it was found.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Server {
    /// The address dialled first.
    pub first: IpAddr,
    /// Every address the name may be dialled at, `first` among them; one
    /// for an address literal or a name the operator mapped.
    pub addrs: Vec<IpAddr>,
    /// Named by the operator (`--resolve`/`--hosts-file`, or an internal
    /// address allowed with `--allow-private-networks`) rather than found
    /// in public DNS: paced by `named_server_delay_ms`.
    pub named: bool,
}

/// The gates of the servers this child paces.
#[derive(Default)]
pub(crate) struct ServerPaces {
    gates: Mutex<Gates>,
}

#[derive(Default)]
struct Gates {
    by_addr: HashMap<IpAddr, Arc<ServerGate>>,
    pruning: Pruning,
}

/// One server's turn: when its next request may start.
pub(crate) struct ServerGate {
    next: tokio::sync::Mutex<Instant>,
}

/// The server's turn, held while a request to it is in progress; when it
/// ends, the next request may start `gap` later.
pub(crate) struct Turn<'a> {
    next: MutexGuard<'a, Instant>,
    gap: Duration,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        *self.next = (*self.next).max(Instant::now() + self.gap);
    }
}

impl ServerPaces {
    /// The gate of `addr`, made now (its first turn a `gap` away) if this
    /// child had none.
    pub(crate) fn gate(&self, addr: IpAddr, gap: Duration) -> Arc<ServerGate> {
        let Ok(mut g) = self.gates.lock() else {
            // A poisoned map (a panic while it was held) cannot be trusted
            // to hold the gates: a gate of its own still paces this task.
            return Arc::new(ServerGate::new(gap));
        };
        if let Some(gate) = g.by_addr.get(&addr) {
            return gate.clone();
        }
        let now = Instant::now();
        let Gates { by_addr, pruning } = &mut *g;
        pruning.retain_if_grown(by_addr, |_, gate| gate.needed(now));
        let gate = Arc::new(ServerGate::new(gap));
        g.by_addr.insert(addr, gate.clone());
        gate
    }

    /// Servers this child holds a gate for.
    pub(crate) fn len(&self) -> usize {
        self.gates.lock().map_or(0, |g| g.by_addr.len())
    }
}

impl Gates {
    /// Drops the gates not needed now, whatever the map's size (tests; the
    /// crawl looks only when the map has grown, in [`ServerPaces::gate`]).
    #[cfg(test)]
    fn prune(&mut self) {
        let now = Instant::now();
        self.pruning.retain(&mut self.by_addr, |_, gate| gate.needed(now));
    }
}

impl ServerGate {
    /// Whether the gate must be kept at `now`: held, or its next turn not
    /// due yet. One dropped and made again would start a gap from then.
    fn needed(self: &Arc<Self>, now: Instant) -> bool {
        Arc::strong_count(self) > 1 || self.next.try_lock().map_or(true, |next| *next > now)
    }

    fn new(gap: Duration) -> ServerGate {
        ServerGate {
            next: tokio::sync::Mutex::new(Instant::now() + gap.min(MAX_GAP)),
        }
    }

    /// Waits until no other request to the server is in progress and its
    /// gap has passed, and takes its turn. The wait is bounded: each turn
    /// ahead lasts at most one request (which has its own timeout) and one
    /// gap.
    pub(crate) async fn turn(&self, gap: Duration, timing: &TimingLog, domain: &str) -> Turn<'_> {
        let asked = Instant::now();
        let next = self.next.lock().await;
        if *next > Instant::now() {
            tokio::time::sleep_until(*next).await;
        }
        let waited = asked.elapsed();
        if !waited.is_zero() {
            timing.record(Op::ServerWait, waited, "waited", Some(domain), None);
        }
        Turn {
            next,
            gap: gap.min(MAX_GAP),
        }
    }
}

/// In real time, not tokio's paused clock: its `test-util` feature, as a
/// dev-dependency, gave the tests a tokio of other features than the
/// binaries', and a release test build then compiled tokio and everything
/// above it twice. The gaps are tens of ms; only lower bounds are asserted.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::prune::PRUNE_FROM;

    fn timing() -> TimingLog {
        TimingLog::disabled()
    }

    #[tokio::test]
    async fn requests_to_one_server_go_one_at_a_time_a_gap_apart() {
        let paces = Arc::new(ServerPaces::default());
        let addr: IpAddr = "192.0.2.7".parse().unwrap();
        let gap = Duration::from_millis(100);
        let t0 = Instant::now();
        let starts = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for i in 0..4u64 {
            let (paces, starts) = (paces.clone(), starts.clone());
            tasks.push(tokio::spawn(async move {
                let gate = paces.gate(addr, gap);
                let _turn = gate.turn(gap, &timing(), &format!("d{i}.test")).await;
                let start = Instant::now();
                // A request of 30 ms, for four names of the server.
                tokio::time::sleep(Duration::from_millis(30)).await;
                starts.lock().unwrap().push((start, Instant::now()));
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        let mut s = starts.lock().unwrap().clone();
        s.sort();
        // The first waits a gap (a new gate), each next one a gap after
        // the previous response ended.
        assert!(s[0].0 - t0 >= gap, "{:?}", s[0].0 - t0);
        for w in s.windows(2) {
            assert!(w[1].0 >= w[0].1 + gap, "{:?}", w);
        }
        assert_eq!(paces.len(), 1);
    }

    #[tokio::test]
    async fn other_servers_do_not_wait() {
        let paces = ServerPaces::default();
        let gap = Duration::from_millis(50);
        let a = paces.gate("192.0.2.1".parse().unwrap(), gap);
        let b = paces.gate("192.0.2.2".parse().unwrap(), gap);
        let t0 = Instant::now();
        let _held = a.turn(gap, &timing(), "a.test").await;
        // Were b's turn a's, it would wait for `_held`: for ever.
        let other = tokio::time::timeout(Duration::from_secs(30), b.turn(gap, &timing(), "b.test")).await;
        assert!(other.is_ok(), "b waited for a's turn");
        assert!(t0.elapsed() >= gap, "b's first turn is a gap away too");
    }

    #[tokio::test]
    async fn idle_gates_are_pruned_and_held_ones_kept() {
        let paces = ServerPaces::default();
        // Long enough that none comes due while the map fills.
        let gap = Duration::from_millis(500);
        let held = paces.gate("198.51.100.1".parse().unwrap(), gap);
        for i in 0..PRUNE_FROM as u32 {
            paces.gate(IpAddr::from(i.to_be_bytes()), gap);
        }
        // None was due when the map filled: all kept.
        assert_eq!(paces.len(), PRUNE_FROM + 1);
        tokio::time::sleep(gap * 2).await;
        paces.gates.lock().unwrap().prune();
        assert_eq!(paces.len(), 1, "only the held gate");
        assert!(Arc::ptr_eq(
            &held,
            &paces.gate("198.51.100.1".parse().unwrap(), gap)
        ));
    }
}
