//! The supervisor's decisions without a socket, a process or a clock:
//! `Sim` plays the loop, feeding events at chosen instants and answering
//! the actions that ask for an answer (each message sent gets the next
//! seal counter). Each test checks the actions the core asks for.

use std::time::{Duration, Instant};

use link::protocol::{
    CrawlResult, FailureKind, FromChild, Outcome, ProcessInfo, ToDispatcher, ToSupervisor, WorkItem,
};

use super::*;

/// A crawl message from the dispatcher, as the link hands it on.
fn said(msg: ToSupervisor) -> Event {
    Event::Dispatcher(Heard::Message(msg))
}

const TIMEOUT: Duration = Duration::from_secs(10);
const SECOND: Duration = Duration::from_secs(1);

struct Sim {
    core: Core,
    now: Instant,
    /// The last seal counter handed out.
    seq: u64,
}

impl Sim {
    /// A core with `slots` slots, welcomed now.
    fn new(slots: usize, max_crashes: u32) -> Sim {
        let core = Core::new(Settings {
            slots,
            me: Identity {
                id: "node-1".into(),
                capacity: 256 * slots as u32,
                process: process(0),
            },
            heartbeat_timeout: TIMEOUT,
            max_crashes,
        });
        let mut sim = Sim {
            core,
            now: Instant::now(),
            seq: 0,
        };
        let now = sim.now;
        sim.on(Event::LinkUp { joined_at: Some(now) });
        sim
    }

    fn on(&mut self, event: Event) -> Vec<Action> {
        self.core.handle(event, self.now)
    }

    fn later(&mut self, by: Duration) {
        self.now += by;
    }

    fn work(&mut self, items: &[WorkItem]) -> Vec<Action> {
        self.on(said(ToSupervisor::Work(items.to_vec())))
    }

    fn result(&mut self, slot: usize, r: CrawlResult) -> Vec<Action> {
        self.on(Event::Slot(SlotEvent::Message(slot, FromChild::Result(r))))
    }

    fn died(&mut self, slot: usize, lived: Duration) -> Vec<Action> {
        self.on(Event::Slot(SlotEvent::Exited {
            slot,
            why: "exited: signal 9".into(),
            lived,
        }))
    }

    fn stopped(&mut self, slot: usize) -> Vec<Action> {
        self.on(Event::Slot(SlotEvent::Stopped { slot }))
    }

    /// Carries out `actions` as a healthy link would: every message leaves
    /// with the next counter. What the core asked for in answer.
    fn deliver(&mut self, actions: Vec<Action>) -> Vec<Action> {
        let mut more = Vec::new();
        for a in actions {
            match a {
                Action::SendResults(batches) => {
                    let sent = batches
                        .into_iter()
                        .map(|b| {
                            self.seq += 1;
                            (self.seq, b)
                        })
                        .collect();
                    more.extend(self.on(Event::ResultsSent {
                        sent,
                        unsent: Vec::new(),
                    }));
                }
                Action::Beat { .. } => {
                    self.seq += 1;
                    let seq = self.seq;
                    more.extend(self.on(Event::Sent { seq }));
                }
                other => more.push(other),
            }
        }
        more
    }

    /// Results due now, sent on a healthy link; the counters they went with.
    fn flush(&mut self) -> Vec<(u64, Vec<u64>)> {
        let mut out = Vec::new();
        for a in self.on(Event::FlushDue) {
            if let Action::SendResults(batches) = a {
                let mut sent = Vec::new();
                for b in batches {
                    self.seq += 1;
                    out.push((self.seq, b.iter().map(|r| r.lease).collect()));
                    sent.push((self.seq, b));
                }
                self.on(Event::ResultsSent {
                    sent,
                    unsent: Vec::new(),
                });
            }
        }
        out
    }

    fn ack(&mut self, seq: u64) -> Vec<Action> {
        self.on(said(ToSupervisor::Ack { seq }))
    }
}

