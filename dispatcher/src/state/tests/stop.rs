//! The stop: every live supervisor told, and any that joins later.

use super::*;

#[test]
fn stopping_tells_every_live_supervisor_and_any_that_joins_later() {
    let mut sim = Sim::new(settings(), 1);
    sim.seed(1);
    let a = sim.join("a", 8, Vec::new());
    let b = sim.join("b", 8, Vec::new());
    let told = sim.st.stop();
    sim.pump();
    assert_eq!(told.len(), 2);
    assert_eq!(sim.sent_to(a, |m| matches!(m, ToSupervisor::Stop)), 1);
    assert_eq!(sim.sent_to(b, |m| matches!(m, ToSupervisor::Stop)), 1);
    // `a` reconnects (it took a pause of ours for our death).
    let a2 = sim.join("a", 8, Vec::new());
    assert_eq!(sim.sent_to(a2, |m| matches!(m, ToSupervisor::Stop)), 1);
    let s = sim.sup_of(a2).unwrap();
    sim.st.bye(s);
    sim.pump();
    // The first connection's Bye came through the second: both confirmed.
    assert!(sim.st.said_bye(told[0]));
    assert!(!sim.st.said_bye(told[1]));
    assert_eq!(sim.st.finish_reason(true), FinishReason::Stopped);
}
