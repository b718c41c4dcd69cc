//! Rebalancing: a supervisor that joins (or rejoins) a running crawl gets
//! a fair share of the domains within seconds.
//!
//! New domains already go to the supervisor with the fewest, but a crawl
//! whose domains are all known when a node joins would leave it idle:
//! every domain keeps its owner, so that one child alone paces it. So,
//! after a supervisor joins, the domains that have work are counted per
//! live supervisor, and each supervisor over its fair share (the ceiling
//! of domains with work over live supervisors) gives the excess to those
//! under it. A domain moves only when nothing of it is in flight: one to
//! move stops being leased to its owner and moves when its last lease
//! ends (a result, or the owner leaving). It is then held for
//! [`HANDOVER_MS`] before the new owner gets a URL of it: by then the old
//! owner's child has written the domain's last-crawled time to the second
//! store (it flushes every second), and the new owner's child, which reads
//! it before its first request, keeps the domain's pace across the move.
//!
//! Counted in `crawler_domains_moved_total`; the domains each supervisor
//! owns are the `crawler_supervisor_domains` gauge.

use super::moves::HANDOVER_MS;
use super::{Frontier, SupId};

impl Frontier {
    /// Once a second: when a supervisor joined since the last call, starts
    /// moving domains from supervisors over their fair share to those
    /// under it. One pass over the domains, only then. Returns the domains
    /// that wait for URLs in flight, by owner: the shell asks the owner to
    /// hand back those it has not started (`ToSupervisor::Recall`), so a
    /// paced domain moves within about one request, not after every URL
    /// its child holds.
    pub(crate) fn rebalance(&mut self) -> Vec<(SupId, Vec<String>)> {
        let mut recalls: Vec<(SupId, Vec<String>)> = Vec::new();
        if !self.moves.take_due() || !self.owners.is_assigning() {
            return recalls;
        }
        let live: Vec<SupId> = (0..self.owners.count())
            .filter(|&s| self.owners.is_live(s))
            .collect();
        if live.len() < 2 {
            return recalls;
        }
        // Domains with work, per owner, that could move.
        let mut owned: Vec<Vec<u32>> = vec![Vec::new(); self.owners.count()];
        let mut total = 0usize;
        for (id, d) in self.domains.iter() {
            let has_work = d.window.queued() > 0 || d.in_flight.get() > 0;
            let Some(owner) = d.owner.get() else { continue };
            let moving = self.moves.is_moving(id);
            // A server's domains stay together (see `servers`).
            let shared = self.servers.is_shared(&d.server);
            if !has_work || d.block.is_halted() || moving || shared || !self.owners.is_live(owner) {
                continue;
            }
            total += 1;
            // Idle ones first: they move at once.
            owned[owner].push(id);
        }
        let fair = total.div_ceil(live.len());
        let floor = total / live.len();
        let mut excess: Vec<u32> = Vec::new();
        for &s in &live {
            let mut mine = std::mem::take(&mut owned[s]);
            if mine.len() > fair {
                mine.sort_by_key(|&id| self.domains[id].in_flight.get());
                excess.extend(mine.drain(..mine.len() - fair));
            }
            owned[s] = mine;
        }
        let mut moved = 0;
        for &to in &live {
            while owned[to].len() < floor.max(1) {
                let Some(id) = excess.pop() else { break };
                owned[to].push(id);
                let from = self.domains[id].owner.get();
                if self.start_move(id, to) {
                    if let Some(from) = from {
                        let name = self.domains[id].name().to_string();
                        match recalls.iter_mut().find(|(s, _)| *s == from) {
                            Some((_, names)) => names.push(name),
                            None => recalls.push((from, vec![name])),
                        }
                    }
                }
                moved += 1;
            }
        }
        if moved > 0 {
            tracing::info!(
                moved,
                domains_with_work = total,
                supervisors = live.len(),
                "rebalancing: domains move to supervisors under their fair share once nothing of them is in flight"
            );
        }
        recalls
    }

    /// Starts moving domain `id` to `to`: it is not leased to its owner
    /// any more, and moves when nothing of it is in flight. Whether it
    /// waits for URLs in flight.
    pub(super) fn start_move(&mut self, id: u32, to: SupId) -> bool {
        self.moves.start(id, to);
        self.finish_move(id)
    }

    /// Moves domain `id` if it is moving and nothing of it is in flight;
    /// gives up the move if its destination left. Whether it is still
    /// waiting to move (and so must not be leased).
    pub(super) fn finish_move(&mut self, id: u32) -> bool {
        if self.moves.is_empty() {
            return false;
        }
        let Some(to) = self.moves.destination(id) else {
            return false;
        };
        if !self.owners.is_live(to) {
            self.moves.cancel(id);
            return false;
        }
        let d = &mut self.domains[id];
        if d.in_flight.get() > 0 {
            return true;
        }
        self.moves.done(id);
        self.owners.hand_over(id, &mut d.owner, to);
        // A server of this domain alone goes with it (a rebalance); a
        // shared one is `to`'s already (the domain moved to join it).
        if !self.servers.is_shared(&d.server) {
            self.servers.set_owner(&d.server, to);
        }
        crate::metric::DOMAINS_MOVED.get().increment(1);
        // Held while the old owner's last-crawled time reaches the store.
        let until = self.clock_ms.saturating_add(HANDOVER_MS);
        self.blocks.pause(id, &mut d.block, until);
        false
    }

