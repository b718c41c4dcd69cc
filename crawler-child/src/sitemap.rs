//! Sitemaps (sitemaps.org protocol 0.9): reading a fetched body as a
//! `<urlset>` (pages of the site) or a `<sitemapindex>` (more sitemaps),
//! plain or gzipped.
//!
//! A sitemap is crawled as a URL like any other: it reaches the frontier
//! from robots.txt's `Sitemap:` lines (`pipeline` offers them with the
//! first page a child stores for the domain) or from a sitemap index, is
//! leased, paced and checked against robots.txt like a page, and its
//! `<loc>`s go back to the dispatcher as its links, admitted with the
//! site's scope, budgets and robots rules. So nothing here fetches, and
//! a child killed mid-sitemap loses nothing the frontier had not kept.
//!
//! Bounds, as the protocol sets them: at most [`MAX_LOCS`] URLs and
//! [`MAX_XML_BYTES`] of XML (after gunzip) a sitemap. Past either, or at
//! an XML error, reading stops: the URLs read so far are kept and the
//! page records why (a hostile or broken sitemap costs only itself). A
//! `<loc>` stops growing at [`MAX_LOC_TEXT`] and is then dropped: one
//! endless `<loc>`, in many text and CDATA pieces, is not 50 MB of string.
//! quick-xml expands no entity but the five predefined ones, so an
//! entity bomb is text, not memory.

use std::io::{BufRead, BufReader, Read};

use quick_xml::events::Event;
use quick_xml::Reader;
use store::docs::SitemapKind as Kind;

/// URLs a sitemap may list (sitemaps.org: 50,000).
pub(crate) const MAX_LOCS: usize = 50_000;
/// XML bytes a sitemap may hold once gunzipped (sitemaps.org: 50 MB).
pub(crate) const MAX_XML_BYTES: u64 = 50 * 1024 * 1024;
/// Text a `<loc>` may hold: the longest URL the crawl keeps, with room
/// for blanks around it (trimmed after). A longer one is no URL we keep.
const MAX_LOC_TEXT: usize = 2 * shared::urls::MAX_URL_LEN;
/// How deep a `<loc>` sits: root, `<url>` or `<sitemap>`, `<loc>`.
/// (An `<image:loc>` of an extension sits deeper and is not a page.)
const LOC_DEPTH: usize = 3;

/// What a sitemap lists.
#[derive(Debug, PartialEq)]
pub(crate) struct Sitemap {
    pub kind: Kind,
    /// The `<loc>`s as written (trimmed, entities decoded), in order.
    pub locs: Vec<String>,
    /// `<loc>`s not kept: past [`MAX_LOCS`], or longer than
    /// [`MAX_LOC_TEXT`].
    pub dropped: u64,
    /// Why reading stopped before the end, when it did.
    pub stopped: Option<String>,
    /// Each kept `<loc>` whose entry gave a readable `<lastmod>`, with that
    /// time (Unix ms): when the page (or the sitemap, in an index) last
    /// changed, as the site says (see `crate::sitemap_due`).
    pub lastmods: Vec<(String, i64)>,
}

impl Sitemap {
    /// An empty sitemap whose root element is `name`, if that is a
    /// sitemap's root.
    fn of_root(name: &[u8]) -> Option<Sitemap> {
        let kind = match name {
            b"urlset" => Kind::Urlset,
            b"sitemapindex" => Kind::Index,
            _ => return None,
        };
        Some(Sitemap {
            kind,
            locs: Vec::new(),
            dropped: 0,
            stopped: None,
            lastmods: Vec::new(),
        })
    }
}

/// A `<lastmod>` (W3C Datetime, as sitemaps.org asks: `2026-11-01`,
/// `2026-11-01T10:20+01:00`, `2026-11-01T10:20:30.5Z`, or just a year or
/// month) as Unix ms; `None` when it is none of those. A date alone is
/// its midnight UTC.
pub(crate) fn w3c_datetime(text: &str) -> Option<i64> {
    let text = text.trim();
    let (date, time) = match text.split_once('T') {
        Some((d, t)) => (d, Some(t)),
        None => (text, None),
    };
    let date = match date.len() {
        4 => format!("{date}-01-01"),
        7 => format!("{date}-01"),
        10 => date.to_string(),
        _ => return None,
    };
    let time = match time {
        None => "00:00:00Z".to_string(),
        // hh:mm then a zone: seconds are optional in W3C, not in RFC 3339.
        Some(t) => match (t.get(..5), t.get(5..)) {
            (Some(hm), Some(zone)) if !zone.is_empty() && !zone.starts_with(':') => format!("{hm}:00{zone}"),
            _ => t.to_string(),
        },
    };
    let ms = bson::DateTime::parse_rfc3339_str(format!("{date}T{time}")).ok()?;
    Some(ms.timestamp_millis())
}

