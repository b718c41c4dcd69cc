//! Leases: every admitted URL leased once and finished once, windows read
//! back, expiry, heartbeats, silent supervisors, and random crawls that
//! mix all of it.

use super::*;

#[test]
fn every_admitted_url_is_leased_once_and_finished_once() {
    let mut sim = Sim::new(settings(), 31);
    sim.seed(5);
    let a = sim.join("a", 8, Vec::new());
    let b = sim.join("b", 8, Vec::new());
    sim.run_to_end();
    sim.assert_each_finished_once();
    assert_eq!(sim.store.len(), 5 * 31);
    assert!(
        sim.leased.values().all(|&n| n == 1),
        "a URL leased twice: {:?}",
        sim.leased
    );
    // Domains were spread over both.
    let by = |c: u32| sim.out.values().filter(|o| o.conn == c).count();
    assert!(by(a) > 0 && by(b) > 0, "a {} b {}", by(a), by(b));
}

#[test]
fn with_small_windows_the_queues_are_read_back_and_nothing_is_leased_twice() {
    // Every domain may hold a window, and one at a time (the others
    // parked, taking turns).
    for active_domains in [0, 1] {
        let mut s = settings();
        s.memory_urls = 10;
        s.active_domains = active_domains;
        let mut sim = Sim::new(s, 63);
        sim.seed(4);
        sim.join("a", 4, Vec::new());
        sim.run_to_end();
        sim.assert_each_crawled_once();
        assert_eq!(sim.store.len(), 4 * 63);
        let parked = if active_domains == 1 { 3 } else { 0 };
        assert_eq!(sim.peak_parked, parked, "domains parked at once");
    }
}

#[test]
fn an_expired_lease_is_leased_again_and_the_late_result_is_dropped() {
    let mut sim = Sim::new(settings(), 1);
    sim.seed(1);
    let a = sim.join("a", 1, Vec::new());
    sim.dispatch();
    let first = sim.held[&a][0].clone();
    // Heard from, but never reporting, past the lease.
    sim.advance(LEASE_MS + 1);
    sim.housekeeping(&[]);
    assert_eq!(sim.st.stats().counts.leases_expired, 1);
    // Queued again once the store says its page is not stored.
    sim.answer_reads();
    sim.held.insert(a, Vec::new());
    sim.dispatch();
    let second = sim.held[&a][0].clone();
    assert_eq!(second.url, first.url);
    assert_ne!(second.lease, first.lease);
    // The first lease's result comes late: dropped, nothing marked.
    sim.deliver(a, vec![fetched(&first, Vec::new())]);
    assert!(sim.marks.is_empty(), "{:?}", sim.marks);
    sim.report(a, 1);
    sim.assert_each_finished_once();
}

#[test]
fn a_heartbeat_renews_what_it_lists() {
    let mut sim = Sim::new(settings(), 1);
    sim.seed(1);
    let a = sim.join("a", 1, Vec::new());
    sim.dispatch();
    let lease = sim.held[&a][0].lease;
    sim.advance(LEASE_MS - 1_000);
    let s = sim.sup_of(a).unwrap();
    sim.st.heartbeat(s, &[lease], sim.now);
    sim.advance(LEASE_MS / 2);
    sim.housekeeping(&[]);
    assert_eq!(sim.st.stats().counts.leases_expired, 0);
    sim.dispatch();
    assert_eq!(sim.leased.values().sum::<u32>(), 1);
}

#[test]
fn a_silent_supervisor_is_given_up_and_its_urls_go_to_another_once() {
    let mut sim = Sim::new(settings(), 7);
    sim.seed(4);
    let a = sim.join("a", 8, Vec::new());
    let b = sim.join("b", 8, Vec::new());
    sim.dispatch();
    let a_held: Vec<String> = sim.held[&a].iter().map(|i| i.url.clone()).collect();
    assert!(!a_held.is_empty());
    sim.advance(HEARTBEAT_TIMEOUT_MS + 1);
    sim.housekeeping(&[a]);
    assert!(!sim.live(a));
    assert_eq!(sim.gone, vec!["a".to_string()]);
    sim.answer_reads();
    sim.dispatch();
    let b_held: HashSet<String> = sim.held[&b].iter().map(|i| i.url.clone()).collect();
    assert!(
        a_held.iter().all(|u| b_held.contains(u)),
        "{a_held:?} not all at b: {b_held:?}"
    );
    // A result on the given-up connection is not taken.
    sim.report(a, usize::MAX);
    assert!(sim.marks.is_empty());
    sim.run_to_end();
    sim.assert_each_finished_once();
}

