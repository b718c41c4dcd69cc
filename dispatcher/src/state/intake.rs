//! Intake: which discovered URLs the crawl takes, and under which `seq`.
//!
//! A link is judged by the seen-set (known, new, unsure, or not judgeable
//! yet while the stored URLs are read in after a restart), made canonical,
//! and admitted by the scope, rules, trap rules and budgets; one over a
//! budget is deferred. The part owns everything that judging needs and
//! says what came of each link ([`Offer`]); the state puts an admitted URL
//! in the frontier and asks the shell to store it (`CrawlState::offer`).
//!
//! Invariants:
//! - `next_seq` only grows: every entry of the stored frontier (admitted,
//!   deferred, or queued again) gets the next one ([`Intake::take_seq`]),
//!   one counter over the whole crawl, past the stored frontier's highest.
//! - `admitted` counts the URLs admitted (against `--max-pages`), each
//!   also counted against its budgets; an unsure URL the store already
//!   held is taken off both ([`Intake::known_after_all`]).
//! - Once the seen-set is whole, `waiting_seeds` and the links
//!   `held_links` keeps in memory are empty (handed back by
//!   [`Intake::rebuilt`]), no link is held any more (a seen-set that is
//!   whole judges every link at once), and those it keeps in a file are
//!   handed back a slice at a time ([`Intake::held_from_file`]).
//! - `unsure` holds exactly the URLs admitted unverified whose store
//!   answer has not come yet, by their `seq`.
//! - The deferred stored URLs (`deferred`) are kept only while the
//!   stored URLs are read in; their keys are in `deferred_keys`, and
//!   `taken_up_before` holds those of them the stored frontier also holds
//!   queued. All three are emptied once the seen-set is whole
//!   ([`Intake::take_up_deferred`], or [`Intake::forget_deferred`] when
//!   the read of stored URLs ended early).

use std::collections::{HashMap, HashSet};

use shared::canonical::Canonicalizer;
use shared::urls;
use store::docs::Deferral;

use super::held::HeldLinks;
use super::inputs::{ScannedUrl, StoredFrontier};
use super::settings::Settings;
use crate::admission::{Admission, Refusal};
use crate::seen::{Seen, SeenSet};
use crate::stats::Counts;

/// What came of a link offered to the crawl.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Offer {
    /// Known, too deep, over `--max-pages`, malformed or refused: nothing
    /// to do (counted).
    Dropped,
    /// Not judgeable yet: held until the seen-set is whole.
    Held,
    /// Over a budget: to be stored as deferred under `seq`.
    Deferred {
        url: String,
        domain: String,
        depth: u16,
        seq: i64,
        why: Deferral,
    },
    /// Admitted under `seq`; `unsure`: the seen-set's hash may have
    /// collided, and the store must say whether it is new.
    Admitted {
        url: String,
        domain: String,
        depth: u16,
        seq: i64,
        unsure: bool,
    },
}

pub(crate) struct Intake {
    max_depth: u16,
    /// 0: no limit.
    max_pages: u64,
    seen: SeenSet,
    /// Scope, rules, trap rules and budgets.
    admission: Admission,
    canonical: Canonicalizer,
    /// The next admitted URL's place in its domain's queue (`FrontierDoc::seq`).
    next_seq: i64,
    admitted: u64,
    /// Links found while the stored URLs are read in that the seen-set
    /// cannot judge yet ([`Seen::NotYet`]): (URL, depth), offered again
    /// once it is whole.
    held_links: HeldLinks,
    /// Unsure URLs inserted and not confirmed yet, by `seq`: (URL, domain, depth).
    unsure: HashMap<i64, (String, String, u16)>,
    /// Seeds waiting for the stored URLs' hashes (see `CrawlState::seed`).
    waiting_seeds: Vec<String>,
    /// Deferred URLs the stored frontier holds that a larger budget may
    /// take up, once every stored URL is counted ([`Intake::take_up_deferred`]):
    /// (URL, domain, depth).
    deferred: Vec<(String, String, u16)>,
    /// Keys (`SeenSet::key`) of the deferred URLs in `deferred`, and of
    /// those among them that the stored frontier also holds queued (an
    /// earlier run took them up): those stay as they are.
    deferred_keys: HashSet<u64>,
    taken_up_before: HashSet<u64>,
}

