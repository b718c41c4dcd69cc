"""Text and JSON output helpers shared by every command.

Numbers are printed with a precision that suits their magnitude, tables are
aligned so magnitudes line up, and JSON is strict (no NaN), because the
output is read both by people and by tests and scripts.
"""

from __future__ import annotations

import json
import math
import sys
import time


def print_json(obj) -> None:
    """Strict JSON (no NaN/Infinity, which most parsers reject): any
    non-finite number left in the output becomes null."""
    print(json.dumps(finite(obj), indent=1, allow_nan=False))


def finite(obj):
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    return obj


def num(x, digits: int = 4):
    """A JSON number: None for a missing or non-finite value (JSON has no
    NaN; a window without samples has no percentile)."""
    return None if x is None or not math.isfinite(x) else round(x, digits)


def fmt_ms(x: float) -> str:
    """Milliseconds with precision that suits the magnitude (µs to minutes)."""
    if math.isnan(x):
        return "-"
    if x < 1:
        return f"{x:.3f}"
    if x < 100:
        return f"{x:.2f}"
    return f"{x:.0f}"


def fmt_rate(x: float) -> str:
    return f"{x:.2f}" if x < 100 else f"{x:.0f}"


def fmt_count(x: float) -> str:
    """A rate or count for a summary line: `1,310`, `42.5`, `0.83`."""
    if x >= 100:
        return f"{x:,.0f}"
    if x >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


def fmt_pct(x) -> str:
    """A fraction as a whole percentage; `-` when unknown."""
    return "-" if x is None or not math.isfinite(x) else f"{100 * x:.0f}%"


def fmt_signed(x: float, spec: str, unit: str = "") -> str:
    return "-" if not math.isfinite(x) else f"{x:+{spec}}{unit}"


def render_table(header: list[str], rows: list[list[str]], right: set[int]) -> str:
    """Aligned columns; numbers right-aligned so magnitudes line up."""
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]

    def line(r):
        cells = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))]
        return "  ".join(cells).rstrip()

    return "\n".join([line(header), line(["-" * w for w in widths])] + [line(r) for r in rows])


def describe_input(stats) -> str:
    """One header line, plus warnings about what could not be read."""
    gauges = f" (+ {stats.gauge_lines:,} gauge lines)" if stats.gauge_lines else ""
    lines = [f"# {stats.lines:,} records{gauges} from {stats.files} file(s), run {stats.span:.1f} s"
             + (f", starting {clock(stats.t_min)}" if stats.lines else "")]
    if stats.bad_lines:
        lines.append(f"# {stats.bad_lines:,} bad line(s) skipped, e.g. " + "; ".join(stats.bad_examples))
    for u in stats.unreadable:
        lines.append(f"# could not read {u}")
    return "\n".join(lines)


def clock(ts: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(ts))


SPARKS = "▁▂▃▄▅▆▇█"


def sparkline(values: list[float]) -> str:
    """A tiny in-terminal chart of a series (NaN = no data, shown as a space)."""
    real = [v for v in values if not math.isnan(v)]
    if not real:
        return ""
    # The scale spans at least half the maximum, so jitter of a steady series
    # stays flat instead of filling the whole height.
    hi = max(real)
    lo = min(min(real), hi / 2)
    out = []
    for v in values:
        if math.isnan(v):
            out.append(" ")
        elif hi == lo:
            out.append(SPARKS[0])
        else:
            out.append(SPARKS[min(len(SPARKS) - 1, int((v - lo) / (hi - lo) * len(SPARKS)))])
    return "".join(out)


def no_data(stats) -> int:
    """Exit status 1 with what was read, when nothing usable was."""
    print(describe_input(stats), file=sys.stderr)
    print("oprates: no timing records found", file=sys.stderr)
    return 1


def usage_error(msg: str) -> int:
    print(f"oprates: {msg}", file=sys.stderr)
    return 2