fn process(pid: u32) -> ProcessInfo {
    ProcessInfo {
        role: "crawler-child".into(),
        node: "node".into(),
        pid,
        debug_addr: None,
    }
}

pub(crate) fn item(lease: u64, domain: &str) -> WorkItem {
    WorkItem {
        server: None,
        lease,
        lease_expires_ms: 0,
        leased_ms: 0,
        url: format!("http://{domain}/{lease}"),
        domain: domain.into(),
        depth: 1,
        min_delay_ms: None,
        revisit: None,
    }
}

fn answer(item: &WorkItem, outcome: Outcome) -> CrawlResult {
    CrawlResult {
        server: None,
        lease: item.lease,
        url: item.url.clone(),
        domain: item.domain.clone(),
        depth: item.depth,
        outcome,
        outlinks: Vec::new(),
        sent_ms: 0,
    }
}

fn fetched(item: &WorkItem) -> CrawlResult {
    answer(
        item,
        Outcome::Fetched {
            status: 200,
            final_url: None,
            content_type: None,
            bytes: 10,
        },
    )
}

/// The leases of the Work commands, by slot, in order.
fn work_sent(actions: &[Action]) -> Vec<(usize, Vec<u64>)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::ToSlot(slot, SlotCmd::Work(items)) => {
                Some((*slot, items.iter().map(|i| i.lease).collect()))
            }
            _ => None,
        })
        .collect()
}

fn restarts(actions: &[Action]) -> Vec<(usize, Duration)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::ToSlot(slot, SlotCmd::Restart { after }) => Some((*slot, *after)),
            _ => None,
        })
        .collect()
}

fn stops(actions: &[Action]) -> Vec<usize> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::ToSlot(slot, SlotCmd::Stop) => Some(*slot),
            _ => None,
        })
        .collect()
}

fn fences(actions: &[Action]) -> Vec<u64> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::ToSlot(_, SlotCmd::Fence(until)) => Some(*until),
            _ => None,
        })
        .collect()
}

/// The leases of every result batch sent, in order.
fn results_sent(actions: &[Action]) -> Vec<Vec<u64>> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::SendResults(batches) => Some(batches.iter().flatten().map(|r| r.lease).collect()),
            _ => None,
        })
        .collect()
}

fn beats(actions: &[Action]) -> Vec<Vec<u64>> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Beat { holding } => {
                let mut h = holding.clone();
                h.sort_unstable();
                Some(h)
            }
            _ => None,
        })
        .collect()
}

fn exit(actions: &[Action]) -> Option<&Option<Failure>> {
    actions.iter().find_map(|a| match a {
        Action::Exit(f) => Some(f),
        _ => None,
    })
}

fn said_bye(actions: &[Action]) -> bool {
    actions.contains(&Action::SayBye)
}

/// Two domains that the placement puts in different slots of two.
fn two_domains(sim: &Sim) -> (String, String) {
    let a = "a.test".to_string();
    let b = (0..100)
        .map(|i| format!("d{i}.test"))
        .find(|d| sim.core.placement.slot_of(d) != sim.core.placement.slot_of(&a))
        .expect("some domain lands in the other slot");
    (a, b)
}

#[test]
fn work_and_recalls_go_to_the_slot_of_their_domain() {
    let mut sim = Sim::new(2, 8);
    let (a, b) = two_domains(&sim);
    let (sa, sb) = (sim.core.placement.slot_of(&a), sim.core.placement.slot_of(&b));
    let sent = sim.work(&[item(1, &a), item(2, &b), item(3, &a)]);
    let mut got = work_sent(&sent);
    got.sort();
    let mut want = vec![(sa, vec![1, 3]), (sb, vec![2])];
    want.sort();
    assert_eq!(got, want);
    // A recall goes to every slot: a domain's URLs may be in two.
    let recalls = sim.on(said(ToSupervisor::Recall {
        domains: vec![b.clone()],
    }));
    let all: Vec<Action> = (0..2)
        .map(|slot| Action::ToSlot(slot, SlotCmd::Recall(vec![b.clone()])))
        .collect();
    assert_eq!(recalls, all);
}