impl Intake {
    /// An error names a bad allow/deny rule or canonical rule.
    pub(crate) fn new(settings: &Settings) -> Result<Intake, String> {
        Ok(Intake {
            max_depth: settings.max_depth,
            max_pages: settings.max_pages,
            seen: SeenSet::new(settings.seen_check, settings.seen_recent_urls),
            admission: Admission::new(&settings.admission)?,
            canonical: settings.canonical.compile()?,
            next_seq: 1,
            admitted: 0,
            held_links: HeldLinks::with_bound(settings.held_links_memory),
            unsure: HashMap::new(),
            waiting_seeds: Vec::new(),
            deferred: Vec::new(),
            deferred_keys: HashSet::new(),
            taken_up_before: HashSet::new(),
        })
    }

    /// The seen-set to use (tests: one whose hashes collide).
    #[cfg(test)]
    pub(crate) fn set_seen(&mut self, seen: SeenSet) {
        self.seen = seen;
    }

    /// Judges a discovered URL: new, in scope and within limits is
    /// admitted. One the seen-set is unsure of is admitted all the same
    /// and waits in the store, where the unique index keeps the first copy
    /// (see `crate::seen` and `Frontier::admit_unverified`); one it cannot
    /// judge yet (the stored URLs are still being read in) is held back
    /// until it can.
    pub(crate) fn judge(&mut self, url: &str, depth: u16, counts: &mut Counts) -> Offer {
        if depth > self.max_depth {
            counts.too_deep += 1;
            return Offer::Dropped;
        }
        if self.max_pages > 0 && self.admitted >= self.max_pages {
            counts.over_page_limit += 1;
            return Offer::Dropped;
        }
        let mut seen = self.seen.check(url);
        if seen == Seen::Known {
            return Offer::Dropped;
        }
        let Ok(mut parsed) = urls::parse(url) else {
            counts.bad_links += 1;
            return Offer::Dropped;
        };
        // Children send canonical links; one that is not (an older child,
        // a peer that lies) is judged by its canonical form.
        if self.canonical.apply(&mut parsed) {
            counts.canonicalized += 1;
            seen = self.seen.check(parsed.as_str());
            if seen == Seen::Known {
                return Offer::Dropped;
            }
        }
        if seen == Seen::NotYet {
            // Maybe stored: judged once the stored URLs are read in.
            counts.held_links += 1;
            if self.held_links.hold(String::from(parsed), depth) {
                counts.held_links_in_file += 1;
            }
            return Offer::Held;
        }
        let domain = urls::domain_of(&parsed);
        let key = match self.admission.judge(&parsed, &domain) {
            Ok(key) => key,
            Err(refusal) => {
                self.refused(refusal, counts);
                if let Refusal::Over(over) = refusal {
                    // Known from now on, not crawled, and taken up by a
                    // later run whose budget is larger.
                    return Offer::Deferred {
                        url: String::from(parsed),
                        domain,
                        depth,
                        seq: self.take_seq(),
                        why: over.deferral(),
                    };
                }
                return Offer::Dropped;
            }
        };
        self.admission.count(&key);
        let url = String::from(parsed);
        self.admitted += 1;
        let seq = self.take_seq();
        let unsure = seen == Seen::Unsure;
        if unsure {
            counts.unsure_links += 1;
            self.seen.remember(&url);
            self.unsure.insert(seq, (url.clone(), domain.clone(), depth));
        } else {
            counts.new_urls += 1;
        }
        Offer::Admitted {
            url,
            domain,
            depth,
            seq,
            unsure,
        }
    }

