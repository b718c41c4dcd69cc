//! The frontier with its queues in a store: windows, refills and what a
//! store that lags, fails or answers wrongly can and cannot do.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::*;

/// The store's side of the queues: every admitted URL by `seq`, with its
/// domain and whether it is still queued. Writes land when `flush` says.
#[derive(Default)]
struct FakeStore {
    docs: BTreeMap<i64, (String, String, bool)>,
    unwritten: Vec<(i64, String, String)>,
    durable: i64,
}

impl FakeStore {
    fn write(&mut self, seq: i64, url: &str, domain: &str) {
        self.unwritten.push((seq, url.into(), domain.into()));
    }
    fn flush(&mut self) {
        for (seq, url, domain) in self.unwritten.drain(..) {
            self.durable = self.durable.max(seq);
            self.docs.insert(seq, (url, domain, true));
        }
    }
    fn read(&self, r: &Refill) -> ReadPage {
        let urls = self
            .docs
            .range(r.after + 1..=r.upto)
            .filter(|(_, (_, d, queued))| *d == r.domain && *queued)
            .take(r.limit)
            .map(|(seq, (url, _, _))| Stored {
                url: url.clone(),
                depth: 0,
                seq: *seq,
            })
            .collect();
        ReadPage::of(urls, r.limit)
    }
    fn mark_done(&mut self, url: &str) {
        for (u, _, queued) in self.docs.values_mut() {
            if u == url {
                *queued = false;
            }
        }
    }
}

/// A crawl over `f` and `store`: leases everything to `sups`, completes
/// it, answers refills, until idle. Returns how often each URL was leased.
fn crawl(f: &mut Frontier, store: &mut FakeStore, sups: &[SupId]) -> HashMap<String, u32> {
    let mut leased: HashMap<String, u32> = HashMap::new();
    for _ in 0..10_000 {
        store.flush();
        for r in f.refills(store.durable, 8) {
            let urls = store.read(&r);
            f.refilled(&r, urls);
        }
        let got: Vec<WorkItem> = sups.iter().flat_map(|s| f.take(*s, 16, 0)).collect();
        if let Err(e) = f.check_slots() {
            panic!("{e}");
        }
        for w in &got {
            *leased.entry(w.url.clone()).or_default() += 1;
            assert!(f.complete(w.lease).is_some());
            store.mark_done(&w.url);
        }
        if f.is_idle() {
            return leased;
        }
    }
    let state: Vec<_> = f
        .domains
        .iter()
        .map(|(_, d)| {
            (
                d.name(),
                d.window.summary(),
                d.slot.is_parked(),
                d.owner.get(),
                d.in_flight.get(),
                d.owner.in_ready(),
                d.block.is_blocked(),
            )
        })
        .collect();
    let rings = f.owners.rings();
    panic!(
        "the crawl never ended: {} queued: {state:?} durable {} rings {rings:?}",
        f.queued(),
        store.durable
    );
}

fn windowed() -> (Frontier, SupId) {
    let mut f = Frontier::new(2, 1000, 1).with_window(4, 0);
    f.start_assigning();
    let s = f.add_supervisor();
    (f, s)
}

#[test]
fn a_window_holds_a_few_urls_and_the_rest_are_read_in_order() {
    let (mut f, s) = windowed();
    let mut store = FakeStore::default();
    for seq in 1..=10 {
        let url = format!("http://a/{seq}");
        store.write(seq, &url, "a");
        f.admit(url, "a", 0, seq, 0);
    }
    assert_eq!(f.queued(), 10);
    assert_eq!(f.spilled(), 6);
    // Nothing is read before it is written.
    assert!(f.refills(0, 8).is_empty());
    let first = f.take(s, 10, 0);
    let urls: Vec<_> = first.iter().map(|w| w.url.as_str()).collect();
    assert_eq!(urls, ["http://a/1", "http://a/2"]);
    store.flush();
    let r = f.refills(store.durable, 8);
    assert_eq!(r.len(), 1);
    assert_eq!((r[0].after, r[0].upto, r[0].limit), (4, 10, 2));
    // Asked once until answered.
    assert!(f.refills(store.durable, 8).is_empty());
    let answer = store.read(&r[0]);
    assert_eq!(f.refilled(&r[0], answer), 0);
    assert_eq!(f.spilled(), 4);
    for w in first {
        f.complete(w.lease);
        store.mark_done(&w.url);
    }
    let leased = crawl(&mut f, &mut store, &[s]);
    assert_eq!(leased.len(), 8);
    assert!(leased.values().all(|n| *n == 1));
    assert_eq!(f.queued(), 0);
}