#[test]
fn the_domains_of_one_server_go_to_one_slot() {
    let mut sim = Sim::new(2, 8);
    let (a, b) = two_domains(&sim);
    let server: std::net::IpAddr = "192.0.2.9".parse().unwrap();
    let on_server = |lease, domain: &str| WorkItem {
        server: Some(server),
        ..item(lease, domain)
    };
    let sent = sim.work(&[on_server(1, &a), on_server(2, &b), item(3, &b)]);
    let got = work_sent(&sent);
    let slot = sim.core.placement.slot_of_item(&on_server(1, &a));
    let own = sim.core.placement.slot_of(&b);
    let mut want = vec![(slot, vec![1, 2]), (own, vec![3])];
    if slot == own {
        want = vec![(slot, vec![1, 2, 3])];
    }
    let mut got = got;
    got.sort();
    want.sort();
    assert_eq!(
        got, want,
        "both domains' URLs with the server in one slot; one without it in its domain's"
    );
}

#[test]
fn a_dead_childs_urls_go_to_its_successor_until_they_have_killed_three() {
    let mut sim = Sim::new(1, 8);
    let items = [item(1, "a.test"), item(2, "a.test")];
    sim.work(&items);
    sim.result(0, fetched(&items[1]));
    // The first death: a new child after 200 ms gets the URL again.
    let first = sim.died(0, SECOND);
    assert_eq!(restarts(&first), vec![(0, Duration::from_millis(200))]);
    assert_eq!(work_sent(&first), vec![(0, vec![1])]);
    // The second: again, after a longer backoff.
    let second = sim.died(0, SECOND);
    assert_eq!(restarts(&second), vec![(0, Duration::from_millis(400))]);
    assert_eq!(work_sent(&second), vec![(0, vec![1])]);
    // The third: the URL is failed instead, and the slot still restarts.
    let third = sim.died(0, SECOND);
    assert_eq!(restarts(&third), vec![(0, Duration::from_millis(800))]);
    assert!(work_sent(&third).is_empty());
    let failed: Vec<&CrawlResult> = sim.core.outbox.results().collect();
    assert_eq!(failed.len(), 2);
    assert!(matches!(
        &failed[1].outcome,
        Outcome::Failed { kind: FailureKind::ChildCrashed, message }
            if message.contains("died 3 times") && message.contains("signal 9")
    ));
    assert_eq!(sim.core.in_flight.len(), 0);
}

#[test]
fn a_child_that_lived_long_enough_starts_the_backoff_again() {
    let mut sim = Sim::new(1, 3);
    assert_eq!(
        restarts(&sim.died(0, SECOND)),
        vec![(0, Duration::from_millis(200))]
    );
    assert_eq!(
        restarts(&sim.died(0, SECOND)),
        vec![(0, Duration::from_millis(400))]
    );
    // Two crashes in a row, then a child that ran a minute: not a third.
    let healthy = sim.died(0, Duration::from_secs(60));
    assert_eq!(restarts(&healthy), vec![(0, Duration::from_millis(200))]);
    assert!(exit(&healthy).is_none() && stops(&healthy).is_empty());
}

#[test]
fn work_for_a_restarting_slot_waits_there_and_counts_no_attempt() {
    let mut sim = Sim::new(1, 3);
    let first = item(7, "a.test");
    sim.work(std::slice::from_ref(&first));
    // The child died holding 7: it goes to the restarting slot, which
    // keeps it (and 8, arriving now) for the next child.
    assert_eq!(work_sent(&sim.died(0, SECOND)), vec![(0, vec![7])]);
    assert_eq!(work_sent(&sim.work(&[item(8, "a.test")])), vec![(0, vec![8])]);
    // The next child dies too: 7's second death, 8's first; neither fails
    // before its third.
    assert_eq!(work_sent(&sim.died(0, SECOND)), vec![(0, vec![7]), (0, vec![8])]);
    assert!(sim.core.outbox.results().next().is_none());
}

