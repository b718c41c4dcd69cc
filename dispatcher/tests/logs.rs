//! The dispatcher's diagnostics on stderr are log lines: an RFC 3339 UTC
//! time, a level, the role and pid; `CRAWLER_LOG_FORMAT=json` makes them
//! JSON; `RUST_LOG` filters them; a store password never shows.
//!
//! The run is one that fails at once, without a store: `--insecure-cluster`
//! (logged as a warning first) and a store URI the driver refuses.

use std::process::{Command, Output};

/// The store URI given: its password must not reach stderr.
const URI: &str = "mongodb://crawler:hunter2@127.0.0.1:notaport/";

fn dispatcher(env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_dispatcher"));
    cmd.args([
        "--insecure-cluster",
        "--debug-addr",
        "127.0.0.1:0",
        "--mongo-uri",
        URI,
    ]);
    for var in [
        "RUST_LOG",
        "CRAWLER_LOG_FORMAT",
        "CRAWLER_CONFIG",
        "CRAWLER_CLUSTER_SECRET",
        "CRAWLER_CLUSTER_SECRET_FILE",
        "CRAWLER_TIMING_LOG",
        "CRAWLER_DEBUG_TOKEN_FILE",
    ] {
        cmd.env_remove(var);
    }
    // A token of its own, so that it writes no run token file where the
    // test runs (the crate's directory).
    cmd.env(
        "CRAWLER_DEBUG_TOKEN",
        "a-token-of-this-test-only-0123456789abcdef",
    );
    cmd.envs(env.iter().copied());
    let out = cmd.output().expect("running the dispatcher");
    assert!(!out.status.success(), "the dispatcher ran with a bad store URI");
    out
}

/// `2025-06-01T12:00:00.123456Z`: RFC 3339 in UTC.
fn is_rfc3339_utc(s: &str) -> bool {
    s.ends_with('Z') && bson::DateTime::parse_rfc3339_str(s).is_ok()
}

#[test]
fn diagnostics_are_lines_with_time_level_and_role() {
    let out = dispatcher(&[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let warning = stderr
        .lines()
        .find(|l| l.contains("--insecure-cluster"))
        .unwrap_or_else(|| panic!("no --insecure-cluster warning:\n{stderr}"));
    let mut parts = warning.split_whitespace();
    let time = parts.next().unwrap();
    assert!(is_rfc3339_utc(time), "not an RFC 3339 UTC time: {warning}");
    assert_eq!(parts.next(), Some("WARN"), "{warning}");
    let role = parts.next().unwrap();
    assert!(
        role.starts_with("dispatcher[") && role.ends_with(']'),
        "{warning}"
    );
    // The failure that ends the process, with the URI's password hidden.
    assert!(
        stderr.contains("bad MongoDB URI") && stderr.contains("crawler:***@"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("hunter2"),
        "the store password was printed:\n{stderr}"
    );
}

#[test]
fn json_lines_on_request() {
    let out = dispatcher(&[("CRAWLER_LOG_FORMAT", "json")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let warning: serde_json::Value = stderr
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .find(|v: &serde_json::Value| v["message"].as_str().unwrap_or("").contains("--insecure-cluster"))
        .unwrap_or_else(|| panic!("no JSON --insecure-cluster warning:\n{stderr}"));
    assert!(
        is_rfc3339_utc(warning["timestamp"].as_str().unwrap()),
        "{warning}"
    );
    assert_eq!(warning["level"], "WARN");
    assert_eq!(warning["role"], "dispatcher");
    assert!(warning["pid"].as_u64().is_some(), "{warning}");
    assert_eq!(warning["target"], "dispatcher");
    assert!(!stderr.contains("hunter2"), "{stderr}");
}

#[test]
fn rust_log_filters() {
    let out = dispatcher(&[("RUST_LOG", "error")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("--insecure-cluster"),
        "a warning shown at RUST_LOG=error:\n{stderr}"
    );
    assert!(stderr.contains("bad MongoDB URI"), "{stderr}");
}