#[test]
fn urls_admitted_while_older_ones_wait_in_the_store_queue_behind_them() {
    let (mut f, s) = windowed();
    let mut store = FakeStore::default();
    let mut seq = 0;
    let mut admit = |f: &mut Frontier, store: &mut FakeStore, n: i64| {
        for _ in 0..n {
            seq += 1;
            let url = format!("http://a/{seq}");
            store.write(seq, &url, "a");
            f.admit(url, "a", 0, seq, 0);
        }
    };
    admit(&mut f, &mut store, 6);
    // The window empties; then more URLs arrive before the refill is read.
    let t = f.take(s, 10, 0);
    for w in &t {
        f.complete(w.lease);
        store.mark_done(&w.url);
    }
    let t = f.take(s, 10, 0);
    for w in &t {
        f.complete(w.lease);
        store.mark_done(&w.url);
    }
    admit(&mut f, &mut store, 3);
    assert_eq!(
        f.spilled(),
        5,
        "5 and 6 wait in the store, so 7..9 wait behind them"
    );
    let mut order = Vec::new();
    for _ in 0..100 {
        store.flush();
        for r in f.refills(store.durable, 8) {
            let answer = store.read(&r);
            f.refilled(&r, answer);
        }
        for w in f.take(s, 1, 0) {
            order.push(w.url.clone());
            f.complete(w.lease);
            store.mark_done(&w.url);
        }
        if f.is_idle() {
            break;
        }
    }
    let expect: Vec<String> = (5..=9).map(|i| format!("http://a/{i}")).collect();
    assert_eq!(order, expect);
}

#[test]
fn a_failed_or_lying_read_loses_and_doubles_nothing() {
    let (mut f, s) = windowed();
    let mut store = FakeStore::default();
    for seq in 1..=12 {
        let url = format!("http://a/{seq}");
        store.write(seq, &url, "a");
        f.admit(url, "a", 0, seq, 0);
    }
    store.flush();
    for w in f.take(s, 10, 0) {
        f.complete(w.lease);
        store.mark_done(&w.url);
    }
    // The read fails: asked again later, nothing lost.
    let r = f.refills(store.durable, 8);
    f.refill_failed(&r[0]);
    let r = f.refills(store.durable, 8);
    assert_eq!(r.len(), 1);
    // The store answers twice, with URLs the read did not ask for (before
    // the cursor, after `upto`) and a URL twice: only the asked ones count.
    let mut answer = store.read(&r[0]).urls;
    answer.insert(
        0,
        Stored {
            url: "http://a/1".into(),
            depth: 0,
            seq: 1,
        },
    );
    answer.push(answer[1].clone());
    answer.push(Stored {
        url: "http://a/99".into(),
        depth: 0,
        seq: 99,
    });
    // Honest about what it returned (`full`, `last_seq`), not about which.
    let honest = store.read(&r[0]);
    let page = ReadPage {
        urls: answer,
        ..honest
    };
    f.refilled(&r[0], page.clone());
    f.refilled(&r[0], page);
    let leased = crawl(&mut f, &mut store, &[s]);
    let mut urls: Vec<_> = leased.keys().cloned().collect();
    urls.sort_by_key(|u| u[9..].parse::<u32>().unwrap_or(0));
    let expect: Vec<String> = (3..=12).map(|i| format!("http://a/{i}")).collect();
    assert_eq!(urls, expect);
    assert!(leased.values().all(|n| *n == 1), "{leased:?}");
}

