//! The changing web ([`WebExtras::changing`](super::WebExtras::changing)):
//! validators on every generated page, a stable subset of pages that get a
//! new version every [`Changing::every`], and the conditional requests
//! (RFC 7232) with which a crawler revisits them for a 304.
//!
//! Like the rest of the generator, everything is a function of the seed, the
//! host, the path and the time since the web was built: no per-page state,
//! so a web of any size costs nothing more with this on.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;

use super::hostile::http_date;
use super::links::{host_code, loc_code};
use super::model::{parse_host, Changing, HostRef, Loc};
use super::rng::{mix, SplitMix};
use super::synthetic::{Answer, Response, SyntheticWeb, HTML};

/// A request's conditional headers, as the client sent them. Unparsable
/// values are ignored rather than refused: a crawler's garbage must not
/// turn a page into an error the ground truth does not expect.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Conditions<'a> {
    /// Every `If-None-Match` field value: the header is a list and may come
    /// in several lines. When one of them holds an entity tag (or `*`),
    /// `if_modified_since` is not looked at (RFC 7232 §3.3).
    pub if_none_match: &'a [&'a str],
    /// The `If-Modified-Since` value, any of the three HTTP-date formats.
    pub if_modified_since: Option<&'a str>,
}

impl SyntheticWeb {
    /// Whether `path` on `host` (a `Host` header value) is one of the pages
    /// that change, so a test knows which revisits should see a new body
    /// and which a 304. False when the changing web is off and for anything
    /// but an HTML page of the generated hosts. A query variant of a page
    /// (`/p/3?sort=new`) serves that page's bytes, so it changes with it.
    pub fn changes(&self, host: &str, path: &str) -> bool {
        self.changing_page(host, path)
            .is_some_and(|(ch, h, loc)| page_changes(ch, self.page_hash(h, loc)))
    }

    /// The version `path` on `host` serves now (0 for pages that never
    /// change), so that a test can wait for a page to change instead of
    /// guessing from the clock. `None` when the changing web is off or this
    /// is not an HTML page of the generated hosts (no validators there).
    pub fn version(&self, host: &str, path: &str) -> Option<u64> {
        self.version_at(host, path, SystemTime::now())
    }

    /// The `ETag` `path` on `host` answers with now (see [`SyntheticWeb::version`]).
    pub fn etag(&self, host: &str, path: &str) -> Option<String> {
        let (ch, h, loc) = self.changing_page(host, path)?;
        let hash = self.page_hash(h, loc);
        Some(etag(hash, self.page_version(ch, hash, SystemTime::now())))
    }

    /// When version 0 of every page began: when the web was built, which
    /// for a [`WebServer`](super::WebServer) is its start, rounded down to
    /// whole seconds. Version `v` of a changing page is served from
    /// `change_epoch() + v * every` on, and that is its `Last-Modified`.
    pub fn change_epoch(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(self.change_epoch)
    }

    /// [`SyntheticWeb::version`] as if the time were `now`.
    pub(crate) fn version_at(&self, host: &str, path: &str, now: SystemTime) -> Option<u64> {
        let (ch, h, loc) = self.changing_page(host, path)?;
        Some(self.page_version(ch, self.page_hash(h, loc), now))
    }

    /// The page `path` on `host` serves, when the changing web is on and
    /// it is an HTML page (the only answers that get validators).
    fn changing_page(&self, host: &str, path: &str) -> Option<(Changing, HostRef, Loc)> {
        let ch = self.extras.changing?;
        let h = parse_host(host, self.spec.hosts, self.spec.outside_hosts)?;
        match self.answer(h, Loc::parse(path)?) {
            Answer::Html(h, loc) => Some((ch, h, loc)),
            _ => None,
        }
    }

    /// Identifies a page for its ETag and decides whether it changes. From
    /// the host and the location the page is served as (a query variant is
    /// its page), not from the request's spelling: `SITE1.test:80/p/3?ref=nav`
    /// and `site1.test/p/3` are the same bytes, so they get the same tag.
    fn page_hash(&self, h: HostRef, loc: Loc) -> u64 {
        mix(&[self.spec.seed, 0x00c4_a16e, host_code(h), loc_code(loc)])
    }

    fn page_version(&self, ch: Changing, hash: u64, now: SystemTime) -> u64 {
        if !page_changes(ch, hash) {
            return 0;
        }
        // A clock set back before the epoch stays at version 0 rather than panicking.
        let now = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        now.saturating_sub(self.change_epoch) / ch.every_secs()
    }

