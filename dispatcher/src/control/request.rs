//! A control request as it travels between `crawlctl` and the dispatcher:
//! one typed value that `crawlctl` turns into an HTTP request
//! ([`ControlRequest::to_http`]) and the endpoint turns back
//! ([`ControlRequest::from_http`]), so the two cannot disagree on a path,
//! a parameter's name or its unit. The same value is what the crawl's
//! state carries out (`state/steer.rs`): there is no second command type
//! to translate it into.

use std::collections::HashMap;

use super::{Refused, MAX_SEEDS_PER_CALL};

/// Which control endpoint: one per kind of request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    Status,
    Pause,
    Resume,
    Stop,
    Block,
    Unblock,
    Delay,
    Seeds,
}

impl Verb {
    pub const ALL: [Verb; 8] = [
        Verb::Status,
        Verb::Pause,
        Verb::Resume,
        Verb::Stop,
        Verb::Block,
        Verb::Unblock,
        Verb::Delay,
        Verb::Seeds,
    ];

    /// The endpoint's path on the dispatcher's debug address.
    pub fn path(self) -> &'static str {
        match self {
            Verb::Status => "/control/status",
            Verb::Pause => "/control/pause",
            Verb::Resume => "/control/resume",
            Verb::Stop => "/control/stop",
            Verb::Block => "/control/block",
            Verb::Unblock => "/control/unblock",
            Verb::Delay => "/control/delay",
            Verb::Seeds => "/control/seeds",
        }
    }

    /// Read-only (GET); every other verb changes the crawl (POST).
    pub fn reads_only(self) -> bool {
        self == Verb::Status
    }
}

/// When a block ends, as the operator gave it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockEnd {
    /// After this many seconds from when the dispatcher takes the request.
    AfterSecs(u64),
    /// At this Unix time, in milliseconds.
    AtUnixMs(u64),
}

impl BlockEnd {
    /// When the block ends, in Unix ms, for a request taken at `now_ms`.
    pub(crate) fn at_ms(self, now_ms: u64) -> u64 {
        match self {
            BlockEnd::AfterSecs(s) => now_ms.saturating_add(s.saturating_mul(1000)),
            BlockEnd::AtUnixMs(t) => t,
        }
    }
}

/// What an operator asks of a running crawl.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ControlRequest {
    Status,
    Pause,
    Resume,
    /// As SIGTERM: supervisors stop, queued URLs stay for the next run.
    Stop,
    /// Nothing more of `domain` is handed out (its URLs stay queued; those
    /// out and not yet started are recalled), until `end` if given.
    Block {
        domain: String,
        end: Option<BlockEnd>,
        reason: String,
    },
    /// Lets `domain` crawl again (also lifts a circuit breaker's halt).
    Unblock {
        domain: String,
    },
    /// `domain`'s minimum gap between requests; `None`: the crawl's
    /// `--min-delay-ms` again. Robots.txt's Crawl-delay still raises it.
    Delay {
        domain: String,
        ms: Option<u64>,
    },
    /// URLs to crawl as seeds, as if they had been given at start
    /// (depth 0, in scope).
    Seeds(Vec<String>),
}

/// A request as HTTP carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpForm {
    pub verb: Verb,
    pub query: Vec<(&'static str, String)>,
    pub body: String,
}

/// A delay as an operator writes it: a number of milliseconds, or
/// `default` for the crawl's own.
pub fn parse_delay_ms(v: &str) -> Result<Option<u64>, String> {
    match v {
        "default" => Ok(None),
        _ => v
            .parse::<u64>()
            .map(Some)
            .map_err(|_| format!("ms={v:?} is not a whole number (of milliseconds) or default")),
    }
}

/// The seeds of a list: one URL a line; blank lines and what follows a
/// `#` left out.
pub fn seed_lines(text: &str) -> impl Iterator<Item = String> + '_ {
    text.lines()
        .map(|l| l.split('#').next().unwrap_or_default().trim())
        .filter(|l| !l.is_empty())
        .map(str::to_string)
}

impl ControlRequest {
    pub fn verb(&self) -> Verb {
        match self {
            ControlRequest::Status => Verb::Status,
            ControlRequest::Pause => Verb::Pause,
            ControlRequest::Resume => Verb::Resume,
            ControlRequest::Stop => Verb::Stop,
            ControlRequest::Block { .. } => Verb::Block,
            ControlRequest::Unblock { .. } => Verb::Unblock,
            ControlRequest::Delay { .. } => Verb::Delay,
            ControlRequest::Seeds(_) => Verb::Seeds,
        }
    }

    /// The request as `crawlctl` sends it.
    pub fn to_http(&self) -> HttpForm {
        let (query, body) = match self {
            ControlRequest::Status
            | ControlRequest::Pause
            | ControlRequest::Resume
            | ControlRequest::Stop => (Vec::new(), String::new()),
            ControlRequest::Block { domain, end, reason } => {
                let mut q = vec![("domain", domain.clone()), ("reason", reason.clone())];
                match end {
                    Some(BlockEnd::AfterSecs(s)) => q.push(("for_s", s.to_string())),
                    Some(BlockEnd::AtUnixMs(t)) => q.push(("until_ms", t.to_string())),
                    None => {}
                }
                (q, String::new())
            }
            ControlRequest::Unblock { domain } => (vec![("domain", domain.clone())], String::new()),
            ControlRequest::Delay { domain, ms } => {
                let ms = ms.map_or_else(|| "default".to_string(), |m| m.to_string());
                (vec![("domain", domain.clone()), ("ms", ms)], String::new())
            }
            ControlRequest::Seeds(seeds) => (Vec::new(), seeds.iter().map(|s| format!("{s}\n")).collect()),
        };
        HttpForm {
            verb: self.verb(),
            query,
            body,
        }
    }