#[test]
fn a_url_the_store_refused_is_no_longer_counted_once_reads_find_it_missing() {
    let (mut f, s) = windowed();
    let mut store = FakeStore::default();
    for seq in 1..=6 {
        let url = format!("http://a/{seq}");
        if seq != 6 {
            store.write(seq, &url, "a");
        }
        f.admit(url, "a", 0, seq, 0);
    }
    store.flush();
    store.durable = 6;
    let leased = crawl(&mut f, &mut store, &[s]);
    assert_eq!(leased.len(), 5);
    assert_eq!(f.queued(), 0);
}

#[test]
fn a_resumed_crawl_reads_its_windows_from_the_store() {
    let mut store = FakeStore::default();
    let mut f = Frontier::new(2, 1000, 1).with_window(4, 0);
    for seq in 1..=9 {
        let d = ["a", "b", "c"][seq as usize % 3];
        let url = format!("http://{d}/{seq}");
        store.write(seq, &url, d);
        f.resume_stored(d, seq);
    }
    store.flush();
    assert_eq!((f.queued(), f.spilled()), (9, 9));
    f.start_assigning();
    let s1 = f.add_supervisor();
    let s2 = f.add_supervisor();
    // This process has written nothing yet: what it found is written.
    let reads = f.refills(0, 8);
    assert_eq!(reads.len(), 3);
    for r in reads {
        let answer = store.read(&r);
        f.refilled(&r, answer);
    }
    let leased = crawl(&mut f, &mut store, &[s1, s2]);
    assert_eq!(leased.len(), 9);
    assert!(leased.values().all(|n| *n == 1));
}

/// A resumed queue is counted by an estimate (`crate::resume`): one too
/// low, with URLs admitted after the restart queued behind it, and one
/// too high. Every stored URL is leased once, the new ones too, and
/// nothing stays counted.
#[test]
fn a_resumed_queue_counted_too_low_or_too_high_is_read_whole() {
    for estimate in [3, 40] {
        let mut store = FakeStore::default();
        let mut f = Frontier::new(2, 1000, 1).with_window(4, 0);
        for seq in 11..=30 {
            let url = format!("http://a/{seq}");
            store.write(seq, &url, "a");
        }
        store.flush();
        f.resume_spilled("a", estimate, 11, 30);
        f.start_assigning();
        let s = f.add_supervisor();
        // Admitted after the restart, before the first read.
        for seq in 31..=40 {
            let url = format!("http://a/{seq}");
            store.write(seq, &url, "a");
            f.admit(url, "a", 0, seq, 0);
        }
        let leased = crawl(&mut f, &mut store, &[s]);
        assert_eq!(leased.len(), 30, "estimate {estimate}");
        assert!(leased.values().all(|n| *n == 1));
        assert_eq!((f.queued(), f.spilled()), (0, 0), "estimate {estimate}");
    }
}

/// Many domains, random admissions (some while reads are under way,
/// some not yet written), expiries and a supervisor leaving: every URL
/// is leased, and none is leased twice unless its lease ended without a
/// result (expired or its holder left). With every domain free to hold a
/// window, and with two at a time (the rest parked, taking turns).
#[test]
fn random_crawls_lease_every_url_and_double_only_what_was_lost() {
    for seed in 0..40u64 {
        random_crawl(seed, usize::MAX);
        random_crawl(seed, 2);
    }
}

