//! Per-domain queues, each drained by its own tasks.
//!
//! Tasks per domain (one by default, up to `max_domain_connections`) mean
//! a slow or heavily paced domain only ever blocks itself; domains run
//! side by side up to the child's fetch concurrency. A domain's tasks exit
//! when its queue is empty and are started again by the next URL, keeping
//! the domain's state.
//!
//! A research crawl meets hundreds of thousands of domains, each for a few
//! pages, so a child forgets a domain idle for [`FORGET_IDLE`] (or
//! [`FORGET_BACKING_OFF`] while it backs off), looked for whenever the map
//! has doubled since the last look: its memory stays flat in the number
//! of domains met. Nothing polite is lost: a domain idle for 3 s reloads
//! its pace from the store anyway (`pipeline::DomainState::pace`), and its
//! robots rules come back from the robots store.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use std::time::{Duration, Instant};

use link::protocol::{now_ms, FailureKind, WorkItem};
use shared::timing::Op;
use tokio::sync::Notify;

use crate::metric;
use crate::pipeline::{self, Ctx, SharedDomain};
use crate::prune::Pruning;

/// How long a domain no URL came for is kept.
const FORGET_IDLE: Duration = Duration::from_secs(60);
/// How long a domain backing off (429/503, robots.txt failures) is kept:
/// longer than its backoff can grow (an hour at most).
const FORGET_BACKING_OFF: Duration = Duration::from_secs(3600);

struct Domain {
    /// Queue (each URL with when it arrived) and the number of tasks
    /// draining it, changed together under one lock.
    queue: Mutex<(VecDeque<(WorkItem, Instant)>, u32)>,
    state: SharedDomain,
    /// When the last URL came for it.
    used: Mutex<Instant>,
}

impl Domain {
    /// Whether the domain can be forgotten at `now`: nothing queued or
    /// running, and idle long enough.
    fn forgettable(&self, now: Instant) -> bool {
        let idle = {
            let used = self.used.lock().unwrap_or_else(|e| e.into_inner());
            now.saturating_duration_since(*used)
        };
        if idle < FORGET_IDLE {
            return false;
        }
        let q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        if !q.0.is_empty() || q.1 > 0 {
            return false;
        }
        match self.state.backing_off() {
            None => false,
            Some(true) => idle >= FORGET_BACKING_OFF,
            Some(false) => true,
        }
    }
}

/// The domains a child holds, and when to look for idle ones
/// (`crate::prune`).
#[derive(Default)]
struct Domains {
    by_name: HashMap<String, Arc<Domain>>,
    pruning: Pruning,
}

impl Domains {
    /// Forgets the idle domains if the map has grown enough since the
    /// last look.
    fn prune_if_grown(&mut self, now: Instant) {
        let forgotten = self
            .pruning
            .retain_if_grown(&mut self.by_name, |_, d| !d.forgettable(now));
        if forgotten > 0 {
            metric::DOMAINS_FORGOTTEN.get().increment(forgotten as u64);
        }
    }
}

pub(crate) struct Worker {
    ctx: Arc<Ctx>,
    domains: Mutex<Domains>,
    /// URLs received and not yet handed on (to the writer or the report).
    pending: AtomicUsize,
    idle: Notify,
}

impl Worker {
    pub(crate) fn new(ctx: Arc<Ctx>) -> Arc<Worker> {
        Arc::new(Worker {
            ctx,
            domains: Mutex::default(),
            pending: AtomicUsize::new(0),
            idle: Notify::new(),
        })
    }

    pub(crate) fn enqueue(self: &Arc<Self>, item: WorkItem) {
        self.pending.fetch_add(1, Ordering::SeqCst);
        if item.leased_ms != 0 {
            // The relay: leased by the dispatcher until it got here.
            let waited = Duration::from_millis(now_ms().saturating_sub(item.leased_ms));
            self.ctx
                .timing
                .record(Op::StartWait, waited, "ok", Some(&item.domain), None);
        }
        let max_tasks = self.ctx.policy.max_domain_connections.max(1);
        let now = Instant::now();
        let domain = {
            let mut domains = self.domains.lock().unwrap_or_else(|e| e.into_inner());
            domains.prune_if_grown(now);
            let domain = domains
                .by_name
                .entry(item.domain.clone())
                .or_insert_with(|| {
                    Arc::new(Domain {
                        queue: Mutex::new((VecDeque::new(), 0)),
                        state: SharedDomain::new(&item.domain, max_tasks),
                        used: Mutex::new(now),
                    })
                })
                .clone();
            domain
        };
        *domain.used.lock().unwrap_or_else(|e| e.into_inner()) = now;
        let start = {
            let mut q = domain.queue.lock().unwrap_or_else(|e| e.into_inner());
            q.0.push_back((item, Instant::now()));
            let start = q.1 < max_tasks;
            if start {
                q.1 += 1;
            }
            start
        };
        if start {
            let me = self.clone();
            tokio::spawn(async move { me.drain(domain).await });
        }
    }

