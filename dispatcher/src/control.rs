//! Steering a running crawl: what an operator may change (pause the
//! crawl, block a domain for a while or until unblocked, set a domain's
//! minimum delay, add seeds, stop) and what stands now. No I/O here:
//! `http` reads commands off the debug server, `crate::crawl::control`
//! applies them to the crawl and writes them to the store, and a
//! restarted dispatcher reads them back ([`Controls::restore`]).
//!
//! Every value comes from a person or a script over the network, so each
//! is checked here and refused with a reason a person can act on.

pub(crate) mod http;
pub mod request;

pub(crate) use request::ControlRequest;

use std::collections::BTreeMap;

use serde::Serialize;
use store::docs::ControlDoc;

/// Longest a domain can be blocked for with a deadline (a longer block
/// is a block without one).
pub(crate) const MAX_BLOCK_MS: u64 = 366 * 24 * 3600 * 1000;
/// Largest minimum delay an operator can set: a day between requests.
pub(crate) const MAX_DELAY_MS: u64 = 24 * 3600 * 1000;
/// Most seeds one call may add (a bigger list: several calls).
pub(crate) const MAX_SEEDS_PER_CALL: usize = 100_000;

/// Why a command was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Refused {
    #[error("{0:?} is not a domain (a host name, with :port when not 80, as `crawlctl status` and the logs name it, e.g. www.example.org)")]
    NotADomain(String),
    #[error("the block would end in the past or more than a year from now; leave out its end to block until unblocked")]
    BadDeadline,
    #[error("a delay above {MAX_DELAY_MS} ms (a day) is a block: block the domain instead")]
    DelayTooLong,
    #[error("{0} is not blocked")]
    NotBlocked(String),
    #[error("no seeds given")]
    NoSeeds,
    #[error("over {MAX_SEEDS_PER_CALL} seeds in one call: split the list")]
    TooManySeeds,
}

/// A domain an operator blocked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Block {
    /// Unix ms; `None`: until unblocked.
    pub(crate) until_ms: Option<u64>,
    pub(crate) reason: String,
    pub(crate) since_ms: u64,
}

/// What the operator set, as it stands.
#[derive(Debug, Default, Clone, PartialEq, Serialize)]
pub(crate) struct Controls {
    pub(crate) paused: bool,
    pub(crate) blocked: BTreeMap<String, Block>,
    /// Minimum delay by domain, in ms.
    pub(crate) delays: BTreeMap<String, u64>,
}

/// A change that took effect: what to write to the store.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Change {
    Crawl,
    Domain(String),
}

impl Controls {
    /// (crawl paused, domains blocked, delays set), for the monitor line.
    pub(crate) fn summary(&self) -> (bool, usize, usize) {
        (self.paused, self.blocked.len(), self.delays.len())
    }

    /// The crawl paused or not; whether that changed anything.
    pub(crate) fn set_paused(&mut self, paused: bool) -> bool {
        std::mem::replace(&mut self.paused, paused) != paused
    }

    /// Blocks `domain` (checked); a later block replaces an earlier one.
    pub(crate) fn block(
        &mut self,
        domain: &str,
        until_ms: Option<u64>,
        reason: &str,
        now_ms: u64,
    ) -> Result<String, Refused> {
        let domain = checked_domain(domain)?;
        if let Some(until) = until_ms {
            if until <= now_ms || until - now_ms > MAX_BLOCK_MS {
                return Err(Refused::BadDeadline);
            }
        }
        let reason: String = reason.chars().take(200).collect();
        let block = Block {
            until_ms,
            reason,
            since_ms: now_ms,
        };
        self.blocked.insert(domain.clone(), block);
        Ok(domain)
    }

    /// Lifts an operator's block of `domain`: the domain, and whether an
    /// operator had blocked it (if not, the circuit breaker may have).
    pub(crate) fn unblock(&mut self, domain: &str) -> Result<(String, bool), Refused> {
        let domain = checked_domain(domain)?;
        let was = self.blocked.remove(&domain).is_some();
        Ok((domain, was))
    }