/// A small deterministic generator (the test must replay from its seed).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Random crawls: supervisors that report part of what they hold, fail
/// URLs, go silent, reconnect holding their work, leave and come back; a
/// dispatcher restarted on the store; time jumping past leases. No URL is
/// ever leased while an earlier lease of it may still be crawled, and in
/// the end every admitted URL is finished exactly once.
#[test]
fn random_crawls_neither_lose_nor_double_a_lease() {
    for seed in 1..=60u64 {
        let mut s = settings();
        s.memory_urls = if seed % 2 == 0 { 12 } else { 1_000_000 };
        // A third of them check repeated links against the store.
        if seed % 3 == 0 {
            s.seen_check = SeenCheck::Store;
            s.seen_recent_urls = 2;
        }
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        // Store-check seeds hash to 6 bits: most links collide.
        let fresh = |s: &Settings, now: u64| {
            let st = CrawlState::new(s.clone(), TimingLog::disabled(), now).unwrap();
            if s.seen_check == SeenCheck::Store {
                st.with_seen(SeenSet::new(SeenCheck::Store, 2).with_hash_bits(6))
            } else {
                st
            }
        };
        let mut sim = Sim::new(s.clone(), 15);
        sim.st = fresh(&s, sim.now);
        sim.extra_links = vec![url(0, 0), url(1, 3), url(2, 14)];
        sim.lagging = seed % 4 < 2;
        sim.seed(6);
        let ids = ["a", "b", "c"];
        let mut conns: HashMap<&str, u32> = HashMap::new();
        for id in &ids[..2] {
            conns.insert(id, sim.join(id, 4, Vec::new()));
        }
        let mut silent: Vec<u32> = Vec::new();
        for _ in 0..400 {
            let id = ids[rng.below(3) as usize];
            match rng.below(12) {
                0..=3 => {
                    if let Some(&c) = conns.get(id) {
                        let n = rng.below(4) as usize;
                        if rng.below(8) == 0 {
                            let items = sim
                                .held
                                .get_mut(&c)
                                .map(|h| h.drain(..n.min(h.len())).collect::<Vec<_>>());
                            let results = items
                                .unwrap_or_default()
                                .iter()
                                .map(|i| failed(i, FailureKind::Timeout))
                                .collect();
                            sim.deliver(c, results);
                        } else {
                            sim.report(c, n);
                        }
                    }
                }
                4 | 5 => sim.dispatch(),
                6 => {
                    sim.answer_reads();
                    sim.scan(rng.below(6) as usize);
                }
                7 => {
                    sim.advance(rng.below(20_000));
                    sim.housekeeping(&silent);
                }
                8 => {
                    // Reconnects on a new socket, listing what it holds.
                    let holding = conns
                        .get(id)
                        .and_then(|c| sim.held.get(c))
                        .cloned()
                        .unwrap_or_default();
                    let c = sim.join(id, 4, holding);
                    conns.insert(id, c);
                    silent.clear();
                }
                9 => {
                    // Goes silent (frozen) until it reconnects.
                    if let Some(&c) = conns.get(id) {
                        silent.push(c);
                    }
                }
                10 => {
                    // Leaves for good, dropping what it holds.
                    if let Some(c) = conns.remove(id) {
                        if let Some(s) = sim.sup_of(c) {
                            sim.st.bye(s);
                            sim.pump();
                        }
                        sim.held.remove(&c);
                    }
                }
                _ => {
                    if rng.below(10) == 0 {
                        // The dispatcher restarts on the store; every
                        // supervisor rejoins with what it holds.
                        if rng.below(2) == 0 {
                            sim.restart(fresh(&s, sim.now));
                        } else {
                            sim.restart_summarized(fresh(&s, sim.now));
                        }
                        // Seeds not stored yet are offered again, as at every start.
                        sim.seed(6);
                        silent.clear();
                        for id in ids {
                            if let Some(old) = conns.get(id).copied() {
                                let holding = sim.held.remove(&old).unwrap_or_default();
                                conns.insert(id, sim.join(id, 4, holding));
                            }
                        }
                    }
                }
            }
        }
        // Everyone back, answering everything.
        for id in ids {
            let holding = conns
                .get(id)
                .and_then(|c| sim.held.get(c))
                .cloned()
                .unwrap_or_default();
            conns.insert(id, sim.join(id, 4, holding));
        }
        sim.run_to_end();
        let stored = sim.store.len();
        assert!(stored > 6, "seed {seed}: only {stored} URLs");
        sim.assert_each_finished_once();
    }
}
