//! The child's cache of DNS answers: each name asked at most once per TTL,
//! by one lookup however many of its URLs want it at once, in a bounded
//! amount of memory.
//!
//! - Answers are kept for their TTL, raised to [`Limits::floor`] and cut to
//!   [`Limits::cap`]. The floor (30 s): a crawl fetches a domain's pages
//!   over seconds to minutes, and CDNs hand out TTLs of 0–60 s; without it
//!   a domain would be asked for again every few pages. Nothing is weakened
//!   by it: the address policy checks every answer each time it is used
//!   (`crate::dns`), cached or not. The cap (1 h): a site that moved is
//!   followed within the hour whatever TTL it once gave.
//! - A name that does not exist (NXDOMAIN, or no A/AAAA) is kept for its
//!   negative TTL (from the SOA) within [`Limits::negative_floor`] ..
//!   [`Limits::negative_cap`] (30 s .. 5 min, RFC 2308's advice for the
//!   cap); a failed lookup (SERVFAIL, timeout) for [`Limits::failure`]
//!   (15 s): long enough that a domain's many URLs fail on one query,
//!   short enough that a retry of the URL asks again.
//! - At most one lookup per name is in flight: the first asker starts it
//!   (in a task of its own, so its answer is kept even if the asker gives
//!   up), the others wait for the same answer, each until its deadline.
//! - Two generations of at most `capacity / 2` names each: a name is put
//!   in the young one, and found in the old one it moves back to the young
//!   one; when the young one is full it becomes the old one and the old
//!   one is dropped. Memory stays flat in the number of domains met, and a
//!   name in use is never the one dropped (an approximation of LRU at O(1)
//!   a lookup). Expired answers go with their generation.

use std::collections::HashMap;
use std::future::Future;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::dns_upstream::{Answered, DnsFailure};

/// A name's addresses (shared by every asker), or why it has none.
pub(crate) type Outcome = Result<Arc<[IpAddr]>, DnsFailure>;

#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub floor: Duration,
    pub cap: Duration,
    pub negative_floor: Duration,
    pub negative_cap: Duration,
    /// How long a SERVFAIL, a timeout or another failed lookup is kept.
    pub failure: Duration,
    /// Most names kept (answers and failures), across both generations.
    pub capacity: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            floor: Duration::from_secs(30),
            cap: Duration::from_secs(3600),
            negative_floor: Duration::from_secs(30),
            negative_cap: Duration::from_secs(300),
            failure: Duration::from_secs(15),
            capacity: 100_000,
        }
    }
}

impl Limits {
    /// How long `answered` is kept.
    fn keep(&self, answered: &Answered) -> Duration {
        match answered.result {
            Ok(_) => answered.ttl.unwrap_or(self.floor).clamp(self.floor, self.cap),
            Err(f) if f.is_negative_answer() => answered
                .ttl
                .unwrap_or(self.negative_floor)
                .clamp(self.negative_floor, self.negative_cap),
            Err(_) => self.failure,
        }
    }
}

/// How an outcome was had, for the cache's counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// A kept answer (addresses).
    Hit,
    /// A kept failure or "no such name".
    NegativeHit,
    /// Waited for a lookup another asker had started.
    Joined,
    /// Started the lookup.
    Looked,
    /// Gave up waiting (the lookup goes on, and its answer will be kept).
    Deadline,
}

impl Source {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Source::Hit => "hit",
            Source::NegativeHit => "negative_hit",
            Source::Joined => "joined",
            Source::Looked => "miss",
            Source::Deadline => "deadline",
        }
    }
}

struct Entry {
    outcome: Outcome,
    expires: Instant,
}

#[derive(Default)]
struct Inner {
    young: HashMap<Box<str>, Entry>,
    old: HashMap<Box<str>, Entry>,
    /// Lookups in flight: their answers, when they come.
    pending: HashMap<Box<str>, watch::Receiver<Option<Outcome>>>,
}

pub(crate) struct DnsCache {
    limits: Limits,
    inner: Mutex<Inner>,
    /// How far the tests moved the cache's clock ahead: they check TTLs of
    /// minutes to an hour without waiting for them, and without tokio's
    /// paused clock (its `test-util` feature, as a dev-dependency, made the
    /// test build compile tokio and everything above it a second time).
    #[cfg(test)]
    skew: Mutex<Duration>,
}