    /// A page of the changing web: 304 when the request's validators still
    /// match, else 200 with the current version's body; both with the
    /// validators, which a crawler stores for its next visit.
    pub(crate) fn respond_changing(
        &self,
        ch: Changing,
        h: HostRef,
        loc: Loc,
        cond: Conditions<'_>,
        now: SystemTime,
    ) -> Response {
        let hash = self.page_hash(h, loc);
        let version = self.page_version(ch, hash, now);
        let tag = etag(hash, version);
        // Whole seconds apart (every_secs >= 1): no two versions share a Last-Modified.
        let modified = self
            .change_epoch
            .saturating_add(version.saturating_mul(ch.every_secs()));
        let not_modified = match none_match(cond.if_none_match, &tag) {
            Some(hit) => hit,
            None => cond
                .if_modified_since
                .and_then(parse_http_date)
                .is_some_and(|since| modified <= since),
        };
        let modified_at = UNIX_EPOCH + Duration::from_secs(modified);
        let validators = [("etag", tag), ("last-modified", http_date(modified_at))];
        if not_modified {
            return Response {
                status: 304,
                headers: validators.into(),
                body: Bytes::new(),
            };
        }
        let mut headers = vec![("content-type", HTML.to_string())];
        headers.extend(validators);
        Response {
            status: 200,
            headers,
            body: revise(self.render_page(h, loc), version),
        }
    }
}

/// Whether a page is in the changing subset: about `share_percent` of them,
/// a pure function of the page so every visit and every test agrees.
fn page_changes(ch: Changing, hash: u64) -> bool {
    SplitMix::new(hash).below(100) < usize::from(ch.share_percent.min(100))
}

/// A strong tag (the body is a function of it), quoted as RFC 7232 wants.
fn etag(hash: u64, version: u64) -> String {
    format!("\"{hash:016x}-{version}\"")
}

/// Version `version` of a page: its version-0 body (the body without the
/// changing web) with a paragraph before `</body>`. Text only, so the
/// links, and with them the crawl's URLs and the ground truth, never change.
fn revise(page: Bytes, version: u64) -> Bytes {
    if version == 0 {
        return page;
    }
    let at = page
        .windows(b"</body>".len())
        .rposition(|w| w == b"</body>")
        .unwrap_or(page.len());
    let rev = format!("<p class=\"rev\">revision {version}</p>\n");
    let mut out = Vec::with_capacity(page.len() + rev.len());
    out.extend_from_slice(&page[..at]);
    out.extend_from_slice(rev.as_bytes());
    out.extend_from_slice(&page[at..]);
    Bytes::from(out)
}

/// Whether `If-None-Match` values name `etag`, by the weak comparison
/// RFC 7232 §3.2 prescribes for it (a `W/` prefix on either side is
/// ignored); `*` names any current page. `None` when no value held a
/// parsable entity tag or `*`: the header then counts as absent, so that
/// garbage falls back to `If-Modified-Since` instead of deciding anything.
fn none_match(values: &[&str], etag: &str) -> Option<bool> {
    let ours = etag.strip_prefix("W/").unwrap_or(etag);
    let mut parsed = false;
    for value in values {
        let mut rest = *value;
        loop {
            rest = rest.trim_start_matches([' ', '\t', ',']);
            if rest.is_empty() {
                break;
            }
            let tag = rest.strip_prefix("W/").unwrap_or(rest);
            if let Some(inner) = tag.strip_prefix('"') {
                // An entity tag cannot contain a quote, but may a comma.
                let Some(end) = inner.find('"') else {
                    break;
                };
                parsed = true;
                if tag[..end + 2] == *ours {
                    return Some(true);
                }
                rest = &inner[end + 1..];
                continue;
            }
            let (item, next) = rest.split_once(',').unwrap_or((rest, ""));
            if item.trim() == "*" {
                return Some(true);
            }
            // Not an entity tag: skip this element.
            rest = next;
        }
    }
    parsed.then_some(false)
}

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// Parses an HTTP-date in any of the three formats a recipient must accept
/// (RFC 7231 §7.1.1.1): IMF-fixdate, RFC 850 (`Sunday, 06-Nov-94 08:49:37
/// GMT`, two-digit years 70..99 → 19xx, 00..69 → 20xx) and asctime (`Sun
/// Nov  6 08:49:37 1994`). Seconds since the Unix epoch; `None` for anything
/// else and for dates before 1970. The weekday is not checked against the date.
/// By hand: the `httpdate` crate is in the lock file (hyper's) but not a
/// dependency of this crate, and [`http_date`] formats by hand too.
pub(crate) fn parse_http_date(s: &str) -> Option<u64> {
    let mut words = [""; 6];
    let mut n = 0;
    for w in s.split_ascii_whitespace() {
        *words.get_mut(n)? = w;
        n += 1;
    }
    let (day, month, year, time) = match words[..n] {
        [weekday, day, month, year, time, "GMT"] if weekday.ends_with(',') => {
            (day, month, digits(year, 4, 4)?, time)
        }
        [weekday, date, time, "GMT"] if weekday.ends_with(',') => {
            let mut parts = date.split('-');
            let (day, month, yy) = (parts.next()?, parts.next()?, parts.next()?);
            if parts.next().is_some() {
                return None;
            }
            let yy = digits(yy, 2, 2)?;
            (day, month, if yy < 70 { 2000 + yy } else { 1900 + yy }, time)
        }
        [_weekday, month, day, time, year] => (day, month, digits(year, 4, 4)?, time),
        _ => return None,
    };
    let month = MONTHS.iter().position(|&m| m == month)? as u64 + 1;
    let day = digits(day, 1, 2)?;
    if year < 1970 || day == 0 || day > days_in_month(year, month) {
        return None;
    }
    let mut hms = time.split(':');
    let (h, m, s) = (
        digits(hms.next()?, 2, 2)?,
        digits(hms.next()?, 2, 2)?,
        digits(hms.next()?, 2, 2)?,
    );
    if hms.next().is_some() || h > 23 || m > 59 || s > 59 {
        return None;
    }
    Some(days_from_civil(year, month, day) * 86_400 + h * 3600 + m * 60 + s)
}

