//! How many URLs may be leased while the store is slower than the crawl.
//!
//! Every result brings writes (its links' inserts, its own mark), and
//! they wait in the frontier writer's queue until the store takes them.
//! Stopping leases once that queue is past a mark is not enough: the
//! leases already out still come back, each with its writes. With 50
//! supervisors of 256 credits and 10 new links a page, each time the
//! queue falls under the mark 12,800 leases go out and bring 128,000
//! writes, and the queue swings far past the mark.
//!
//! So once the writer is past the mark, the gate counts what the leases
//! out will bring (URLs out times the writes a result has brought
//! lately) and leases only while that and the queue fit under the mark.
//! It opens again only once the queue is nearly empty: the store then
//! keeps up, and leases out are again limited by credits alone, as a
//! crawl whose pages take seconds needs many out to keep nodes busy.

/// Results over which the writes per result are averaged, about: past
/// it, the counts are halved, so the average follows the crawl (early
/// pages bring many new links, late ones few).
const WINDOW: u64 = 4_096;

#[derive(Debug)]
pub(crate) struct WriteGate {
    /// Writes waiting past this close the gate.
    max: usize,
    /// Shut since the writer went past `max`, until it falls under a
    /// tenth of it.
    shut: bool,
    /// Writes that recent results brought, and how many results.
    writes: u64,
    results: u64,
}

impl WriteGate {
    pub(crate) fn new(max: usize) -> WriteGate {
        WriteGate {
            max,
            shut: false,
            writes: 0,
            results: 0,
        }
    }

    /// `results` results brought `writes` writes.
    pub(crate) fn observe(&mut self, results: usize, writes: usize) {
        self.results = self.results.saturating_add(results as u64);
        self.writes = self.writes.saturating_add(writes as u64);
        if self.results > WINDOW {
            self.results /= 2;
            self.writes /= 2;
        }
    }

    /// URLs that may be leased now, with `backlog` writes waiting and
    /// `out` URLs leased and not reported. Shuts or opens the gate first,
    /// from `backlog`: call it once a dispatch.
    pub(crate) fn room(&mut self, backlog: usize, out: usize) -> usize {
        self.shut = if self.shut {
            backlog >= self.max / 10
        } else {
            backlog > self.max
        };
        if !self.shut {
            return usize::MAX;
        }
        // Writes that fit, over writes per result (1 until a result came).
        let fit = self.max.saturating_sub(backlog) as u64;
        let urls = fit.saturating_mul(self.results.max(1)) / self.writes.max(1);
        usize::try_from(urls).unwrap_or(usize::MAX).saturating_sub(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_until_the_writer_is_past_the_mark() {
        let mut g = WriteGate::new(1_000);
        g.observe(10, 100);
        assert_eq!(g.room(1_000, 5_000), usize::MAX);
        assert_eq!(g.room(0, 0), usize::MAX);
    }

    #[test]
    fn once_past_it_counts_what_the_leases_out_will_bring() {
        let mut g = WriteGate::new(1_000);
        g.observe(10, 100); // 10 writes a result
        assert_eq!(g.room(1_001, 0), 0);
        // 600 waiting: 400 writes fit, 40 results, 15 of them out.
        assert_eq!(g.room(600, 15), 25);
        assert_eq!(g.room(600, 40), 0);
        assert_eq!(g.room(600, 400), 0);
    }

    #[test]
    fn it_opens_again_once_the_writer_nearly_caught_up() {
        let mut g = WriteGate::new(1_000);
        g.observe(1, 10);
        assert_eq!(g.room(2_000, 0), 0);
        assert_eq!(g.room(100, 0), 90);
        assert_eq!(g.room(99, 500), usize::MAX);
    }

    #[test]
    fn with_no_result_yet_a_result_counts_one_write() {
        let mut g = WriteGate::new(1_000);
        assert_eq!(g.room(1_001, 0), 0);
        assert_eq!(g.room(500, 100), 400);
    }

    #[test]
    fn the_average_follows_recent_results() {
        let mut g = WriteGate::new(1_000);
        g.observe(100, 2_000); // 20 a result
        for _ in 0..100 {
            g.observe(100, 100); // then 1
        }
        assert_eq!(g.room(1_001, 0), 0);
        // Close to 1 a result now: nearly all 500 writes' room is URLs.
        assert!(g.room(500, 0) > 450, "{}", g.room(500, 0));
    }
}
