//! Retries and halts: retryable failures after a pause, then for good;
//! halted domains, this run's and an earlier run's.

use super::*;

#[test]
fn retryable_failures_come_back_after_a_pause_then_fail_for_good() {
    let mut sim = Sim::new(settings(), 1);
    sim.seed(1);
    let a = sim.join("a", 1, Vec::new());
    for attempt in 1..=3u64 {
        sim.dispatch();
        let items = std::mem::take(sim.held.get_mut(&a).unwrap());
        assert_eq!(items.len(), 1, "attempt {attempt}");
        sim.deliver(a, vec![failed(&items[0], FailureKind::Connect)]);
        if attempt < 3 {
            assert!(sim.marks.is_empty());
            // Not before its pause.
            sim.advance(RETRY_AFTER.as_millis() as u64 * attempt - 1);
            sim.dispatch();
            assert!(sim.held[&a].is_empty(), "retried early");
            sim.advance(1);
        }
    }
    assert_eq!(sim.marks[&url(0, 0)], vec![UrlState::Failed]);
    assert!(sim.st.done());
    assert_eq!(sim.st.stats().counts.retried, 2);
}

#[test]
fn a_halted_domain_is_not_leased_until_unhalted() {
    let mut s = settings();
    s.breaker.halt_after = 2;
    let mut sim = Sim::new(s, 7);
    sim.seed(2);
    let a = sim.join("a", 8, Vec::new());
    sim.dispatch();
    // d0 fails twice in a row: halted, and recorded for the next run.
    let d0: Vec<WorkItem> = sim.held[&a]
        .iter()
        .filter(|i| i.domain == "d0.test")
        .cloned()
        .collect();
    assert_eq!(d0.len(), 1);
    sim.held.get_mut(&a).unwrap().retain(|i| i.domain != "d0.test");
    sim.deliver(a, vec![failed(&d0[0], FailureKind::Connect)]);
    sim.advance(RETRY_AFTER.as_millis() as u64);
    sim.dispatch();
    let again: Vec<WorkItem> = sim.held[&a]
        .iter()
        .filter(|i| i.domain == "d0.test")
        .cloned()
        .collect();
    sim.held.get_mut(&a).unwrap().retain(|i| i.domain != "d0.test");
    sim.deliver(a, vec![failed(&again[0], FailureKind::Connect)]);
    assert_eq!(sim.halts.len(), 1);
    assert_eq!(sim.halts[0].0, "d0.test");
    assert!(sim.halts[0].1.is_some());
    // The rest of the crawl goes on; d0 waits.
    for _ in 0..50 {
        sim.advance(RETRY_AFTER.as_millis() as u64 * 3);
        sim.dispatch();
        sim.report(a, usize::MAX);
    }
    // Nothing left but the halted domain's URLs: the crawl is over, halted.
    assert!(sim.held[&a].is_empty());
    assert!(sim.st.done());
    assert!(sim.st.left() > 0);
    assert!(sim
        .marks
        .keys()
        .chain(sim.pages_stored.keys())
        .all(|u| u.starts_with("http://d1.test/")));
    assert_eq!(sim.st.finish_reason(false), FinishReason::Halted);
    // An operator un-halts it: cleared in the store, crawled to the end.
    assert!(sim.st.unhalt("d0.test"));
    sim.pump();
    assert_eq!(sim.halts[1], ("d0.test".to_string(), None));
    assert!(!sim.st.unhalt("d0.test"));
    assert!(!sim.st.done());
    sim.run_to_end();
    sim.assert_each_finished_once();
}

#[test]
fn a_domain_halted_in_an_earlier_run_stays_halted() {
    let mut sim = Sim::new(settings(), 1);
    sim.st.halted_before("d0.test");
    sim.seed(2);
    let a = sim.join("a", 8, Vec::new());
    sim.dispatch();
    assert_eq!(sim.held[&a].len(), 1);
    assert_eq!(sim.held[&a][0].domain, "d1.test");
}
