//! HTML rendering of generated pages: head metadata, links embedded in
//! filler paragraphs, padding up to `page_bytes`.
//!
//! Bodies are built in one pre-sized `String` per request; filler words come
//! from a separate random stream so that the link choices (which the ground
//! truth replays) do not depend on the page size.

use std::fmt::Write as _;

use bytes::Bytes;

use super::links::{host_code, loc_code, nav_len, LinkSpec, PageCtx, Quote, Target};
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

/// Filler paragraphs (sometimes with an image) until `out` is `until` long.
fn pad(out: &mut String, rng: &mut SplitMix, until: usize) {
    while out.len() < until {
        out.push_str("<p>");
        if rng.chance(1, 6) {
            let _ = write!(out, "<img src=\"/img/{}.jpg\" alt=\"", rng.below(500));
            words(rng, out, 3);
            out.push_str("\" width=\"640\" height=\"360\"> ");
        }
        let n = 15 + rng.below(40);
        words(rng, out, n);
        out.push_str(".</p>\n");
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
        if self.spec.is_realistic() {
            return self.render_realistic(host, loc);
        }
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

    /// The size a realistic page is padded to: a triangular draw over
    /// 5/18..32/18 of `page_bytes` less 1 KiB (so that the last filler
    /// paragraph stays below the top), with `page_bytes` as its mean.
    pub(crate) fn realistic_target_bytes(&self, host: HostRef, loc: Loc) -> usize {
        let mean = self.spec.page_bytes;
        let lo = mean * 5 / 18;
        let hi = (mean * 32 / 18).saturating_sub(1024).max(lo);
        let mut rng = SplitMix::new(mix(&[self.spec.seed, 0x33, host_code(host), loc_code(loc)]));
        let half = (hi - lo) / 2;
        lo + rng.below(half + 1) + rng.below(half + 1)
    }

    /// A realistic page: head with a per-host stylesheet and script, a nav
    /// bar, the links spread through the article's paragraphs, filler up to
    /// the page's own size, a footer.
    fn render_realistic(&self, host: HostRef, loc: Loc) -> Bytes {
        let ctx = self.page_ctx(host, loc);
        let target = self.realistic_target_bytes(host, loc);
        let mut filler = SplitMix::new(mix(&[self.spec.seed, 0x55, host_code(host), loc_code(loc)]));
        let mut links = Vec::with_capacity(48);
        self.for_each_link(&ctx, &mut |l| links.push(*l));
        let nav = match loc {
            Loc::Home | Loc::Page(_) | Loc::Private(_) => nav_len(self.pages_of(host)).min(links.len()),
            _ => 0,
        };
        let mut out = String::with_capacity(target + 4096);
        let mut name = String::with_capacity(16);
        self.write_host_name(&mut name, host, false);
        let mut title = String::with_capacity(48);
        title.push_str(&name);
        let _ = match loc {
            Loc::Home => write!(title, " home"),
            Loc::Page(j) => write!(title, " page {j}"),
            Loc::Private(n) => write!(title, " private {n}"),
            _ => write!(title, " resource"),
        };
        out.push_str(
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>",
        );
        out.push_str(&title);
        out.push_str("</title>\n<meta name=\"description\" content=\"");
        words(&mut filler, &mut out, 20);
        out.push_str("\">\n<link rel=\"canonical\" href=\"");
        self.write_origin(&mut out, host, false, false);
        loc.write_path(&mut out);
        out.push_str("\">\n<link rel=\"stylesheet\" href=\"/static/site.css\">\n");
        // The same style and script on every page of a host, as a site template has.
        let hc = host_code(host);
        let mut site = SplitMix::new(mix(&[self.spec.seed, 0x66, hc]));
        out.push_str("<style>\n");
        for class in [
            "body", "header", "nav", "main", "article", "h1", "h2", "p", "a", "footer", ".note", ".card",
        ] {
            let _ = writeln!(
                out,
                "{class} {{ margin: {}px {}px; padding: {}px; color: #{:06x}; background: #{:06x}; \
                 font: {}px/1.{} sans-serif; border-radius: {}px; }}",
                site.below(24),
                site.below(32),
                site.below(16),
                site.below(1 << 24),
                site.below(1 << 24),
                12 + site.below(10),
                3 + site.below(6),
                site.below(8)
            );
        }
        out.push_str("</style>\n<script>\nwindow.dataLayer = window.dataLayer || [];\n");
        let _ = writeln!(
            out,
            "function track(e) {{ window.dataLayer.push({{event: e, site: \"{name}\", v: {}}}); }}\n\
             document.addEventListener(\"DOMContentLoaded\", function () {{ track(\"view\"); }});",
            site.below(1000)
        );
        out.push_str("</script>\n</head>\n<body>\n<header>\n<nav>\n<ul>\n");
        for l in &links[..nav] {
            out.push_str("<li>");
            self.write_anchor(&mut out, &ctx, l, &mut filler);
            out.push_str("</li>\n");
        }
        out.push_str("</ul>\n</nav>\n</header>\n<main>\n<article>\n<h1>");
        out.push_str(&title);
        out.push_str("</h1>\n");

        const TAIL: &str = "</article>\n</main>\n<footer>\n<p class=\"note\">";
        const END: &str = "</p>\n</footer>\n</body>\n</html>\n";
        let footer_len = TAIL.len() + END.len() + name.len() + 64;
        let body = &links[nav..];
        let start = out.len();
        let room = target.saturating_sub(start + footer_len);
        for (i, l) in body.iter().enumerate() {
            if i % 4 == 0 {
                let _ = writeln!(out, "<h2 id=\"sec{}\">Section {}</h2>", i / 4 % 4, i / 4 + 1);
            }
            out.push_str("<p>");
            let n = 6 + filler.below(14);
            words(&mut filler, &mut out, n);
            out.push(' ');
            self.write_anchor(&mut out, &ctx, l, &mut filler);
            out.push(' ');
            let n = 3 + filler.below(10);
            words(&mut filler, &mut out, n);
            out.push_str(".</p>\n");
            // Spread the filler between the links.
            let until = start + room * (i + 1) / (body.len() + 1);
            pad(&mut out, &mut filler, until);
        }
        pad(&mut out, &mut filler, target.saturating_sub(footer_len));
        out.push_str(TAIL);
        let _ = write!(out, "&copy; 2026 {name} &middot; ");
        words(&mut filler, &mut out, 4);
        out.push_str(END);
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
