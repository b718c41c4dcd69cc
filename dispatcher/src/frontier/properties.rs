//! Random runs of the frontier against its accounting: whatever happens
//! (supervisors joining, leaving and reconnecting, results late, twice or
//! from the wrong peer, leases expiring and renewed, domains paused and
//! halted, the dispatcher restarting and supervisors adopting what they
//! held), no URL is ever lost, out twice at once, or accepted as done twice,
//! and every supervisor's credit and every domain's in-flight count match
//! the leases out. At the end every admitted URL can be crawled to done.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use link::protocol::WorkItem;
use proptest::prelude::*;

use super::{Frontier, SupId};

const CAP: u32 = 2;
const LEASE_MS: u64 = 1_000;

#[derive(Debug, Clone)]
enum Op {
    /// Admits `http://d<domain>.test/p<path>` (if new) at `depth`.
    Push {
        domain: u8,
        path: u16,
        depth: u16,
    },
    Join,
    Leave(u8),
    Take {
        sup: u8,
        n: u8,
    },
    /// A result for the `pick`-th lease ever issued, sent by `sup`.
    Complete {
        sup: u8,
        pick: u16,
    },
    /// Time passes; expired leases go back, pauses end.
    Tick(u16),
    /// `sup`'s heartbeat: the leases it holds.
    Renew(u8),
    Pause {
        domain: u8,
        ms: u16,
    },
    Halt(u8),
    Unhalt(u8),
    /// `sup` reconnects as a new peer holding what it held, plus a few
    /// leases that are not its own (stale or another's).
    Reconnect {
        sup: u8,
        stale: u16,
    },
    /// The dispatcher restarts from what the store knows; the live
    /// supervisors rejoin holding their leases. Its first lease id is
    /// `back` below the last one issued (a clock that went backwards): new
    /// leases must still not collide with adopted ones.
    Restart {
        back: u8,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u8..5, 0u16..40, 0u16..4).prop_map(|(domain, path, depth)| Op::Push { domain, path, depth }),
        1 => Just(Op::Join),
        1 => any::<u8>().prop_map(Op::Leave),
        5 => (any::<u8>(), 1u8..6).prop_map(|(sup, n)| Op::Take { sup, n }),
        5 => (any::<u8>(), any::<u16>()).prop_map(|(sup, pick)| Op::Complete { sup, pick }),
        2 => (0u16..1500).prop_map(Op::Tick),
        1 => any::<u8>().prop_map(Op::Renew),
        1 => (0u8..5, 0u16..3000).prop_map(|(domain, ms)| Op::Pause { domain, ms }),
        1 => (0u8..5).prop_map(Op::Halt),
        1 => (0u8..5).prop_map(Op::Unhalt),
        1 => (any::<u8>(), any::<u16>()).prop_map(|(sup, stale)| Op::Reconnect { sup, stale }),
        1 => any::<u8>().prop_map(|back| Op::Restart { back }),
    ]
}

fn domain(i: u8) -> String {
    format!("d{i}.test")
}

/// What the store would know: every URL admitted (with its depth and
/// domain), and those whose result was accepted.
#[derive(Default)]
struct Truth {
    admitted: BTreeMap<String, (String, u16)>,
    done: BTreeSet<String>,
    halted: BTreeSet<String>,
    /// Every lease ever issued, in order.
    issued: Vec<WorkItem>,
}

struct Run {
    f: Frontier,
    now: u64,
    /// Supervisors that are connected (index into the frontier's).
    live: Vec<SupId>,
    truth: Truth,
}

impl Run {
    fn new() -> Run {
        let mut f = Frontier::new(CAP, LEASE_MS, 1);
        f.start_assigning();
        let live = vec![f.add_supervisor()];
        Run {
            f,
            now: 1_000,
            live,
            truth: Truth::default(),
        }
    }

    fn pick_live(&self, i: u8) -> Option<SupId> {
        (!self.live.is_empty()).then(|| self.live[i as usize % self.live.len()])
    }

    /// What `sup` holds: its leases as they were handed out.
    fn held_items(&self, sup: SupId) -> Vec<WorkItem> {
        self.f
            .leases
            .iter()
            .filter(|(_, l)| l.sup == sup)
            .map(|(id, l)| WorkItem {
                server: None,
                lease: *id,
                lease_expires_ms: l.expires_ms,
                leased_ms: 0,
                url: l.url.clone(),
                domain: self.f.domains[l.domain_id].name().to_string(),
                depth: l.depth,
                min_delay_ms: None,
                revisit: None,
            })
            .collect()
    }

