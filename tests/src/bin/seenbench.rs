//! `seenbench`: the dispatcher's seen-set (`dispatcher::hash_set48`) against
//! the `HashSet<u64>` it replaced, at the sizes of a big crawl: memory a
//! URL (what the process gained, at its peak and at the end) and the time
//! of an insert and of a look-up. One set a run, so the figures are that
//! set's alone.
//!
//!     cargo run --release -p crawl-tests --bin seenbench -- --urls 100000000 --set hash48
//!     cargo run --release -p crawl-tests --bin seenbench -- --urls 100000000 --set std

use std::collections::HashSet;
use std::time::Instant;

use clap::{Parser, ValueEnum};
use dispatcher::hash_set48::HashSet48;

/// The allocator the dispatcher runs with, so the figures are its.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Set {
    /// `dispatcher::hash_set48::HashSet48`.
    Hash48,
    /// `HashSet<u64, ahash::RandomState>`, the seen-set before it.
    Std,
}

#[derive(Parser, Debug)]
#[command(about = "Times and weighs the dispatcher's seen-set")]
struct Args {
    /// Distinct hashes inserted.
    #[arg(long, default_value_t = 10_000_000)]
    urls: usize,
    #[arg(long, value_enum, default_value_t = Set::Hash48)]
    set: Set,
    /// Look-ups timed, half of hashes inserted, half of others.
    #[arg(long, default_value_t = 2_000_000)]
    lookups: usize,
}

trait Seen {
    fn insert(&mut self, h: u64) -> bool;
    fn contains(&self, h: u64) -> bool;
}

impl Seen for HashSet48 {
    fn insert(&mut self, h: u64) -> bool {
        HashSet48::insert(self, h)
    }
    fn contains(&self, h: u64) -> bool {
        HashSet48::contains(self, h)
    }
}

impl Seen for HashSet<u64, ahash::RandomState> {
    fn insert(&mut self, h: u64) -> bool {
        HashSet::insert(self, h)
    }
    fn contains(&self, h: u64) -> bool {
        HashSet::contains(self, &h)
    }
}

/// The `n`th of a stream of spread-out hashes (splitmix64), so that a
/// hash inserted can be named again without keeping it.
fn hash(n: u64) -> u64 {
    let mut z = n.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// `VmRSS` and `VmHWM` (the peak) of this process, in bytes.
fn memory() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map_or(0, |kib| kib * 1024)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn run(set: &mut dyn Seen, args: &Args) -> serde_json::Value {
    let urls = args.urls as u64;
    let (rss0, _) = memory();
    let start = Instant::now();
    let mut new = 0u64;
    for n in 0..urls {
        new += u64::from(set.insert(hash(n)));
    }
    let insert_s = start.elapsed().as_secs_f64();
    let (rss, peak) = memory();
    let lookups = args.lookups as u64;
    let start = Instant::now();
    let mut found = 0u64;
    for i in 0..lookups {
        // Alternately one inserted and one not (past the inserted range).
        let n = if i % 2 == 0 {
            i.wrapping_mul(7_919) % urls.max(1)
        } else {
            urls + i
        };
        found += u64::from(set.contains(hash(n)));
    }
    let lookup_s = start.elapsed().as_secs_f64();
    let per_url = |b: u64| (b.saturating_sub(rss0) as f64 / urls.max(1) as f64 * 10.0).round() / 10.0;
    serde_json::json!({
        "urls": urls,
        "distinct": new,
        "insert_ns": (insert_s * 1e9 / urls.max(1) as f64).round(),
        "lookup_ns": (lookup_s * 1e9 / lookups.max(1) as f64).round(),
        "found": found,
        "bytes_per_url": per_url(rss),
        "peak_bytes_per_url": per_url(peak),
    })
}

fn main() {
    // As the dispatcher, which holds the seen-set: mimalloc's own purge
    // delay (see `shared::alloc`).
    let args = Args::parse();
    let mut result = match args.set {
        Set::Hash48 => run(&mut HashSet48::new(), &args),
        Set::Std => run(&mut HashSet::with_hasher(ahash::RandomState::new()), &args),
    };
    result["set"] = serde_json::json!(format!("{:?}", args.set));
    println!("{result}");
}