fn random_crawl(seed: u64, active_bound: usize) {
    {
        let mut rng = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let mut next = |n: u64| {
            rng = rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (rng >> 33) % n
        };
        let mut f = Frontier::new(2, 1000, 1)
            .with_window(4, 0)
            .with_active_bound(active_bound);
        f.start_assigning();
        let mut sups = vec![f.add_supervisor(), f.add_supervisor()];
        let mut store = FakeStore::default();
        let mut pending: Vec<Refill> = Vec::new();
        let mut out: Vec<(u64, String, SupId)> = Vec::new();
        let mut leased: HashMap<String, u32> = HashMap::new();
        let mut lost: HashMap<String, u32> = HashMap::new();
        let mut seq = 0i64;
        let mut now = 0u64;
        let mut returned = false;
        for step in 0..3000 {
            match next(10) {
                0..=2 if seq < 300 => {
                    seq += 1;
                    let d = format!("d{}", next(5));
                    let url = format!("http://{d}/{seq}");
                    store.write(seq, &url, &d);
                    f.admit(url, &d, 0, seq, now);
                }
                3 => store.flush(),
                4 => pending.extend(f.refills(store.durable, 3)),
                5 if !pending.is_empty() => {
                    let r = pending.swap_remove(next(pending.len() as u64) as usize);
                    if next(5) == 0 {
                        f.refill_failed(&r);
                    } else {
                        let answer = store.read(&r);
                        f.refilled(&r, answer);
                    }
                }
                6 => {
                    let s = sups[next(sups.len() as u64) as usize];
                    for w in f.take(s, 3, now) {
                        *leased.entry(w.url.clone()).or_default() += 1;
                        out.push((w.lease, w.url, s));
                    }
                }
                7 if !out.is_empty() => {
                    let (lease, url, s) = out.swap_remove(next(out.len() as u64) as usize);
                    if f.complete_for(s, lease, &url).is_ok() {
                        store.mark_done(&url);
                    }
                }
                8 if step % 500 == 0 => {
                    now += 1000;
                    for (_, url, _) in out.drain(..) {
                        *lost.entry(url).or_default() += 1;
                    }
                    f.expire(now);
                }
                9 if sups.len() == 2 && step > 1500 => {
                    let gone = sups.remove(0);
                    out.retain(|(_, url, s)| {
                        if *s == gone {
                            *lost.entry(url.clone()).or_default() += 1;
                        }
                        *s != gone
                    });
                    f.remove_supervisor(gone);
                }
                _ => {}
            }
            if let Err(e) = f.check_slots() {
                panic!("seed {seed}, bound {active_bound}, step {step}: {e}");
            }
            // A lease that comes back takes a slot even past the bound
            // (its URL must be in memory); until then the bound holds.
            returned |= !lost.is_empty();
            assert!(
                returned || f.active_domains() <= active_bound,
                "seed {seed}: {} domains hold a window past a bound of {active_bound}",
                f.active_domains()
            );
        }
        // Finish: answer, flush, lease and complete until idle.
        for r in pending.drain(..) {
            let answer = store.read(&r);
            f.refilled(&r, answer);
        }
        for (lease, url, s) in out.drain(..) {
            if f.complete_for(s, lease, &url).is_ok() {
                store.mark_done(&url);
            }
        }
        for (u, n) in crawl(&mut f, &mut store, &sups) {
            *leased.entry(u).or_default() += n;
        }
        assert_eq!(
            leased.len() as i64,
            seq,
            "seed {seed}: every admitted URL was leased"
        );
        for (u, n) in &leased {
            let allowed = 1 + lost.get(u).copied().unwrap_or(0);
            assert!(
                *n <= allowed,
                "seed {seed}: {u} leased {n} times, {allowed} allowed"
            );
        }
        assert_eq!(f.queued(), 0, "seed {seed}");
    }
}