/// A decimal of `min..=max` ASCII digits.
fn digits(s: &str, min: usize, max: usize) -> Option<u64> {
    if (min..=max).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit()) {
        s.parse().ok()
    } else {
        None
    }
}

fn days_in_month(y: u64, m: u64) -> u64 {
    match m {
        2 if y.is_multiple_of(4) && (!y.is_multiple_of(100) || y.is_multiple_of(400)) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date from 1970 on
/// (H. Hinnant's `days_from_civil`; [`http_date`] does the inverse).
fn days_from_civil(y: u64, m: u64, d: u64) -> u64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y / 400;
    let yoe = y % 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_http_dates() {
        let date = |secs: u64| http_date(UNIX_EPOCH + Duration::from_secs(secs));
        for s in [
            "Sun, 06 Nov 1994 08:49:37 GMT",
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994",
        ] {
            assert_eq!(parse_http_date(s), Some(784_111_777), "{s}");
        }
        // Every day of 60 years, leap ones (2000 and 2024) included, round-trips.
        for secs in (0..60 * 366).map(|d| 946_000_000 + d * 86_400 + d * 37 % 86_400) {
            assert_eq!(parse_http_date(&date(secs)), Some(secs), "{}", date(secs));
        }
        assert_eq!(
            parse_http_date("Thu, 29 Feb 2024 23:59:59 GMT"),
            Some(1_709_251_199)
        );
        assert_eq!(
            parse_http_date("Fri, 01 Jan 2100 00:00:00 GMT"),
            Some(4_102_444_800)
        );
        assert_eq!(parse_http_date("Thursday, 01-Jan-70 00:00:00 GMT"), Some(0));
        assert_eq!(
            parse_http_date("Wednesday, 01-Jan-25 00:00:00 GMT"),
            Some(1_735_689_600)
        );
        for bad in [
            "",
            "garbage",
            "Sun, 06 Nov 1994 08:49:37 UTC",
            "Sun, 06 Nov 1994 08:49 GMT",
            "Sun, 06 Nov 1994 24:00:00 GMT",
            "Sun, 31 Nov 1994 08:49:37 GMT",
            "Sun, 29 Feb 1900 08:49:37 GMT",
            "Sun, 06 nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 94 08:49:37 GMT",
            "Sun, 06 Nov 1969 08:49:37 GMT",
            "Sun, 06 Nov +994 08:49:37 GMT",
            "Sun, 06 Nov 1994 08:49:37 GMT extra",
            "Sunday, 06-Nov-94-1 08:49:37 GMT",
            "Sun Nov  6 08:49:37",
        ] {
            assert_eq!(parse_http_date(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn if_none_match_uses_weak_comparison() {
        let tag = "\"00ab-3\"";
        for (values, want) in [
            (&["\"00ab-3\""][..], Some(true)),
            (&["W/\"00ab-3\""], Some(true)),
            (&["\"x\", W/\"00ab-3\""], Some(true)),
            (&["\"x\"", " \"00ab-3\" "], Some(true)),
            (&["*"], Some(true)),
            (&["\"a,b\", *"], Some(true)),
            (&["\"00ab-2\""], Some(false)),
            (&["\"00ab-3"], None),
            (&["00ab-3"], None),
            (&["garbage, \"00ab-2\""], Some(false)),
            (&["garbage, \"00ab-3\"x"], Some(true)),
            (&["w/\"00ab-3\""], None),
            (&[""], None),
            (&[], None),
        ] {
            assert_eq!(none_match(values, tag), want, "{values:?}");
        }
    }
}