    fn apply(&mut self, op: Op) -> Result<(), TestCaseError> {
        match op {
            Op::Push {
                domain: d,
                path,
                depth,
            } => {
                let url = format!("http://{}/p{path}", domain(d));
                // The seen-set (`crate::seen`) admits a URL once.
                if !self.truth.admitted.contains_key(&url) {
                    self.f.push_at(url.clone(), &domain(d), depth, 0, self.now);
                    self.truth.admitted.insert(url, (domain(d), depth));
                }
            }
            Op::Join => self.live.push(self.f.add_supervisor()),
            Op::Leave(i) => {
                if let Some(s) = self.pick_live(i) {
                    let held = self.f.held(s) as usize;
                    prop_assert_eq!(self.f.remove_supervisor(s), held);
                    self.live.retain(|x| *x != s);
                }
            }
            Op::Take { sup, n } => {
                if let Some(s) = self.pick_live(sup) {
                    let items = self.f.take(s, n as usize, self.now);
                    prop_assert!(items.len() <= n as usize);
                    for w in &items {
                        let (d, depth) = &self.truth.admitted[&w.url];
                        prop_assert_eq!(
                            (&w.domain, w.depth),
                            (d, *depth),
                            "lease of {} says otherwise",
                            w.url
                        );
                        prop_assert!(
                            !self.truth.done.contains(&w.url),
                            "{} leased after it was done",
                            w.url
                        );
                    }
                    self.truth.issued.extend(items);
                }
            }
            Op::Complete { sup, pick } => {
                let Some(s) = self.pick_live(sup) else {
                    return Ok(());
                };
                if self.truth.issued.is_empty() {
                    return Ok(());
                }
                let w = self.truth.issued[pick as usize % self.truth.issued.len()].clone();
                // A lease id may have been issued again after a restart:
                // only a result about the lease's own URL, from its holder, counts.
                let holder = self.f.leases.get(w.lease).map(|l| (l.sup, l.url.clone()));
                let theirs = holder == Some((s, w.url.clone()));
                match self.f.complete_for(s, w.lease, &w.url) {
                    Ok(leased) => {
                        prop_assert!(theirs, "a result accepted from {s} for {holder:?}");
                        prop_assert_eq!(&leased.url, &w.url);
                        prop_assert!(
                            self.truth.done.insert(w.url.clone()),
                            "{} accepted as done twice",
                            w.url
                        );
                    }
                    Err(_) => prop_assert!(!theirs, "the holder's result was refused"),
                }
            }
            Op::Tick(ms) => {
                self.now += u64::from(ms);
                self.f.expire(self.now);
                self.f.release_blocked(self.now);
                // Domains with nothing left are forgotten (here at every
                // tick, so that slots are reused often).
                self.f.sweep();
            }
            Op::Renew(i) => {
                if let Some(s) = self.pick_live(i) {
                    let mine: Vec<u64> = self.held_items(s).iter().map(|w| w.lease).collect();
                    // (Ids issued again after a restart are named once.)
                    let all: BTreeSet<u64> = self.truth.issued.iter().map(|w| w.lease).collect();
                    let all: Vec<u64> = all.into_iter().collect();
                    // Naming others' leases renews nothing of theirs.
                    prop_assert_eq!(self.f.renew(s, &all, self.now), mine.len());
                }
            }
            Op::Pause { domain: d, ms } => self.f.pause(&domain(d), self.now + u64::from(ms)),
            Op::Halt(d) => {
                self.f.halt(&domain(d));
                self.truth.halted.insert(domain(d));
            }
            Op::Unhalt(d) => {
                self.f.unhalt(&domain(d));
                self.truth.halted.remove(&domain(d));
            }
            Op::Reconnect { sup, stale } => {
                let Some(old) = self.pick_live(sup) else {
                    return Ok(());
                };
                let mut items = self.held_items(old);
                let mine = items.len();
                if !self.truth.issued.is_empty() {
                    let w = &self.truth.issued[stale as usize % self.truth.issued.len()];
                    if !items.iter().any(|i| i.lease == w.lease) {
                        items.push(w.clone());
                    }
                }
                let new = self.f.add_supervisor();
                let report = self.f.adopt(new, items, self.now, |h| h == old);
                prop_assert!(
                    report.adopted >= mine,
                    "{} of its own {mine} leases adopted",
                    report.adopted
                );
                self.f.remove_supervisor(old);
                self.live.retain(|x| *x != old);
                self.live.push(new);
            }
            Op::Restart { back } => {
                let holding: Vec<Vec<WorkItem>> = self.live.iter().map(|s| self.held_items(*s)).collect();
                let first = self.f.leases.next_id().saturating_sub(u64::from(back)).max(1);
                let mut g = Frontier::new(CAP, LEASE_MS, first);
                g.start_assigning();
                for (url, (d, depth)) in &self.truth.admitted {
                    if !self.truth.done.contains(url) {
                        g.push(url.clone(), d, *depth);
                    }
                }
                for d in &self.truth.halted {
                    g.halt(d);
                }
                self.f = g;
                self.live.clear();
                for items in holding {
                    let n = items.len();
                    let s = self.f.add_supervisor();
                    let report = self.f.adopt(s, items, self.now, |_| false);
                    prop_assert_eq!(report.adopted, n, "held leases lost at a restart");
                    self.live.push(s);
                }
            }
        }
        self.check()
    }