#[test]
fn a_slot_that_keeps_crashing_makes_the_supervisor_leave_with_an_error() {
    let mut sim = Sim::new(2, 3);
    let it = item(1, "a.test");
    sim.work(std::slice::from_ref(&it));
    let slot = sim.core.placement.slot_of("a.test");
    let other = 1 - slot;
    sim.died(slot, SECOND);
    sim.died(slot, SECOND);
    let gave_up = sim.died(slot, SECOND);
    assert!(restarts(&gave_up).is_empty(), "no child after the limit");
    assert!(
        work_sent(&gave_up).is_empty(),
        "its URL stays in flight for the Bye"
    );
    assert_eq!(stops(&gave_up), vec![0, 1]);
    assert!(exit(&gave_up).is_none(), "the other slot still drains");
    // The given-up slot's own Stopped counts for nothing; the other's ends the run.
    assert!(sim.stopped(slot).is_empty());
    let end = sim.stopped(other);
    assert!(said_bye(&end));
    match exit(&end) {
        Some(Some(Failure::SlotCrashing { slot: s, why })) => {
            assert_eq!(*s, slot);
            assert!(why.starts_with("3 crashes in a row, the last: "), "{why}");
        }
        other => panic!("expected a crashing slot, got {other:?}"),
    }
    assert_eq!(
        Failure::SlotCrashing {
            slot: 1,
            why: "x".into()
        }
        .to_string(),
        "child slot 1 keeps crashing: x"
    );
}

#[test]
fn a_stop_drains_the_slots_then_hands_in_the_results_and_says_bye() {
    let mut sim = Sim::new(2, 8);
    let items = [item(1, "a.test"), item(2, "a.test")];
    sim.work(&items);
    let stop = sim.on(said(ToSupervisor::Stop));
    assert_eq!(stops(&stop), vec![0, 1]);
    assert_eq!(sim.core.deadline(), Some(sim.now + STOP_WAIT));
    assert!(!sim.core.listens_for_shutdown());
    assert!(
        stops(&sim.on(said(ToSupervisor::Stop))).is_empty(),
        "stopped once"
    );
    // Stopping children hand in what they finish; a death while stopping
    // passes nothing on (the Bye hands it back).
    let slot = sim.core.placement.slot_of("a.test");
    sim.result(slot, fetched(&items[0]));
    let died = sim.died(slot, SECOND);
    assert!(work_sent(&died).is_empty());
    assert_eq!(beats(&sim.on(Event::Tick)), vec![vec![1, 2]]);
    assert!(sim.stopped(slot).is_empty());
    // The last slot ends: the results go out, then the Bye.
    let leaving = sim.stopped(1 - slot);
    assert_eq!(results_sent(&leaving), vec![vec![1]]);
    assert!(exit(&leaving).is_none(), "the results are handed in first");
    let end = sim.deliver(leaving);
    assert_eq!(end, vec![Action::SayBye, Action::Exit(None)]);
}

#[test]
fn slots_that_do_not_stop_are_left_behind_after_the_stop_wait() {
    let mut sim = Sim::new(2, 8);
    assert_eq!(stops(&sim.on(Event::Shutdown)), vec![0, 1]);
    assert!(
        sim.on(Event::Shutdown).is_empty(),
        "only the first request counts"
    );
    sim.stopped(0);
    sim.later(STOP_WAIT);
    let end = sim.on(Event::Deadline);
    assert_eq!(end, vec![Action::SayBye, Action::Exit(None)]);
    // Whatever a slot says afterwards changes nothing.
    assert!(sim.stopped(1).is_empty());
    assert!(sim.on(Event::Tick).is_empty());
}

