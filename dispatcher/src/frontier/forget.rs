//! Forgetting domains that have nothing left, so that the frontier holds
//! the domains with work (and those crawled in the last minute or two),
//! not every domain the crawl ever met.
//!
//! A domain cost the dispatcher about 1 KB (its queue record, its window's
//! buffer, its name twice and an index entry), measured with
//! `scripts/bench-dispatcher.sh --domains 100000`, and was kept to the
//! end: at the millions of domains a research crawl meets, that was the
//! term that grew. A domain whose URLs are all done is forgotten: its slot
//! is reused for the next new domain and its name leaves the index. If it
//! is met again, it starts afresh, as a new domain: its first URL goes
//! into its window, so reads of its queue start after it, not at its
//! finished entries.
//!
//! A domain is forgotten only after a whole sweep period with no result
//! (its record's `recent` mark, see `domains`), so at least that long
//! after its last fetch ended. Then it may get another owner, whose child
//! reads the domain's last-crawled time from the second store. The period
//! is never shorter than the longest gap a child keeps between two
//! requests to a domain, plus 2 s (`--forget-idle-domains-ms`): the old
//! child has written the time by then, and the domain's pace holds across
//! owners.
//!
//! Which records are free is `domains`' to keep; what counts as nothing
//! left is every part's, asked here.

use super::Frontier;

impl Frontier {
    /// Sweeps every `every_ms`: a domain is forgotten between one and two
    /// periods after its last result.
    pub(crate) fn with_forgetting(mut self, every_ms: u64) -> Frontier {
        self.domains.sweep_every(every_ms);
        self
    }

    /// Once a period: forgets the domains with nothing left.
    pub(crate) fn forget_idle(&mut self, now_ms: u64) {
        if self.domains.sweep_due(now_ms) {
            self.sweep();
        }
    }

    /// Domains forgotten so far.
    pub(crate) fn forgotten(&self) -> u64 {
        self.domains.forgotten()
    }

    /// Forgets the domains with nothing left (nothing queued, read, out,
    /// blocked, parked, moving or waiting for the writer's word) and no
    /// result since the last sweep, and clears the mark of those with
    /// one. How many were forgotten.
    pub(super) fn sweep(&mut self) -> usize {
        let moves = &self.moves;
        let mut gone = self.domains.sweep(|id, d| {
            d.window.is_empty()
                && d.in_flight.get() == 0
                && !d.block.is_blocked()
                && !d.owner.in_ready()
                && !d.slot.is_parked()
                && !moves.is_moving(id)
        });
        for (_, d) in &mut gone {
            self.owners.forget(&d.owner);
            self.servers.leave(&mut d.server);
            self.forgotten_progress(d);
        }
        let ids: Vec<u32> = gone.iter().map(|(id, _)| *id).collect();
        self.owners.forgotten(&ids);
        gone.len()
    }
}

#[cfg(test)]
mod tests {
    use super::super::domains::DEFAULT_SWEEP_MS;
    use super::super::{ReadPage, Stored};
    use super::*;

    fn f() -> Frontier {
        let mut f = Frontier::new(2, 1000, 1);
        f.start_assigning();
        f
    }

    /// Takes and completes everything queued at `s`.
    fn crawl_all(f: &mut Frontier, s: usize) -> Vec<String> {
        let mut done = Vec::new();
        loop {
            let got = f.take(s, 100, 0);
            if got.is_empty() {
                return done;
            }
            for w in got {
                assert!(f.complete(w.lease).is_some());
                done.push(w.url);
            }
        }
    }

    #[test]
    fn a_domain_is_forgotten_a_sweep_after_its_last_result_and_its_slot_reused() {
        let mut f = f();
        let s = f.add_supervisor();
        for d in ["a", "b", "c"] {
            f.push(format!("http://{d}/1"), d, 0);
        }
        f.push("http://a/2".into(), "a", 0);
        let first = f.take(s, 1, 0);
        assert_eq!(first[0].url, "http://a/1");
        assert!(f.complete(first[0].lease).is_some());
        // "a" has a URL left; "b" and "c" are queued: nothing to forget.
        assert_eq!(f.sweep(), 0);
        let done = crawl_all(&mut f, s);
        assert_eq!(done.len(), 3);
        // Results since the last sweep: kept through this one...
        assert_eq!(f.sweep(), 0);
        assert_eq!(f.domain_count(), 3);
        assert_eq!(f.domains_of(s), 3);
        // ...and forgotten at the next.
        assert_eq!(f.sweep(), 3);
        assert_eq!(f.domain_count(), 0);
        assert_eq!(f.domains_of(s), 0);
        assert!(f.is_idle());
        // A new domain takes a freed slot; "a" met again starts afresh.
        f.push("http://d/1".into(), "d", 0);
        f.push("http://a/3".into(), "a", 0);
        assert_eq!(f.domains.slots(), 3);
        assert_eq!(f.domain_count(), 2);
        let mut again = crawl_all(&mut f, s);
        again.sort();
        assert_eq!(again, ["http://a/3", "http://d/1"]);
    }