    /// Blocks with a deadline that has passed are over (the frontier
    /// lets them go by itself); the domains they were on.
    pub(crate) fn expire(&mut self, now_ms: u64) -> Vec<String> {
        let over: Vec<String> = self
            .blocked
            .iter()
            .filter(|(_, b)| b.until_ms.is_some_and(|t| t <= now_ms))
            .map(|(d, _)| d.clone())
            .collect();
        for d in &over {
            self.blocked.remove(d);
        }
        over
    }

    /// Sets (or with `None` clears) `domain`'s minimum delay.
    pub(crate) fn delay(&mut self, domain: &str, ms: Option<u64>) -> Result<String, Refused> {
        let domain = checked_domain(domain)?;
        match ms {
            Some(ms) if ms > MAX_DELAY_MS => return Err(Refused::DelayTooLong),
            Some(ms) => self.delays.insert(domain.clone(), ms),
            None => self.delays.remove(&domain),
        };
        Ok(domain)
    }

    /// The document that records `change` as it stands now.
    pub(crate) fn doc(&self, change: &Change, now_ms: u64) -> ControlDoc {
        let now = i64::try_from(now_ms).unwrap_or(i64::MAX);
        match change {
            Change::Crawl => ControlDoc {
                id: ControlDoc::CRAWL.into(),
                paused: self.paused,
                changed_ms: now,
                ..ControlDoc::default()
            },
            Change::Domain(d) => {
                let block = self.blocked.get(d);
                ControlDoc {
                    id: d.clone(),
                    blocked: block.is_some(),
                    blocked_until_ms: block
                        .and_then(|b| b.until_ms)
                        .map(|t| i64::try_from(t).unwrap_or(i64::MAX)),
                    reason: block.map(|b| b.reason.clone()).unwrap_or_default(),
                    min_delay_ms: self
                        .delays
                        .get(d)
                        .map(|&ms| i64::try_from(ms).unwrap_or(i64::MAX)),
                    changed_ms: now,
                    ..ControlDoc::default()
                }
            }
        }
    }

    /// Takes back what a stored document says. Blocks that ended while
    /// the dispatcher was down are dropped; values out of range (the
    /// store was edited by hand) are skipped with a warning.
    pub(crate) fn restore(&mut self, d: &ControlDoc, now_ms: u64) {
        if d.id == ControlDoc::CRAWL {
            self.paused = d.paused;
            return;
        }
        let Ok(domain) = checked_domain(&d.id) else {
            tracing::warn!(id = %d.id, "skipping a control document that names no domain");
            return;
        };
        if d.blocked {
            let until = d.blocked_until_ms.map(|t| u64::try_from(t).unwrap_or(0));
            if until.is_none_or(|t| t > now_ms) {
                let since = u64::try_from(d.changed_ms).unwrap_or(0);
                self.blocked.insert(
                    domain.clone(),
                    Block {
                        until_ms: until,
                        reason: d.reason.clone(),
                        since_ms: since,
                    },
                );
            }
        }
        match d.min_delay_ms.map(u64::try_from) {
            Some(Ok(ms)) if ms <= MAX_DELAY_MS => {
                self.delays.insert(domain, ms);
            }
            Some(_) => tracing::warn!(domain = %domain, "skipping a stored delay out of range"),
            None => {}
        }
    }
}

