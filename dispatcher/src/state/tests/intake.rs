//! Intake: limits, the store check on hash collisions, budgets that
//! defer URLs (and take them up after a restart), canonical forms, traps
//! and rules.

use super::*;

#[test]
fn limits_keep_urls_out_and_count_them() {
    let mut s = settings();
    s.max_depth = 1;
    s.admission.scope = crate::admission::ScopeKind::Seeds;
    let mut sim = Sim::new(s, 1_000);
    sim.seed(1);
    let a = sim.join("a", 8, Vec::new());
    sim.dispatch();
    let item = sim.held.get_mut(&a).unwrap().remove(0);
    let links = vec![
        url(0, 1),
        url(0, 1),
        url(9, 1),
        "not a url".to_string(),
        url(0, 2),
    ];
    sim.deliver(a, vec![fetched(&item, links)]);
    let c = &sim.st.stats().counts;
    assert_eq!((c.out_of_scope, c.bad_links, c.new_urls), (1, 1, 3));
    sim.dispatch();
    let item = sim.held.get_mut(&a).unwrap().remove(0);
    sim.deliver(a, vec![fetched(&item, vec![url(0, 3)])]);
    assert_eq!(sim.st.stats().counts.too_deep, 1);
}

/// Hashes of 4 bits: nearly every link collides with another URL.
fn colliding(check: SeenCheck, max_pages: u64, memory_urls: usize) -> Sim {
    let mut s = settings();
    s.seen_check = check;
    s.seen_recent_urls = 8;
    s.max_pages = max_pages;
    s.memory_urls = memory_urls;
    let mut sim = Sim::new(s.clone(), 31);
    sim.st = CrawlState::new(s, TimingLog::disabled(), T0)
        .unwrap()
        .with_seen(SeenSet::new(check, 8).with_hash_bits(4));
    sim.extra_links = vec![url(0, 0), url(1, 0), url(2, 5)];
    sim.lagging = true;
    sim.seed(3);
    sim.join("a", 8, Vec::new());
    sim
}

#[test]
fn with_the_store_check_no_url_is_dropped_for_a_hash_collision() {
    for memory_urls in [1_000_000, 6] {
        store_check_crawls_every_page(memory_urls);
    }
}

fn store_check_crawls_every_page(memory_urls: usize) {
    let mut sim = colliding(SeenCheck::Store, 0, memory_urls);
    sim.run_to_end();
    sim.assert_each_finished_once();
    // Every page of the web, each once, although 16 hashes cover 93 URLs.
    assert_eq!(sim.store.len(), 3 * 31);
    assert!(sim.leased.values().all(|&n| n == 1));
    let c = &sim.st.stats().counts;
    assert!(c.unsure_new > 50, "{} found new", c.unsure_new);
    assert!(c.unsure_known > 0 && sim.duplicate_inserts > 0);
    assert_eq!(c.unsure_links, c.unsure_new + c.unsure_known);
    assert_eq!(c.new_urls, 3 * 31);
    // The hash alone loses most of the web.
    let mut lossy = colliding(SeenCheck::Hash, 0, memory_urls);
    lossy.run_to_end();
    assert!(lossy.store.len() < 3 * 31 / 2, "{}", lossy.store.len());
}

#[test]
fn with_the_store_check_max_pages_counts_only_what_the_store_took() {
    let mut sim = colliding(SeenCheck::Store, 40, 1_000_000);
    sim.run_to_end();
    sim.assert_each_finished_once();
    assert!((30..=40).contains(&sim.store.len()), "{} stored", sim.store.len());
}