impl DnsCache {
    pub(crate) fn new(limits: Limits) -> Arc<Self> {
        Arc::new(DnsCache {
            limits,
            inner: Mutex::default(),
            #[cfg(test)]
            skew: Mutex::default(),
        })
    }

    /// The cache's time: tokio's clock (moved ahead by the tests).
    fn now(&self) -> Instant {
        let now = Instant::now();
        #[cfg(test)]
        let now = now + *self.skew.lock().unwrap_or_else(|e| e.into_inner());
        now
    }

    /// Moves the cache's clock `by` ahead (tests).
    #[cfg(test)]
    fn advance(&self, by: Duration) {
        *self.skew.lock().unwrap_or_else(|e| e.into_inner()) += by;
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Nothing here panics half-way through a change.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Names kept now (both generations), for a gauge.
    pub(crate) fn len(&self) -> usize {
        let inner = self.lock();
        inner.young.len() + inner.old.len()
    }

    /// `name`'s outcome: kept, or from the lookup in flight, or from
    /// `lookup()` started now; each asker waits at most `deadline`.
    pub(crate) async fn get<F, Fut>(
        self: &Arc<Self>,
        name: &str,
        deadline: Duration,
        lookup: F,
    ) -> (Outcome, Source)
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Answered> + Send + 'static,
    {
        let (mut rx, source) = {
            let mut inner = self.lock();
            if let Some(kept) = self.kept(&mut inner, name) {
                let source = if kept.is_ok() {
                    Source::Hit
                } else {
                    Source::NegativeHit
                };
                return (kept, source);
            }
            match inner.pending.get(name) {
                Some(rx) => (rx.clone(), Source::Joined),
                None => {
                    let (tx, rx) = watch::channel(None);
                    inner.pending.insert(name.into(), rx.clone());
                    drop(inner);
                    let fut = lookup();
                    let this = self.clone();
                    let key: Box<str> = name.into();
                    tokio::spawn(async move {
                        let answered = fut.await;
                        let outcome = this.finish(key, &answered);
                        let _ = tx.send(Some(outcome));
                    });
                    (rx, Source::Looked)
                }
            }
        };
        let waited = tokio::time::timeout(deadline, rx.wait_for(Option::is_some)).await;
        match waited {
            Ok(Ok(got)) => match got.as_ref() {
                Some(outcome) => (outcome.clone(), source),
                None => (Err(DnsFailure::Error), source),
            },
            // The lookup's task is gone without an answer (the runtime is
            // stopping): nothing to wait for.
            Ok(Err(_)) => (Err(DnsFailure::Error), source),
            Err(_) => (Err(DnsFailure::Timeout), Source::Deadline),
        }
    }

    /// A fresh kept outcome for `name`, moved to the young generation.
    fn kept(&self, inner: &mut Inner, name: &str) -> Option<Outcome> {
        let now = self.now();
        if let Some(e) = inner.young.get(name) {
            if e.expires > now {
                return Some(e.outcome.clone());
            }
            inner.young.remove(name);
            return None;
        }
        let (key, e) = inner.old.remove_entry(name)?;
        if e.expires <= now {
            return None;
        }
        let outcome = e.outcome.clone();
        self.insert(inner, key, e);
        Some(outcome)
    }

    fn insert(&self, inner: &mut Inner, key: Box<str>, entry: Entry) {
        let half = (self.limits.capacity / 2).max(1);
        if inner.young.len() >= half && !inner.young.contains_key(&key) {
            inner.old = std::mem::take(&mut inner.young);
        }
        inner.young.insert(key, entry);
    }

    /// Keeps `addrs` as `name`'s answer for the floor, as if DNS had said so.
    #[cfg(test)]
    pub(crate) fn put(&self, name: &str, addrs: Vec<IpAddr>) {
        let answered = Answered {
            result: Ok(addrs),
            ttl: None,
        };
        let _ = self.finish(name.into(), &answered);
    }

    /// Keeps a lookup's answer and ends its flight.
    fn finish(&self, key: Box<str>, answered: &Answered) -> Outcome {
        let outcome: Outcome = answered.result.clone().map(Arc::from);
        let expires = self.now() + self.limits.keep(answered);
        let mut inner = self.lock();
        inner.pending.remove(&key);
        inner.old.remove(&key);
        let entry = Entry {
            outcome: outcome.clone(),
            expires,
        };
        self.insert(&mut inner, key, entry);
        outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    const DEADLINE: Duration = Duration::from_secs(10);

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    /// A lookup that counts its calls and answers `answered` after `delay`.
    fn counted(
        calls: &Arc<AtomicUsize>,
        answered: Answered,
        delay: Duration,
    ) -> impl FnOnce() -> std::pin::Pin<Box<dyn Future<Output = Answered> + Send>> {
        let calls = calls.clone();
        move || {
            calls.fetch_add(1, Ordering::SeqCst);
            Box::pin(async move {
                // Even a sleep of zero waits for the timer's next tick
                // (about 1 ms): 10,000 of them were 8 s of CI.
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                answered
            })
        }
    }

    fn answer(ttl_secs: Option<u64>) -> Answered {
        Answered {
            result: Ok(vec![ip("192.0.2.1")]),
            ttl: ttl_secs.map(Duration::from_secs),
        }
    }

    async fn get(
        cache: &Arc<DnsCache>,
        calls: &Arc<AtomicUsize>,
        name: &str,
        a: Answered,
    ) -> (Outcome, Source) {
        cache.get(name, DEADLINE, counted(calls, a, Duration::ZERO)).await
    }

    #[tokio::test]
    async fn answers_are_kept_for_their_ttl_within_floor_and_cap() {
        let cache = DnsCache::new(Limits::default());
        let calls = Arc::new(AtomicUsize::new(0));
        // A TTL of 120 s is kept 120 s.
        let (o, s) = get(&cache, &calls, "a.test", answer(Some(120))).await;
        assert_eq!((o.unwrap().to_vec(), s), (vec![ip("192.0.2.1")], Source::Looked));
        cache.advance(Duration::from_secs(119));
        assert_eq!(
            get(&cache, &calls, "a.test", answer(Some(120))).await.1,
            Source::Hit
        );
        cache.advance(Duration::from_secs(2));
        assert_eq!(
            get(&cache, &calls, "a.test", answer(Some(120))).await.1,
            Source::Looked
        );
        assert_eq!(calls.load(Ordering::SeqCst), 2);

        // A TTL of 1 s (and none at all) is raised to the 30 s floor.
        for (name, ttl) in [("b.test", Some(1)), ("c.test", None)] {
            let _ = get(&cache, &calls, name, answer(ttl)).await;
            cache.advance(Duration::from_secs(29));
            assert_eq!(
                get(&cache, &calls, name, answer(ttl)).await.1,
                Source::Hit,
                "{name}"
            );
            cache.advance(Duration::from_secs(2));
            assert_eq!(
                get(&cache, &calls, name, answer(ttl)).await.1,
                Source::Looked,
                "{name}"
            );
        }

        // A TTL of a day is cut to the hour.
        let _ = get(&cache, &calls, "d.test", answer(Some(86_400))).await;
        cache.advance(Duration::from_secs(3599));
        assert_eq!(get(&cache, &calls, "d.test", answer(None)).await.1, Source::Hit);
        cache.advance(Duration::from_secs(2));
        assert_eq!(
            get(&cache, &calls, "d.test", answer(None)).await.1,
            Source::Looked
        );
    }

    #[tokio::test]
    async fn failures_are_kept_a_short_time_and_no_such_name_by_its_negative_ttl() {
        let cache = DnsCache::new(Limits::default());
        let calls = Arc::new(AtomicUsize::new(0));
        let servfail = Answered::failed(DnsFailure::ServFail);
        let (o, s) = get(&cache, &calls, "s.test", servfail.clone()).await;
        assert_eq!((o, s), (Err(DnsFailure::ServFail), Source::Looked));
        cache.advance(Duration::from_secs(14));
        let (o, s) = get(&cache, &calls, "s.test", servfail.clone()).await;
        assert_eq!((o, s), (Err(DnsFailure::ServFail), Source::NegativeHit));
        cache.advance(Duration::from_secs(2));
        assert_eq!(get(&cache, &calls, "s.test", servfail).await.1, Source::Looked);

        // NXDOMAIN with an SOA minimum of 120 s: kept 120 s; of 5 s: 30 s; of a day: 5 min.
        for (ttl, kept) in [(120, 120), (5, 30), (86_400, 300)] {
            let name = format!("nx{ttl}.test");
            let nx = Answered {
                result: Err(DnsFailure::NxDomain),
                ttl: Some(Duration::from_secs(ttl)),
            };
            let _ = get(&cache, &calls, &name, nx.clone()).await;
            cache.advance(Duration::from_secs(kept - 1));
            assert_eq!(
                get(&cache, &calls, &name, nx.clone()).await.1,
                Source::NegativeHit,
                "{name}"
            );
            cache.advance(Duration::from_secs(2));
            assert_eq!(get(&cache, &calls, &name, nx).await.1, Source::Looked, "{name}");
        }
    }

    #[tokio::test]
    async fn one_lookup_in_flight_per_name() {
        let cache = DnsCache::new(Limits::default());
        let calls = Arc::new(AtomicUsize::new(0));
        let slow = Duration::from_secs(3);
        let askers: Vec<_> = (0..20)
            .map(|_| {
                let cache = cache.clone();
                let lookup = counted(&calls, answer(Some(60)), slow);
                tokio::spawn(async move { cache.get("one.test", DEADLINE, lookup).await })
            })
            .collect();
        // Another name is not held up by the slow one.
        let other = tokio::time::timeout(
            Duration::from_secs(2),
            get(&cache, &calls, "other.test", answer(Some(60))),
        )
        .await
        .expect("another name waited for the slow one");
        assert!(other.0.is_ok());
        let mut sources = Vec::new();
        for a in askers {
            let (o, s) = a.await.unwrap();
            assert!(o.is_ok());
            sources.push(s);
        }
        assert_eq!(calls.load(Ordering::SeqCst), 2, "one lookup per name");
        assert_eq!(sources.iter().filter(|s| **s == Source::Looked).count(), 1);
        assert_eq!(sources.iter().filter(|s| **s == Source::Joined).count(), 19);
    }

    #[tokio::test]
    async fn an_asker_past_its_deadline_times_out_and_the_answer_is_still_kept() {
        let cache = DnsCache::new(Limits::default());
        let calls = Arc::new(AtomicUsize::new(0));
        let lookup = counted(&calls, answer(Some(60)), Duration::from_millis(1500));
        let (o, s) = cache.get("late.test", Duration::from_millis(300), lookup).await;
        assert_eq!((o, s), (Err(DnsFailure::Timeout), Source::Deadline));
        // A second asker joins the same lookup rather than starting another.
        let lookup = counted(&calls, answer(Some(60)), Duration::ZERO);
        let (o, s) = cache.get("late.test", DEADLINE, lookup).await;
        assert!(o.is_ok());
        assert_eq!(s, Source::Joined);
        assert_eq!(
            get(&cache, &calls, "late.test", answer(None)).await.1,
            Source::Hit
        );
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn the_cache_is_bounded_and_keeps_names_in_use() {
        let cache = DnsCache::new(Limits {
            capacity: 100,
            ..Limits::default()
        });
        let calls = Arc::new(AtomicUsize::new(0));
        for i in 0..10_000 {
            let _ = get(&cache, &calls, &format!("n{i}.test"), answer(Some(600))).await;
            // One name asked for all along stays.
            let (_, s) = get(&cache, &calls, "hot.test", answer(Some(600))).await;
            assert!(i == 0 || s == Source::Hit, "hot.test dropped at {i}: {s:?}");
            assert!(cache.len() <= 100, "{} names kept", cache.len());
        }
        assert_eq!(calls.load(Ordering::SeqCst), 10_001);
        // A name not asked for since is gone.
        assert_eq!(
            get(&cache, &calls, "n0.test", answer(None)).await.1,
            Source::Looked
        );
        assert!(cache.lock().pending.is_empty());
    }
}