/// `domain` as the frontier names domains (`shared::urls::domain_of`:
/// lower case, no trailing dot, `:port` when not 80), or why it is none.
pub(crate) fn checked_domain(domain: &str) -> Result<String, Refused> {
    let refused = || Refused::NotADomain(domain.chars().take(100).collect());
    let trimmed = domain.trim().trim_end_matches('.');
    if trimmed.is_empty() || trimmed.len() > 253 || trimmed.contains(['/', '@', '?', '#', ' ']) {
        return Err(refused());
    }
    let url = url::Url::parse(&format!("http://{trimmed}/")).map_err(|_| refused())?;
    match url.host_str() {
        Some(host) if !host.is_empty() => Ok(shared::urls::domain_of(&url)),
        _ => Err(refused()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_800_000_000_000;

    #[test]
    fn domains_are_named_as_the_frontier_names_them_and_junk_is_refused() {
        assert_eq!(
            checked_domain("WWW.Example.ORG.").as_deref(),
            Ok("www.example.org")
        );
        assert_eq!(checked_domain("127.0.0.1").as_deref(), Ok("127.0.0.1"));
        assert_eq!(checked_domain("a.test:8080").as_deref(), Ok("a.test:8080"));
        assert_eq!(checked_domain("a.test:80").as_deref(), Ok("a.test"));
        for bad in [
            "",
            " ",
            "http://a.test/",
            "a.test/x",
            "a b",
            "user@a.test",
            "a.test:x",
            "a.test:99999",
            "@crawl",
        ] {
            assert!(
                matches!(checked_domain(bad), Err(Refused::NotADomain(_))),
                "{bad:?} accepted"
            );
        }
        assert!(checked_domain(&"a".repeat(300)).is_err());
    }

    #[test]
    fn blocks_and_delays_are_checked_and_recorded() {
        let mut c = Controls::default();
        assert_eq!(c.block("A.test", None, "complaint", NOW).as_deref(), Ok("a.test"));
        assert_eq!(c.block("b.test", Some(NOW), "", NOW), Err(Refused::BadDeadline));
        assert_eq!(
            c.block("b.test", Some(NOW + MAX_BLOCK_MS + 1), "", NOW),
            Err(Refused::BadDeadline)
        );
        assert!(c.block("b.test", Some(NOW + 5_000), "", NOW).is_ok());
        assert_eq!(c.unblock("c.test"), Ok(("c.test".into(), false)));
        assert_eq!(
            c.delay("a.test", Some(MAX_DELAY_MS + 1)),
            Err(Refused::DelayTooLong)
        );
        assert!(c.delay("a.test", Some(2_000)).is_ok());
        assert!(c.set_paused(true));
        assert!(!c.set_paused(true));
        // The deadline passes: the timed block is over, the other stands.
        assert_eq!(c.expire(NOW + 5_000), ["b.test"]);
        assert_eq!(c.blocked.keys().collect::<Vec<_>>(), ["a.test"]);
        assert_eq!(c.unblock("a.test"), Ok(("a.test".into(), true)));
        assert!(c.blocked.is_empty());
        assert_eq!(c.delay("a.test", None).as_deref(), Ok("a.test"));
        assert!(c.delays.is_empty());
    }

    #[test]
    fn what_is_stored_reads_back_the_same() {
        let mut c = Controls::default();
        c.set_paused(true);
        c.block("a.test", Some(NOW + 60_000), "webmaster asked", NOW)
            .unwrap();
        c.block("b.test", None, "", NOW).unwrap();
        c.delay("b.test", Some(3_000)).unwrap();
        c.delay("c.test", Some(500)).unwrap();
        let docs: Vec<ControlDoc> = [
            Change::Crawl,
            Change::Domain("a.test".into()),
            Change::Domain("b.test".into()),
            Change::Domain("c.test".into()),
        ]
        .iter()
        .map(|ch| c.doc(ch, NOW))
        .collect();
        let mut back = Controls::default();
        for d in &docs {
            let d: ControlDoc = bson::from_document(bson::to_document(d).unwrap()).unwrap();
            back.restore(&d, NOW + 1);
        }
        assert_eq!(back, c);
        // A timed block that ended while the dispatcher was down is not restored.
        let mut later = Controls::default();
        for d in &docs {
            later.restore(d, NOW + 60_000);
        }
        assert_eq!(later.blocked.keys().collect::<Vec<_>>(), ["b.test"]);
        assert_eq!(later.delays.len(), 2);
        // An unblocked domain's document says so.
        c.unblock("a.test").unwrap();
        assert!(!c.doc(&Change::Domain("a.test".into()), NOW).blocked);
    }
}