    async fn drain(self: Arc<Self>, domain: Arc<Domain>) {
        loop {
            // The ticket is taken under the queue's lock, as a recall
            // empties the queue and fires: the URL is either taken back
            // from the queue or recalled in its waits.
            let ((item, arrived), ticket) = {
                let mut q = domain.queue.lock().unwrap_or_else(|e| e.into_inner());
                match q.0.pop_front() {
                    Some(queued) => (queued, domain.state.recalls.ticket()),
                    None => {
                        q.1 -= 1;
                        return;
                    }
                }
            };
            // Waiting for one of the domain's tasks is waiting for the domain.
            pipeline::record_wait(&self.ctx, Op::DomainWait, arrived, &item.domain);
            pipeline::crawl(&self.ctx, &domain.state, item, ticket).await;
            if self.pending.fetch_sub(1, Ordering::SeqCst) == 1 {
                self.idle.notify_waiters();
            }
        }
    }

    /// Hands back the URLs of `domains` not started yet, as `Recalled`
    /// results: the dispatcher blocked, paused, re-paced or moved those
    /// domains. Those queued come back now; those waiting for their turn,
    /// their server's or a fetch slot give up their wait and come back
    /// (`crate::recall`). A URL whose request started finishes as usual.
    pub(crate) fn recall(&self, domains: &[String]) {
        for name in domains {
            let Some(domain) = self
                .domains
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .by_name
                .get(name)
                .cloned()
            else {
                continue;
            };
            self.take_back(
                &domain,
                "recalled (its domain was blocked, paused, given a new delay or moved)",
            );
        }
    }

    /// At the stop: every URL not started comes back (queued ones now,
    /// waiting ones from their waits), and nothing new starts; requests
    /// under way finish (within the child's drain deadline).
    pub(crate) fn stop(&self) {
        self.ctx.stopping.fire();
        let all: Vec<Arc<Domain>> = self
            .domains
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .by_name
            .values()
            .cloned()
            .collect();
        for domain in all {
            self.take_back(&domain, "not started: the crawl stops");
        }
    }

    /// Empties `domain`'s queue and fires its recall, under the queue's
    /// lock (see `drain`); hands the queued URLs back.
    fn take_back(&self, domain: &Domain, why: &str) {
        let taken: Vec<WorkItem> = {
            let mut q = domain.queue.lock().unwrap_or_else(|e| e.into_inner());
            domain.state.recalls.fire();
            q.0.drain(..).map(|(item, _)| item).collect()
        };
        for item in taken {
            pipeline::hand_back(&self.ctx, &item, FailureKind::Recalled, why);
            if self.pending.fetch_sub(1, Ordering::SeqCst) == 1 {
                self.idle.notify_waiters();
            }
        }
    }

    /// Domains held now (for a gauge).
    pub(crate) fn domains(&self) -> usize {
        self.domains
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .by_name
            .len()
    }

    pub(crate) fn pending(&self) -> usize {
        self.pending.load(Ordering::SeqCst)
    }

    /// Resolves when every received URL has been handed on.
    pub(crate) async fn wait_idle(&self) {
        loop {
            let notified = self.idle.notified();
            if self.pending() == 0 {
                return;
            }
            notified.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prune::PRUNE_FROM;

    fn domain(name: &str, used: Instant) -> Arc<Domain> {
        Arc::new(Domain {
            queue: Mutex::new((VecDeque::new(), 0)),
            state: SharedDomain::new(name, 1),
            used: Mutex::new(used),
        })
    }

    #[test]
    fn idle_domains_are_forgotten_once_the_map_has_grown_and_busy_ones_kept() {
        let t0 = Instant::now();
        let mut d = Domains::default();
        for i in 0..PRUNE_FROM - 4 {
            d.by_name.insert(format!("idle{i}.test"), domain("idle", t0));
        }
        // A domain with a task running, one backing off, one in use later.
        let running = domain("running.test", t0);
        running.queue.lock().unwrap().1 = 1;
        d.by_name.insert("running.test".into(), running.clone());
        let throttled = domain("throttled.test", t0);
        throttled.state.throttle();
        d.by_name.insert("throttled.test".into(), throttled);
        let recent = t0 + FORGET_IDLE;
        d.by_name
            .insert("recent.test".into(), domain("recent.test", recent));
        // Under the threshold nothing is looked at, however idle.
        let later = t0 + FORGET_IDLE + Duration::from_secs(1);
        d.prune_if_grown(later);
        assert_eq!(d.by_name.len(), PRUNE_FROM - 1);
        d.by_name.insert("new.test".into(), domain("new.test", later));
        d.prune_if_grown(later);
        let mut kept: Vec<&str> = d.by_name.keys().map(String::as_str).collect();
        kept.sort_unstable();
        assert_eq!(
            kept,
            ["new.test", "recent.test", "running.test", "throttled.test"]
        );
        // The next look waits for the map to double (from the floor).
        assert_eq!(d.pruning.next(), 8);
        // Backing off, a domain is kept an hour; done running, it goes.
        running.queue.lock().unwrap().1 = 0;
        for i in 0..PRUNE_FROM {
            d.by_name.insert(format!("more{i}.test"), domain("more", later));
        }
        d.prune_if_grown(t0 + FORGET_BACKING_OFF);
        assert!(!d.by_name.contains_key("throttled.test") && !d.by_name.contains_key("running.test"));
        assert_eq!(
            d.by_name.len(),
            0,
            "{:?}",
            d.by_name.keys().take(3).collect::<Vec<_>>()
        );
    }
}