#[test]
fn a_restarted_dispatcher_adopts_held_urls_that_are_still_only_in_the_store() {
    let mut store = FakeStore::default();
    let mut f = Frontier::new(2, 1000, 1).with_window(4, 0);
    for seq in 1..=10 {
        let url = format!("http://a/{seq}");
        store.write(seq, &url, "a");
        f.resume_stored("a", seq);
    }
    store.flush();
    f.start_assigning();
    let s = f.add_supervisor();
    // The supervisor held a/2 and a/9 (lease ids 500, 501) from before
    // the restart, and a/77, which was never queued.
    let held: Vec<WorkItem> = [(2, 500), (9, 501), (77, 502)]
        .iter()
        .map(|(i, lease)| WorkItem {
            server: None,
            lease: *lease,
            lease_expires_ms: 0,
            leased_ms: 0,
            url: format!("http://a/{i}"),
            domain: "a".into(),
            depth: 0,
            min_delay_ms: None,
            revisit: None,
        })
        .collect();
    let first = f.adopt(s, held, 0, |_| false);
    assert_eq!((first.adopted, first.refused, first.to_look_up()), (0, 0, 3));
    // The window reads a/1..a/4 before the look-up's answer comes back.
    let r = f.refills(0, 8);
    let answer = store.read(&r[0]);
    f.refilled(&r[0], answer);
    let found: Vec<(u64, Stored)> = first
        .look_up
        .iter()
        .flat_map(|l| l.held.iter())
        .filter_map(|(lease, url)| {
            let (seq, _) = store.docs.iter().find(|(_, (u, _, _))| u == url)?;
            Some((
                *lease,
                Stored {
                    url: url.clone(),
                    depth: 0,
                    seq: *seq,
                },
            ))
        })
        .collect();
    let second = f.adopt_stored(s, first.to_look_up(), found, 0);
    assert_eq!((second.adopted, second.refused), (2, 1));
    assert_eq!(f.held(s), 2);
    assert_eq!(f.queued(), 8);
    // The adopted ones are never leased again; everything else once.
    for (lease, url) in [(500, "http://a/2"), (501, "http://a/9")] {
        assert!(f.complete(lease).is_some());
        store.mark_done(url);
    }
    let leased = crawl(&mut f, &mut store, &[s]);
    let mut urls: Vec<_> = leased.keys().cloned().collect();
    urls.sort_by_key(|u| u[9..].parse::<u32>().unwrap_or(0));
    let expect: Vec<String> = [1, 3, 4, 5, 6, 7, 8, 10]
        .iter()
        .map(|i| format!("http://a/{i}"))
        .collect();
    assert_eq!(urls, expect);
    assert!(leased.values().all(|n| *n == 1));
}

#[test]
fn windows_are_bounded_only_once_memory_is_short() {
    let mut f = Frontier::new(2, 1000, 1).with_window(4, 10);
    f.start_assigning();
    let _s = f.add_supervisor();
    for seq in 1..=8 {
        f.admit(format!("http://a/{seq}"), "a", 0, seq, 0);
    }
    assert_eq!(f.spilled(), 0, "8 URLs fit in a budget of 10");
    for seq in 9..=12 {
        f.admit(format!("http://b/{seq}"), "b", 0, seq, 0);
    }
    // b's first two fit; then memory is short and b's window (4) is the
    // bound, a's is past it: a's next URL waits in the store.
    assert_eq!(f.spilled(), 0);
    f.admit("http://b/13".into(), "b", 0, 13, 0);
    f.admit("http://a/14".into(), "a", 0, 14, 0);
    assert_eq!(f.spilled(), 2);
    assert_eq!(f.queued(), 14);
}

#[test]
fn a_resume_keeps_what_fits_and_never_puts_a_url_behind_the_cursor() {
    let mut store = FakeStore::default();
    let mut f = Frontier::new(2, 1000, 1).with_window(4, 2);
    // The store returns a's URLs out of order: 5 and 2 fit the budget; 9
    // does not; 1 and 3 are behind a's cursor (5), so they are kept too;
    // 7 waits in the store behind 9.
    for seq in [5, 2, 9, 1, 3, 7] {
        let url = format!("http://a/{seq}");
        store.write(seq, &url, "a");
        f.resume_queued(url, "a", 0, seq);
    }
    store.flush();
    assert_eq!((f.queued(), f.spilled()), (6, 2));
    f.start_assigning();
    let s = f.add_supervisor();
    let leased = crawl(&mut f, &mut store, &[s]);
    assert_eq!(leased.len(), 6);
    assert!(leased.values().all(|n| *n == 1));
}

/// Admits 100 domains' 20 URLs each, domain after domain, into `f`; the
/// store holds them all.
fn hundred_domains_of_twenty(f: &mut Frontier) -> FakeStore {
    let mut store = FakeStore::default();
    let mut seq = 0;
    for d in 0..100 {
        let domain = format!("d{d}");
        for i in 0..20 {
            seq += 1;
            let url = format!("http://{domain}/{i}");
            store.write(seq, &url, &domain);
            f.admit(url, &domain, 0, seq, 0);
        }
    }
    assert_eq!(f.queued(), 2000);
    store
}

