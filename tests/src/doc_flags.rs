//! The documents say only what exists: every `--flag` a document shows on
//! a line that runs one of our binaries is a flag of that binary (of its
//! subcommand, for `pages export` or `crawlctl block`), as the built
//! binary's `--help` lists it; and every file path a code comment names
//! exists (the rule of [`crate::doc_paths`], for comments).
//!
//! A line that runs a binary: a line of a fenced code block, or an inline
//! code span, with a word whose last path component is the binary's name
//! (`target/release/dispatcher`, `pages`); its flags are the `--words`
//! after it, up to the end of the command (`|`, `&&`, `;`, `>`, `#`), a
//! trailing `\` joining the next line. `cargo run ... --bin NAME -- ARGS`
//! runs NAME with the flags after `--`. Reads the binaries' help, so the
//! binaries must be built (`scripts/test.sh` builds them first); no crawl.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::doc_paths::{documents, files_under, named_paths};

/// Our binaries, as a document runs them.
const BINARIES: &[&str] = &[
    "dispatcher",
    "supervisor",
    "crawler-child",
    "pages",
    "crawlctl",
    "cluster-profile",
    "synthweb",
    "dispatcher_load",
    "frontier_fill",
    "pagebench",
    "seenbench",
];

/// A command a document shows: the binary, the plain words after it (one
/// may be its subcommand: `pages --crawl-id c1 export`) and the flags given.
#[derive(Debug, PartialEq)]
struct Run {
    binary: String,
    words: Vec<String>,
    flags: Vec<String>,
}

/// The words where a shell command ends.
fn ends_command(word: &str) -> bool {
    matches!(word, "|" | "||" | "&&" | ";" | "&")
        || word.starts_with('>')
        || word.starts_with('#')
        || word.starts_with("2>")
}

/// The flag a word gives, if it is one (`--name` of `--name=value`).
fn flag(word: &str) -> Option<&str> {
    let name = word.strip_prefix("--")?;
    let name = name.split('=').next().unwrap_or_default();
    let name = name.trim_end_matches([',', '.', ')', '`', '"', '\'']);
    (name.len() > 1 && name.starts_with(|c: char| c.is_ascii_lowercase())).then_some(name)
}

/// The commands one line of shell (continuations joined) runs.
fn runs_in(line: &str) -> Vec<Run> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let mut runs = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let word = words[i].trim_matches(|c| c == '`' || c == '(' || c == '"');
        let name = word.rsplit('/').next().unwrap_or(word);
        if !BINARIES.contains(&name) {
            i += 1;
            continue;
        }
        let mut rest = i + 1;
        if i > 0 && words[i - 1] == "--bin" {
            // `cargo run ... --bin NAME -- ARGS`: NAME's flags follow `--`.
            match words[rest..].iter().position(|w| *w == "--") {
                Some(at) => rest += at + 1,
                None => {
                    i += 1;
                    continue;
                }
            }
        }
        let mut run = Run {
            binary: name.to_string(),
            words: Vec::new(),
            flags: Vec::new(),
        };
        let mut j = rest;
        while j < words.len() && !ends_command(words[j]) {
            let w = words[j];
            if let Some(f) = flag(w) {
                run.flags.push(f.to_string());
            } else if w.chars().all(|c| c.is_ascii_lowercase() || c == '-') {
                run.words.push(w.to_string());
            }
            j += 1;
        }
        runs.push(run);
        i = j.max(i + 1);
    }
    runs
}

/// The shell lines of a Markdown document: each line of a fenced code
/// block (a trailing `\` joins the next) and each inline code span.
fn shell_lines(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_block = false;
    let mut pending = String::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
            continue;
        }
        if in_block {
            let (body, joined) = match line.trim_end().strip_suffix('\\') {
                Some(body) => (body, true),
                None => (line, false),
            };
            pending.push_str(body);
            pending.push(' ');
            if !joined {
                out.push(std::mem::take(&mut pending));
            }
            continue;
        }
        let mut spans = line.split('`');
        spans.next();
        while let Some(span) = spans.next() {
            out.push(span.to_string());
            spans.next();
        }
    }
    out
}

/// The long flags a binary's help lists (`--name`), for `args` (the
/// subcommand, or none).
fn help_flags(binary: &Path, args: &[&str]) -> Option<BTreeSet<String>> {
    let out = Command::new(binary).args(args).arg("--help").output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    Some(
        text.split(|c: char| c.is_whitespace() || c == ',' || c == '[' || c == ']')
            .filter_map(flag)
            .map(str::to_string)
            .collect(),
    )
}