#[test]
fn a_domain_over_its_budget_is_deferred_and_a_larger_budget_takes_it_up_after_a_restart() {
    let mut s = settings();
    s.admission.max_pages_per_domain = 5;
    let mut sim = Sim::new(s.clone(), 40);
    sim.seed(2);
    let a = sim.join("a", 8, Vec::new());
    sim.run_to_end();
    sim.assert_each_crawled_once();
    let mut deferred_before = 0;
    for d in 0..2 {
        let (admitted, deferred) = admitted_and_deferred(&sim, d);
        assert_eq!(admitted, 5, "d{d}");
        assert!(deferred > 0, "d{d}: nothing deferred");
        deferred_before += deferred;
    }
    // No deferred URL was leased.
    assert!(sim.deferred.keys().all(|u| !sim.leased.contains_key(u)));
    let c = &sim.st.stats().counts;
    assert_eq!(
        c.refused.get("over_domain_budget").copied(),
        Some(deferred_before as u64)
    );
    assert_eq!(c.new_urls, 10);

    // The same budget again: the restart takes nothing up, and the crawl
    // still ends by itself.
    sim.restart_summarized(CrawlState::new(s.clone(), TimingLog::disabled(), sim.now).unwrap());
    sim.seed(2);
    sim.join("a", 8, Vec::new());
    sim.scan(usize::MAX);
    sim.run_to_end();
    assert_eq!(sim.st.stats().counts.deferred_taken_up, 0);
    assert_eq!(sim.deferred.len(), deferred_before);

    // A budget of 8: three more per domain, in the order they were found.
    s.admission.max_pages_per_domain = 8;
    sim.restart_summarized(CrawlState::new(s, TimingLog::disabled(), sim.now).unwrap());
    sim.seed(2);
    sim.join("a", 8, Vec::new());
    // As the shell does: the stored URLs are read in before the crawl may end.
    sim.scan(usize::MAX);
    sim.run_to_end();
    sim.assert_each_finished_once();
    assert_eq!(sim.st.stats().counts.deferred_taken_up, 6);
    for d in 0..2 {
        assert_eq!(admitted_and_deferred(&sim, d).0, 8, "d{d}");
    }
    assert!(sim.leased.values().all(|&n| n == 1));
    let _ = a;
}

#[test]
fn a_path_over_its_query_budget_is_deferred_apart_from_its_domain() {
    let mut s = settings();
    s.admission.max_query_variants = 2;
    let mut sim = Sim::new(s, 2);
    sim.seed(1);
    let a = sim.join("a", 8, Vec::new());
    sim.dispatch();
    let item = sim.held.get_mut(&a).unwrap().remove(0);
    let links = vec![
        "http://d0.test/cal?m=1".to_string(),
        "http://d0.test/cal?m=2".to_string(),
        "http://d0.test/cal?m=3".to_string(),
        "http://d0.test/cal".to_string(),
        "http://d0.test/other?m=3".to_string(),
    ];
    sim.deliver(a, vec![fetched(&item, links)]);
    assert_eq!(
        sim.deferred.keys().collect::<Vec<_>>(),
        ["http://d0.test/cal?m=3"]
    );
    assert_eq!(sim.deferred["http://d0.test/cal?m=3"].1, 1, "its depth");
    let c = &sim.st.stats().counts;
    assert_eq!(c.refused.get("over_query_budget").copied(), Some(1));
    assert_eq!(c.new_urls, 5, "the seed and four links");
}

#[test]
fn links_are_judged_by_their_canonical_form_and_traps_and_rules_are_refused() {
    let mut s = settings();
    s.admission.rules.deny_url = vec![r"/private/".to_string()];
    s.admission.traps = crate::admission::PathTraps::DEFAULT;
    let mut sim = Sim::new(s, 2);
    sim.seed(1);
    let a = sim.join("a", 8, Vec::new());
    sim.dispatch();
    let item = sim.held.get_mut(&a).unwrap().remove(0);
    let links = vec![
        // A child that did not canonicalise: the dispatcher does.
        "http://d0.test/p1?sid=0123456789abcdef&b=2&a=1".to_string(),
        "http://d0.test/p1?a=1&b=2&utm_source=x".to_string(),
        "http://d0.test/p1;jsessionid=ABC?b=2&a=1".to_string(),
        "http://d0.test/private/x".to_string(),
        "http://d0.test/private/y".to_string(),
        "http://d0.test/a/b/a/b/a/b/".to_string(),
    ];
    sim.deliver(a, vec![fetched(&item, links)]);
    let stored: Vec<&String> = sim.store.values().map(|(u, ..)| u).collect();
    assert_eq!(stored, ["http://d0.test/p0", "http://d0.test/p1?a=1&b=2"]);
    let c = &sim.st.stats().counts;
    assert_eq!(c.canonicalized, 3);
    assert_eq!(c.refused.get("denied_by_rule").copied(), Some(2));
    assert_eq!(c.refused_by_rule.get("deny-url:/private/").copied(), Some(2));
    assert_eq!(c.refused.get("repeated_segments").copied(), Some(1));
    assert!(sim.deferred.is_empty());
}
