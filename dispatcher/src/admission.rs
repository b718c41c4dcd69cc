//! Which discovered URLs the crawl takes, once they are known to be new:
//! where it may go (`--scope` and the operator's allow and deny rules),
//! which paths are traps, and how much of one domain, or of one path's
//! query variants, it spends. Pure decisions on a parsed, canonical URL
//! (see `shared::canonical`, applied before the seen-check), so they are
//! tested without a crawl; `CrawlState::offer` applies them in this
//! order and counts each refusal by its reason.
//!
//! Why these rules: the open web is full of URL spaces without end
//! (session ids, calendars, faceted search, relative links that stack
//! path segments), and a crawl that cannot tell them from pages never
//! ends, and spends a site's patience on URLs for pages it has. The
//! peers do the same things under other names: Heritrix's decide rules
//! and queue budgets, Nutch's `generate.max.count`, StormCrawler's
//! filters. The rules that only say where a crawl may go (scope, rules,
//! traps) drop a URL; the budgets keep it, as a deferred entry of the
//! stored frontier that a later crawl with a larger budget takes up
//! (`crate::resume`).

mod budget;
mod rules;
mod scope;
mod traps;

use url::Url;

pub(crate) use budget::{BudgetKey, Budgets, Over};
pub(crate) use rules::{RuleSpecs, RuleVerdict, UrlRules};
pub(crate) use scope::{Scope, ScopeKind};
pub(crate) use traps::{PathTrap, PathTraps};

/// Why a new URL was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Outside `--scope`.
    OutOfScope,
    /// Deny rule number `n` matched.
    Denied(usize),
    /// Allow rules exist and none matched.
    NotAllowed,
    Trap(PathTrap),
    /// Over a budget: kept in the stored frontier as deferred.
    Over(Over),
}

impl Refusal {
    /// Bounded label value (metrics, the summary, the stored frontier).
    pub(crate) fn reason(self) -> &'static str {
        match self {
            Refusal::OutOfScope => "out_of_scope",
            Refusal::Denied(_) => "denied_by_rule",
            Refusal::NotAllowed => "not_allowed_by_rule",
            Refusal::Trap(PathTrap::TooManySegments) => "too_many_segments",
            Refusal::Trap(PathTrap::RepeatedSegments) => "repeated_segments",
            Refusal::Over(Over::Domain) => "over_domain_budget",
            Refusal::Over(Over::QueryVariants) => "over_query_budget",
        }
    }
}

/// The settings, from the command line.
#[derive(Debug, Clone)]
pub(crate) struct AdmissionSettings {
    pub(crate) scope: ScopeKind,
    pub(crate) rules: RuleSpecs,
    pub(crate) traps: PathTraps,
    /// 0: no budget.
    pub(crate) max_pages_per_domain: u32,
    pub(crate) max_query_variants: u32,
}

impl AdmissionSettings {
    /// Everything allowed: tests of other rules.
    #[cfg(test)]
    pub(crate) fn open() -> AdmissionSettings {
        AdmissionSettings {
            scope: ScopeKind::Any,
            rules: RuleSpecs::default(),
            traps: PathTraps {
                max_segments: 0,
                max_repeats: 0,
            },
            max_pages_per_domain: 0,
            max_query_variants: 0,
        }
    }
}

/// The rules in force and the budgets' counts.
pub(crate) struct Admission {
    scope: Scope,
    rules: UrlRules,
    traps: PathTraps,
    budgets: Budgets,
}

impl Admission {
    pub(crate) fn new(s: &AdmissionSettings) -> Result<Admission, String> {
        Ok(Admission {
            scope: Scope::new(s.scope),
            rules: UrlRules::new(&s.rules)?,
            traps: s.traps,
            budgets: Budgets::new(s.max_pages_per_domain, s.max_query_variants),
        })
    }

    /// A seed: its host or site is in scope. Seeds are admitted by the
    /// same rules as any URL otherwise.
    pub(crate) fn seed(&mut self, url: &Url, domain: &str) {
        self.scope.seed(url, domain);
    }