#[test]
fn past_the_budget_the_domains_share_it_rather_than_each_keeping_a_whole_window() {
    // 100 domains of 20 URLs, a budget of 40 and windows of 64: a window
    // of 64 holds every domain's whole queue (2,000 URLs in memory).
    // Shared, a domain keeps the budget over the domains known, at least
    // twice its in-flight maximum (4).
    let mut f = Frontier::new(2, 1000, 1).with_window(64, 40);
    f.start_assigning();
    let s = f.add_supervisor();
    let mut store = hundred_domains_of_twenty(&mut f);
    let in_memory = f.queued() - f.spilled();
    assert!(in_memory <= 500, "{in_memory} URLs in memory");
    // Each URL is still crawled, once.
    let leased = crawl(&mut f, &mut store, &[s]);
    assert_eq!(leased.len(), 2000);
    assert!(leased.values().all(|&n| n == 1));
}

#[test]
fn past_the_budget_a_bounded_set_of_domains_holds_windows_and_the_rest_take_turns() {
    // 100 domains of 20 URLs, a budget of 40, windows of at least 4, and
    // at most 10 domains holding one: shared out alone, the windows held
    // 4 URLs of every domain (400); bounded, 10 domains' at most.
    let mut f = Frontier::new(2, 1000, 1)
        .with_window(64, 40)
        .with_active_bound(10);
    f.start_assigning();
    let s = f.add_supervisor();
    let mut store = hundred_domains_of_twenty(&mut f);
    assert_eq!((f.active_domains(), f.parked_domains()), (10, 90));
    // Crawled to the end with no more than 10 domains' windows in memory:
    // d0 and d1 whole (40, under the budget), then d2 to d9 their shares
    // as they were met (13, 10, 8, ... 4).
    let mut order: Vec<String> = Vec::new();
    let mut leased = HashSet::new();
    let mut peak = 0;
    for _ in 0..10_000 {
        store.flush();
        for r in f.refills(store.durable, 8) {
            let urls = store.read(&r);
            f.refilled(&r, urls);
        }
        peak = peak.max(f.queued() - f.spilled());
        for w in f.take(s, 16, 0) {
            assert!(f.complete(w.lease).is_some());
            store.mark_done(&w.url);
            assert!(leased.insert(w.url), "leased twice");
            order.push(w.domain);
        }
        if let Err(e) = f.check_slots() {
            panic!("{e}");
        }
        assert!(f.active_domains() <= 10);
        if f.is_idle() {
            break;
        }
    }
    assert!(peak <= 95, "{peak} URLs in memory");
    assert_eq!(leased.len(), 2000, "each URL crawled");
    // Turns: every parked domain is crawled before d2 to d9 (which took
    // their slots with a part of their queues) are done: each gave its
    // slot back when its window emptied.
    let first = |d: u32| order.iter().position(|o| *o == format!("d{d}"));
    let last = |d: u32| order.iter().rposition(|o| *o == format!("d{d}"));
    let last_start = (10..100).map(first).max().flatten();
    let first_end = (2..10).map(last).min().flatten();
    assert!(last_start < first_end, "{last_start:?} {first_end:?}");
}

#[test]
fn domains_that_took_slots_under_the_budget_grow_no_window_past_it() {
    // 40 domains take a slot each with one URL, under a budget of 40;
    // the bound is 10. Their next URLs wait in the store: grown to the
    // floor (4), the 40 windows held 160 URLs.
    let mut f = Frontier::new(2, 1000, 1)
        .with_window(64, 40)
        .with_active_bound(10);
    f.start_assigning();
    let s = f.add_supervisor();
    let mut store = FakeStore::default();
    let mut seq = 0;
    for round in 0..20 {
        for d in 0..40 {
            seq += 1;
            let (domain, url) = (format!("d{d}"), format!("http://d{d}/{round}"));
            store.write(seq, &url, &domain);
            f.admit(url, &domain, 0, seq, 0);
        }
    }
    assert_eq!(f.active_domains(), 40);
    assert_eq!(f.queued() - f.spilled(), 40);
    // Crawled to the end, each URL once; windows drain, and from then on
    // no more than 10 domains hold one.
    let leased = crawl(&mut f, &mut store, &[s]);
    assert_eq!(leased.len(), 800);
    assert!(leased.values().all(|&n| n == 1));
}
