//! Membership: supervisors joining a running crawl, handing URLs back,
//! reconnecting with what they hold, rejoining with stale results, lying
//! about other supervisors' leases, and saying bye.

use super::*;

/// Issue 46: a node that joins a running crawl gets a fair share of the
/// domains (they move once nothing of them is in flight; the domain check
/// in `pump` fails on any domain out at two connections at once).
#[test]
fn a_supervisor_that_joins_a_running_crawl_gets_a_share_of_its_domains() {
    let mut sim = Sim::new(settings(), 63);
    sim.seed(12);
    let a = sim.join("a", 64, Vec::new());
    for _ in 0..3 {
        sim.answer_reads();
        sim.dispatch();
        sim.report(a, usize::MAX);
        sim.advance(1_000);
        sim.housekeeping(&[]);
    }
    let before: HashSet<String> = sim.out.keys().cloned().collect();
    let b = sim.join("b", 64, Vec::new());
    sim.run_to_end();
    sim.assert_each_crawled_once();
    let after: Vec<&Out> = sim
        .out
        .iter()
        .filter(|(u, _)| !before.contains(*u))
        .map(|(_, o)| o)
        .collect();
    let by_b = after.iter().filter(|o| o.conn == b).count();
    assert!(
        by_b * 3 >= after.len(),
        "b crawled {by_b} of the {} pages left when it joined",
        after.len()
    );
    assert!(sim.st.frontier().domains_moved() >= 5);
}

/// Issue 46: a URL a node hands back unfetched (its right to crawl ran
/// out) is queued again at once, without counting a try; results and
/// heartbeats are acknowledged by their message's counter.
#[test]
fn a_url_handed_back_fenced_is_leased_again_without_a_try() {
    let mut sim = Sim::new(settings(), 1);
    sim.seed(1);
    let a = sim.join("a", 1, Vec::new());
    sim.dispatch();
    let item = sim.held[&a][0].clone();
    sim.held.insert(a, Vec::new());
    sim.deliver(a, vec![failed(&item, FailureKind::Fenced)]);
    let s = sim.sup_of(a).unwrap();
    sim.st.acknowledge(s, 7);
    sim.pump();
    assert_eq!(sim.sent_to(a, |m| *m == ToSupervisor::Ack { seq: 7 }), 1);
    let counts = &sim.st.stats().counts;
    assert_eq!((counts.handed_back, counts.retried, counts.fetched), (1, 0, 0));
    assert!(sim.marks.is_empty());
    sim.dispatch();
    let again = sim.held[&a].clone();
    assert_eq!(again.len(), 1, "leased again at once, no retry pause");
    assert_eq!(again[0].url, item.url);
    // The old lease handed back again (sent twice over a reconnect): dropped.
    sim.deliver(a, vec![failed(&item, FailureKind::Fenced)]);
    assert_eq!(sim.st.stats().counts.handed_back, 1);
    sim.run_to_end();
    // Leased twice (handed back once), fetched and finished once.
    sim.assert_each_finished_once();
    assert_eq!(sim.leased[&item.url], 2);
}

/// Issue 46: a supervisor given up (its link was cut) whose children
/// stored pages it could not report, rejoins and sends those results
/// again: the pages were found in the store meanwhile, so nothing is
/// fetched again, and its held URLs and results are dropped as
/// duplicates, not refused as lies.
#[test]
fn a_rejoining_supervisors_stale_results_are_dropped_as_duplicates() {
    let mut sim = Sim::new(settings(), 7);
    sim.seed(2);
    let a = sim.join("a", 8, Vec::new());
    let _b = sim.join("b", 8, Vec::new());
    sim.dispatch();
    let a_held = sim.held.insert(a, Vec::new()).unwrap_or_default();
    assert!(!a_held.is_empty());
    for i in &a_held {
        sim.pages_stored.insert(i.url.clone(), links_of(&i.url, 7));
    }
    sim.advance(HEARTBEAT_TIMEOUT_MS + 1);
    sim.housekeeping(&[a]);
    assert!(!sim.live(a));
    sim.answer_reads();
    let a2 = sim.join("a", 8, a_held.clone());
    let results = a_held.iter().map(|i| fetched(i, links_of(&i.url, 7))).collect();
    sim.deliver(a2, results);
    assert_eq!(sim.st.stats().counts.stale_results, 2 * a_held.len() as u64);
    sim.run_to_end();
    sim.assert_each_finished_once();
    for i in &a_held {
        assert_eq!(sim.leased[&i.url], 1, "{} leased again", i.url);
    }
}

#[test]
fn a_reconnecting_supervisor_keeps_what_it_holds() {
    let mut sim = Sim::new(settings(), 7);
    sim.seed(3);
    let a1 = sim.join("a", 8, Vec::new());
    sim.dispatch();
    let holding = sim.held[&a1].clone();
    assert!(!holding.is_empty());
    // The same supervisor on a new socket, listing what it holds.
    let a2 = sim.join("a", 8, holding.clone());
    assert!(!sim.live(a1));
    assert!(sim.gone.is_empty(), "a supervisor still connected is not gone");
    sim.dispatch();
    let again = sim.held[&a2].len() - holding.len();
    assert_eq!(
        sim.leased.values().filter(|&&n| n > 1).count(),
        0,
        "{again} leased again"
    );
    sim.run_to_end();
    sim.assert_each_finished_once();
}

#[test]
fn a_supervisor_cannot_adopt_or_report_on_another_supervisors_lease() {
    let mut sim = Sim::new(settings(), 3);
    sim.seed(2);
    let a = sim.join("a", 8, Vec::new());
    sim.dispatch();
    let theirs = sim.held[&a].clone();
    // Another supervisor claims to hold them, and reports on them.
    let b = sim.join("b", 8, theirs.clone());
    sim.held.insert(b, Vec::new());
    for i in &theirs {
        sim.out.insert(
            i.url.clone(),
            Out {
                conn: a,
                lease: i.lease,
                expires_ms: i.lease_expires_ms,
            },
        );
    }
    sim.deliver(b, theirs.iter().map(|i| fetched(i, Vec::new())).collect());
    assert!(sim.marks.is_empty());
    sim.run_to_end();
    sim.assert_each_finished_once();
}

#[test]
fn a_supervisor_that_says_bye_gets_its_farewell_and_its_urls_go_back() {
    let mut sim = Sim::new(settings(), 3);
    sim.seed(2);
    let a = sim.join("a", 8, Vec::new());
    sim.dispatch();
    assert!(!sim.held[&a].is_empty());
    let s = sim.sup_of(a).unwrap();
    sim.st.bye(s);
    sim.pump();
    assert_eq!(sim.sent_to(a, |m| matches!(m, ToSupervisor::Farewell)), 1);
    assert!(sim.st.said_bye(s));
    // Queued again once the store says their pages are not stored.
    sim.answer_reads();
    assert_eq!(sim.st.frontier().in_flight(), 0);
    let b = sim.join("b", 8, Vec::new());
    sim.run_to_end();
    sim.assert_each_finished_once();
    assert!(sim
        .out
        .values()
        .all(|o| o.conn == b || sim.reported.contains(&o.lease)));
}