    /// Whether a new URL may be admitted: the key to [`Admission::count`]
    /// it under when it is, or why not.
    pub(crate) fn judge(&self, url: &Url, domain: &str) -> Result<BudgetKey, Refusal> {
        if !self.scope.contains(url, domain) {
            return Err(Refusal::OutOfScope);
        }
        match self.rules.judge(url) {
            RuleVerdict::Pass => {}
            RuleVerdict::Denied(i) => return Err(Refusal::Denied(i)),
            RuleVerdict::NotAllowed => return Err(Refusal::NotAllowed),
        }
        if let Some(trap) = self.traps.check(url.path()) {
            return Err(Refusal::Trap(trap));
        }
        // A normalised URL always has a key.
        let key = self.budgets.key(url.as_str()).ok_or(Refusal::OutOfScope)?;
        match self.budgets.over(&key) {
            Some(over) => Err(Refusal::Over(over)),
            None => Ok(key),
        }
    }

    /// A URL judged admissible was admitted.
    pub(crate) fn count(&mut self, key: &BudgetKey) {
        self.budgets.count(key);
    }

    /// A URL the stored frontier holds, admitted before a restart: it
    /// counts against its budgets as it did then.
    pub(crate) fn count_stored(&mut self, url: &str) {
        if let Some(key) = self.budgets.key(url) {
            self.budgets.count(&key);
        }
    }

    /// A URL admitted as unsure was in the store already (see
    /// `CrawlState::confirmed`): the read of stored URLs counts it, so its
    /// admission no longer does.
    pub(crate) fn uncount(&mut self, url: &str) {
        if let Some(key) = self.budgets.key(url) {
            self.budgets.uncount(&key);
        }
    }

    /// Whether one more URL like `url` would be over a budget now (a
    /// deferred URL read back: taken up only if the budget grew).
    pub(crate) fn over_budget(&self, url: &str) -> Option<Over> {
        self.budgets.key(url).and_then(|k| self.budgets.over(&k))
    }

    /// The label of deny rule `i`, to count refusals by rule.
    pub(crate) fn deny_label(&self, i: usize) -> &str {
        self.rules.deny_label(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judge(a: &Admission, url: &str) -> Result<BudgetKey, Refusal> {
        let u = Url::parse(url).unwrap();
        a.judge(&u, &shared::urls::domain_of(&u))
    }

    #[test]
    fn refusals_in_order_and_budgets_count_only_what_is_admitted() {
        let mut a = Admission::new(&AdmissionSettings {
            scope: ScopeKind::Site,
            rules: RuleSpecs {
                deny_url: vec!["/private/".into()],
                ..RuleSpecs::default()
            },
            traps: PathTraps::DEFAULT,
            max_pages_per_domain: 2,
            max_query_variants: 1,
        })
        .unwrap();
        let seed = Url::parse("http://www.a.test/").unwrap();
        a.seed(&seed, "www.a.test");
        assert_eq!(judge(&a, "http://b.test/").unwrap_err(), Refusal::OutOfScope);
        assert_eq!(
            judge(&a, "http://shop.a.test/private/x").unwrap_err(),
            Refusal::Denied(0)
        );
        assert_eq!(a.deny_label(0), "deny-url:/private/");
        assert_eq!(
            judge(&a, "http://shop.a.test/x/x/x/x").unwrap_err(),
            Refusal::Trap(PathTrap::RepeatedSegments)
        );
        let k = judge(&a, "http://shop.a.test/cal?m=1").unwrap();
        // Judged but not admitted: nothing counted.
        assert!(judge(&a, "http://shop.a.test/cal?m=2").is_ok());
        a.count(&k);
        assert_eq!(
            judge(&a, "http://shop.a.test/cal?m=2").unwrap_err(),
            Refusal::Over(Over::QueryVariants)
        );
        a.count_stored("http://shop.a.test/p/1");
        assert_eq!(
            judge(&a, "http://shop.a.test/p/2").unwrap_err(),
            Refusal::Over(Over::Domain)
        );
        assert_eq!(a.over_budget("http://shop.a.test/p/3"), Some(Over::Domain));
        assert_eq!(a.over_budget("http://www.a.test/p/3"), None);
        assert_eq!(Refusal::Over(Over::Domain).reason(), "over_domain_budget");
    }
}
