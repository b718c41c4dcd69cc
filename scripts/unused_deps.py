#!/usr/bin/env python3
"""Fails when a workspace crate lists a dependency none of its files names.

Why: every dependency a crate lists is compiled and linked into everything
above it, whether or not a line uses it (`shared` once listed 13 it never
used, so `profiling` linked ZeroMQ and the MongoDB driver). `cargo udeps`
needs a nightly compiler and `cargo machete` an install, so this is the same
check machete makes, in a few lines: a dependency is used when a Rust file of
its crate names it as a path (`name::`), in a `use` or `extern crate`, or in
a `#[serde(with = "name")]`-style string.

A dependency listed only for its features or its linking (a `-sys` crate, a
crate whose feature a sibling needs) is named, with why, in the crate's
`[package.metadata.cargo-machete] ignored = [...]` (machete's own key, so
either tool reads it).

    python3 scripts/unused_deps.py     # from the repository's root; exit 1 on a finding
"""

import pathlib
import re
import sys
import tomllib

ROOT = pathlib.Path(__file__).resolve().parent.parent
SECTIONS = ("dependencies", "dev-dependencies", "build-dependencies")


def crate_sources(crate_dir: pathlib.Path) -> str:
    """Every Rust file of the crate (src, tests, benches, examples, build.rs)."""
    text = []
    for path in sorted(crate_dir.rglob("*.rs")):
        rel = path.relative_to(crate_dir).parts
        if rel and rel[0] == "target":
            continue
        # A member nested in this one's folder (shared/link in shared) is its own crate.
        if any((crate_dir.joinpath(*rel[:i]) / "Cargo.toml").exists() for i in range(1, len(rel))):
            continue
        text.append(path.read_text(encoding="utf-8", errors="replace"))
    return "\n".join(text)


def used(lib_name: str, sources: str) -> bool:
    n = re.escape(lib_name)
    pattern = rf'(\b{n}::|\buse\s+{n}\b|\bextern\s+crate\s+{n}\b|"{n}(::[A-Za-z_:]+)?")'
    return re.search(pattern, sources) is not None


def lib_name(dep_key: str, spec) -> str:
    """The name the code uses: the package's, renamed by `package = ...` only in the key."""
    return dep_key.replace("-", "_")


def findings() -> list[str]:
    workspace = tomllib.loads((ROOT / "Cargo.toml").read_text())
    out = []
    for member in workspace["workspace"]["members"]:
        crate_dir = ROOT / member
        manifest = tomllib.loads((crate_dir / "Cargo.toml").read_text())
        ignored = set(
            manifest.get("package", {})
            .get("metadata", {})
            .get("cargo-machete", {})
            .get("ignored", [])
        )
        sources = crate_sources(crate_dir)
        for section in SECTIONS:
            for key, spec in manifest.get(section, {}).items():
                if key in ignored:
                    continue
                if not used(lib_name(key, spec), sources):
                    out.append(f"{member}/Cargo.toml [{section}] {key}: no file of the crate names it")
    return out


def main() -> int:
    found = findings()
    for line in found:
        print(line)
    if found:
        print(
            f"{len(found)} unused dependencies: remove them, or name them with why in "
            "[package.metadata.cargo-machete] ignored = [...]",
            file=sys.stderr,
        )
        return 1
    print("unused_deps: every dependency of every workspace crate is used")
    return 0


if __name__ == "__main__":
    sys.exit(main())