    /// Counts a refusal by its reason (and deny rules by rule).
    fn refused(&self, refusal: Refusal, counts: &mut Counts) {
        let reason = refusal.reason();
        crate::metric::LINKS_REFUSED.at([reason]).increment(1);
        match refusal {
            Refusal::OutOfScope => counts.out_of_scope += 1,
            Refusal::Denied(i) => {
                *counts.refused.entry(reason).or_default() += 1;
                let rule = self.admission.deny_label(i);
                match counts.refused_by_rule.get_mut(rule) {
                    Some(n) => *n += 1,
                    None => {
                        counts.refused_by_rule.insert(rule.to_string(), 1);
                    }
                }
            }
            _ => *counts.refused.entry(reason).or_default() += 1,
        }
    }

    /// The `seq` of the next entry of the stored frontier (admitted,
    /// deferred or queued again): one counter over the whole crawl.
    pub(crate) fn take_seq(&mut self) -> i64 {
        let seq = self.next_seq;
        self.next_seq = seq.saturating_add(1);
        seq
    }

    /// An unsure URL's `seq` the store answered for: the URL, once.
    pub(crate) fn take_unsure(&mut self, seq: i64) -> Option<(String, String, u16)> {
        self.unsure.remove(&seq)
    }

    /// An unsure URL the store held before: known, and no longer counted
    /// against `--max-pages` or its budgets.
    pub(crate) fn known_after_all(&mut self, url: &str) {
        self.admitted = self.admitted.saturating_sub(1);
        self.admission.uncount(url);
    }

    /// The seeds' domains are the scope (with `scope_to_seeds`); whether
    /// they can be judged now. While the stored URLs' hashes are still
    /// being read in, they wait ([`Intake::rebuilt`] hands them back).
    pub(crate) fn seed(&mut self, seeds: &[String]) -> bool {
        for s in seeds {
            if let Ok(mut u) = urls::parse(s) {
                self.canonical.apply(&mut u);
                self.admission.seed(&u, &urls::domain_of(&u));
            }
        }
        if !self.seen.is_complete() {
            self.waiting_seeds.extend_from_slice(seeds);
            return false;
        }
        true
    }

    /// Seeds waiting for the seen-set.
    pub(crate) fn waiting_seeds(&self) -> usize {
        self.waiting_seeds.len()
    }

    /// Resumes from a summary of the stored frontier: its URLs were
    /// admitted, its `seq`s are taken, and until its URLs' hashes are read
    /// in ([`Intake::seen_stored`]) a link the seen-set does not know is
    /// held back.
    pub(crate) fn resume_summary(&mut self, s: &StoredFrontier) {
        self.admitted = self.admitted.saturating_add(s.urls);
        self.next_seq = self.next_seq.max(s.last_seq.saturating_add(1));
        if !s.is_empty() {
            self.seen.rebuilding(s.urls);
        }
    }

    /// Stored URLs read in for the seen-set; each but the deferred ones
    /// counts against its budgets as when it was admitted. A deferred one
    /// that is not over its budget already is kept to be taken up once
    /// every stored URL is counted (counts only grow, so one over its
    /// budget now stays over), unless the stored frontier also holds it
    /// queued (an earlier run took it up: its queued copy comes later in
    /// the scan's order, which is the order of admission).
    pub(crate) fn seen_stored(&mut self, urls: Vec<ScannedUrl>) {
        for u in urls {
            self.seen.insert_stored(&u.url);
            match u.deferred {
                None => {
                    self.admission.count_stored(&u.url);
                    if !self.deferred_keys.is_empty() {
                        let key = self.seen.key(&u.url);
                        if self.deferred_keys.contains(&key) {
                            self.taken_up_before.insert(key);
                        }
                    }
                }
                Some((domain, depth)) => {
                    if self.admission.over_budget(&u.url).is_none() {
                        self.deferred_keys.insert(self.seen.key(&u.url));
                        self.deferred.push((u.url, domain, depth));
                    }
                }
            }
        }
    }

