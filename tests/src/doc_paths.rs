//! Every file path the documents name exists: a README that sends a
//! newcomer to a file that moved is worse than one that names none.
//!
//! A path is a word with a `/` and a known extension (`dispatcher/src/state.rs`,
//! `frontier/adopt.rs`). It may be written from the repository's root, from
//! the document's own directory, or as the tail of a longer path (the README
//! says `frontier/adopt.rs` inside a paragraph about the dispatcher).

use std::path::{Path, PathBuf};

/// The documents checked, from the repository's root, besides every
/// Markdown file under [`DOCS`], which are found at test time so that a new
/// document is checked without being listed here.
const DOCUMENTS: &[&str] = &[
    "README.md",
    "ansible/README.md",
    "scripts/README.md",
    "scripts/scale-measurements.md",
    "Cargo.toml",
    "dispatcher/Cargo.toml",
    "supervisor/Cargo.toml",
    "crawler-child/Cargo.toml",
    "shared/Cargo.toml",
    "shared/link/Cargo.toml",
    "shared/store/Cargo.toml",
    "pages/Cargo.toml",
    "profiling/Cargo.toml",
    "tests/Cargo.toml",
];

/// The manual's directory, from the repository's root.
const DOCS: &str = "docs";

const EXTENSIONS: &[&str] = &["rs", "py", "sh", "md", "toml", "yml", "yaml", "json", "ini", "j2"];

/// The file paths `text` names.
pub(crate) fn named_paths(text: &str) -> Vec<&str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || "_./-".contains(c)))
        .map(|w| w.trim_end_matches('.'))
        .filter(|w| w.contains('/') && !w.starts_with('/'))
        .filter(|w| {
            w.rsplit_once('.')
                .is_some_and(|(stem, ext)| !stem.ends_with('/') && EXTENSIONS.contains(&ext))
        })
        .collect()
}

/// Every file under `dir`, but build output, git's and the virtualenvs.
pub(crate) fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            if name != "target" && name != ".git" && !name.starts_with(".venv") {
                files_under(&path, out);
            }
        } else {
            out.push(path);
        }
    }
}

/// The Markdown files under [`DOCS`], from the repository's root, sorted.
fn manual(root: &Path) -> Vec<String> {
    let mut found = Vec::new();
    files_under(&root.join(DOCS), &mut found);
    let mut docs: Vec<String> = found
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .filter_map(|p| p.strip_prefix(root).ok())
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    docs.sort();
    docs
}

/// Every document checked: [`DOCUMENTS`] and the manual.
pub(crate) fn documents(root: &Path) -> Vec<String> {
    let mut all: Vec<String> = DOCUMENTS.iter().map(|d| d.to_string()).collect();
    all.extend(manual(root));
    all
}

#[test]
fn every_path_the_documents_name_exists() {
    let root = crate::harness::repo_root();
    let mut files = Vec::new();
    files_under(&root, &mut files);
    let manual = manual(&root);
    assert!(!manual.is_empty(), "no documents under {DOCS}/");
    let mut missing = Vec::new();
    for doc in &documents(&root) {
        let text = std::fs::read_to_string(root.join(doc)).unwrap_or_else(|e| panic!("reading {doc}: {e}"));
        let dir = root
            .join(doc)
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| root.clone());
        for p in named_paths(&text) {
            let found = root.join(p).exists() || dir.join(p).exists() || files.iter().any(|f| f.ends_with(p));
            if !found {
                missing.push(format!("{doc}: {p}"));
            }
        }
    }
    assert!(missing.is_empty(), "paths named that do not exist: {missing:?}");
}

#[test]
fn the_readme_links_every_document_of_the_manual() {
    let root = crate::harness::repo_root();
    let readme = std::fs::read_to_string(root.join("README.md")).expect("reading README.md");
    let unlinked: Vec<String> = manual(&root)
        .into_iter()
        .filter(|doc| !readme.contains(&format!("]({doc}")))
        .collect();
    assert!(
        unlinked.is_empty(),
        "documents the README does not link: {unlinked:?}"
    );
}

#[test]
fn paths_are_found_in_prose_but_not_in_addresses() {
    let text = "See `dispatcher/src/state.rs`, frontier/adopt.rs. and https://example.test/a/b.json or /etc/hosts.txt; v1.2/3";
    assert_eq!(
        named_paths(text),
        vec!["dispatcher/src/state.rs", "frontier/adopt.rs"]
    );
}
