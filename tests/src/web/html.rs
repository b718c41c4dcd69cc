//! HTML rendering of generated pages: head metadata, links embedded in
//! filler paragraphs, padding up to `page_bytes`.
//!
//! Bodies are built in one pre-sized `String` per request; filler words come
//! from a separate random stream so that the link choices (which the ground
//! truth replays) do not depend on the page size.

use std::fmt::Write as _;

use bytes::Bytes;

use super::links::{host_code, loc_code, LinkSpec, PageCtx, Quote, Target};
use super::model::{HostRef, Loc};
use super::rng::{mix, SplitMix};
use super::SyntheticWeb;

/// Filler vocabulary; one non-ASCII word checks that the charset is honoured.
const WORDS: &[&str] = &[
    "crawler",
    "frontier",
    "politeness",
    "robots",
    "delay",
    "fetch",
    "parse",
    "anchor",
    "link",
    "graph",
    "depth",
    "breadth",
    "queue",
    "host",
    "domain",
    "scope",
    "canonical",
    "redirect",
    "status",
    "header",
    "body",
    "page",
    "index",
    "store",
    "record",
    "synthetic",
    "web",
    "seed",
    "the",
    "a",
    "of",
    "and",
    "to",
    "in",
    "is",
    "for",
    "with",
    "on",
    "naïve",
    "quick",
    "brown",
    "lazy",
    "river",
    "mountain",
    "signal",
    "pattern",
    "window",
    "garden",
    "lantern",
    "harbor",
    "meadow",
    "copper",
    "silver",
    "orbit",
    "cascade",
    "ember",
    "quartz",
    "willow",
    "sparrow",
    "tunnel",
    "beacon",
    "compass",
    "ledger",
    "thistle",
];

/// Appends `n` random words separated by spaces.
fn words(rng: &mut SplitMix, out: &mut String, n: usize) {
    for i in 0..n {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(WORDS[rng.below(WORDS.len())]);
    }
}

/// Body of every 404 and of unknown hosts.
pub(crate) const NOT_FOUND_HTML: &str =
    "<!DOCTYPE html>\n<html lang=\"en\"><head><title>404 Not Found</title></head>\
     <body><h1>404 Not Found</h1></body></html>\n";

/// Body sent with redirects (crawlers ignore it).
pub(crate) const MOVED_HTML: &str =
    "<!DOCTYPE html>\n<html lang=\"en\"><head><title>Moved</title></head><body>Moved</body></html>\n";

impl SyntheticWeb {
    /// Renders the HTML of a page that answers 200 (`/`, `/p/j`, `/private/n`).
    pub(crate) fn render_page(&self, host: HostRef, loc: Loc) -> Bytes {
        let ctx = self.page_ctx(host, loc);
        let mut filler = SplitMix::new(mix(&[self.spec.seed, 0x22, host_code(host), loc_code(loc)]));
        let mut out = String::with_capacity(self.spec.page_bytes + 2048);
        let mut title = String::with_capacity(48);
        self.write_host_name(&mut title, host, false);
        let _ = match loc {
            Loc::Home => write!(title, " home"),
            Loc::Page(j) => write!(title, " page {j}"),
            Loc::Private(n) => write!(title, " private {n}"),
            _ => write!(title, " resource"),
        };

        out.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>");
        out.push_str(&title);
        out.push_str("</title>\n<meta name=\"description\" content=\"Synthetic ");
        out.push_str(&title);
        out.push_str(": ");
        words(&mut filler, &mut out, 12);
        out.push_str("\">\n<link rel=\"canonical\" href=\"");
        self.write_origin(&mut out, host, false, false);
        loc.write_path(&mut out);
        out.push_str("\">\n");
        if let Some(base) = ctx.base {
            let _ = writeln!(out, "<base href=\"{base}\">");
        }
        out.push_str("</head>\n<body>\n<h1>");
        out.push_str(&title);
        out.push_str("</h1>\n");
        if let Loc::Page(_) = loc {
            // An HTML comment is not a link: a regex-based extractor would fetch this 404.
            let _ = writeln!(
                out,
                "<!-- old navigation: <a href=\"/commented/{}\">archive</a> -->",
                filler.below(1000)
            );
        }

        let mut count = 0usize;
        self.for_each_link(&ctx, &mut |l| {
            if count.is_multiple_of(4) {
                let _ = writeln!(out, "<h2 id=\"sec{}\">Section {}</h2>", count / 4 % 4, count / 4);
            }
            count += 1;
            out.push_str("<p>");
            let n = 6 + filler.below(12);
            words(&mut filler, &mut out, n);
            out.push(' ');
            self.write_anchor(&mut out, &ctx, l, &mut filler);
            out.push(' ');
            let n = 3 + filler.below(8);
            words(&mut filler, &mut out, n);
            out.push_str(".</p>\n");
        });

        const TAIL: &str = "</body>\n</html>\n";
        while out.len() + TAIL.len() < self.spec.page_bytes {
            out.push_str("<p>");
            let n = 20 + filler.below(40);
            words(&mut filler, &mut out, n);
            out.push_str(".</p>\n");
        }
        out.push_str(TAIL);
        Bytes::from(out)
    }

    /// Writes one `<a>` element with the quoting/casing the spec asks for.
    fn write_anchor(&self, out: &mut String, ctx: &PageCtx, l: &LinkSpec, filler: &mut SplitMix) {
        let (open, attr, close) = if l.upper_tag {
            ("<A", "HREF", "</A>")
        } else {
            ("<a", "href", "</a>")
        };
        out.push_str(open);
        if l.nofollow {
            out.push_str(" rel=\"nofollow\"");
        }
        out.push(' ');
        out.push_str(attr);
        out.push('=');
        let q = match l.quote {
            Quote::Double => "\"",
            Quote::Single => "'",
            Quote::Bare => "",
        };
        out.push_str(q);
        self.write_href(out, ctx, l);
        out.push_str(q);
        out.push('>');
        match l.target {
            Target::Mailto(_) => out.push_str("mail us"),
            Target::Javascript => out.push_str("open menu"),
            Target::Url(..) => {
                let n = 1 + filler.below(3);
                words(filler, out, n);
            }
        }
        out.push_str(close);
    }
}
