#!/usr/bin/env python3
"""Which test binaries scripts/test.sh runs beside the e2e tests, and which after.

scripts/test.sh starts the end-to-end tests (`crawl-tests`' `e2e` binary) as
soon as they and the binaries they run are built, and builds and runs every
other test binary beside them; the package's other integration tests judge a
crawl's timing and run alone, after them.

    python3 scripts/test_targets.py beside crawl-tests
        The target flags (`--lib --bin pages --test logs ...`) of every test
        binary `cargo test --workspace` runs by default (`test = true`), but
        the integration tests of that package.

    python3 scripts/test_targets.py after crawl-tests e2e
        `--test NAME` for each of the package's integration tests but `e2e`.

The flags select targets within `cargo test --workspace`: selecting fewer
packages (`-p`, `--exclude`) would unify fewer features and rebuild crates.
"""

import json
import subprocess
import sys

# What `--lib` selects (a crate's one library, whatever it compiles to).
LIBRARY_KINDS = {"lib", "rlib", "dylib", "cdylib", "staticlib", "proc-macro"}


def workspace():
    """The workspace's packages, from `cargo metadata` (no dependencies)."""
    out = subprocess.run(
        ["cargo", "metadata", "--no-deps", "--format-version", "1"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(out)["packages"]


def flags(package: str, but: str | None) -> list[str]:
    """With `but` None: every tested target but the package's integration
    tests; else those tests, but `but`."""
    out = []
    for p in workspace():
        for t in p["targets"]:
            if not t.get("test", True):
                continue
            its_test = p["name"] == package and "test" in t["kind"]
            if but is None and not its_test:
                if set(t["kind"]) & LIBRARY_KINDS:
                    if "--lib" not in out:
                        out.append("--lib")
                elif "bin" in t["kind"]:
                    out.append(f"--bin {t['name']}")
                elif "test" in t["kind"]:
                    out.append(f"--test {t['name']}")
            elif but is not None and its_test and t["name"] != but:
                out.append(f"--test {t['name']}")
    return out


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "beside":
        print(" ".join(flags(sys.argv[2], None)))
    elif len(sys.argv) == 4 and sys.argv[1] == "after":
        print(" ".join(flags(sys.argv[2], sys.argv[3])))
    else:
        sys.exit(__doc__)