#[test]
fn leaving_hands_in_no_longer_than_the_leave_wait_and_says_no_bye_with_results_left() {
    let mut sim = Sim::new(1, 8);
    // A full window: 64 messages unacknowledged.
    for lease in 0..crate::outbox::WINDOW as u64 {
        sim.result(0, fetched(&item(lease, "a.test")));
        assert_eq!(sim.flush().len(), 1);
    }
    sim.result(0, fetched(&item(100, "a.test")));
    sim.on(said(ToSupervisor::Stop));
    let leaving = sim.stopped(0);
    assert!(leaving.is_empty(), "nothing can go out until an ack: {leaving:?}");
    assert_eq!(sim.core.deadline(), Some(sim.now + LEAVE_WAIT));
    // Other messages change nothing while handing in.
    assert!(sim.work(&[item(200, "a.test")]).is_empty());
    // An ack opens the window: the last result goes out at once.
    let opened = sim.ack(1);
    assert_eq!(results_sent(&opened), vec![vec![100]]);
    // Sent, but the dispatcher never acknowledges: nothing waits, so Bye.
    assert_eq!(sim.deliver(opened), vec![Action::SayBye, Action::Exit(None)]);

    // The same with the link gone: the results are kept, and no Bye.
    let mut cut = Sim::new(1, 8);
    cut.result(0, fetched(&item(1, "a.test")));
    cut.on(Event::LinkDown);
    cut.on(said(ToSupervisor::Stop));
    assert_eq!(cut.stopped(0), vec![Action::Exit(None)]);

    // And with a dispatcher that stops acknowledging: out at the deadline.
    let mut slow = Sim::new(1, 8);
    for lease in 0..crate::outbox::WINDOW as u64 {
        slow.result(0, fetched(&item(lease, "a.test")));
        slow.flush();
    }
    slow.result(0, fetched(&item(100, "a.test")));
    slow.on(Event::Shutdown);
    assert!(slow.stopped(0).is_empty());
    slow.later(LEAVE_WAIT);
    assert_eq!(slow.on(Event::Deadline), vec![Action::Exit(None)]);
}

#[test]
fn a_send_that_fails_while_leaving_ends_the_hand_in_without_a_bye() {
    let mut sim = Sim::new(1, 8);
    sim.result(0, fetched(&item(1, "a.test")));
    sim.on(said(ToSupervisor::Stop));
    let leaving = sim.stopped(0);
    let Some(Action::SendResults(batches)) = leaving.into_iter().next() else {
        panic!("the waiting result goes out first");
    };
    let end = sim.on(Event::ResultsSent {
        sent: Vec::new(),
        unsent: batches,
    });
    assert_eq!(end, vec![Action::Exit(None)]);
    assert_eq!(sim.core.outbox.waiting(), 1);
}

#[test]
fn unacknowledged_results_go_again_first_after_a_reconnect() {
    let mut sim = Sim::new(1, 8);
    sim.on(Event::Slot(SlotEvent::Message(0, FromChild::Ready(process(41)))));
    sim.result(0, fetched(&item(1, "a.test")));
    sim.result(0, fetched(&item(2, "a.test")));
    assert_eq!(sim.flush(), vec![(1, vec![1, 2])]);
    sim.result(0, fetched(&item(3, "a.test")));
    assert_eq!(sim.flush(), vec![(2, vec![3])]);
    sim.ack(1);
    // The connection dies with message 2 unacknowledged; a result comes
    // in meanwhile and waits.
    sim.on(Event::LinkDown);
    sim.result(0, fetched(&item(4, "a.test")));
    assert!(sim.flush().is_empty());
    assert_eq!(sim.core.flush_at(), Some(sim.now + RESULTS_RETRY));
    assert!(
        beats(&sim.on(Event::Tick)).is_empty(),
        "no heartbeat on a down link"
    );
    // Welcomed again: the right runs from the new Join, the dispatcher
    // learns the children again, and message 2's results go first.
    sim.later(SECOND);
    let now = sim.now;
    let welcome = sim.on(Event::LinkUp { joined_at: Some(now) });
    assert!(welcome.contains(&Action::Send(ToDispatcher::Child {
        slot: 0,
        process: process(41),
        alive: true,
    })));
    assert_eq!(results_sent(&welcome), vec![vec![3, 4]]);
    assert!(!fences(&welcome).is_empty());
}

