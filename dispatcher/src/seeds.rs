//! Seeds: from a file (one URL per line, `#` comments) and from the
//! `seeds` collection. File seeds are also written to the collection, so
//! the store records what a crawl started from.

use std::collections::HashSet;
use std::path::Path;

use anyhow::Context;
use bson::doc;
use shared::urls;
use store::docs::SeedDoc;
use store::{decode_each, only_duplicates, Stores};

/// Reads a seeds file; bad lines are reported and skipped, never fatal.
pub(crate) fn read_file(path: &Path) -> anyhow::Result<Vec<String>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading seeds file {}", path.display()))?;
    let mut seeds = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or_default().trim();
        if line.is_empty() {
            continue;
        }
        match urls::parse(line) {
            Ok(u) => seeds.push(u.to_string()),
            Err(why) => tracing::warn!(
                file = %path.display(),
                line = n + 1,
                seed = line,
                why = why.as_str(),
                "skipping a malformed seed"
            ),
        }
    }
    Ok(seeds)
}

/// The first seed on the open web: not on a name reserved for testing and
/// documentation (RFC 2606 and 6761: `.test`, `.example`, `.invalid`,
/// `.localhost`) nor a loopback address. Crawling such a seed with the
/// built-in user agent, which names no one, is refused: a site owner must
/// be able to tell who is crawling and how to reach them.
pub(crate) fn on_the_open_web(seeds: &[String]) -> Option<&str> {
    seeds.iter().map(String::as_str).find(|s| {
        let Ok(url) = urls::parse(s) else { return false };
        match url.host() {
            Some(url::Host::Domain(name)) => {
                let name = name.trim_end_matches('.');
                let reserved = ["test", "example", "invalid", "localhost"];
                let tld = name.rsplit('.').next().unwrap_or(name);
                !reserved.contains(&tld)
            }
            Some(url::Host::Ipv4(ip)) => !ip.is_loopback(),
            Some(url::Host::Ipv6(ip)) => !ip.is_loopback(),
            None => false,
        }
    })
}

/// Stores the seeds not stored yet and returns every stored seed (those
/// stored before first, in the store's order).
///
/// The stored seeds are read first so that a resumed crawl does not write
/// its whole seed list again: each copy the unique index refuses costs the
/// store a failed insert, several times what reading a seed in a batch
/// costs.
pub(crate) async fn sync_with_store(stores: &Stores, seeds: &[String]) -> anyhow::Result<Vec<String>> {
    let mut stored = HashSet::new();
    let mut out = Vec::new();
    decode_each(
        &stores.seeds(),
        doc! {},
        |d: SeedDoc| {
            match urls::parse(&d.url) {
                Ok(u) => out.push(u.to_string()),
                Err(e) => tracing::warn!(seed = %d.url, reason = e.as_str(), "skipping a malformed seed"),
            }
            stored.insert(d.url);
        },
        |d, e| tracing::warn!(document = ?d, error = %e, "skipping a malformed seed document"),
    )
    .await
    .context("reading seeds")?;
    let new = not_stored(seeds, &stored);
    if !new.is_empty() {
        let docs: Vec<SeedDoc> = new.iter().map(|s| SeedDoc { url: s.to_string() }).collect();
        // Duplicates still happen (another dispatcher of the same crawl
        // wrote them meanwhile) and are not errors.
        if let Err(e) = stores.seeds().insert_many(docs).ordered(false).await {
            if !only_duplicates(&e) {
                return Err(e).context("writing seeds");
            }
        }
        out.extend(new.into_iter().map(str::to_string));
    }
    Ok(out)
}

/// The seeds of `seeds` not in `stored`, each once, in order.
fn not_stored<'a>(seeds: &'a [String], stored: &HashSet<String>) -> Vec<&'a str> {
    let mut met = HashSet::new();
    seeds
        .iter()
        .map(String::as_str)
        .filter(|s| !stored.contains(*s) && met.insert(*s))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_seeds_not_stored_are_written_once_each() {
        let seeds: Vec<String> = [
            "http://a.test/",
            "http://b.test/",
            "http://a.test/",
            "http://c.test/",
        ]
        .map(String::from)
        .to_vec();
        let stored: HashSet<String> = ["http://b.test/".to_string()].into();
        assert_eq!(not_stored(&seeds, &stored), ["http://a.test/", "http://c.test/"]);
        assert!(not_stored(&seeds[1..2], &stored).is_empty());
    }

    #[test]
    fn only_reserved_names_and_loopback_are_off_the_open_web() {
        let seeds = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let off = seeds(&[
            "http://site1.test:8080/",
            "http://a.example/",
            "http://x.invalid/",
            "http://localhost/",
            "http://127.0.0.2/",
            "http://[::1]/",
        ]);
        assert_eq!(on_the_open_web(&off), None);
        let mut on = off.clone();
        on.push("https://example.org/".into());
        assert_eq!(on_the_open_web(&on), Some("https://example.org/"));
        assert_eq!(
            on_the_open_web(&seeds(&["http://10.0.0.1/"])),
            Some("http://10.0.0.1/")
        );
        assert_eq!(
            on_the_open_web(&seeds(&["http://test.com/"])),
            Some("http://test.com/")
        );
    }
}
