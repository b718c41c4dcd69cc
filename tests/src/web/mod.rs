//! The synthetic web: a deterministic, generated set of hosts and pages served
//! by one local HTTP server, plus the ground truth of a correct crawl of it.
//!
//! Used by the end-to-end tests, the demo and the benchmark. Every response is
//! computed on demand from `(seed, host, path)`, so a web of 20,000+ pages
//! costs no memory and the crawler — not the server — is what gets measured.
//!
//! Layout:
//! - [`model`]: [`WebSpec`], host names, paths, robots rules per host;
//! - `links`: the outlinks of each page and how their hrefs are spelled;
//! - `html`: page rendering; `synthetic`: [`SyntheticWeb::respond`];
//! - [`expected`]: [`Expected`], the ground truth;
//! - [`server`]: [`WebServer`], the Host-routed HTTP server with a request log;
//! - `dump`: [`SyntheticWeb::dump`], the same web as files for nginx.
//!
//! Two shapes ([`Profile`]): `Small`, the default, built by the end-to-end
//! tests to exercise edge cases, and `Realistic` ([`WebSpec::realistic`]),
//! for benchmarks: pages of 5–32 KiB, 10–40 links mostly to the same host,
//! few 404s and redirects. What follows is the small profile's; the
//! realistic one is described on [`Profile::Realistic`].
//!
//! Host rules are a function of the in-scope host index `i` (so tests can
//! rely on them): `site1` robots has `Disallow: /p/1` (prefix: also /p/10..);
//! `i % 7 == 3` has no robots.txt (unless it is a crawl-delay host); `i % 7 == 5`
//! disallows `/p/` for `*` but has its own `synthcrawler` group that only
//! disallows `/private/`; all others disallow `/private/`; `i % 3 == 0` adds an
//! `otherbot` group disallowing everything; `i % crawl_delay_every == 0` adds
//! `Crawl-delay`; `i % 4 == 2` has `<base href="/p/">` on its home page.
//!
//! Opt-in additions ([`WebExtras`], all off by default): [`hostile`] hosts
//! (traps and robots.txt edge cases, in scope after `siteN.test`) and slow
//! hosts (the first `slow_hosts` in-scope hosts answer after `slow_ms`);
//! [`traps`] hosts (session ids, tracking parameters, a calendar, a faceted
//! search, stacked relative paths, and apart a site bigger than the
//! per-domain budget), in scope after all the others; and [`changing`]
//! pages ([`Changing`]), which change between visits and answer a crawler's
//! conditional revisits with 304.

pub mod changing;
mod dump;
pub mod expected;
pub mod family;
pub mod hostile;
mod html;
mod links;
pub mod model;
mod rng;
pub mod server;
mod synthetic;
pub mod traps;

#[cfg(test)]
mod tests;

pub use changing::Conditions;
pub use dump::{Dumped, HOSTS_DIR, HTTP_CONF, SERVER_CONF};
pub use expected::Expected;
pub use model::{Changing, Profile, WebExtras, WebSpec};
pub use server::{RequestRecord, WebServer};
pub use synthetic::{Response, SyntheticWeb};

/// The user-agent token the ground truth assumes (the crawler's default).
pub const USER_AGENT_TOKEN: &str = "synthcrawler";