#[test]
fn every_flag_the_documents_show_exists_in_the_binary_they_run() {
    let root = crate::harness::repo_root();
    let mut help: BTreeMap<(String, Option<String>), BTreeSet<String>> = BTreeMap::new();
    let mut wrong = Vec::new();
    let mut checked = 0;
    for doc in documents(&root).iter().filter(|d| d.ends_with(".md")) {
        let text = std::fs::read_to_string(root.join(doc)).unwrap_or_else(|e| panic!("reading {doc}: {e}"));
        for line in shell_lines(&text) {
            for run in runs_in(&line) {
                let path = crate::harness::bin(&run.binary).unwrap_or_else(|e| panic!("{e}"));
                let top = help
                    .entry((run.binary.clone(), None))
                    .or_insert_with(|| {
                        help_flags(&path, &[]).unwrap_or_else(|| panic!("{} --help failed", run.binary))
                    })
                    .clone();
                // The binary's own flags and those of its subcommand: any
                // plain word after it whose help the binary gives (a flag's
                // value, `warc`, has none).
                let mut known = top;
                for word in &run.words {
                    let sub = help
                        .entry((run.binary.clone(), Some(word.clone())))
                        .or_insert_with(|| help_flags(&path, &[word]).unwrap_or_default());
                    known.extend(sub.iter().cloned());
                }
                for f in &run.flags {
                    checked += 1;
                    if !known.contains(f) {
                        wrong.push(format!("{doc}: {} --{f} (in `{}`)", run.binary, line.trim()));
                    }
                }
            }
        }
    }
    eprintln!(
        "doc_flags: {checked} flags checked, {} --help pages read",
        help.len()
    );
    assert!(checked > 30, "only {checked} flags found in the documents");
    assert!(
        wrong.is_empty(),
        "flags the binaries do not have:\n{}",
        wrong.join("\n")
    );
}

/// The comment lines of a source file: `//` (and `///`, `//!`) in Rust,
/// `#` in Python, shell and YAML.
fn comments(path: &Path, text: &str) -> Vec<String> {
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or_default();
    let marker = match ext {
        "rs" => "//",
        "py" | "sh" | "yml" | "yaml" | "toml" => "#",
        _ => return Vec::new(),
    };
    // A marker at the line's start or after a space: not `https://` nor
    // a `#` inside a word.
    text.lines()
        .filter_map(|l| {
            let at = l
                .match_indices(marker)
                .map(|(at, _)| at)
                .find(|&at| at == 0 || l[..at].ends_with(char::is_whitespace))?;
            Some(l[at + marker.len()..].to_string())
        })
        .collect()
}

/// Our source files: everything but build output, virtualenvs and the
/// vendored crate (not ours).
fn sources(root: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    files_under(root, &mut files);
    files.retain(|f| !f.strip_prefix(root).is_ok_and(|p| p.starts_with("vendor")));
    files
}

#[test]
fn every_path_a_code_comment_names_exists() {
    let root = crate::harness::repo_root();
    let files = sources(&root);
    let mut missing = Vec::new();
    let mut checked = 0;
    for file in &files {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        let dir = file.parent().unwrap_or(&root);
        for comment in comments(file, &text) {
            for p in named_paths(&comment) {
                checked += 1;
                let found =
                    root.join(p).exists() || dir.join(p).exists() || files.iter().any(|f| f.ends_with(p));
                if !found {
                    let at = file.strip_prefix(&root).unwrap_or(file);
                    missing.push(format!("{}: {p}", at.display()));
                }
            }
        }
    }
    eprintln!("doc_flags: {checked} paths named in comments checked");
    assert!(checked > 100, "only {checked} paths found in comments");
    assert!(
        missing.is_empty(),
        "paths named in comments that do not exist:\n{}",
        missing.join("\n")
    );
}

#[test]
fn commands_are_read_from_code_and_end_where_the_shell_ends_them() {
    let text = "Run `target/release/dispatcher --seeds s.txt --min-delay-ms=5` or\n\
                ```\n\
                pages export --format warc \\\n    --out x | head   # --not-this\n\
                cargo run --release -p crawl-tests --bin seenbench -- --urls 10\n\
                ```\n";
    let runs: Vec<Run> = shell_lines(text).iter().flat_map(|l| runs_in(l)).collect();
    let flags = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        runs,
        vec![
            Run {
                binary: "dispatcher".into(),
                words: vec![],
                flags: flags(&["seeds", "min-delay-ms"]),
            },
            Run {
                binary: "pages".into(),
                words: flags(&["export", "warc", "x"]),
                flags: flags(&["format", "out"]),
            },
            Run {
                binary: "seenbench".into(),
                words: vec![],
                flags: flags(&["urls"]),
            },
        ]
    );
}