    /// The request an HTTP request to `verb`'s endpoint carries, or why it
    /// is malformed (a reason a person can act on).
    pub(crate) fn from_http(
        verb: Verb,
        q: &HashMap<String, String>,
        body: &str,
    ) -> Result<ControlRequest, String> {
        let domain = || {
            q.get("domain")
                .filter(|d| !d.is_empty())
                .cloned()
                .ok_or_else(|| "missing ?domain=".to_string())
        };
        let number = |key: &str| -> Result<Option<u64>, String> {
            q.get(key)
                .map(|v| {
                    v.parse::<u64>()
                        .map_err(|_| format!("{key}={v:?} is not a whole number"))
                })
                .transpose()
        };
        Ok(match verb {
            Verb::Status => ControlRequest::Status,
            Verb::Pause => ControlRequest::Pause,
            Verb::Resume => ControlRequest::Resume,
            Verb::Stop => ControlRequest::Stop,
            Verb::Block => {
                let end = match (number("for_s")?, number("until_ms")?) {
                    (Some(_), Some(_)) => return Err("give for_s or until_ms, not both".into()),
                    (Some(s), None) => Some(BlockEnd::AfterSecs(s)),
                    (None, Some(t)) => Some(BlockEnd::AtUnixMs(t)),
                    (None, None) => None,
                };
                ControlRequest::Block {
                    domain: domain()?,
                    end,
                    reason: q.get("reason").cloned().unwrap_or_default(),
                }
            }
            Verb::Unblock => ControlRequest::Unblock { domain: domain()? },
            Verb::Delay => {
                let ms = match q.get("ms") {
                    None => return Err("missing ?ms= (a number of milliseconds, or default)".into()),
                    Some(v) => parse_delay_ms(v)?,
                };
                ControlRequest::Delay {
                    domain: domain()?,
                    ms,
                }
            }
            Verb::Seeds => {
                let seeds: Vec<String> = seed_lines(body).collect();
                if seeds.len() > MAX_SEEDS_PER_CALL {
                    return Err(Refused::TooManySeeds.to_string());
                }
                ControlRequest::Seeds(seeds)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// What crawlctl sends, the endpoint reads back as the same request.
    #[test]
    fn every_request_survives_the_trip_over_http() {
        let all = [
            ControlRequest::Status,
            ControlRequest::Pause,
            ControlRequest::Resume,
            ControlRequest::Stop,
            ControlRequest::Block {
                domain: "a.test".into(),
                end: None,
                reason: String::new(),
            },
            ControlRequest::Block {
                domain: "a.test:8080".into(),
                end: Some(BlockEnd::AfterSecs(90)),
                reason: "asked, by mail & phone".into(),
            },
            ControlRequest::Block {
                domain: "b.test".into(),
                end: Some(BlockEnd::AtUnixMs(1_800_000_000_000)),
                reason: "x".into(),
            },
            ControlRequest::Unblock {
                domain: "a.test".into(),
            },
            ControlRequest::Delay {
                domain: "a.test".into(),
                ms: Some(1500),
            },
            ControlRequest::Delay {
                domain: "a.test".into(),
                ms: None,
            },
            ControlRequest::Seeds(vec!["http://a.test/".into(), "http://b.test/x?y=1".into()]),
        ];
        for r in all {
            let form = r.to_http();
            assert_eq!(form.verb, r.verb());
            let query: HashMap<String, String> = form
                .query
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect();
            assert_eq!(
                ControlRequest::from_http(form.verb, &query, &form.body),
                Ok(r.clone()),
                "{r:?}"
            );
        }
        // Every verb has its own path.
        let paths: std::collections::BTreeSet<_> = Verb::ALL.iter().map(|v| v.path()).collect();
        assert_eq!(paths.len(), Verb::ALL.len());
    }

    #[test]
    fn malformed_requests_say_why_and_blocks_end_when_asked() {
        let now = 1_000_000;
        let block = ControlRequest::from_http(
            Verb::Block,
            &q(&[("domain", "a.test"), ("for_s", "60"), ("reason", "asked")]),
            "",
        );
        let Ok(ControlRequest::Block { domain, end, reason }) = block else {
            panic!("{block:?}")
        };
        assert_eq!((domain.as_str(), reason.as_str()), ("a.test", "asked"));
        assert_eq!(end.map(|e| e.at_ms(now)), Some(now + 60_000));
        assert_eq!(BlockEnd::AtUnixMs(5).at_ms(now), 5);
        assert!(ControlRequest::from_http(
            Verb::Block,
            &q(&[("domain", "a.test"), ("for_s", "1"), ("until_ms", "5")]),
            ""
        )
        .is_err());
        assert!(ControlRequest::from_http(Verb::Block, &q(&[("for_s", "1")]), "")
            .unwrap_err()
            .contains("domain"));
        assert!(
            ControlRequest::from_http(Verb::Delay, &q(&[("domain", "a.test"), ("ms", "-3")]), "")
                .unwrap_err()
                .contains("whole number")
        );
        assert!(
            ControlRequest::from_http(Verb::Delay, &q(&[("domain", "a.test")]), "")
                .unwrap_err()
                .contains("missing ?ms=")
        );
        assert_eq!(
            ControlRequest::from_http(
                Verb::Seeds,
                &q(&[]),
                "# new hosts\nhttp://a.test/\n\n  http://b.test/x # why\n"
            ),
            Ok(ControlRequest::Seeds(vec![
                "http://a.test/".into(),
                "http://b.test/x".into()
            ]))
        );
    }
}
