"""The command line: one sub-command per question, shared flags, exit codes.

Exit status: 0 on success, 1 when no timing record could be read (or an
output could not be written), 2 on a usage error.
"""

from __future__ import annotations

import argparse
import math
import sys

from . import bottleneck
from .ops import WAIT_OPS
from .plots import cmd_plot
from .reading import KEY_FIELDS
from .table import cmd_table
from .tls import cmd_tls
from .trend import cmd_trend


def positive_float(s: str) -> float:
    try:
        v = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {s}") from None
    if not v > 0 or not math.isfinite(v):
        raise argparse.ArgumentTypeError(f"must be > 0: {s}")
    return v


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="oprates.py",
        description="Per-operation rates and latencies over time from crawler timing logs (--timing-log), "
                    "and which resource limits the crawl.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="See scripts/README.md for a worked example.",
    )
    sub = ap.add_subparsers(dest="cmd", required=True)

    def logs(p):
        p.add_argument("logs", nargs="+", help="timing log files or directories (*.jsonl inside, recursively)")

    def common(p, by: str, window: float | None, windows: int):
        logs(p)
        p.add_argument("--by", default=by, help=f"group by these fields, comma-separated: {', '.join(KEY_FIELDS)} "
                                                f"(default {by})")
        wdefault = f"{window:g} s" if window else f"the run cut into ~{windows} windows"
        p.add_argument("--window", type=positive_float, default=window, metavar="SECS",
                       help=f"window length in seconds (default: {wdefault})")
        p.add_argument("--windows", type=int, default=windows, metavar="N",
                       help=f"without --window: cut the run into ~N windows (default {windows})")

    t = sub.add_parser("table", help="count, rate, p50/p95/p99 and error share per window and group")
    common(t, "op,role", 60.0, 10)
    t.add_argument("--json", action="store_true", help="machine-readable output")
    t.set_defaults(func=cmd_table)

    p = sub.add_parser("plot", help="SVG charts: rate per op over time (line per node), p95 latency per op")
    common(p, "op,node", None, 40)
    p.add_argument("--out", required=True, help="directory for the SVG files (created)")
    p.set_defaults(func=cmd_plot)

    r = sub.add_parser("trend", help="which operation slows down or falls behind over the run (its tail left "
                                     "out), and by how much")
    common(r, "op", None, 10)
    r.add_argument("--json", action="store_true", help="machine-readable output")
    r.add_argument("--include-waits", action="store_true",
                   help=f"let the waits ({', '.join(sorted(WAIT_OPS))}) into the verdict")
    r.set_defaults(func=cmd_trend)

    b = sub.add_parser("bottleneck", help="which resource limits the crawl's rate per window "
                                          "(store, dispatcher, capacity, politeness, cpu), and over the run")
    logs(b)
    b.add_argument("--window", type=positive_float, default=bottleneck.DEFAULT_WINDOW, metavar="SECS",
                   help=f"window length in seconds (default {bottleneck.DEFAULT_WINDOW:g})")
    b.add_argument("--json", action="store_true", help="machine-readable output")
    b.set_defaults(func=bottleneck.cmd_bottleneck)
    s = sub.add_parser("tls", help="TLS handshakes (full, resumed) per page, and failed ones by why, from the "
                                   "children's gauge lines")
    logs(s)
    s.add_argument("--json", action="store_true", help="machine-readable output")
    s.set_defaults(func=cmd_tls)
    return ap


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except BrokenPipeError:  # `oprates.py table ... | head`
        sys.stderr.close()
        return 0
    except OSError as e:  # e.g. --out in a read-only place; input errors are handled while reading
        print(f"oprates: {e}", file=sys.stderr)
        return 1
