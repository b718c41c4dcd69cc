//! Ground truth: what a correct crawler with default settings stores.
//!
//! Computed by replaying the generator's own link lists and robots rules in a
//! BFS (no HTML or robots parsing), so it is independent of the crawler's
//! extractor and robots library. Rules modelled:
//! - seeds are the in-scope home pages; only in-scope http URLs are followed;
//! - a robots-disallowed URL goes to `must_not_fetch` and is not stored;
//! - 200 → stored as 200, outlinks (resolved against the final URL) discovered;
//! - 404 → stored as 404;
//! - same-host redirects are followed (≤ 10 hops): stored under the linked URL
//!   with the final status, the final page's outlinks are discovered;
//! - a cross-host redirect is stored as 302 and its target is discovered.

use std::collections::{BTreeMap, BTreeSet, HashSet, VecDeque};

use super::links::Target;
use super::model::{HostRef, Loc};
use super::synthetic::Answer;
use super::SyntheticWeb;

/// The expected result of crawling [`SyntheticWeb::seed_urls`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Expected {
    /// Normalised URL (no fragment) → the HTTP status the crawler must record.
    pub pages: BTreeMap<String, u16>,
    /// Linked URLs that robots.txt forbids: the crawler must never request them.
    pub must_not_fetch: BTreeSet<String>,
}

impl Expected {
    /// How many stored URLs have this status.
    pub fn count_status(&self, status: u16) -> usize {
        self.pages.values().filter(|&&s| s == status).count()
    }
}

/// Same-host redirect hops a crawler follows before giving up.
const MAX_HOPS: usize = 10;

impl SyntheticWeb {
    /// The ground truth for a default crawl (agent `synthcrawler`, scope = in-scope hosts).
    pub fn expected_crawl(&self) -> Expected {
        let mut exp = Expected::default();
        let mut seen: HashSet<(usize, Loc)> = HashSet::new();
        let mut queue: VecDeque<(usize, Loc)> = VecDeque::new();
        let mut discover = |host: HostRef, loc: Loc, queue: &mut VecDeque<(usize, Loc)>| {
            let loc = loc.canonical();
            if let HostRef::InScope(i) = host {
                if seen.insert((i, loc)) {
                    queue.push_back((i, loc));
                }
            }
        };
        for i in 0..self.spec.hosts {
            discover(HostRef::InScope(i), Loc::Home, &mut queue);
        }
        while let Some((i, loc)) = queue.pop_front() {
            let host = HostRef::InScope(i);
            let url = self.url(host, loc);
            if self.rules(host).disallows(&loc.path()) {
                exp.must_not_fetch.insert(url);
                continue;
            }
            let mut cur = loc;
            let mut hops = 0;
            let status = loop {
                match self.answer(host, cur) {
                    Answer::Html(h, page) => {
                        let ctx = self.page_ctx(h, page);
                        self.for_each_link(&ctx, &mut |l| {
                            if let Target::Url(th, tl) = l.target {
                                discover(th, tl, &mut queue);
                            }
                        });
                        break 200;
                    }
                    Answer::Robots(_) => break 200,
                    Answer::NotFound => break 404,
                    Answer::Redirect {
                        status,
                        host: to,
                        loc: next,
                    } => {
                        let follow =
                            to == host && hops < MAX_HOPS && !self.rules(host).disallows(&next.path());
                        if !follow {
                            if to != host {
                                discover(to, next, &mut queue);
                            }
                            break status;
                        }
                        cur = next;
                        hops += 1;
                    }
                }
            };
            exp.pages.insert(url, status);
        }
        exp
    }
}
