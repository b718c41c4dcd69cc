//! An operator's commands applied to the crawl (see `crate::control`):
//! the frontier blocks and lets go of domains, dispatch stops while the
//! crawl is paused, leases carry a domain's delay, added seeds are
//! offered as seeds. Each change is recorded through an effect, so a
//! restarted dispatcher keeps it.

use link::protocol::ToSupervisor;
use serde_json::json;
use store::docs::ControlDoc;

use super::{CrawlState, Effect};
use crate::control::{Change, ControlRequest, Controls, Refused};

impl<C> CrawlState<C> {
    /// What an operator set in an earlier run, read back at start-up.
    pub(crate) fn restore_controls(&mut self, docs: &[ControlDoc], now_ms: u64) {
        for d in docs {
            self.controls.restore(d, now_ms);
        }
        let blocks: Vec<(String, Option<u64>)> = self
            .controls
            .blocked
            .iter()
            .map(|(d, b)| (d.clone(), b.until_ms))
            .collect();
        for (domain, until) in blocks {
            self.block_in_frontier(&domain, until);
        }
    }

    pub(crate) fn controls(&self) -> &Controls {
        &self.controls
    }

    /// Carries out `cmd`, taken at `now_ms` (but `Stop`, which the shell
    /// carries out): its answer for the operator, or why it was refused.
    pub(crate) fn steer(&mut self, cmd: ControlRequest, now_ms: u64) -> Result<serde_json::Value, String> {
        let answer = match cmd {
            ControlRequest::Status => return Ok(self.status()),
            // Carried out by the shell once answered.
            ControlRequest::Stop => json!({"stopping": true, "queued": self.frontier.queued()}),
            ControlRequest::Pause | ControlRequest::Resume => {
                let pause = cmd == ControlRequest::Pause;
                if self.controls.set_paused(pause) {
                    tracing::warn!(
                        "crawl {} by an operator",
                        if pause { "PAUSED" } else { "resumed" }
                    );
                    self.record(Change::Crawl, now_ms);
                    if pause {
                        self.recall(None);
                    }
                }
                json!({"paused": pause})
            }
            ControlRequest::Block { domain, end, reason } => {
                let until_ms = end.map(|e| e.at_ms(now_ms));
                let domain = self
                    .controls
                    .block(&domain, until_ms, &reason, now_ms)
                    .map_err(say)?;
                self.block_in_frontier(&domain, until_ms);
                self.recall(Some(&domain));
                tracing::warn!(domain = %domain, until_ms, reason = %reason, "domain BLOCKED by an operator");
                self.record(Change::Domain(domain.clone()), now_ms);
                json!({"domain": domain, "blocked": true, "until_ms": until_ms})
            }
            ControlRequest::Unblock { domain } => {
                let (domain, by_operator) = self.controls.unblock(&domain).map_err(say)?;
                // A circuit breaker's halt is lifted too (`unhalt` records it).
                let halted = !by_operator && self.unhalt(&domain);
                if !by_operator && !halted {
                    return Err(say(Refused::NotBlocked(domain)));
                }
                if by_operator {
                    self.frontier.unblock(&domain);
                    self.retries.reset(&domain);
                    tracing::info!(domain = %domain, "domain unblocked by an operator");
                    self.record(Change::Domain(domain.clone()), now_ms);
                }
                json!({"domain": domain, "blocked": false})
            }
            ControlRequest::Delay { domain, ms } => {
                let domain = self.controls.delay(&domain, ms).map_err(say)?;
                // URLs already leased carry the old delay: back they come,
                // to go out again with the new one.
                self.recall(Some(&domain));
                tracing::info!(domain = %domain, min_delay_ms = ms, "domain's delay set by an operator");
                self.record(Change::Domain(domain.clone()), now_ms);
                json!({"domain": domain, "min_delay_ms": ms})
            }
            ControlRequest::Seeds(seeds) => return self.add_seeds(seeds, now_ms),
        };
        Ok(answer)
    }

    /// Timed blocks whose end has passed: recorded as over (the frontier
    /// let the domain go by itself). Called once a second.
    pub(crate) fn expire_controls(&mut self, now_ms: u64) {
        for domain in self.controls.expire(now_ms) {
            tracing::info!(domain = %domain, "an operator's block of the domain is over");
            self.record(Change::Domain(domain), now_ms);
        }
    }

    /// The minimum delay an operator set for `domain`, if any.
    pub(crate) fn delay_of(&self, domain: &str) -> Option<u64> {
        self.controls.delays.get(domain).copied()
    }

    /// Asks the supervisors holding URLs of `domain` (of every domain when
    /// `None`) for those not started yet: they come back as `Recalled`
    /// and are queued again without costing a try, so a pause or a block
    /// takes hold within a request, not after every URL already leased.
    fn recall(&mut self, domain: Option<&str>) {
        for (s, domains) in self.frontier.held_at(domain) {
            self.effects
                .push(Effect::Send(s, ToSupervisor::Recall { domains }));
        }
    }

    fn block_in_frontier(&mut self, domain: &str, until_ms: Option<u64>) {
        match until_ms {
            Some(until) => self.frontier.pause(domain, until),
            None => self.frontier.halt(domain),
        }
    }

    fn record(&mut self, change: Change, now_ms: u64) {
        self.effects
            .push(Effect::RecordControl(self.controls.doc(&change, now_ms)));
    }

    /// Seeds an operator adds: each one checked as a seed from a file is,
    /// stored (so a restart keeps them) and offered at depth 0 with its
    /// host in scope.
    fn add_seeds(&mut self, seeds: Vec<String>, now_ms: u64) -> Result<serde_json::Value, String> {
        if seeds.is_empty() {
            return Err(say(Refused::NoSeeds));
        }
        let mut good = Vec::new();
        let mut refused = Vec::new();
        for s in seeds {
            match shared::urls::parse(&s) {
                Ok(u) => good.push(u.to_string()),
                Err(why) => refused
                    .push(json!({"seed": s.chars().take(200).collect::<String>(), "why": why.as_str()})),
            }
        }
        if !good.is_empty() {
            tracing::info!(seeds = good.len(), "seeds added by an operator");
            self.effects.push(Effect::StoreSeeds(good.clone()));
            self.seed(&good, now_ms);
        }
        Ok(json!({"added": good.len(), "refused": refused}))
    }

    /// The crawl as it stands, for `status`.
    fn status(&self) -> serde_json::Value {
        let f = &self.frontier;
        let (paused_domains, halted) = f.blocked_domains();
        json!({
            "paused": self.controls.paused,
            "stopping": self.stopping,
            "queued": f.queued(),
            "in_flight": f.in_flight(),
            "seen": self.seen_count(),
            "supervisors_live": self.members.iter().filter(|m| m.live).count(),
            "blocked": self.controls.blocked,
            "delays": self.controls.delays,
            // Every domain not handed out now, whoever blocked it (the
            // circuit breaker, a move between supervisors, an operator).
            "domains_paused": paused_domains.len(),
            "domains_halted": halted.len(),
            // The first hundred: a status is read by a person.
            "domains_halted_first": halted.iter().take(100).collect::<Vec<_>>(),
        })
    }
}

fn say(r: Refused) -> String {
    r.to_string()
}
