//! Where the dispatcher's settings come from: the command line, an
//! environment variable for every flag, and `--config crawl.toml`, a file
//! holding any of them under the flags' own names:
//!
//! ```toml
//! seeds = ["seeds.txt"]
//! crawl-id = "news-2026-11"
//! min-delay-ms = 2000
//! scope = "any"
//! skip-nofollow = true
//! ```
//!
//! A setting given in more than one place is taken from the first of: the
//! command line, the environment (`CRAWLER_` and the flag's name in
//! capitals, `-` as `_`: `CRAWLER_MIN_DELAY_MS`), the file, the default.
//! (Flags that take several values, `seeds` and `unhalt`, add up instead.)
//! An unknown name in the file is an error, not a silent default.
//!
//! The effective settings, wherever each came from, go into the summary
//! (`summary.json`), with the store URIs' passwords and the debug token
//! hidden.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use clap::{ArgAction, CommandFactory, FromArgMatches};
use serde_json::Value;

use link::cluster_auth::ClusterKey;

use crate::admission;

mod flags;

pub use flags::Flags;

/// The file's path may also come from here.
pub(crate) const CONFIG_ENV: &str = "CRAWLER_CONFIG";

/// Settings whose values are secrets or may hold one: shown redacted.
const SECRET_URIS: [&str; 2] = ["mongo-uri", "robots-uri"];
const SECRET_VALUES: [&str; 1] = ["debug-token"];

/// The environment variable of flag `--long`.
pub(crate) fn env_name(long: &str) -> String {
    format!("CRAWLER_{}", long.to_ascii_uppercase().replace('-', "_"))
}

/// The dispatcher's command: its flags, each with an environment variable
/// (those that declare none get [`env_name`]), a repeated flag replacing
/// the earlier value (so the command line overrides the file).
pub(crate) fn command() -> clap::Command {
    Flags::command().args_override_self(true).mut_args(|a| {
        let wants_env = a.get_env().is_none()
            && a.get_long().is_some_and(|l| l != "help" && l != "version")
            && !matches!(a.get_action(), ArgAction::Help | ArgAction::Version);
        match a.get_long() {
            Some(long) if wants_env => {
                let env = env_name(long);
                a.env(env)
            }
            _ => a,
        }
    })
}

/// Everything a crawl runs with: its flags, the effective settings (for
/// the summary) and the cluster secret supervisors must prove.
pub struct Config {
    pub flags: Flags,
    pub settings: Value,
    pub key: ClusterKey,
}

/// Parsed arguments and the effective settings, for the summary.
pub(crate) struct Parsed {
    pub(crate) args: Flags,
    pub(crate) settings: Value,
}

/// The config of the command line `argv` (with its `--config` file), the
/// cluster secret from `secret` (the environment variable's value) if no
/// file names it. Bad rules are refused here, before anything is started
/// or stored. Every refusal is returned, never an exit: a bad flag, or
/// `--help`, is a `clap::Error` inside the error (see `main.rs`).
pub fn load(argv: Vec<OsString>, secret: Option<OsString>) -> anyhow::Result<Config> {
    let Parsed {
        args: flags,
        settings,
    } = parse(argv)?;
    admission::Admission::new(&flags.admission()).map_err(anyhow::Error::msg)?;
    flags
        .canonical()
        .compile()
        .map_err(|e| anyhow::anyhow!("--strip-params: {e}"))?;
    if let Some(revisit) = flags.revisit() {
        revisit.check().map_err(anyhow::Error::msg)?;
    }
    let key = flags.cluster.key(secret)?;
    Ok(Config { flags, settings, key })
}

/// Parses `argv` with the config file (if one is named) read in.
pub(crate) fn parse(argv: Vec<OsString>) -> anyhow::Result<Parsed> {
    let cmd = command();
    let path = config_path(&argv).or_else(|| std::env::var_os(CONFIG_ENV).map(PathBuf::from));
    let mut full: Vec<OsString> = argv.first().cloned().into_iter().collect();
    if let Some(path) = &path {
        full.extend(file_args(&cmd, path)?);
    }
    full.extend(argv.into_iter().skip(1));
    // A bad flag (and `--help`, `--version`) is clap's error, returned as
    // is: the binary prints it and exits as clap does (`main.rs`), a test
    // or an in-process caller gets it.
    let matches = cmd.clone().try_get_matches_from(full)?;
    let args = Flags::from_arg_matches(&matches)?;
    Ok(Parsed {
        settings: effective(&cmd, &matches, path.as_deref()),
        args,
    })
}