    /// Domains moved between supervisors so far.
    pub(crate) fn domains_moved(&self) -> u64 {
        self.moves.moved()
    }

    /// Domains supervisor `sup` owns.
    pub(crate) fn domains_of(&self, sup: SupId) -> usize {
        self.owners.domains_of(sup)
    }
}

#[cfg(test)]
mod tests {
    use super::super::*;
    use super::HANDOVER_MS;

    fn owners(f: &Frontier) -> Vec<Option<SupId>> {
        f.domains.iter().map(|(_, d)| d.owner.get()).collect()
    }

    /// A frontier with one supervisor, `a`, owning `domains` domains of
    /// `pages` queued URLs each.
    fn one_supervisor(domains: u32, pages: u32) -> (Frontier, SupId) {
        let mut f = Frontier::new(4, 60_000, 1);
        f.start_assigning();
        let a = f.add_supervisor();
        for d in 0..domains {
            for p in 0..pages {
                f.push(format!("http://d{d}.test/{p}"), &format!("d{d}.test"), 0);
            }
        }
        (f, a)
    }

    #[test]
    fn a_joining_supervisor_gets_a_fair_share_once_nothing_is_in_flight() {
        let (mut f, a) = one_supervisor(6, 3);
        // Everything is a's; domains 0-2 have a URL out.
        let out = f.take(a, 3, 0);
        assert_eq!(out.len(), 3);
        assert!(owners(&f).iter().all(|o| *o == Some(a)));
        f.clock_ms = 1_000;
        let b = f.add_supervisor();
        // Half of six domains move: the idle ones, so nothing is recalled.
        assert_eq!(f.rebalance(), vec![]);
        assert_eq!(f.domains_moved(), 3);
        assert!(f.rebalance().is_empty(), "only once per join");
        // The idle ones moved at once, but wait for the hand-over.
        let moved_now = owners(&f).iter().filter(|o| **o == Some(b)).count();
        assert_eq!(moved_now, 3, "{:?}", owners(&f));
        assert!(f.take(b, 10, 1_000).is_empty(), "held for the hand-over");
        f.release_blocked(1_000 + HANDOVER_MS);
        let got = f.take(b, 10, 1_000 + HANDOVER_MS);
        assert_eq!(got.len(), 9, "all of the three moved domains' URLs");
        // a keeps leasing its own three, and nothing of b's.
        let a_got = f.take(a, 10, 1_000 + HANDOVER_MS);
        assert!(a_got.iter().all(|i| !got.iter().any(|g| g.domain == i.domain)));
        assert_eq!((f.domains_of(a), f.domains_of(b), f.domains_moved()), (3, 3, 3));
    }

    #[test]
    fn a_busy_domain_moves_when_its_last_lease_ends() {
        let (mut f, a) = one_supervisor(2, 3);
        let out = f.take(a, 10, 0);
        assert_eq!(out.len(), 6, "both domains busy");
        let b = f.add_supervisor();
        let recalls = f.rebalance();
        // Nothing moved yet, and the moving domain is not leased to a,
        // which is asked to hand back what it has not started.
        assert_eq!(f.domains_of(b), 0);
        let moving = f.moves.ids().next().unwrap();
        let name = f.domains[moving].name().to_string();
        assert_eq!(recalls, vec![(a, vec![name.clone()])]);
        let mine: Vec<u64> = out.iter().filter(|i| i.domain == name).map(|i| i.lease).collect();
        for lease in &mine[..2] {
            f.complete(*lease);
        }
        assert!(f.take(a, 10, 0).iter().all(|i| i.domain != name));
        assert_eq!(f.domains_of(b), 0, "one still in flight");
        f.complete(mine[2]);
        assert_eq!((f.domains_of(a), f.domains_of(b)), (1, 1));
        f.release_blocked(HANDOVER_MS);
        assert!(f.take(b, 10, HANDOVER_MS).iter().all(|i| i.domain == name));
    }

    #[test]
    fn a_move_to_a_supervisor_that_left_is_given_up() {
        let (mut f, a) = one_supervisor(2, 1);
        let out = f.take(a, 10, 0);
        let b = f.add_supervisor();
        assert_eq!(f.rebalance().len(), 1);
        f.remove_supervisor(b);
        for i in &out {
            f.complete(i.lease);
        }
        assert_eq!(f.domains_of(a), 2);
        assert!(f.moves.is_empty());
    }
}