/// `body` read as a sitemap; `None` when it is not one (not XML, or its
/// first element is neither `<urlset>` nor `<sitemapindex>`).
pub(crate) fn parse(body: &[u8]) -> Option<Sitemap> {
    if body.starts_with(&[0x1f, 0x8b]) {
        let gunzip = flate2::read::MultiGzDecoder::new(body).take(MAX_XML_BYTES);
        let mut xml = BufReader::new(gunzip);
        // Only the first block is unpacked to see whether it is XML.
        if !starts_like_xml(xml.fill_buf().ok()?) {
            return None;
        }
        read(xml)
    } else {
        let cut = body
            .len()
            .min(usize::try_from(MAX_XML_BYTES).unwrap_or(usize::MAX));
        starts_like_xml(body).then(|| read(&body[..cut])).flatten()
    }
}

/// Whether `head` starts, after a byte-order mark and blanks, with `<`:
/// every body that is not (an image, a PDF) is passed over without
/// being scanned.
fn starts_like_xml(head: &[u8]) -> bool {
    let head = head.strip_prefix(b"\xef\xbb\xbf").unwrap_or(head);
    head.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'<')
}

/// The `<loc>` being read, if any.
enum Loc {
    None,
    Reading(String),
    /// Past [`MAX_LOC_TEXT`]: its text is no longer kept.
    TooLong,
}

impl Loc {
    /// Appends `text` to the `<loc>` being read, unless that takes it past
    /// [`MAX_LOC_TEXT`].
    fn push(&mut self, text: &str) {
        if let Loc::Reading(l) = self {
            if l.len().saturating_add(text.len()) > MAX_LOC_TEXT {
                *self = Loc::TooLong;
            } else {
                l.push_str(text);
            }
        }
    }
}