#[test]
fn results_wait_for_the_window_and_an_ack_opens_it() {
    let mut sim = Sim::new(1, 8);
    for lease in 0..crate::outbox::WINDOW as u64 {
        sim.result(0, fetched(&item(lease, "a.test")));
        sim.flush();
    }
    sim.result(0, fetched(&item(100, "a.test")));
    assert!(sim.flush().is_empty(), "the window is full");
    assert_eq!(sim.core.flush_at(), Some(sim.now + RESULTS_RETRY));
    // An ack opens the window; the retry already due sends the rest.
    sim.ack(1);
    assert_eq!(sim.core.flush_at(), Some(sim.now + RESULTS_RETRY));
    sim.later(RESULTS_RETRY);
    assert_eq!(sim.flush(), vec![(crate::outbox::WINDOW as u64 + 1, vec![100])]);
    assert_eq!(sim.core.flush_at(), None, "an idle supervisor sleeps");
}

#[test]
fn results_share_a_message_within_the_flush_delay() {
    let mut sim = Sim::new(1, 8);
    let first_at = sim.now;
    sim.result(0, fetched(&item(1, "a.test")));
    assert_eq!(sim.core.flush_at(), Some(first_at + RESULTS_FLUSH));
    sim.later(Duration::from_millis(2));
    sim.result(0, fetched(&item(2, "a.test")));
    assert_eq!(sim.core.flush_at(), Some(first_at + RESULTS_FLUSH));
    assert_eq!(sim.flush(), vec![(1, vec![1, 2])]);
}

#[test]
fn heartbeats_list_every_lease_held_until_its_result_is_acknowledged() {
    let mut sim = Sim::new(1, 8);
    let items = [item(1, "a.test"), item(2, "a.test")];
    sim.work(&items);
    sim.result(0, fetched(&items[0]));
    let tick = sim.on(Event::Tick);
    assert_eq!(beats(&tick), vec![vec![1, 2]]);
    assert_eq!(tick.last(), Some(&Action::MaintainLink));
    sim.deliver(tick);
    let sent = sim.flush();
    let tick = sim.on(Event::Tick);
    assert_eq!(beats(&tick), vec![vec![1, 2]], "sent is not delivered");
    sim.deliver(tick);
    sim.ack(sent[0].0);
    assert_eq!(beats(&sim.on(Event::Tick)), vec![vec![2]]);
}

#[test]
fn a_welcome_is_answered_first_with_every_url_still_held_but_those_handed_back() {
    let mut sim = Sim::new(1, 8);
    let items = [item(1, "a.test"), item(2, "a.test"), item(3, "a.test")];
    sim.work(&items);
    sim.result(0, fetched(&items[1]));
    sim.result(
        0,
        answer(
            &items[2],
            Outcome::failed(FailureKind::Fenced, "the right to crawl ran out"),
        ),
    );
    sim.on(Event::LinkDown);
    let nonce = [7; 32];
    let join = sim.on(Event::Dispatcher(Heard::Challenge(nonce)));
    let [Action::Join { nonce: n, intro }] = join.as_slice() else {
        panic!("a challenge is answered with a Join: {join:?}");
    };
    assert_eq!(*n, nonce);
    assert_eq!((intro.supervisor_id.as_str(), intro.capacity), ("node-1", 256));
    // The rest of the handshake is the link's.
    assert_eq!(
        sim.on(Event::Dispatcher(Heard::Reintroduce)),
        vec![Action::Reintroduce]
    );
    // Welcomed: what we hold is the first thing said on the connection.
    let now = sim.now;
    let welcome = sim.on(Event::LinkUp { joined_at: Some(now) });
    let Some(Action::Send(ToDispatcher::Holding(holding))) = welcome.first() else {
        panic!("the first action after a Welcome is Holding: {welcome:?}");
    };
    let mut held: Vec<u64> = holding.iter().map(|i| i.lease).collect();
    held.sort_unstable();
    assert_eq!(held, vec![1, 2]);
}

