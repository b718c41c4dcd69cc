//! A crawl's name, and the collections it owns.
//!
//! Each crawl keeps its seeds, frontier, pages and body dictionaries in
//! collections of its own, named after it (`news-2026__pages`), as Nutch
//! prefixes its tables with the crawl id. So a second crawl on the same
//! database starts from nothing instead of taking the first one's URLs as
//! seen; resuming a crawl id finds exactly its own collections; and a crawl
//! is dropped, exported or sharded as a unit. Robots rules and domains'
//! last-crawled times stay shared: politeness is owed to a site whichever
//! crawl visits it.
//!
//! Collection names are what both mongod and the nx-27017 stand-in accept
//! (letters, digits and `_`, not starting with a digit), so the name is
//! escaped: a character other than a letter or digit, or a leading digit,
//! becomes `_` and its two hex digits (`-` is `_2d`). That keeps the
//! mapping one-to-one, and `__` (which no escape writes) separates the
//! crawl from the collection.

use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CrawlId(String);

/// Why a crawl name was refused.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("crawl id {0:?} is not 1 to {max} letters, digits, '-', '_' or '.'", max = CrawlId::MAX_LEN)]
pub struct BadCrawlId(pub String);

impl CrawlId {
    /// Longest name: its collections' names stay well inside MongoDB's
    /// 255-byte namespace limit even escaped.
    pub const MAX_LEN: usize = 64;
    /// The dispatcher's default `--crawl-id`.
    pub const DEFAULT: &'static str = "crawl";

    pub fn parse(name: &str) -> Result<CrawlId, BadCrawlId> {
        let fits = (1..=Self::MAX_LEN).contains(&name.len())
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
        if fits {
            Ok(CrawlId(name.to_string()))
        } else {
            Err(BadCrawlId(name.chars().take(Self::MAX_LEN + 8).collect()))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The name of this crawl's collection `kind` (`pages`, `frontier`, ...).
    pub fn collection(&self, kind: &str) -> String {
        let mut out = String::with_capacity(self.0.len() * 3 + 2 + kind.len());
        for (i, b) in self.0.bytes().enumerate() {
            if b.is_ascii_alphabetic() || (b.is_ascii_digit() && i > 0) {
                out.push(char::from(b));
            } else {
                out.push_str(&format!("_{b:02x}"));
            }
        }
        out.push_str("__");
        out.push_str(kind);
        out
    }
}

impl Default for CrawlId {
    fn default() -> CrawlId {
        CrawlId(Self::DEFAULT.to_string())
    }
}

impl FromStr for CrawlId {
    type Err = BadCrawlId;
    fn from_str(s: &str) -> Result<CrawlId, BadCrawlId> {
        CrawlId::parse(s)
    }
}

impl fmt::Display for CrawlId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collection_names_are_readable_escaped_and_one_to_one() {
        let c = |s: &str| CrawlId::parse(s).unwrap().collection("pages");
        assert_eq!(c("crawl"), "crawl__pages");
        assert_eq!(c("news-2026"), "news_2d2026__pages");
        assert_eq!(c("a_b"), "a_5fb__pages");
        assert_eq!(c("2026"), "_32026__pages");
        // Names that look alike stay apart.
        let names = ["a-b", "a_b", "a.b", "a_2db", "a2db", "_2d", "-"];
        let all: std::collections::BTreeSet<String> = names.iter().map(|n| c(n)).collect();
        assert_eq!(all.len(), names.len());
        for name in all {
            assert!(
                name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'),
                "{name}"
            );
            assert!(!name.as_bytes()[0].is_ascii_digit(), "{name}");
        }
    }

    #[test]
    fn bad_names_are_refused() {
        for bad in ["", "a b", "a/b", "caf\u{e9}", "$x", &"x".repeat(65)] {
            assert!(CrawlId::parse(bad).is_err(), "{bad:?}");
        }
        assert_eq!("x".repeat(64).parse::<CrawlId>().unwrap().as_str().len(), 64);
    }
}