/// Reads a sitemap from `xml`, which ends at [`MAX_XML_BYTES`] at most
/// (a cut document ends in an XML error, recorded in `stopped`).
fn read<R: BufRead>(xml: R) -> Option<Sitemap> {
    let mut reader = Reader::from_reader(xml);
    let mut buf = Vec::new();
    let mut depth = 0usize;
    let mut map: Option<Sitemap> = None;
    // The text of the `<loc>` being read.
    let mut loc = Loc::None;
    // The entry's `<loc>` as kept, and the text of its `<lastmod>`.
    let mut entry_loc: Option<String> = None;
    let mut lastmod: Option<String> = None;
    let mut reading_lastmod = false;
    loop {
        buf.clear();
        let event = match reader.read_event_into(&mut buf) {
            Ok(e) => e,
            Err(e) => {
                let mut map = map?;
                map.stopped = Some(format!("XML error at byte {}: {e}", reader.buffer_position()));
                return Some(map);
            }
        };
        match event {
            Event::Start(e) => {
                depth = depth.saturating_add(1);
                match map.as_ref() {
                    None => map = Some(Sitemap::of_root(e.local_name().as_ref())?),
                    Some(_) if depth == LOC_DEPTH && e.local_name().as_ref() == b"loc" => {
                        loc = Loc::Reading(String::new());
                    }
                    Some(_) if depth == LOC_DEPTH && e.local_name().as_ref() == b"lastmod" => {
                        lastmod = Some(String::new());
                        reading_lastmod = true;
                    }
                    Some(_) if depth == LOC_DEPTH - 1 => {
                        entry_loc = None;
                        lastmod = None;
                    }
                    Some(_) => {}
                }
            }
            // An empty root lists nothing; an empty `<loc/>` is nothing.
            Event::Empty(e) if map.is_none() => return Sitemap::of_root(e.local_name().as_ref()),
            Event::Text(t) => {
                if reading_lastmod {
                    if let (Some(m), Ok(text)) = (lastmod.as_mut(), t.unescape()) {
                        // A date is a few dozen bytes; more is not one.
                        if m.len() < 64 {
                            m.push_str(&text);
                        }
                    }
                } else if let Loc::Reading(_) = loc {
                    match t.unescape() {
                        Ok(text) => loc.push(&text),
                        // A bad reference spoils this `<loc>` only.
                        Err(_) => loc = Loc::None,
                    }
                }
            }
            Event::CData(c) => {
                if let Loc::Reading(_) = loc {
                    loc.push(&String::from_utf8_lossy(&c));
                }
            }
            Event::End(_) => {
                reading_lastmod = false;
                if depth == LOC_DEPTH - 1 {
                    if let (Some(l), Some(at), Some(m)) = (
                        entry_loc.take(),
                        lastmod.take().as_deref().and_then(w3c_datetime),
                        map.as_mut(),
                    ) {
                        m.lastmods.push((l, at));
                    }
                }
                if depth == LOC_DEPTH {
                    match (std::mem::replace(&mut loc, Loc::None), map.as_mut()) {
                        (Loc::Reading(l), Some(m)) => {
                            let l = l.trim();
                            if l.is_empty() {
                            } else if m.locs.len() < MAX_LOCS {
                                m.locs.push(l.to_string());
                                entry_loc = Some(l.to_string());
                            } else {
                                m.dropped = m.dropped.saturating_add(1);
                            }
                        }
                        (Loc::TooLong, Some(m)) => m.dropped = m.dropped.saturating_add(1),
                        _ => {}
                    }
                }
                depth = depth.saturating_sub(1);
            }
            Event::Eof => {
                let mut map = map?;
                if depth > 0 {
                    map.stopped = Some(format!(
                        "the XML ends inside an element (cut at {} bytes?)",
                        reader.buffer_position()
                    ));
                }
                return Some(map);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        z.write_all(bytes).expect("in memory");
        z.finish().expect("in memory")
    }

    const URLSET: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"
        xmlns:image="http://www.google.com/schemas/sitemap-image/1.1">
  <url><loc> http://a.test/p?x=1&amp;y=2 </loc><lastmod>2026-11-01</lastmod></url>
  <url><loc><![CDATA[http://a.test/cdata]]></loc>
       <image:image><image:loc>http://a.test/i.png</image:loc></image:image></url>
  <url><loc></loc></url>
</urlset>"#;

    #[test]
    fn lastmods_read_every_w3c_datetime_form_and_nothing_else() {
        let day = 1_793_491_200_000; // 2026-11-01T00:00:00Z
        assert_eq!(w3c_datetime("2026-11-01"), Some(day));
        assert_eq!(w3c_datetime(" 2026-11-01T10:20Z "), Some(day + 37_200_000));
        assert_eq!(w3c_datetime("2026-11-01T10:20+01:00"), Some(day + 33_600_000));
        assert_eq!(w3c_datetime("2026-11-01T10:20:30.5Z"), Some(day + 37_230_500));
        assert_eq!(w3c_datetime("2026-11"), Some(day));
        assert_eq!(w3c_datetime("2026"), Some(1_767_225_600_000));
        for bad in [
            "",
            "yesterday",
            "2026-13-01",
            "2026-11-01T25:00Z",
            "2026-11-01Té",
            "20261101",
            "2026-11-01T10",
        ] {
            assert_eq!(w3c_datetime(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_lastmod_goes_with_its_own_entry_only() {
        let xml = r#"<urlset>
          <url><lastmod>2026-11-01</lastmod><loc>http://a.test/before</loc></url>
          <url><loc>http://a.test/none</loc></url>
          <url><loc>http://a.test/bad</loc><lastmod>soon</lastmod></url>
        </urlset>"#;
        let map = parse(xml.as_bytes()).expect("a sitemap");
        assert_eq!(map.locs.len(), 3);
        assert_eq!(
            map.lastmods,
            vec![("http://a.test/before".into(), 1_793_491_200_000)]
        );
        let index = r#"<sitemapindex><sitemap><loc>http://a.test/m.xml</loc><lastmod>2026-11-01</lastmod></sitemap></sitemapindex>"#;
        assert_eq!(parse(index.as_bytes()).expect("an index").lastmods.len(), 1);
    }

    #[test]
    fn an_endless_loc_stops_growing_and_is_dropped_whole() {
        // One `<loc>` of a megabyte in ten thousand CDATA pieces, one in a
        // single text, then an ordinary one.
        let pieces = "<![CDATA[aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa]]>".repeat(10_000);
        let text = "b".repeat(1 << 20);
        let xml = format!(
            "<urlset><url><loc>http://a.test/{pieces}</loc></url><url><loc>http://a.test/{text}</loc></url>\
             <url><loc>http://a.test/ok</loc></url></urlset>"
        );
        let map = parse(xml.as_bytes()).expect("a sitemap");
        assert_eq!(map.locs, vec!["http://a.test/ok".to_string()]);
        assert_eq!(map.dropped, 2);
        assert_eq!(map.stopped, None);
        // A URL just under the limit, with blanks around it, is kept.
        let long = format!("http://a.test/{}", "c".repeat(shared::urls::MAX_URL_LEN - 20));
        let xml = format!("<urlset><url><loc>\n   {long}   \n</loc></url></urlset>");
        assert_eq!(parse(xml.as_bytes()).expect("a sitemap").locs, vec![long]);
    }

    #[test]
    fn a_urlset_lists_its_locs_plain_or_gzipped() {
        let want = Sitemap {
            kind: Kind::Urlset,
            locs: vec!["http://a.test/p?x=1&y=2".into(), "http://a.test/cdata".into()],
            dropped: 0,
            stopped: None,
            lastmods: vec![("http://a.test/p?x=1&y=2".into(), 1_793_491_200_000)],
        };
        assert_eq!(parse(URLSET.as_bytes()), Some(want));
        let gz = parse(&gzip(URLSET.as_bytes())).expect("a sitemap");
        assert_eq!(gz.locs.len(), 2);
    }

    #[test]
    fn an_index_lists_sitemaps() {
        let xml = r#"<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
            <sitemap><loc>http://a.test/s1.xml.gz</loc></sitemap>
            <sitemap><loc>http://a.test/s2.xml</loc><lastmod>2026-01-01</lastmod></sitemap>
        </sitemapindex>"#;
        let map = parse(xml.as_bytes()).expect("a sitemap");
        assert_eq!(map.kind, Kind::Index);
        assert_eq!(map.locs, ["http://a.test/s1.xml.gz", "http://a.test/s2.xml"]);
        let empty = parse(b"<urlset/>").expect("a sitemap");
        assert!(empty.locs.is_empty() && empty.stopped.is_none());
    }

    #[test]
    fn other_documents_are_not_sitemaps() {
        for body in [
            &b"<html><body><loc>http://a.test/</loc></body></html>"[..],
            b"<rss><channel/></rss>",
            b"plain text",
            b"",
            b"\x1f\x8b garbage that is not gzip",
            b"%PDF-1.7 <urlset>",
        ] {
            assert_eq!(parse(body), None, "{:?}", String::from_utf8_lossy(body));
        }
        assert_eq!(parse(&gzip(b"<feed/>")), None);
        assert_eq!(parse(&gzip(b"tar\0<urlset/>")), None);
        assert!(parse(b"\xef\xbb\xbf\n <?xml version=\"1.0\"?><urlset/>").is_some());
    }

    #[test]
    fn a_broken_sitemap_keeps_what_came_before_the_break() {
        let xml = "<urlset><url><loc>http://a.test/1</loc></url><url><loc>http://a.test/2</lo";
        let map = parse(xml.as_bytes()).expect("a sitemap");
        assert_eq!(map.locs, ["http://a.test/1"]);
        assert!(map.stopped.is_some());
        let bad = "<urlset><url><loc>http://a.test/1</loc></url></wrong><url><loc>http://a.test/2</loc></url></urlset>";
        let map = parse(bad.as_bytes()).expect("a sitemap");
        assert_eq!(map.locs, ["http://a.test/1"]);
        assert!(
            map.stopped.as_deref().is_some_and(|s| s.contains("XML error")),
            "{map:?}"
        );
        // A bad reference loses its own `<loc>` only.
        let entity = "<urlset><url><loc>http://a.test/&bogus;</loc></url><url><loc>http://a.test/3</loc></url></urlset>";
        assert_eq!(
            parse(entity.as_bytes()).expect("a sitemap").locs,
            ["http://a.test/3"]
        );
    }

    #[test]
    fn past_the_bounds_reading_stops_or_counts() {
        // A gzip bomb: a few URLs, then more blank XML than a sitemap may
        // hold, then a URL past the bound.
        let mut xml = String::from("<urlset><url><loc>http://a.test/early</loc></url>");
        xml.push_str(&" ".repeat(MAX_XML_BYTES as usize));
        xml.push_str("<url><loc>http://a.test/late</loc></url></urlset>");
        let bomb = gzip(xml.as_bytes());
        assert!(bomb.len() < 1024 * 1024, "{} bytes", bomb.len());
        let map = parse(&bomb).expect("a sitemap");
        assert_eq!(map.locs, ["http://a.test/early"]);
        assert!(map.stopped.is_some());
        // More URLs than a sitemap may list: the first are kept.
        let mut many = String::from("<urlset>");
        for i in 0..MAX_LOCS + 3 {
            many.push_str(&format!("<url><loc>http://a.test/{i}</loc></url>"));
        }
        many.push_str("</urlset>");
        let map = parse(many.as_bytes()).expect("a sitemap");
        assert_eq!((map.locs.len(), map.dropped), (MAX_LOCS, 3));
        assert_eq!(map.locs.last().map(String::as_str), Some("http://a.test/49999"));
    }
}