    /// Every stored URL was read in: the seen-set judges alone again. The
    /// links held back meanwhile in memory, (URL, depth), and the seeds
    /// that waited for it, to be offered again (in that order); those held
    /// in a file come after, a slice at a time
    /// ([`Intake::held_from_file`]).
    pub(crate) fn rebuilt(&mut self) -> (Vec<(String, u16)>, Vec<String>) {
        self.seen.rebuilt();
        (
            self.held_links.take_memory(),
            std::mem::take(&mut self.waiting_seeds),
        )
    }

    /// Up to `max` of the links held in a file, once the seen-set is whole
    /// (none before), to be offered again.
    pub(crate) fn held_from_file(&mut self, max: usize) -> Vec<(String, u16)> {
        if !self.seen.is_complete() {
            return Vec::new();
        }
        self.held_links.take_from_file(max)
    }

    /// The deferred URLs this run's rules let in (its budget is larger
    /// than the run's that deferred them), in the order they were stored,
    /// each counted as admitted, to be queued again under a new `seq`:
    /// (URL, domain, depth). The others stay deferred. Call it once the
    /// seen-set is whole.
    pub(crate) fn take_up_deferred(&mut self, counts: &mut Counts) -> Vec<(String, String, u16)> {
        let before = std::mem::take(&mut self.taken_up_before);
        self.deferred_keys.clear();
        let mut taken = Vec::new();
        for (url, domain, depth) in std::mem::take(&mut self.deferred) {
            if before.contains(&self.seen.key(&url)) {
                continue;
            }
            let Ok(parsed) = urls::parse(&url) else {
                continue;
            };
            let Ok(key) = self.admission.judge(&parsed, &domain) else {
                continue;
            };
            self.admission.count(&key);
            self.admitted += 1;
            counts.deferred_taken_up += 1;
            taken.push((url, domain, depth));
        }
        taken
    }

    /// The read of stored URLs ended early: no deferred URL is taken up
    /// (not every stored URL was counted).
    pub(crate) fn forget_deferred(&mut self) {
        self.deferred.clear();
        self.deferred_keys.clear();
        self.taken_up_before.clear();
    }

    /// The seen-set knows every stored URL.
    pub(crate) fn is_complete(&self) -> bool {
        self.seen.is_complete()
    }

    /// Nothing waits for the seen-set: it is whole, and no link or seed
    /// is held back.
    pub(crate) fn is_settled(&self) -> bool {
        self.seen.is_complete() && self.held_links.is_empty() && self.waiting_seeds.is_empty()
    }

    /// Links are held back (the stored URLs are still being read in, or
    /// those held in a file are not all offered again yet), or some held
    /// links were lost to a failed file: either way the pages they came
    /// from must stay open.
    pub(crate) fn holds_links(&self) -> bool {
        !self.held_links.is_empty() || self.held_links.lost()
    }

    /// So many links are held back that no more URLs should be leased
    /// until the stored URLs are read in (each result brings more): only
    /// when their file failed (see `super::held`).
    pub(crate) fn holds_too_many(&self) -> bool {
        self.held_links.is_full()
    }

    /// URLs known (distinct hashes).
    pub(crate) fn seen_count(&self) -> usize {
        self.seen.len()
    }

