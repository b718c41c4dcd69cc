//! `pages`: one document per URL the crawl fetched, whatever the answer.
//! Written once by the child that fetched it (an insert keyed by URL, so a
//! retried write stores it once); read by `pages` (`get`, `stats`,
//! `export`) and the tests.
//!
//! Three parts, each filled in by the one file that knows it:
//! - what was fetched and what came of it (the child's pipeline);
//! - the HTTP exchange a WARC record needs: `fetch_ms`, `ip`,
//!   `response_head`, `request_head` ([`crate::exchange`]);
//! - the body, compressed: `body`, `body_dict`, `charset`
//!   ([`crate::page_body`]).
//!
//! Every field after `bytes` is optional, so pages stored by earlier
//! versions (without the exchange, say) still read.
//!
//! Lean by design: a store's work per document follows its elements as
//! well as its bytes (nx-27017 turns each into JSON; mongod validates,
//! journals and caches each), so nothing is stored that another field or
//! the collection already holds. Earlier versions stored more, which still
//! reads: `crawl_id` (the collection is the crawl's, `<crawl>__pages`),
//! `content_type` (a header of `response_head`, read by
//! [`crate::exchange::content_type`]), `body_encoding` (always `zstd`)
//! and `fetch_started_at` (a second date; now `fetch_ms` before
//! `fetched_at`). On the realistic bench's pages this took 3 of 23
//! elements and 100 bytes off a page, and a date for a number: 6 % of
//! nx-27017's instructions per page insert (callgrind).

use bson::{spec::BinarySubtype, Binary, Bson, DateTime};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::payload_digest::PayloadDigest;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PageDoc {
    /// The URL leased (normalised), which is what de-duplication is on.
    #[serde(rename = "_id")]
    pub url: String,
    pub domain: String,
    /// Hops from a seed.
    pub depth: i32,
    pub status: i32,
    /// When the answer was complete.
    pub fetched_at: DateTime,
    /// Body bytes received (after content decoding), before any cut.
    pub bytes: i64,
    /// The SHA-1 of those bytes ([`crate::payload_digest`]), whether the
    /// body is kept or not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload_sha1: Option<PayloadDigest>,
    /// The body was cut: at `--max-body-bytes`, or to fit the store.
    #[serde(default, skip_serializing_if = "is_false")]
    pub truncated: bool,
    /// The response head was cut at [`crate::exchange::MAX_RESPONSE_HEAD`]:
    /// `response_head` lacks the headers past it.
    #[serde(default, skip_serializing_if = "is_false")]
    pub head_truncated: bool,
    /// Where same-domain redirects ended, when they were followed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_url: Option<String>,
    /// The Content-Type header, as pages of earlier versions stored it
    /// besides `response_head`; read it with
    /// [`crate::exchange::content_type`], which reads either.
    #[serde(default, skip_serializing)]
    pub(crate) content_type: Option<String>,

    /// How long before `fetched_at` the request went out, in ms
    /// ([`crate::exchange`]): a number rather than a second date (4 bytes
    /// instead of 8 on mongod; nx-27017 spends about three times a
    /// number's work on a date).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fetch_ms: Option<i32>,
    /// When the request went out, as earlier versions stored it; read it
    /// with [`crate::exchange::fetch_started`], which reads either.
    #[serde(default, skip_serializing)]
    pub(crate) fetch_started_at: Option<DateTime>,
    /// The server address dialled, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip: Option<String>,
    /// The status line, then each header as `name: value`, CRLF-joined.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_head: Option<Head>,
    /// The request headers sent besides `Host`, the same way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_head: Option<Head>,

    /// The body as received, compressed ([`crate::page_body`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<Binary>,
    /// How `body` is compressed; absent for zstd, the only encoding ever
    /// written (earlier versions named it on every page).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_encoding: Option<String>,
    /// The zstd dictionary the body was compressed with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_dict: Option<String>,
    /// The WHATWG name of the encoding the HTML was decoded with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub charset: Option<String>,

    /// Why the body was not parsed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<Skipped>,
    /// A redirect to another domain, handed to the dispatcher as a link.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redirect_to: Option<String>,
    /// Links handed to the dispatcher (parsed pages and redirects only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outlinks: Option<i32>,
    /// Those links themselves, canonical, as the dispatcher got them (a
    /// redirect's target for a redirect), packed in one compressed field
    /// (`crate::page_links`). The page is the record that its URL is
    /// finished (the frontier entry is not marked), so it also carries
    /// what the URL led to: a dispatcher killed before it wrote them to
    /// the frontier offers them again from here when it resumes
    /// (`dispatcher::finished`), instead of fetching the page again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub links: Option<Binary>,
    /// The body was a sitemap of this kind; its `<loc>`s on the page's
    /// domain are the page's links (`crawler-child/src/sitemap.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sitemap: Option<SitemapKind>,
    /// Why reading the sitemap stopped before its end (an XML error, more
    /// than 50 MB of XML); the URLs read before are its links.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sitemap_stopped: Option<String>,
    /// Links past `--max-outlinks-per-page` (a sitemap's past 50,000, or
    /// off its domain), not handed on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outlinks_dropped: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canonical: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lang: Option<String>,
    /// What the page asked of robots, in its `<meta name="robots">` (or
    /// ours by agent name) and its `X-Robots-Tag` header.
    #[serde(default, skip_serializing_if = "RobotsDirectives::is_empty")]
    pub robots: RobotsDirectives,
    /// When the crawl revisits (`--revisit-after`): when the page is due
    /// again, in Unix ms (indexed, see `Stores::ensure_revisit_index`),
    /// and what its next visit sends. Set by the first visit, moved by
    /// each later one. A number, not a date: nx-27017 stores a date set
    /// by `$set` at the top level of a document as a string, which no
    /// range query then finds; a number reads the same on both stores.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub due_ms: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revisit: Option<super::RevisitState>,
}