    /// The frontier's books balance against the truth.
    fn check(&self) -> Result<(), TestCaseError> {
        let f = &self.f;
        let mut out: HashMap<&str, &str> = HashMap::new();
        let mut queued = 0;
        for (_, d) in f.domains.iter() {
            for url in d.window.urls() {
                prop_assert!(out.insert(url, "queued").is_none(), "{} queued twice", url);
                queued += 1;
            }
        }
        prop_assert_eq!(queued, f.queued());
        for (id, l) in f.leases.iter() {
            let was = out.insert(&l.url, "leased");
            prop_assert!(
                was.is_none(),
                "{} leased (lease {id}) while also {:?}",
                l.url,
                was
            );
        }
        for url in out.keys() {
            prop_assert!(self.truth.admitted.contains_key(*url), "{url} never admitted");
            prop_assert!(
                !self.truth.done.contains(*url),
                "{url} done and still in the frontier"
            );
        }
        prop_assert_eq!(
            out.len() + self.truth.done.len(),
            self.truth.admitted.len(),
            "URLs lost: neither queued, out nor done"
        );
        for s in 0..f.owners.count() {
            let n = f.leases.iter().filter(|(_, l)| l.sup == s).count();
            prop_assert_eq!(f.leases.held(s) as usize, n, "credit of supervisor {}", s);
            if !f.owners.is_live(s) {
                prop_assert_eq!(n, 0, "a gone supervisor holds leases");
            }
        }
        for (i, d) in f.domains.iter() {
            let n = f.leases.iter().filter(|(_, l)| l.domain_id == i).count();
            prop_assert_eq!(d.in_flight.get() as usize, n, "in flight on {}", d.name());
        }
        // Every slot is a held domain, named in the index, or free.
        for id in f.domains.indexed() {
            let name = f.domains[id].name();
            prop_assert_eq!(f.domains.find(name), Some(id));
            prop_assert!(!f.domains.is_free(id), "{} held in a free slot", name);
        }
        prop_assert_eq!(f.domains.held() + f.domains.free_count(), f.domains.slots());
        for s in 0..f.owners.count() {
            let owned = f.domains.iter().filter(|(_, d)| d.owner.get() == Some(s)).count();
            if f.owners.is_live(s) {
                prop_assert_eq!(f.owners.domains_of(s), owned, "domains of supervisor {}", s);
            }
        }
        Ok(())
    }

    /// Un-halts everything and crawls what is left with a fresh supervisor.
    fn drain(&mut self) -> Result<(), TestCaseError> {
        for d in std::mem::take(&mut self.truth.halted) {
            self.f.unhalt(&d);
        }
        self.now += 10 * LEASE_MS;
        self.f.release_blocked(self.now);
        self.live.push(self.f.add_supervisor());
        for _ in 0..10_000 {
            let mut any = false;
            for s in self.live.clone() {
                for w in self.f.take(s, 64, self.now) {
                    any = true;
                    let leased = self.f.complete_for(s, w.lease, &w.url);
                    prop_assert!(leased.is_ok(), "a fresh lease was refused");
                    prop_assert!(self.truth.done.insert(w.url.clone()), "{} done twice", w.url);
                }
            }
            // Leases still out at other supervisors come back by expiry.
            self.now += 2 * LEASE_MS;
            self.f.expire(self.now);
            if !any && self.f.is_idle() {
                break;
            }
        }
        self.check()?;
        prop_assert!(self.f.is_idle(), "the crawl never finished");
        prop_assert_eq!(self.truth.done.len(), self.truth.admitted.len());
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn no_url_is_lost_or_out_twice_whatever_happens(ops in proptest::collection::vec(op(), 1..200)) {
        let mut run = Run::new();
        for op in ops {
            run.apply(op)?;
        }
        run.drain()?;
    }
}