    /// Heap bytes of the seen-set's hashes.
    pub(crate) fn seen_bytes(&self) -> usize {
        self.seen.bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::inputs::StoredQueue;

    fn settings() -> Settings {
        crate::state::tests::settings()
    }

    fn admitted(o: &Offer) -> (i64, bool) {
        match o {
            Offer::Admitted { seq, unsure, .. } => (*seq, *unsure),
            other => panic!("not admitted: {other:?}"),
        }
    }

    #[test]
    fn seqs_only_grow_and_a_known_url_is_dropped() {
        let mut intake = Intake::new(&settings()).unwrap();
        let mut counts = Counts::default();
        assert_eq!(
            admitted(&intake.judge("http://a.test/1", 0, &mut counts)),
            (1, false)
        );
        assert_eq!(intake.judge("http://a.test/1", 0, &mut counts), Offer::Dropped);
        assert_eq!(intake.take_seq(), 2);
        assert_eq!(
            admitted(&intake.judge("http://a.test/2", 0, &mut counts)),
            (3, false)
        );
        assert_eq!(counts.new_urls, 2);
        assert_eq!(intake.judge("http://a.test/3", 21, &mut counts), Offer::Dropped);
        assert_eq!(counts.too_deep, 1);
    }

    #[test]
    fn a_summary_moves_seqs_past_the_stored_ones_and_holds_links_until_rebuilt() {
        let mut intake = Intake::new(&settings()).unwrap();
        let mut counts = Counts::default();
        intake.resume_summary(&StoredFrontier {
            urls: 10,
            queues: vec![StoredQueue {
                domain: "a.test".into(),
                count: 5,
                first_seq: 1,
            }],
            last_seq: 40,
            ..StoredFrontier::default()
        });
        assert!(!intake.is_complete());
        assert_eq!(intake.judge("http://a.test/new", 1, &mut counts), Offer::Held);
        assert!(!intake.seed(&["http://b.test/".to_string()]));
        assert!(intake.holds_links() && !intake.is_settled());
        assert_eq!(intake.waiting_seeds(), 1);
        let (held, seeds) = intake.rebuilt();
        assert_eq!(held, vec![("http://a.test/new".to_string(), 1)]);
        assert_eq!(seeds, vec!["http://b.test/".to_string()]);
        assert!(intake.is_settled());
        assert_eq!(
            admitted(&intake.judge("http://a.test/new", 1, &mut counts)),
            (41, false)
        );
    }

    #[test]
    fn max_pages_counts_admitted_urls_and_a_known_unsure_one_is_given_back() {
        let mut s = settings();
        s.max_pages = 2;
        let mut intake = Intake::new(&s).unwrap();
        // Every hash the same: the second URL can only be unsure.
        intake.set_seen(SeenSet::new(crate::seen::SeenCheck::Store, 0).with_hash_bits(0));
        let mut counts = Counts::default();
        assert_eq!(
            admitted(&intake.judge("http://a.test/1", 0, &mut counts)),
            (1, false)
        );
        assert_eq!(
            admitted(&intake.judge("http://a.test/2", 0, &mut counts)),
            (2, true)
        );
        assert_eq!(intake.judge("http://a.test/3", 0, &mut counts), Offer::Dropped);
        assert_eq!(counts.over_page_limit, 1);
        let (url, domain, depth) = intake.take_unsure(2).unwrap();
        assert_eq!(
            (url.as_str(), domain.as_str(), depth),
            ("http://a.test/2", "a.test", 0)
        );
        assert!(intake.take_unsure(2).is_none());
        intake.known_after_all(&url);
        assert_eq!(
            admitted(&intake.judge("http://a.test/3", 0, &mut counts)),
            (3, true)
        );
    }

    #[test]
    fn a_deferred_url_queued_before_is_not_taken_up_again() {
        let mut intake = Intake::new(&settings()).unwrap();
        let mut counts = Counts::default();
        intake.resume_summary(&StoredFrontier {
            urls: 3,
            last_seq: 3,
            ..StoredFrontier::default()
        });
        let deferred = |u: &str| ScannedUrl {
            url: u.into(),
            deferred: Some(("a.test".into(), 2)),
        };
        intake.seen_stored(vec![
            deferred("http://a.test/1"),
            deferred("http://a.test/2"),
            ScannedUrl {
                url: "http://a.test/1".into(),
                deferred: None,
            },
        ]);
        let _ = intake.rebuilt();
        let taken = intake.take_up_deferred(&mut counts);
        assert_eq!(
            taken,
            vec![("http://a.test/2".to_string(), "a.test".to_string(), 2)]
        );
        assert_eq!(counts.deferred_taken_up, 1);
        assert!(intake.take_up_deferred(&mut counts).is_empty());
    }
}