impl PageDoc {
    pub const URL: &'static str = "_id";
    pub const FETCHED_AT: &'static str = "fetched_at";
    pub const LINKS: &'static str = "links";
    pub const DUE_MS: &'static str = "due_ms";

    /// A page with what every fetch has; the rest is filled in as known.
    pub fn new(url: String, domain: String, depth: i32, status: i32, bytes: i64) -> PageDoc {
        PageDoc {
            url,
            domain,
            depth,
            status,
            fetched_at: DateTime::now(),
            bytes,
            payload_sha1: None,
            truncated: false,
            head_truncated: false,
            final_url: None,
            content_type: None,
            fetch_ms: None,
            fetch_started_at: None,
            ip: None,
            response_head: None,
            request_head: None,
            body: None,
            body_encoding: None,
            body_dict: None,
            charset: None,
            skipped: None,
            redirect_to: None,
            outlinks: None,
            links: None,
            outlinks_dropped: None,
            sitemap: None,
            sitemap_stopped: None,
            title: None,
            description: None,
            canonical: None,
            lang: None,
            robots: RobotsDirectives::default(),
            due_ms: None,
            revisit: None,
        }
    }
}

/// The robots directives a page gave that change what is done with it
/// (others, such as `nosnippet`, concern search engines only). Stored
/// with only the ones set, and not at all when none is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RobotsDirectives {
    /// Not to be indexed: recorded, for whoever uses the pages.
    #[serde(default, skip_serializing_if = "is_false")]
    pub noindex: bool,
    /// Its links are not followed (the crawler drops them).
    #[serde(default, skip_serializing_if = "is_false")]
    pub nofollow: bool,
    /// Not to be archived: `pages export --respect-noarchive` leaves it out.
    #[serde(default, skip_serializing_if = "is_false")]
    pub noarchive: bool,
}

impl RobotsDirectives {
    pub fn is_empty(&self) -> bool {
        *self == RobotsDirectives::default()
    }

    /// Both sets together: a directive given anywhere holds.
    pub fn add(&mut self, other: RobotsDirectives) {
        self.noindex |= other.noindex;
        self.nofollow |= other.nofollow;
        self.noarchive |= other.noarchive;
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// What a sitemap lists (sitemaps.org).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SitemapKind {
    /// `<urlset>`: pages.
    Urlset,
    /// `<sitemapindex>`: more sitemaps.
    Index,
}

impl SitemapKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SitemapKind::Urlset => "urlset",
            SitemapKind::Index => "index",
        }
    }
}

/// Why a page's body was not parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Skipped {
    /// Not HTML.
    ContentType,
}

/// An HTTP head as stored: a string when it is UTF-8 (nearly always),
/// binary otherwise, so a header value in another encoding survives byte
/// for byte. One element rather than an array of pairs: a store's work per
/// document grows with its elements.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Head(pub Vec<u8>);

impl Serialize for Head {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match std::str::from_utf8(&self.0) {
            Ok(text) => s.serialize_str(text),
            Err(_) => Binary {
                subtype: BinarySubtype::Generic,
                bytes: self.0.clone(),
            }
            .serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Head {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Head, D::Error> {
        match Bson::deserialize(d)? {
            Bson::String(s) => Ok(Head(s.into_bytes())),
            Bson::Binary(b) => Ok(Head(b.bytes)),
            other => Err(serde::de::Error::custom(format!(
                "an HTTP head is a string or binary, not {:?}",
                other.element_type()
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_are_strings_when_utf8_and_binary_otherwise_and_read_back() {
        let mut p = PageDoc::new("http://a.test/".into(), "a.test".into(), 1, 200, 5);
        p.response_head = Some(Head(b"HTTP/1.1 200 OK\r\nx: caf\xe9".to_vec()));
        p.request_head = Some(Head(b"user-agent: bot".to_vec()));
        p.skipped = Some(Skipped::ContentType);
        let stored = bson::to_document(&p).unwrap();
        assert!(matches!(stored.get("response_head"), Some(Bson::Binary(_))));
        assert_eq!(stored.get_str("request_head"), Ok("user-agent: bot"));
        assert_eq!(stored.get_str("skipped"), Ok("content_type"));
        // Empty options are left out, not stored as null.
        assert!(stored.get("title").is_none() && stored.get("truncated").is_none());
        assert_eq!(bson::from_document::<PageDoc>(stored).unwrap(), p);
    }

    #[test]
    fn pages_without_the_later_fields_still_read() {
        let old = bson::doc! {
            "_id": "http://a.test/", "domain": "a.test", "depth": 0, "status": 404,
            "fetched_at": DateTime::from_millis(1), "crawl_id": "c", "bytes": 0i64,
        };
        let p = bson::from_document::<PageDoc>(old).unwrap();
        assert_eq!((p.status, p.body, p.response_head), (404, None, None));
        let bad = bson::doc! {"_id": "http://a.test/", "response_head": 3};
        assert!(bson::from_document::<PageDoc>(bad).is_err());
    }
}
