//! A restarted dispatcher: pages stored before a kill, what the
//! supervisors hold, a start from the store's summary while the seen-set
//! fills, and seeds that wait for it.

use super::*;

/// Issue 45: a dispatcher killed before it wrote anything of the results
/// it took (its writer lags: no link of those pages is in the frontier)
/// fetches none of those pages again after the restart, as their pages
/// are stored, and loses none of their links: it offers them again from
/// the pages.
#[test]
fn pages_stored_before_a_kill_are_not_fetched_again_and_their_links_are_not_lost() {
    for (memory_urls, summarized) in [(1_000_000, false), (4, false), (1_000_000, true), (4, true)] {
        let mut s = settings();
        s.memory_urls = memory_urls;
        let mut sim = Sim::new(s.clone(), 15);
        sim.seed(3);
        let a = sim.join("a", 6, Vec::new());
        sim.dispatch();
        sim.lagging = true;
        sim.report(a, 3);
        let reported: Vec<String> = sim.pages_stored.keys().cloned().collect();
        assert_eq!(reported.len(), 3);
        // Killed with every write of those results unwritten.
        let st = CrawlState::new(s.clone(), TimingLog::disabled(), sim.now).unwrap();
        sim.lagging = false;
        if summarized {
            sim.restart_summarized(st);
        } else {
            sim.restart(st);
        }
        let holding = sim.held.remove(&a).unwrap_or_default();
        sim.join("a", 6, holding);
        sim.run_to_end();
        sim.assert_each_finished_once();
        for u in &reported {
            assert_eq!(
                sim.leased[u], 1,
                "budget {memory_urls}, summarized {summarized}: {u} fetched again"
            );
        }
        assert!(sim.marks.is_empty());
        assert_eq!(sim.st.stats().counts.relinked, 3);
        // Every page of the web was reached: the links of the three pages
        // were offered again.
        assert_eq!(sim.pages_stored.len(), sim.store.len());
    }
}

/// A crawl of 3 domains of `pages` pages with one supervisor ("a", the
/// connection returned), which has reported `reported` results and holds
/// more.
fn partly_done(s: &Settings, pages: u32, reported: usize) -> (Sim, u32) {
    let mut sim = Sim::new(s.clone(), pages);
    sim.seed(3);
    let a = sim.join("a", 6, Vec::new());
    sim.dispatch();
    sim.report(a, reported);
    sim.dispatch();
    (sim, a)
}

#[test]
fn a_restarted_dispatcher_adopts_what_the_supervisors_hold() {
    for (memory_urls, summarized) in [(1_000_000, false), (4, false), (1_000_000, true), (4, true)] {
        let mut s = settings();
        s.memory_urls = memory_urls;
        let (mut sim, a) = partly_done(&s, 15, 2);
        let holding = sim.held[&a].clone();
        assert!(!holding.is_empty());
        // A new dispatcher on the same store.
        let st = CrawlState::new(s, TimingLog::disabled(), sim.now).unwrap();
        if summarized {
            sim.restart_summarized(st);
        } else {
            sim.restart(st);
        }
        let a2 = sim.join("a", 6, holding.clone());
        sim.answer_reads();
        sim.dispatch();
        let twice: Vec<&String> = sim
            .leased
            .iter()
            .filter(|(_, &n)| n > 1)
            .map(|(u, _)| u)
            .collect();
        assert!(twice.is_empty(), "budget {memory_urls}: leased again: {twice:?}");
        assert!(sim.held[&a2].len() >= holding.len());
        sim.run_to_end();
        sim.assert_each_finished_once();
    }
}

/// With the held links' memory bound at 0 or 1, they go to their file
/// (`state::held`) and are judged from it the same.
#[test]
fn restarted_from_a_summary_no_stored_url_is_crawled_again_while_the_seen_set_fills() {
    for (seen_check, held_bound) in [
        (SeenCheck::Hash, None),
        (SeenCheck::Store, None),
        (SeenCheck::Hash, Some(0_usize)),
        (SeenCheck::Store, Some(1)),
    ] {
        let mut s = settings();
        s.memory_urls = 4;
        s.seen_check = seen_check;
        let (mut sim, a) = partly_done(&s, 12, 4);
        let holding = sim.held[&a].clone();
        let stored_before = sim.store.len();
        if let Some(bound) = held_bound {
            s.held_links_memory = bound;
        }
        sim.restart_summarized(CrawlState::new(s, TimingLog::disabled(), sim.now).unwrap());
        assert_eq!(sim.st.resumed().0 + sim.st.resumed().1, stored_before as u64);
        // The seeds again, as at every start: they wait for the seen-set.
        sim.seed(3);
        assert_eq!(sim.st.waiting_seeds(), 3);
        // Links to stored URLs, met before their hashes are read in (the
        // read goes in `seq` order: the last stored are read in last).
        sim.extra_links = sim
            .store
            .values()
            .rev()
            .take(3)
            .map(|(u, ..)| u.clone())
            .collect();
        sim.join("a", 6, holding);
        sim.run_to_end();
        sim.assert_each_finished_once();
        let twice = sim.leased.values().filter(|&&n| n > 1).count();
        assert_eq!(twice, 0, "{seen_check:?}: URLs leased twice");
        let c = &sim.st.stats().counts;
        // Rediscovered stored URLs were held back until the stored URLs
        // were read in, and then known without the store.
        assert!(c.held_links >= 3, "{seen_check:?}: {} held", c.held_links);
        match held_bound {
            None => assert_eq!(c.held_links_in_file, 0),
            Some(b) => assert_eq!(c.held_links_in_file, c.held_links - b as u64),
        }
        assert_eq!(sim.duplicate_inserts as u64, c.unsure_known);
    }
}

