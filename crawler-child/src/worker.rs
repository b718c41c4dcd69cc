//! Per-domain queues, each drained by its own tasks.
//!
//! Tasks per domain (one by default, up to `max_domain_connections`) mean
//! a slow or heavily paced domain only ever blocks itself; domains run
//! side by side up to the child's fetch concurrency. A domain's tasks exit
//! when its queue is empty and are started again by the next URL, keeping
//! the domain's state.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use std::time::{Duration, Instant};

use link::protocol::{now_ms, FailureKind, WorkItem};
use shared::timing::Op;
use tokio::sync::Notify;

use crate::pipeline::{self, Ctx, SharedDomain};

struct Domain {
    /// Queue (each URL with when it arrived) and the number of tasks
    /// draining it, changed together under one lock.
    queue: Mutex<(VecDeque<(WorkItem, Instant)>, u32)>,
    state: SharedDomain,
}

pub(crate) struct Worker {
    ctx: Arc<Ctx>,
    domains: Mutex<HashMap<String, Arc<Domain>>>,
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
        let domain = {
            let mut domains = self.domains.lock().unwrap_or_else(|e| e.into_inner());
            domains
                .entry(item.domain.clone())
                .or_insert_with(|| {
                    Arc::new(Domain {
                        queue: Mutex::new((VecDeque::new(), 0)),
                        state: SharedDomain::new(&item.domain, max_tasks),
                    })
                })
                .clone()
        };
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
            let (item, arrived) = {
                let mut q = domain.queue.lock().unwrap_or_else(|e| e.into_inner());
                match q.0.pop_front() {
                    Some(queued) => queued,
                    None => {
                        q.1 -= 1;
                        return;
                    }
                }
            };
            // Waiting for one of the domain's tasks is waiting for the domain.
            pipeline::record_wait(&self.ctx, Op::DomainWait, arrived, &item.domain);
            pipeline::crawl(&self.ctx, &domain.state, item).await;
            if self.pending.fetch_sub(1, Ordering::SeqCst) == 1 {
                self.idle.notify_waiters();
            }
        }
    }

    /// Hands back the URLs of `domains` not started yet, as `Recalled`
    /// results: the dispatcher is moving those domains to another node.
    /// A URL being crawled finishes as usual.
    pub(crate) fn recall(&self, domains: &[String]) {
        for name in domains {
            let Some(domain) = self
                .domains
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(name)
                .cloned()
            else {
                continue;
            };
            let taken: Vec<WorkItem> = {
                let mut q = domain.queue.lock().unwrap_or_else(|e| e.into_inner());
                q.0.drain(..).map(|(item, _)| item).collect()
            };
            for item in taken {
                pipeline::hand_back(
                    &self.ctx,
                    &item,
                    FailureKind::Recalled,
                    "its domain moves to another node",
                );
                if self.pending.fetch_sub(1, Ordering::SeqCst) == 1 {
                    self.idle.notify_waiters();
                }
            }
        }
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