/// `--config PATH` or `--config=PATH` on the command line.
fn config_path(argv: &[OsString]) -> Option<PathBuf> {
    let mut it = argv.iter().skip(1);
    while let Some(a) = it.next() {
        let a = a.to_string_lossy();
        if a == "--config" {
            return it.next().map(PathBuf::from);
        }
        if let Some(p) = a.strip_prefix("--config=") {
            return Some(PathBuf::from(p));
        }
    }
    None
}

/// The file's settings as command-line arguments, leaving out those the
/// environment sets (it comes first).
fn file_args(cmd: &clap::Command, path: &Path) -> anyhow::Result<Vec<OsString>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let table: toml::Table = text
        .parse()
        .with_context(|| format!("{}: not a TOML file", path.display()))?;
    let mut out = Vec::new();
    for (key, value) in &table {
        let long = key.replace('_', "-");
        let Some(arg) = cmd.get_arguments().find(|a| a.get_long() == Some(long.as_str())) else {
            bail!(
                "{}: unknown setting {key:?} (settings have the names of the dispatcher's flags; see --help)",
                path.display()
            );
        };
        if long == "config" {
            bail!("{}: a config file cannot name another", path.display());
        }
        if std::env::var_os(env_name(&long)).is_some()
            || arg.get_env().is_some_and(|e| std::env::var_os(e).is_some())
        {
            continue;
        }
        let takes_value = arg.get_action().takes_values();
        let values: Vec<&toml::Value> = match value {
            toml::Value::Array(items) => items.iter().collect(),
            v => vec![v],
        };
        for v in values {
            let text = match v {
                toml::Value::String(s) => s.clone(),
                toml::Value::Integer(i) => i.to_string(),
                toml::Value::Float(f) => f.to_string(),
                toml::Value::Boolean(b) if !takes_value => {
                    if *b {
                        out.push(OsString::from(format!("--{long}")));
                    }
                    continue;
                }
                toml::Value::Boolean(b) => b.to_string(),
                other => bail!(
                    "{}: {key} = {other}: expected a string, number, boolean or a list of them",
                    path.display()
                ),
            };
            if !takes_value {
                bail!("{}: {key} is a switch: give true or false", path.display());
            }
            out.push(OsString::from(format!("--{long}")));
            out.push(OsString::from(text));
        }
    }
    Ok(out)
}