/// A crawl of 3 domains, half done, restarted from the store's summary,
/// with its seeds offered again and a new one (`url(7, 0)`).
fn restarted_with_a_new_seed() -> Sim {
    let mut s = settings();
    s.memory_urls = 4;
    let (mut sim, a) = partly_done(&s, 12, 4);
    let holding = sim.held[&a].clone();
    sim.restart_summarized(CrawlState::new(s, TimingLog::disabled(), sim.now).unwrap());
    let stored = sim.store.len();
    let mut seeds: Vec<String> = (0..3).map(|d| url(d, 0)).collect();
    seeds.push(url(7, 0));
    sim.st.seed(&seeds, sim.now);
    sim.pump();
    assert_eq!(sim.st.waiting_seeds(), 4);
    assert_eq!(
        sim.store.len(),
        stored,
        "a seed was inserted before the seen-set was whole"
    );
    sim.join("a", 6, holding);
    sim
}

#[test]
fn resumed_seeds_wait_for_the_seen_set_and_cost_the_store_nothing() {
    let mut sim = restarted_with_a_new_seed();
    sim.run_to_end();
    sim.assert_each_finished_once();
    assert_eq!(sim.st.waiting_seeds(), 0);
    // The stored seeds were known in memory: no insert for the store to refuse.
    assert_eq!(sim.duplicate_inserts, 0);
    assert_eq!(sim.st.stats().counts.unsure_known, 0);
    // The new seed was crawled, with its domain.
    assert!(sim.finished(&url(7, 0)));
    assert!(sim.finished(&url(7, 1)));
}

#[test]
fn a_finished_crawl_resumed_with_a_new_seed_crawls_it_once_the_stored_urls_are_read_in() {
    let mut s = settings();
    s.memory_urls = 4;
    let mut sim = Sim::new(s.clone(), 6);
    sim.seed(2);
    sim.join("a", 6, Vec::new());
    sim.run_to_end();
    let stored = sim.store.len();
    sim.restart_summarized(CrawlState::new(s, TimingLog::disabled(), sim.now).unwrap());
    // Every domain's progress was recorded as the crawl ended: nothing of
    // its queues is read again.
    assert!(sim.reads.is_empty());
    sim.st.seed(&[url(0, 0), url(7, 0)], sim.now);
    assert_eq!(sim.st.waiting_seeds(), 2);
    sim.join("a", 6, Vec::new());
    for _ in 0..5 {
        sim.answer_reads();
        sim.advance(100);
        sim.dispatch();
    }
    // Not done, and nothing admitted, while the stored URLs are read in.
    assert!(!sim.st.done(), "done with seeds waiting");
    assert_eq!(sim.store.len(), stored);
    sim.run_to_end();
    sim.assert_each_finished_once();
    assert!(sim.finished(&url(7, 0)));
    assert_eq!(sim.store.len(), stored + 6);
    assert_eq!(sim.leased.values().filter(|&&n| n > 1).count(), 0);
}

#[test]
fn stored_urls_found_again_while_the_seen_set_fills_count_once_against_their_budget() {
    // Each domain's every page fits the budget exactly: one stored URL
    // counted twice (once when found again, held back, once by the read of
    // stored URLs) would defer a real page.
    let mut s = settings();
    s.memory_urls = 4;
    s.admission.max_pages_per_domain = 12;
    let (mut sim, a) = partly_done(&s, 12, 4);
    let holding = sim.held[&a].clone();
    sim.restart_summarized(CrawlState::new(s, TimingLog::disabled(), sim.now).unwrap());
    sim.seed(3);
    sim.extra_links = sim
        .store
        .values()
        .rev()
        .take(3)
        .map(|(u, ..)| u.clone())
        .collect();
    sim.join("a", 6, holding);
    sim.run_to_end();
    sim.assert_each_finished_once();
    assert!(sim.st.stats().counts.held_links >= 3);
    assert!(sim.deferred.is_empty(), "deferred: {:?}", sim.deferred.keys());
    for d in 0..3 {
        assert_eq!(admitted_and_deferred(&sim, d), (12, 0), "d{d}");
    }
}
