//! An operator's commands on a running crawl: block, pause, pace.

use super::*;

/// The supervisor at `conn` answers recalls as a child does: what it holds
/// of the recalled domains comes back `Recalled`. How many came back.
fn answer_recalls(sim: &mut Sim, conn: u32) -> usize {
    let recalled: Vec<String> = std::mem::take(&mut sim.sent)
        .into_iter()
        .filter_map(|(c, msg)| match msg {
            ToSupervisor::Recall { domains } if c == conn => Some(domains),
            _ => None,
        })
        .flatten()
        .collect();
    let held = sim.held.remove(&conn).unwrap_or_default();
    let (back, kept): (Vec<WorkItem>, Vec<WorkItem>) =
        held.into_iter().partition(|i| recalled.contains(&i.domain));
    sim.held.insert(conn, kept);
    let n = back.len();
    sim.deliver(
        conn,
        back.iter().map(|i| failed(i, FailureKind::Recalled)).collect(),
    );
    n
}

fn leased_of(sim: &Sim, conn: u32, domain: &str) -> Vec<WorkItem> {
    sim.held
        .get(&conn)
        .map(|h| h.iter().filter(|i| i.domain == domain).cloned().collect())
        .unwrap_or_default()
}

#[test]
fn an_operator_blocks_pauses_and_paces_a_running_crawl() {
    use crate::control::ControlRequest;
    let mut sim = Sim::new(settings(), 15);
    sim.seed(2);
    let a = sim.join("a", 8, Vec::new());
    sim.dispatch();
    sim.report(a, usize::MAX);
    sim.dispatch();
    assert!(!leased_of(&sim, a, "d0.test").is_empty());

    // A block: what the supervisor holds of d0 is recalled, handed back
    // without a try, and nothing of d0 goes out again.
    let block = ControlRequest::Block {
        domain: "d0.test".into(),
        end: None,
        reason: "asked to".into(),
    };
    sim.st.steer(block, sim.now).unwrap();
    sim.pump();
    assert!(answer_recalls(&mut sim, a) > 0);
    assert!(sim
        .controls
        .last()
        .is_some_and(|d| d.id == "d0.test" && d.blocked));
    for _ in 0..5 {
        sim.dispatch();
        assert!(
            leased_of(&sim, a, "d0.test").is_empty(),
            "a blocked domain was leased"
        );
        sim.report(a, 1);
    }

    // A pause: everything out is recalled and nothing is leased.
    sim.st.steer(ControlRequest::Pause, sim.now).unwrap();
    sim.pump();
    answer_recalls(&mut sim, a);
    sim.report(a, usize::MAX);
    sim.advance(1_000);
    sim.dispatch();
    assert!(sim.held.get(&a).is_none_or(Vec::is_empty), "leased while paused");
    assert!(sim.st.progress_line().starts_with("PAUSED"));

    // Resumed and paced: d1's leases carry the operator's delay.
    sim.st.steer(ControlRequest::Resume, sim.now).unwrap();
    let pace = ControlRequest::Delay {
        domain: "d1.test".into(),
        ms: Some(700),
    };
    sim.st.steer(pace, sim.now).unwrap();
    sim.pump();
    sim.dispatch();
    let d1 = leased_of(&sim, a, "d1.test");
    assert!(!d1.is_empty() && d1.iter().all(|i| i.min_delay_ms == Some(700)));

    // Unblocked, the crawl ends with every URL finished once, d0's too.
    sim.st
        .steer(
            ControlRequest::Unblock {
                domain: "d0.test".into(),
            },
            sim.now,
        )
        .unwrap();
    sim.pump();
    sim.run_to_end();
    sim.assert_each_finished_once();
    assert!(sim.pages_stored.keys().any(|u| u.starts_with("http://d0.test/")));
}
