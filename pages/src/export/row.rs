//! A page's fields as JSON lines and CSV rows carry them (and the WARC
//! metadata record repeats them): one [`Row`] per page or capture.

use serde::Serialize;
use store::docs::PageDoc;

/// A page's fields for JSON lines and CSV (and the WARC metadata record).
#[derive(Debug, Serialize)]
pub(super) struct Row {
    pub(super) url: String,
    pub(super) final_url: Option<String>,
    pub(super) status: i32,
    pub(super) content_type: Option<String>,
    pub(super) fetched_at: Option<String>,
    pub(super) ip: Option<String>,
    pub(super) bytes: i64,
    pub(super) truncated: bool,
    pub(super) domain: String,
    pub(super) depth: i32,
    pub(super) crawl_id: String,
    pub(super) title: Option<String>,
    pub(super) description: Option<String>,
    pub(super) canonical: Option<String>,
    pub(super) lang: Option<String>,
    pub(super) charset: Option<String>,
    pub(super) outlinks: i32,
    pub(super) redirect_to: Option<String>,
    /// The page's robots directives that matter here, comma-joined
    /// (`noindex,nofollow,noarchive`); none when it gave none.
    pub(super) robots: Option<String>,
    /// The SHA-1 of the body as received, as WARC writes it
    /// (`sha1:BASE32`): equal digests, equal bodies.
    pub(super) payload_digest: Option<String>,
    /// `urlset` or `index` when the body was a sitemap.
    pub(super) sitemap: Option<String>,
    /// For a later visit (a crawl that revisits): what it found,
    /// `changed`, `not_modified` (a 304) or `same_payload`; none for a
    /// page's first visit.
    pub(super) capture: Option<String>,
}

impl Row {
    pub(super) const COLUMNS: [&'static str; 22] = [
        "url",
        "final_url",
        "status",
        "content_type",
        "fetched_at",
        "ip",
        "bytes",
        "truncated",
        "domain",
        "depth",
        "crawl_id",
        "title",
        "description",
        "canonical",
        "lang",
        "charset",
        "outlinks",
        "redirect_to",
        "robots",
        "payload_digest",
        "sitemap",
        "capture",
    ];

    pub(super) fn of(d: &PageDoc, crawl_id: &str) -> Row {
        Row {
            url: d.url.clone(),
            final_url: d.final_url.clone(),
            status: d.status,
            content_type: store::exchange::content_type(d),
            fetched_at: d.fetched_at.try_to_rfc3339_string().ok(),
            ip: d.ip.clone(),
            bytes: d.bytes,
            truncated: d.truncated,
            domain: d.domain.clone(),
            depth: d.depth,
            crawl_id: crawl_id.to_string(),
            title: d.title.clone(),
            description: d.description.clone(),
            canonical: d.canonical.clone(),
            lang: d.lang.clone(),
            charset: d.charset.clone(),
            outlinks: d.outlinks.unwrap_or(0),
            redirect_to: d.redirect_to.clone(),
            robots: robots_field(d.robots),
            payload_digest: d.payload_sha1.map(|h| h.warc()),
            sitemap: d.sitemap.map(|k| k.as_str().to_string()),
            capture: None,
        }
    }

    /// One CSV line (RFC 4180: fields with a comma, quote or line break
    /// are quoted, quotes doubled).
    pub(super) fn csv_line(&self) -> String {
        let opt = |v: &Option<String>| v.clone().unwrap_or_default();
        let fields = [
            self.url.clone(),
            opt(&self.final_url),
            self.status.to_string(),
            opt(&self.content_type),
            opt(&self.fetched_at),
            opt(&self.ip),
            self.bytes.to_string(),
            self.truncated.to_string(),
            self.domain.clone(),
            self.depth.to_string(),
            self.crawl_id.clone(),
            opt(&self.title),
            opt(&self.description),
            opt(&self.canonical),
            opt(&self.lang),
            opt(&self.charset),
            self.outlinks.to_string(),
            opt(&self.redirect_to),
            opt(&self.robots),
            opt(&self.payload_digest),
            opt(&self.sitemap),
            opt(&self.capture),
        ];
        let mut line = fields.iter().map(|f| csv_field(f)).collect::<Vec<_>>().join(",");
        line.push('\n');
        line
    }
}

fn robots_field(r: store::docs::RobotsDirectives) -> Option<String> {
    let set: Vec<&str> = [
        (r.noindex, "noindex"),
        (r.nofollow, "nofollow"),
        (r.noarchive, "noarchive"),
    ]
    .into_iter()
    .filter_map(|(on, name)| on.then_some(name))
    .collect();
    (!set.is_empty()).then(|| set.join(","))
}

/// One CSV cell. A cell a spreadsheet would take for a formula (it
/// starts with `=`, `+`, `-`, `@`, a tab or a carriage return: a page's
/// title or URL is anyone's text, e.g. `=HYPERLINK(...)`), and is not a
/// plain number, is written as text: a `'` before it, and quoted.
fn csv_field(f: &str) -> String {
    // A plain number (`-1`) is a number to a spreadsheet, not a formula.
    let formula = f.starts_with(['=', '+', '-', '@', '\t', '\r']) && f.parse::<f64>().is_err();
    if formula {
        format!("\"'{}\"", f.replace('"', "\"\""))
    } else if f.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", f.replace('"', "\"\""))
    } else {
        f.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_fields_with_commas_quotes_or_breaks_are_quoted() {
        assert_eq!(csv_field("plain"), "plain");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field("two\nlines"), "\"two\nlines\"");
        // What a spreadsheet would run is text.
        assert_eq!(csv_field("=1+2"), "\"'=1+2\"");
        assert_eq!(
            csv_field("=HYPERLINK(\"http://x\")"),
            "\"'=HYPERLINK(\"\"http://x\"\")\""
        );
        assert_eq!(csv_field("-1"), "-1");
        for f in ["+1+1", "-1+cmd", "@SUM(A1)", "\tx", "\rx"] {
            assert!(csv_field(f).starts_with("\"'"), "{f:?}");
        }
        assert_eq!(csv_field("a=b"), "a=b");
    }
}