    #[test]
    fn domains_with_anything_pending_are_kept() {
        let mut f = Frontier::new(1, 1000, 1).with_window(2, 0);
        f.start_assigning();
        let s = f.add_supervisor();
        // Out on a lease.
        f.push("http://out/1".into(), "out", 0);
        let out = f.take(s, 1, 0);
        assert_eq!(out.len(), 1);
        // Paused, with nothing queued.
        f.pause("paused", u64::MAX - 1);
        // Waiting for the writer's word.
        f.admit_unverified("unsure", 5);
        // Only in the store, read under way.
        f.resume_spilled("stored", 4, 10, 13);
        let reads = f.refills(0, 10);
        assert_eq!(reads.len(), 1);
        for _ in 0..3 {
            assert_eq!(f.sweep(), 0);
        }
        assert_eq!(f.domain_count(), 4);
        // Each, once settled, goes (a sweep after a result).
        assert!(f.complete(out[0].lease).is_some());
        assert!(f.confirmed("unsure", 5));
        f.release_blocked(u64::MAX - 1);
        let page = ReadPage::of(
            (10..14)
                .map(|seq| Stored {
                    url: format!("http://stored/{seq}"),
                    depth: 0,
                    seq,
                })
                .collect(),
            100,
        );
        assert_eq!(f.refilled(&reads[0], page), 0);
        assert_eq!(crawl_all(&mut f, s).len(), 4);
        f.sweep();
        f.sweep();
        assert_eq!(f.domain_count(), 0);
        assert!(f.is_idle());
    }

    #[test]
    fn a_domain_met_again_reads_its_queue_after_its_new_urls() {
        let mut f = Frontier::new(1, 1000, 1).with_window(2, 0);
        f.start_assigning();
        let s = f.add_supervisor();
        f.admit("http://a/1".into(), "a", 0, 1, 0);
        assert_eq!(crawl_all(&mut f, s), ["http://a/1"]);
        f.sweep();
        assert_eq!(f.sweep(), 1);
        // Met again at seq 40: two into the window, the third only in the
        // store. The read starts after the window, not at entry 1.
        for seq in 40..43 {
            f.admit(format!("http://a/{seq}"), "a", 0, seq, 0);
        }
        assert_eq!(f.spilled(), 1);
        assert_eq!(f.take(s, 1, 0).len(), 1);
        let reads = f.refills(42, 10);
        assert_eq!((reads[0].after, reads[0].upto), (41, 42));
    }

    #[test]
    fn sweeps_once_a_period() {
        let mut f = f();
        let s = f.add_supervisor();
        f.push("http://a/1".into(), "a", 0);
        crawl_all(&mut f, s);
        f.forget_idle(1_000);
        f.forget_idle(1_000 + DEFAULT_SWEEP_MS - 1);
        assert_eq!(f.domain_count(), 1);
        f.forget_idle(1_000 + DEFAULT_SWEEP_MS);
        assert_eq!((f.domain_count(), f.forgotten()), (0, 1));
        // Another period: the first sweep clears the mark of the result,
        // the next (a period later) forgets.
        let mut g = Frontier::new(2, 1000, 1).with_forgetting(10);
        g.start_assigning();
        let s = g.add_supervisor();
        g.push("http://b/1".into(), "b", 0);
        crawl_all(&mut g, s);
        g.forget_idle(0);
        g.forget_idle(9);
        assert_eq!(g.domain_count(), 1);
        g.forget_idle(10);
        assert_eq!((g.domain_count(), g.forgotten()), (0, 1));
    }
}
