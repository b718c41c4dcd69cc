//! `pagebench`: the CPU a crawler child spends on one page's own work
//! (link and feature extraction, body compression), measured on pages of
//! the realistic synthetic web, so a change to either can be judged in
//! microseconds per page before a whole crawl is run.
//!
//!     cargo run --release -p crawl-tests --bin pagebench [-- --pages 2000 --rounds 5]

use std::time::Instant;
/// The allocator the crawler child runs with, so the figures are its.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::Parser;
use crawl_tests::web::{SyntheticWeb, WebSpec};
use crawler_child::extract::{extract, ExtractOptions};
use store::docs::PageDoc;
use url::Url;

#[derive(Parser, Debug)]
struct Args {
    /// Pages sampled, spread over the web's hosts.
    #[arg(long, default_value_t = 2000)]
    pages: usize,
    /// Passes over the sample; the fastest counts (the others warm caches
    /// or meet a noisy neighbour).
    #[arg(long, default_value_t = 5)]
    rounds: usize,
}

fn main() {
    let args = Args::parse();
    let web = SyntheticWeb::new(WebSpec::realistic(), 80);
    let hosts = web.in_scope_host_names();
    let per_host = (args.pages / hosts.len()).max(1);
    let mut pages = Vec::new();
    'fill: for n in 0..per_host {
        for h in &hosts {
            let r = web.respond(h, &format!("/p/{n}"));
            if r.status == 200 {
                pages.push((
                    Url::parse(&web.url_on(h, &format!("/p/{n}"))).expect("synthetic URL"),
                    r.body,
                ));
            }
            if pages.len() >= args.pages {
                break 'fill;
            }
        }
    }
    let html_bytes: usize = pages.iter().map(|(_, b)| b.len()).sum();
    println!(
        "{} pages, {:.0} B of HTML a page",
        pages.len(),
        html_bytes as f64 / pages.len() as f64
    );
    let options = ExtractOptions {
        skip_nofollow: false,
        robots_agent: "synthcrawler",
        max_links: 0,
        canonical: None,
    };
    let mut links = 0usize;
    let extract_us = best(args.rounds, || {
        links = 0;
        for (url, body) in &pages {
            links += extract(body, url, None, options).links.len();
        }
    }) / pages.len() as f64;
    println!(
        "extract: {extract_us:.1} µs a page ({:.1} links a page)",
        links as f64 / pages.len() as f64
    );
    // The links a page document keeps (`store::page_links`).
    let all_links: Vec<Vec<String>> = pages
        .iter()
        .map(|(url, body)| extract(body, url, None, options).links)
        .collect();
    let mut packed = 0usize;
    let pack_us = best(args.rounds, || {
        packed = 0;
        for l in &all_links {
            packed += store::page_links::pack(l).map_or(0, |b| b.bytes.len());
        }
    }) / pages.len() as f64;
    println!(
        "pack links: {pack_us:.1} µs a page, {:.0} B stored a page",
        packed as f64 / pages.len() as f64
    );
    // As a child does: a dictionary learnt from its first 100 pages (the
    // ones measured are others: the sample is spread over all of them).
    let samples: Vec<&[u8]> = pages
        .iter()
        .step_by((pages.len() / 100).max(1))
        .map(|(_, b)| &b[..])
        .take(100)
        .collect();
    let dict = store::body_dict::BodyDict::train(&samples).ok();
    for (what, dict) in [
        ("no dictionary", None),
        ("a dictionary of 100 pages", dict.as_ref()),
    ] {
        let mut stored = 0usize;
        let us = best(args.rounds, || {
            stored = 0;
            for (_, body) in &pages {
                let mut d = PageDoc::new(String::new(), String::new(), 0, 200, 0);
                store::page_body::store(&mut d, body, Some("UTF-8"), dict);
                stored += d.body.map_or(0, |b| b.bytes.len());
            }
        }) / pages.len() as f64;
        println!(
            "compress, {what}: {us:.1} µs a page, {:.0} B stored a page",
            stored as f64 / pages.len() as f64
        );
    }
}

/// The fastest of `rounds` runs of `f`, in microseconds.
fn best(rounds: usize, mut f: impl FnMut()) -> f64 {
    (0..rounds.max(1))
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1e6
        })
        .fold(f64::INFINITY, f64::min)
}