#[test]
fn children_are_told_the_right_and_are_fenced_when_it_lapses() {
    let mut sim = Sim::new(2, 8);
    let grant = fence::grant(TIMEOUT);
    let start = sim.core.right.until_mono_ms();
    assert!(start > 0, "the Welcome started the right");
    // A heartbeat acknowledged a second later moves the right a second on,
    // and every slot is told.
    sim.later(SECOND);
    let tick = sim.on(Event::Tick);
    sim.deliver(tick);
    let acked = sim.ack(sim.seq);
    assert_eq!(acked.first(), Some(&Action::Fence(start + 1_000)));
    assert_eq!(fences(&acked), vec![start + 1_000, start + 1_000]);
    // Silence: beats go on, unanswered; the right is not moved, so the
    // children stop starting requests at its end by themselves.
    let mut said = Vec::new();
    for _ in 0..10 {
        sim.later(SECOND);
        let tick = sim.on(Event::Tick);
        assert_eq!(beats(&tick).len(), 1);
        said.extend(sim.deliver(tick));
    }
    assert!(fences(&said).is_empty() && !said.iter().any(|a| matches!(a, Action::Fence(_))));
    assert!(!sim.core.right.is_fresh(sim.now));
    assert_eq!(sim.core.right.left(sim.now), Duration::ZERO);
    assert!(grant < Duration::from_secs(10));
    // What the children hand back unfetched is kept and reported.
    let it = item(5, "a.test");
    sim.work(std::slice::from_ref(&it));
    sim.result(0, answer(&it, Outcome::failed(FailureKind::Fenced, "fenced")));
    assert_eq!(sim.flush().len(), 1);
    // An acknowledgement of a fresh heartbeat gives the right back.
    let tick = sim.on(Event::Tick);
    sim.deliver(tick);
    let back = sim.ack(sim.seq);
    assert_eq!(fences(&back), vec![start + 11_000, start + 11_000]);
    assert!(sim.core.right.is_fresh(sim.now));
}

#[test]
fn an_unreachable_dispatcher_drains_the_children_and_fails_the_run() {
    let mut sim = Sim::new(2, 8);
    let why = "dispatcher at tcp://x:1 unreachable for 900s; giving up".to_string();
    let drain = sim.on(Event::Unreachable(why.clone()));
    assert_eq!(stops(&drain), vec![0, 1]);
    let tick = sim.on(Event::Tick);
    assert!(
        !tick.contains(&Action::MaintainLink),
        "the link is not kept any more"
    );
    sim.on(Event::LinkDown);
    sim.stopped(0);
    // Nothing waits: a Bye is tried (it cannot leave a down link).
    let end = sim.stopped(1);
    assert_eq!(
        end,
        vec![Action::SayBye, Action::Exit(Some(Failure::Unreachable(why)))]
    );
}

#[test]
fn a_ready_child_is_announced_only_while_the_link_is_up() {
    let mut sim = Sim::new(2, 8);
    let up = sim.on(Event::Slot(SlotEvent::Message(1, FromChild::Ready(process(9)))));
    assert_eq!(
        up,
        vec![Action::Send(ToDispatcher::Child {
            slot: 1,
            process: process(9),
            alive: true
        })]
    );
    sim.on(Event::LinkDown);
    assert!(sim
        .on(Event::Slot(SlotEvent::Message(0, FromChild::Ready(process(8)))))
        .is_empty());
    // A dead child is not announced again.
    sim.died(1, SECOND);
    let now = sim.now;
    let welcome = sim.on(Event::LinkUp { joined_at: Some(now) });
    let announced: Vec<u32> = welcome
        .iter()
        .filter_map(|a| match a {
            Action::Send(ToDispatcher::Child { slot, .. }) => Some(*slot),
            _ => None,
        })
        .collect();
    assert_eq!(announced, vec![0]);
}
