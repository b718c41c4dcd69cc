//! The operator's allow and deny rules on URLs: regular expressions
//! (`--allow-url`, `--deny-url`) and SURT prefixes (`--allow-surt`,
//! `--deny-surt`), as Heritrix's `MatchesRegexDecideRule` and
//! `SurtPrefixedDecideRule` do.
//!
//! A URL is refused when a deny rule matches it, and, when there are
//! allow rules, when none matches it: allow rules narrow the crawl within
//! its `--scope`, they never widen it. Each refusal is counted by rule.
//!
//! SURT (Sort-friendly URI Reordering Transform) writes a host's labels
//! in reverse, so a prefix names a site and everything under it:
//! `http://(com,example,` is example.com and all its subdomains over
//! http, `http://(com,example,www,)/forum/` one directory of one host.
//! A prefix that starts with `(` applies to both schemes.

use regex::Regex;
use url::{Host, Url};

/// One rule, as the operator wrote it.
#[derive(Debug)]
enum Pattern {
    Regex(Regex),
    Surt(String),
}

/// A rule and its label (how it is counted: `deny-url:^https?://x`).
#[derive(Debug)]
struct Rule {
    label: String,
    pattern: Pattern,
}

impl Rule {
    fn matches(&self, url: &str, surt: &str) -> bool {
        match &self.pattern {
            Pattern::Regex(r) => r.is_match(url),
            Pattern::Surt(prefix) if prefix.starts_with('(') => surt
                .split_once("://")
                .is_some_and(|(_, rest)| rest.starts_with(prefix.as_str())),
            Pattern::Surt(prefix) => surt.starts_with(prefix.as_str()),
        }
    }
}

/// What the rules say of a URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RuleVerdict {
    Pass,
    /// Deny rule number `n` matched.
    Denied(usize),
    /// There are allow rules and none matched.
    NotAllowed,
}

/// The operator's rules.
#[derive(Debug, Default)]
pub(crate) struct UrlRules {
    allow: Vec<Rule>,
    deny: Vec<Rule>,
    surts: bool,
}

/// The rules as given on the command line or in the config file.
#[derive(Debug, Clone, Default)]
pub(crate) struct RuleSpecs {
    pub(crate) allow_url: Vec<String>,
    pub(crate) deny_url: Vec<String>,
    pub(crate) allow_surt: Vec<String>,
    pub(crate) deny_surt: Vec<String>,
}

impl UrlRules {
    /// Compiles the rules; a bad regular expression or an empty SURT
    /// prefix is an error naming it.
    pub(crate) fn new(specs: &RuleSpecs) -> Result<UrlRules, String> {
        let regexes = |flag: &str, list: &[String]| -> Result<Vec<Rule>, String> {
            list.iter()
                .map(|p| {
                    let r = Regex::new(p).map_err(|e| format!("--{flag} {p:?}: {e}"))?;
                    Ok(Rule {
                        label: format!("{flag}:{p}"),
                        pattern: Pattern::Regex(r),
                    })
                })
                .collect()
        };
        let surts = |flag: &str, list: &[String]| -> Result<Vec<Rule>, String> {
            list.iter()
                .map(|p| {
                    let prefix = p.trim().to_ascii_lowercase();
                    if prefix.is_empty() {
                        return Err(format!("--{flag}: an empty SURT prefix would match every URL"));
                    }
                    Ok(Rule {
                        label: format!("{flag}:{p}"),
                        pattern: Pattern::Surt(prefix),
                    })
                })
                .collect()
        };
        let mut allow = regexes("allow-url", &specs.allow_url)?;
        allow.extend(surts("allow-surt", &specs.allow_surt)?);
        let mut deny = regexes("deny-url", &specs.deny_url)?;
        deny.extend(surts("deny-surt", &specs.deny_surt)?);
        let surts = !specs.allow_surt.is_empty() || !specs.deny_surt.is_empty();
        Ok(UrlRules { allow, deny, surts })
    }

    /// Whether there are no rules at all (the common case: nothing to do).
    pub(crate) fn is_empty(&self) -> bool {
        self.allow.is_empty() && self.deny.is_empty()
    }

    pub(crate) fn judge(&self, url: &Url) -> RuleVerdict {
        if self.is_empty() {
            return RuleVerdict::Pass;
        }
        let surt = if self.surts { surt(url) } else { String::new() };
        if let Some(i) = self.deny.iter().position(|r| r.matches(url.as_str(), &surt)) {
            return RuleVerdict::Denied(i);
        }
        if !self.allow.is_empty() && !self.allow.iter().any(|r| r.matches(url.as_str(), &surt)) {
            return RuleVerdict::NotAllowed;
        }
        RuleVerdict::Pass
    }