/// Every setting's effective value (command line, environment, file or
/// default), secrets hidden.
fn effective(cmd: &clap::Command, matches: &clap::ArgMatches, config: Option<&Path>) -> Value {
    let mut out = BTreeMap::new();
    for arg in cmd.get_arguments() {
        let Some(long) = arg.get_long() else { continue };
        let id = arg.get_id().as_str();
        if long == "help" || long == "version" {
            continue;
        }
        let value = if !arg.get_action().takes_values() {
            Value::Bool(matches.get_flag(id))
        } else {
            let raw: Vec<String> = matches
                .get_raw(id)
                .into_iter()
                .flatten()
                .map(|v| v.to_string_lossy().into_owned())
                .map(|v| {
                    if SECRET_URIS.contains(&long) {
                        store::redact_uri(&v)
                    } else if SECRET_VALUES.contains(&long) {
                        "***".to_string()
                    } else {
                        v
                    }
                })
                .collect();
            match (arg.get_action(), raw.len()) {
                (ArgAction::Append, _) => Value::from(raw),
                (_, 0) => Value::Null,
                _ => Value::from(raw.into_iter().next().unwrap_or_default()),
            }
        };
        out.insert(long.to_string(), value);
    }
    if let Some(path) = config {
        out.insert("config".into(), Value::from(path.display().to_string()));
    }
    Value::from(serde_json::Map::from_iter(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(list: &[&str]) -> Vec<OsString> {
        std::iter::once("dispatcher")
            .chain(list.iter().copied())
            .map(OsString::from)
            .collect()
    }

    #[test]
    fn the_file_sets_what_the_command_line_does_not() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let path = dir.path().join("crawl.toml");
        std::fs::write(
            &path,
            "crawl-id = \"from-file\"\nmin_delay_ms = 250\nscope = \"any\"\nskip-nofollow = true\nseeds = [\"a.txt\", \"b.txt\"]\nmax-depth = 3\n",
        )
        .expect("writing the file");
        let p = path.to_str().expect("utf-8 path");
        let parsed = parse(argv(&["--config", p, "--max-depth", "7", "--seeds", "c.txt"])).expect("parses");
        assert_eq!(parsed.args.crawl_id.as_str(), "from-file");
        assert_eq!(parsed.args.min_delay_ms, 250);
        assert_eq!(parsed.args.scope, crate::admission::ScopeKind::Any);
        assert!(parsed.args.skip_nofollow);
        // The command line wins; lists add up.
        assert_eq!(parsed.args.max_depth, 7);
        assert_eq!(parsed.args.seeds.len(), 3);
        assert_eq!(parsed.settings["max-depth"], "7");
        assert_eq!(parsed.settings["min-delay-ms"], "250");
        assert_eq!(parsed.settings["skip-nofollow"], true);
        assert_eq!(parsed.settings["config"], p);
    }

    #[test]
    fn unknown_settings_and_bad_values_are_errors() {
        let dir = tempfile::tempdir().expect("a temp dir");
        for (text, want) in [
            ("max-dept = 3\n", "unknown setting"),
            ("skip-nofollow = \"yes\"\n", "switch"),
            ("max-depth = { x = 1 }\n", "expected"),
            ("not toml at all", "TOML"),
        ] {
            let path = dir.path().join("bad.toml");
            std::fs::write(&path, text).expect("writing");
            let err = match parse(argv(&["--config", path.to_str().expect("utf-8")])) {
                Ok(_) => panic!("{text:?} was accepted"),
                Err(e) => format!("{e:#}"),
            };
            assert!(err.contains(want), "{text:?}: {err}");
        }
    }

    #[test]
    fn a_bad_flag_and_help_are_returned_not_exits() {
        let Err(err) = parse(argv(&["--no-such-flag"])) else {
            panic!("an unknown flag was accepted")
        };
        let usage = err.downcast_ref::<clap::Error>().expect("clap's error");
        assert_eq!(usage.kind(), clap::error::ErrorKind::UnknownArgument);
        let Err(help) = parse(argv(&["--help"])) else {
            panic!("--help was taken for a config")
        };
        let help = help.downcast_ref::<clap::Error>().expect("clap's error");
        assert_eq!(help.kind(), clap::error::ErrorKind::DisplayHelp);
    }

    #[test]
    fn a_domain_is_never_forgotten_sooner_than_its_pace_allows() {
        let ms = |list: &[&str]| parse(argv(list)).expect("parses").args.forget_idle_domains_ms();
        // The default is above the 30 s Crawl-delay cap plus 2 s.
        assert_eq!(ms(&[]), 60_000);
        let low = ["--forget-idle-domains-ms", "1", "--max-crawl-delay-ms", "0"];
        assert_eq!(ms(&[&low[..], &["--min-delay-ms", "500"]].concat()), 2_500);
        assert_eq!(ms(&["--max-crawl-delay-ms", "120000"]), 122_000);
        let rps = |r: &'static str| [&low[..], &["--min-delay-ms", "0", "--max-domain-rps", r]].concat();
        assert_eq!(ms(&rps("0.01")), 102_000);
        // A rate near zero waits an hour at most, as the children do.
        assert_eq!(ms(&rps("1e-12")), 3_602_000);
    }

    #[test]
    fn every_flag_has_an_environment_variable_and_secrets_are_hidden() {
        let cmd = command();
        for arg in cmd.get_arguments() {
            if let Some(long) = arg.get_long().filter(|l| *l != "help" && *l != "version") {
                assert!(arg.get_env().is_some(), "--{long} has no environment variable");
            }
        }
        let parsed = parse(argv(&[
            "--mongo-uri",
            "mongodb://u:pw@db/",
            "--debug-token",
            "tok",
        ]))
        .expect("parses");
        let shown = parsed.settings.to_string();
        assert!(!shown.contains("pw@") && !shown.contains("\"tok\""), "{shown}");
    }
}
