//! The fast HTML scanner finds exactly what `lol_html` finds: links (in
//! order, resolved), title, description, canonical and language, on the
//! realistic web's pages, on the hostile web's links and on generated tag
//! soup. Where the scanner gives a page to `lol_html` it is not compared,
//! but it must take (nearly) every realistic page itself, or it is no
//! faster.

use crawl_tests::web::{hostile, SyntheticWeb, WebSpec};
use crawler_child::extract::{extract, extract_fast, extract_reference, ExtractOptions};
use url::Url;

fn options(skip_nofollow: bool) -> ExtractOptions<'static> {
    ExtractOptions {
        skip_nofollow,
        robots_agent: "synthcrawler",
        max_links: 0,
        canonical: None,
    }
}

/// Compares both extractors on `html`; returns whether the scanner took it.
fn agree(html: &[u8], page: &Url, opts: ExtractOptions<'_>) -> bool {
    let reference = extract_reference(html, page, None, opts);
    assert_eq!(extract(html, page, None, opts), {
        // `extract` is the scanner, else `lol_html`: the same either way.
        reference.clone()
    });
    match extract_fast(html, page, opts) {
        Some(fast) => {
            assert_eq!(
                fast,
                reference,
                "scanner and lol_html disagree on:\n{}",
                String::from_utf8_lossy(html)
            );
            true
        }
        None => false,
    }
}

#[test]
fn the_scanner_takes_every_realistic_page_and_agrees_with_lol_html() {
    let web = SyntheticWeb::new(WebSpec::realistic(), 8080);
    let hosts = web.in_scope_host_names();
    let (mut pages, mut fast, mut links) = (0, 0, 0);
    for n in [0, 1, 7, 60, 199] {
        for host in hosts.iter().take(60) {
            let path = if n == 0 {
                "/".to_string()
            } else {
                format!("/p/{n}")
            };
            let r = web.respond(host, &path);
            if r.status != 200 {
                continue;
            }
            let page = Url::parse(&web.url_on(host, &path)).unwrap();
            pages += 1;
            fast += agree(&r.body, &page, options(false)) as usize;
            links += extract(&r.body, &page, None, options(false)).links.len();
        }
    }
    assert!(pages > 250, "{pages} pages");
    assert_eq!(fast, pages, "the scanner gave realistic pages to lol_html");
    assert!(links > pages * 10, "{links} links on {pages} pages");
}

/// Pieces of markup, well- and ill-formed, that generated pages are made of.
const PIECES: &[&str] = &[
    "<a href=\"/x\">",
    "<a href='/y?a=1&amp;b=2'>",
    "<a href=/z>",
    "<A HREF=\"/up\">",
    "<a href>",
    "<a  href = \"/sp\" >",
    "<a href=\"/dup\" href=\"/second\">",
    "<a rel=\"nofollow\" href=\"/nf\">",
    "<a rel=\"x NoFollow\" href=/nf2>",
    "<area href=../d>",
    "<a/href=/slash>",
    "<a href=\"/q\"x=1>",
    "<a href=/gt>text</a>",
    "<a title='>' href=/after-gt>",
    "<a href=\"/multi\nline\">",
    "</a>",
    "<a href=\"&#47;num\">",
    "<a href=\"/&ampx=1&amp=2\">",
    "<a href=\"javascript:void(0)\">",
    "<a href=\"mailto:x@y\">",
    "<a href=\"//other.test/s\">",
    "<a href=\"http://[::1\">",
    "<base href=\"http://cdn.test/b/\">",
    "<base href=/root/>",
    "<html lang=\" de \">",
    "<html>",
    "<meta name=description content=\" About &amp; us \">",
    "<meta name=\"DESCRIPTION\" content=x>",
    "<meta content=\"no name\">",
    "<link rel=\"canonical\" href=\"/canon\">",
    "<link rel=x href=/no>",
    "<title>",
    "</title>",
    "<title>Q&amp;A  here</title>",
    "<TITLE>up</TiTlE>",
    "</title x=\">\">",
    "<script>",
    "</script>",
    "<script>if (a<b) x='<a href=/in-script>';</script>",
    "<script>document.write('<!--<script>')</script>",
    "<style>a{x:'</a>'}</style>",
    "<textarea><a href=/ta></textarea>",
    "<iframe><a href=/if></iframe>",
    "<xmp><a href=/xmp></xmp>",
    "<noscript><a href=/ns></noscript>",
    "<svg><a href=/svg></a><title>t</title></svg>",
    "<math><a href=/m></math>",
    "<plaintext>",
    "<!-- <a href=/c> -->",
    "<!---->",
    "<!-->",
    "<!--->",
    "<!-- x --!> <a href=/bang>",
    "<!-- a --- b -->",
    "<!--",
    "-->",
    "<!DOCTYPE html>",
    "<!doctype html public \"x>y\">",
    "<![CDATA[<a href=/cd>]]>",
    "<?php echo '<a href=/php>'; ?>",
    "</ x>",
    "</>",
    "</",
    "<",
    "<<",
    ">",
    "<3",
    "a < b",
    "&",
    "&amp;",
    "text ",
    "\n",
    "\r\n",
    "\t",
    "é",
    "日本",
    "<p class=x>",
    "</p>",
    "<div id=\"a\" data-x='y'>",
    "<img src=x alt=\"a > b\">",
    "<br/>",
    "<a href=\"/unterminated",
    "<a href='",
    "<a href=",
    "<a ",
    "<a href=\"/cr\rx\">",
    "<title>cr\r</title>",
    "\0",
    "<a href=\"/nul\0\">",
];

#[test]
fn generated_tag_soup_agrees_where_the_scanner_takes_it() {
    let page = Url::parse("http://site.test:8080/dir/page").unwrap();
    let bad = hostile::bad_links();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move |n: usize| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % n as u64) as usize
    };
    let (mut fast, total) = (0, 6000);
    for i in 0..total {
        let mut html = String::new();
        for _ in 0..1 + next(24) {
            if next(8) == 0 {
                html.push_str(&format!("<a href=\"{}\">", bad[next(bad.len())]));
            } else {
                html.push_str(PIECES[next(PIECES.len())]);
            }
        }
        // Cut some pages anywhere, as a server that stops sending does.
        if next(4) == 0 {
            let mut cut = next(html.len() + 1);
            while !html.is_char_boundary(cut) {
                cut -= 1;
            }
            html.truncate(cut);
        }
        fast += agree(html.as_bytes(), &page, options(i % 2 == 0)) as usize;
    }
    // Most generated pages hold a piece the scanner leaves to lol_html;
    // enough must remain for the comparison to mean something.
    assert!(fast > total / 5, "the scanner took only {fast} of {total} pages");
}