    /// The label of deny rule `i` (`deny-url:PATTERN` or `deny-surt:PREFIX`).
    pub(crate) fn deny_label(&self, i: usize) -> &str {
        self.deny.get(i).map_or("deny:?", |r| r.label.as_str())
    }
}

/// The SURT form of a URL: `https://(uk,co,example,www,:8443)/path?query`;
/// an address's host is not reversed (`http://(127.0.0.1,)/`).
pub(crate) fn surt(url: &Url) -> String {
    let mut s = String::with_capacity(url.as_str().len() + 4);
    s.push_str(url.scheme());
    s.push_str("://(");
    match url.host() {
        Some(Host::Domain(name)) => {
            for label in name.rsplit('.').filter(|l| !l.is_empty()) {
                s.push_str(label);
                s.push(',');
            }
        }
        Some(_) => {
            s.push_str(url.host_str().unwrap_or_default());
            s.push(',');
        }
        None => {}
    }
    if let Some(port) = url.port() {
        s.push(':');
        s.push_str(&port.to_string());
    }
    s.push(')');
    s.push_str(url.path());
    if let Some(q) = url.query() {
        s.push('?');
        s.push_str(q);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    fn rules(allow_url: &[&str], deny_url: &[&str], allow_surt: &[&str], deny_surt: &[&str]) -> UrlRules {
        let v = |l: &[&str]| l.iter().map(|s| s.to_string()).collect();
        UrlRules::new(&RuleSpecs {
            allow_url: v(allow_url),
            deny_url: v(deny_url),
            allow_surt: v(allow_surt),
            deny_surt: v(deny_surt),
        })
        .unwrap()
    }

    #[test]
    fn surt_forms() {
        assert_eq!(
            surt(&u("http://www.Example.com/a?b=1")),
            "http://(com,example,www,)/a?b=1"
        );
        assert_eq!(
            surt(&u("https://example.co.uk:8443/")),
            "https://(uk,co,example,:8443)/"
        );
        assert_eq!(surt(&u("http://127.0.0.1:81/x")), "http://(127.0.0.1,:81)/x");
    }

    #[test]
    fn deny_rules_refuse_and_say_which() {
        let r = rules(
            &[],
            &[r"/calendar\b", r"\.pdf$"],
            &[],
            &["http://(com,example,ads,"],
        );
        assert_eq!(r.judge(&u("http://a.test/calendar?m=1")), RuleVerdict::Denied(0));
        assert_eq!(r.judge(&u("http://a.test/x.pdf")), RuleVerdict::Denied(1));
        assert_eq!(r.judge(&u("http://ads.example.com/x")), RuleVerdict::Denied(2));
        assert_eq!(r.judge(&u("http://x.ads.example.com/x")), RuleVerdict::Denied(2));
        assert_eq!(r.judge(&u("https://ads.example.com/x")), RuleVerdict::Pass);
        assert_eq!(r.judge(&u("http://www.example.com/x")), RuleVerdict::Pass);
        assert_eq!(r.deny_label(2), "deny-surt:http://(com,example,ads,");
    }

    #[test]
    fn allow_rules_narrow() {
        let r = rules(&[r"^https?://[^/]+/blog/"], &[], &["(org,example,"], &[]);
        assert_eq!(r.judge(&u("http://a.test/blog/1")), RuleVerdict::Pass);
        assert_eq!(r.judge(&u("https://www.example.org/anything")), RuleVerdict::Pass);
        assert_eq!(r.judge(&u("http://a.test/shop/1")), RuleVerdict::NotAllowed);
        // Deny wins over allow.
        let r = rules(&[r"/blog/"], &[r"/blog/drafts/"], &[], &[]);
        assert_eq!(r.judge(&u("http://a.test/blog/drafts/1")), RuleVerdict::Denied(0));
    }

    #[test]
    fn bad_rules_are_errors() {
        let bad = UrlRules::new(&RuleSpecs {
            deny_url: vec!["(unclosed".into()],
            ..RuleSpecs::default()
        });
        assert!(bad.unwrap_err().contains("--deny-url \"(unclosed\""));
        let empty = UrlRules::new(&RuleSpecs {
            allow_surt: vec!["  ".into()],
            ..RuleSpecs::default()
        });
        assert!(empty.unwrap_err().contains("empty SURT"));
        assert!(rules(&[], &[], &[], &[]).is_empty());
    }
}
