#!/usr/bin/env python3
"""oprates: per-operation rates and latencies over time from the crawler's timing logs.

Every crawler process started with `--timing-log DIR/` writes one JSON line per
operation to `DIR/<role>-<pid>.jsonl`:

    {"ts":1700000000.123456,"node":"n1","role":"crawler-child","pid":42,
     "op":"fetch","dur_us":1234,"outcome":"ok","domain":"a.test"}

A crawler of this shape once slowed down over time, and worse with every node
added; what showed why was the rate and latency of each operation over time and
per node. This script gives exactly that view, in three forms:

    oprates.py table LOGS... [--window 60] [--by op,role] [--json]
        count, rate/s, p50/p95/p99 latency and error share per window and group
    oprates.py plot  LOGS... --out DIR [--window SECS] [--by op,node]
        SVG line charts: rate over time per operation (a line per node) and
        p95 latency over time (a line per operation)
    oprates.py trend LOGS... [--window SECS] [--by op] [--json]
        names the operation whose latency grows or whose rate falls over the
        run, and by how much

How `trend` decides: per group it compares the median latency and the rate of
the first third of the run with the last third (growth = last/first) and fits
a least-squares line through the per-window medians (slope, r²). The latency
verdict is the largest growth among groups whose growth costs real time
(added load = added median × final rate ≥ 1% of a thread and ≥ 10% of the
largest added load), so a 20 µs operation that doubles cannot outrank one that
adds milliseconds to every page. Groups with < 20 samples and deliberate waits
(politeness_wait) are left out of the verdict but still listed.

LOGS are files or directories (every `*.jsonl` / `*.jsonl.gz` below them).
Bad lines (a process killed mid-write, a stray edit) are counted and reported,
never fatal. Python 3.11 standard library only: it must run in CI and on
machines without internet access.
"""

from __future__ import annotations

import argparse
import gzip
import html
import json
import math
import os
import re
import sys
import time
from array import array
from dataclasses import dataclass, field

# Outcomes that mean "the operation did what it should". `waited` is the
# politeness pause, `absent` a robots.txt that is not there (4xx: no rules):
# both are normal, so they must not inflate the error share.
SUCCESS_OUTCOMES = frozenset({"ok", "waited", "absent"})

# Operations that are slow on purpose. A growing politeness wait means the
# crawl is obeying a site's Crawl-delay, not that something is wrong, so the
# trend verdict leaves them out unless asked (`--include-waits`).
DELIBERATE_WAITS = frozenset({"politeness_wait"})

# Pipeline order, so tables read like a page's life; unknown ops sort after.
OP_ORDER = (
    "dispatch",
    "robots_lookup",
    "robots_fetch",
    "politeness_wait",
    "fetch",
    "parse",
    "store",
    "report",
    "frontier_insert",
)

# Fields a series can be grouped by (`--by`).
KEY_FIELDS = ("op", "node", "role", "pid", "domain")

# Timestamps are first bucketed at a fine resolution that coarsens (by whole
# factors, so buckets merge exactly) as the run grows: memory stays bounded by
# MAX_FINE_BUCKETS per series whatever the run length, and windows can still
# start where the run starts and, without --window, cut it into ~N equal parts.
# With --window W the ladder is W/1024, W/512, ... W instead.
RESOLUTION_LADDER = (0.01, 0.1, 1.0, 10.0, 60.0, 600.0, 3600.0, 86400.0)
MAX_FINE_BUCKETS = 2048

# Trend verdict: fewer samples than this and the percentiles are noise.
MIN_SAMPLES = 20
# ...and each compared third needs at least this many.
MIN_THIRD_SAMPLES = 5
# Latency growth must cost at least this share of the largest added load
# (see Trend.added_load), and at least MIN_RELEVANT_LOAD (1% of one thread),
# to be named: a harmless microsecond op cannot win.
RELEVANT_LOAD_SHARE = 0.1
MIN_RELEVANT_LOAD = 0.01
# Below these the verdict says "nothing stands out" (the JSON still names the worst).
NOTABLE_GROWTH = 2.0
NOTABLE_DECLINE = 0.2


# --------------------------------------------------------------------------
# Reading logs
# --------------------------------------------------------------------------


@dataclass
class ReadStats:
    """What was read, so every output can say how much it is based on."""

    files: int = 0
    lines: int = 0
    bad_lines: int = 0
    unreadable: list = field(default_factory=list)
    bad_examples: list = field(default_factory=list)
    t_min: float = math.inf
    t_max: float = -math.inf

    def bad(self, path: str, lineno: int, why: str) -> None:
        self.bad_lines += 1
        if len(self.bad_examples) < 3:
            self.bad_examples.append(f"{path}:{lineno}: {why}")

    @property
    def span(self) -> float:
        return max(0.0, self.t_max - self.t_min) if self.lines else 0.0

    def as_json(self) -> dict:
        return {
            "files": self.files,
            "lines": self.lines,
            "bad_lines": self.bad_lines,
            "bad_examples": self.bad_examples,
            "unreadable": self.unreadable,
            "start": self.t_min if self.lines else None,
            "end": self.t_max if self.lines else None,
            "span_secs": round(self.span, 3),
        }


class BadLine(Exception):
    """A line that is not a timing record; the message says why."""


def find_log_files(paths: list[str], stats: ReadStats) -> list[str]:
    """Expands directories to the logs below them, sorted for stable output."""
    files = []
    for p in paths:
        if os.path.isdir(p):
            for d, _, names in os.walk(p):
                files += [os.path.join(d, n) for n in names if n.endswith((".jsonl", ".jsonl.gz"))]
        elif os.path.exists(p):
            files.append(p)
        else:
            stats.unreadable.append(f"{p}: no such file or directory")
    return sorted(set(files))


# A bound decoder skips json.loads' per-call setup: a third of the time per line.
_decode = json.JSONDecoder().decode
_NUMBER = (int, float)  # not bool: `type(True) is bool`


def parse_line(line: str) -> tuple | None:
    """Returns (ts, dur_us, ok, record) for a timing line, None for a blank one.

    Raises BadLine for anything else: a half-written last line, a non-object,
    a missing or non-numeric field. Checking types here keeps the
    aggregation code free of them.
    """
    try:
        rec = _decode(line)
    except (ValueError, RecursionError) as e:
        if not line.strip():
            return None
        raise BadLine(f"not JSON ({str(e)[:60]})") from None
    if type(rec) is not dict:
        raise BadLine("not a JSON object")
    ts, dur, op = rec.get("ts"), rec.get("dur_us"), rec.get("op")
    # Chained comparisons also reject NaN and infinity.
    if type(ts) not in _NUMBER or not 0 < ts < math.inf:
        raise BadLine("missing or bad ts")
    if type(dur) not in _NUMBER or not 0 <= dur < math.inf:
        raise BadLine("missing or bad dur_us")
    if type(op) is not str or not op:
        raise BadLine("missing op")
    return float(ts), int(dur), rec.get("outcome", "ok") in SUCCESS_OUTCOMES, rec


def read_records(files: list[str], stats: ReadStats):
    """Yields (ts, dur_us, ok, record) for every good line of every file.

    Streams line by line so a few million lines need no more memory than the
    aggregates; the record dict is dropped as soon as its key is taken.
    """
    for path in files:
        opener = gzip.open if path.endswith(".gz") else open
        try:
            # Invalid UTF-8 becomes U+FFFD: a mangled domain still counts.
            with opener(path, "rt", encoding="utf-8", errors="replace") as f:
                stats.files += 1
                for lineno, line in enumerate(f, 1):
                    try:
                        parsed = parse_line(line)
                    except BadLine as e:
                        stats.bad(path, lineno, str(e))
                        continue
                    if parsed is None:
                        continue
                    stats.lines += 1
                    ts = parsed[0]
                    if ts < stats.t_min:
                        stats.t_min = ts
                    if ts > stats.t_max:
                        stats.t_max = ts
                    yield parsed
        except (OSError, EOFError) as e:  # unreadable file, truncated or corrupt gzip
            stats.unreadable.append(f"{path}: {e}")


def key_of(rec: dict, by: tuple) -> tuple:
    """The group a record belongs to: its values of the `--by` fields."""
    out = []
    for f in by:
        v = rec.get(f)
        out.append("-" if v is None else str(v))
    return tuple(out)


# --------------------------------------------------------------------------
# Aggregating into time buckets
# --------------------------------------------------------------------------


class Series:
    """Durations (µs) and error counts of one group, per fine time bucket.

    Durations are kept (as compact int arrays) rather than summarised because
    percentiles of a window cannot be computed from percentiles of its parts.
    """

    __slots__ = ("durs", "errors")

    def __init__(self):
        self.durs: dict[int, array] = {}
        self.errors: dict[int, int] = {}

    def add(self, bucket: int, dur_us: int, ok: bool) -> bool:
        """Adds one duration; True if it opened a new bucket."""
        if not ok:
            self.errors[bucket] = self.errors.get(bucket, 0) + 1
        a = self.durs.get(bucket)
        if a is not None:
            a.append(dur_us)
            return False
        self.durs[bucket] = array("q", (dur_us,))
        return True

    def coarsen(self, factor: int) -> None:
        """Merges every `factor` consecutive buckets into one."""
        durs: dict[int, array] = {}
        for b, a in self.durs.items():
            nb = b // factor
            if nb in durs:
                durs[nb].extend(a)
            else:
                durs[nb] = a
        errors: dict[int, int] = {}
        for b, n in self.errors.items():
            errors[b // factor] = errors.get(b // factor, 0) + n
        self.durs, self.errors = durs, errors


class Collector:
    """Buckets timing records by group and time, at a resolution that adapts
    to the run's length (see RESOLUTION_LADDER)."""

    def __init__(self, by: tuple, window: float | None):
        self.by = by
        self.ladder = RESOLUTION_LADDER if window is None else tuple(window / 2**k for k in range(10, -1, -1))
        self.resolution = self.ladder[0]
        self.series: dict[tuple, Series] = {}
        # Lowest and highest bucket so far (only new buckets can change them).
        self._lo = math.inf
        self._hi = -math.inf

    def add(self, key: tuple, ts: float, dur_us: int, ok: bool) -> None:
        s = self.series.get(key)
        if s is None:
            s = self.series[key] = Series()
        b = int(ts // self.resolution)
        if s.add(b, dur_us, ok) and not self._lo <= b <= self._hi:
            self._lo, self._hi = min(self._lo, b), max(self._hi, b)
            while self._hi - self._lo > MAX_FINE_BUCKETS and self._coarsen():
                pass

    def _coarsen(self) -> bool:
        i = self.ladder.index(self.resolution)
        if i + 1 == len(self.ladder):
            return False
        factor = round(self.ladder[i + 1] / self.resolution)
        for s in self.series.values():
            s.coarsen(factor)
        self._lo, self._hi = self._lo // factor, self._hi // factor
        self.resolution = self.ladder[i + 1]
        return True


def collect(paths: list[str], by: tuple, window: float | None) -> tuple[Collector, ReadStats]:
    """Reads all logs into a Collector."""
    stats = ReadStats()
    col = Collector(by, window)
    add = col.add
    for ts, dur, ok, rec in read_records(find_log_files(paths, stats), stats):
        add(key_of(rec, by), ts, dur, ok)
    return col, stats


# --------------------------------------------------------------------------
# Windows and their statistics
# --------------------------------------------------------------------------


@dataclass
class Grid:
    """The run cut into equal windows of `k` fine buckets each."""

    resolution: float
    k: int
    first_bucket: int
    count: int
    t_min: float
    t_max: float

    @property
    def window(self) -> float:
        return self.resolution * self.k

    def index(self, bucket: int) -> int:
        return (bucket - self.first_bucket) // self.k

    def start(self, w: int) -> float:
        return (self.first_bucket + w * self.k) * self.resolution

    def covered(self, w: int) -> float:
        """Seconds of window `w` inside the run: the first and last windows are
        partial, and dividing their counts by the full window would show a
        rate drop that is not there."""
        lo = max(self.start(w), self.t_min)
        hi = min(self.start(w) + self.window, self.t_max)
        return max(hi - lo, 1e-3)

    def mid(self, w: int) -> float:
        """Middle of the covered part of window `w`, seconds since the run began."""
        lo = max(self.start(w), self.t_min)
        hi = min(self.start(w) + self.window, self.t_max)
        return (lo + hi) / 2 - self.t_min


def make_grid(col: Collector, stats: ReadStats, window: float | None, n_windows: int) -> Grid:
    """Windows of `window` seconds, or ~`n_windows` equal ones over the run,
    starting with the fine bucket that holds the run's first record."""
    r = col.resolution
    first = int(stats.t_min // r) if stats.lines else 0
    last = int(stats.t_max // r) if stats.lines else 0
    if window is not None:  # the ladder ends at the window: a whole number of buckets
        k = max(1, round(window / r))
    else:
        k = max(1, math.ceil((last - first + 1) / max(1, n_windows)))
    return Grid(r, k, first, (last - first) // k + 1, stats.t_min, stats.t_max)


def percentile(sorted_vals, q: float) -> float:
    """Nearest-rank percentile: always an observed value, no interpolation."""
    if not sorted_vals:
        return math.nan
    i = max(0, math.ceil(q * len(sorted_vals)) - 1)
    return sorted_vals[i]


@dataclass
class WindowStats:
    count: int
    errors: int
    secs: float
    p50_ms: float
    p95_ms: float
    p99_ms: float

    @property
    def rate(self) -> float:
        return self.count / self.secs if self.secs > 0 else 0.0

    @property
    def error_share(self) -> float:
        return self.errors / self.count if self.count else 0.0

    def as_json(self) -> dict:
        return {
            "count": self.count,
            "secs": round(self.secs, 3),
            "rate_per_sec": round(self.rate, 3),
            "p50_ms": _num(self.p50_ms),
            "p95_ms": _num(self.p95_ms),
            "p99_ms": _num(self.p99_ms),
            "error_share": round(self.error_share, 4),
        }


def _num(x: float):
    """JSON has no NaN: a window without samples has no percentile."""
    return None if not math.isfinite(x) else round(x, 4)


def summarize(arrays: list, errors: int, secs: float) -> WindowStats:
    """Count, percentiles (ms) and errors of durations pooled from buckets."""
    vals = sorted(v for a in arrays for v in a)
    return WindowStats(
        count=len(vals),
        errors=errors,
        secs=secs,
        p50_ms=percentile(vals, 0.50) / 1000,
        p95_ms=percentile(vals, 0.95) / 1000,
        p99_ms=percentile(vals, 0.99) / 1000,
    )


def windows_of(series: Series, grid: Grid) -> list[WindowStats]:
    """Stats of one series for every window of the grid (empty windows too:
    a rate of zero is a data point, a missing line would hide it)."""
    arrays: list[list] = [[] for _ in range(grid.count)]
    errors = [0] * grid.count
    for b, a in series.durs.items():
        arrays[grid.index(b)].append(a)
    for b, n in series.errors.items():
        errors[grid.index(b)] += n
    return [summarize(arrays[w], errors[w], grid.covered(w)) for w in range(grid.count)]


def whole_run(series: Series, stats: ReadStats) -> WindowStats:
    return summarize(list(series.durs.values()), sum(series.errors.values()), max(stats.span, 1e-3))


def merge_series(col: Collector, keep: tuple) -> dict[tuple, Series]:
    """Regroups series by a subset of the `--by` fields (e.g. per op across
    nodes). Buckets are shared, not copied: the result is read-only."""
    idx = [col.by.index(f) for f in keep]
    out: dict[tuple, Series] = {}
    for key, s in col.series.items():
        k = tuple(key[i] for i in idx)
        m = out.get(k)
        if m is None:
            m = out[k] = Series()
        for b, a in s.durs.items():
            m.durs.setdefault(b, []).append(a)
        for b, n in s.errors.items():
            m.errors[b] = m.errors.get(b, 0) + n
    for m in out.values():
        m.durs = {b: _flatten(parts) for b, parts in m.durs.items()}
    return out


def _flatten(parts: list) -> array:
    if len(parts) == 1:
        return parts[0]
    a = array("q")
    for p in parts:
        a.extend(p)
    return a


def sort_key(key: tuple, by: tuple) -> tuple:
    """Orders groups with ops in pipeline order, other fields naturally."""
    out = []
    for f, v in zip(by, key):
        if f == "op":
            out.append((OP_ORDER.index(v) if v in OP_ORDER else len(OP_ORDER), v))
        elif f == "pid" and v.isdigit():
            out.append((0, f"{int(v):012d}"))
        else:
            out.append((0, v))
    return tuple(out)


# --------------------------------------------------------------------------
# Text output helpers
# --------------------------------------------------------------------------


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


def render_table(header: list[str], rows: list[list[str]], right: set[int]) -> str:
    """Aligned columns; numbers right-aligned so magnitudes line up."""
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]

    def line(r):
        cells = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))]
        return "  ".join(cells).rstrip()

    return "\n".join([line(header), line(["-" * w for w in widths])] + [line(r) for r in rows])


def describe_input(stats: ReadStats) -> str:
    """One header line, plus warnings about what could not be read."""
    lines = [f"# {stats.lines:,} records from {stats.files} file(s), run {stats.span:.1f} s"
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


# --------------------------------------------------------------------------
# table
# --------------------------------------------------------------------------


def cmd_table(args) -> int:
    by = parse_by(args.by)
    col, stats = collect(args.logs, by, args.window)
    if not stats.lines:
        return no_data(stats)
    grid = make_grid(col, stats, args.window, args.windows)
    keys = sorted(col.series, key=lambda k: sort_key(k, by))
    per_key = {k: windows_of(col.series[k], grid) for k in keys}
    totals = {k: whole_run(col.series[k], stats) for k in keys}
    if args.json:
        print_json(table_json(by, grid, stats, keys, per_key, totals))
        return 0
    print(describe_input(stats))
    print(f"# windows of {grid.window:g} s; latency in ms; err = share of outcomes other than "
          f"{'/'.join(sorted(SUCCESS_OUTCOMES))}\n")
    header = ["secs", "clock"] + list(by) + ["count", "rate/s", "p50", "p95", "p99", "err%"]
    right = {0} | set(range(2 + len(by), len(header)))
    rows = []
    for w in range(grid.count):
        window_rows = [[f"{max(0.0, grid.start(w) - stats.t_min):.1f}", clock(grid.start(w))]
                       + list(k) + stat_cells(per_key[k][w]) for k in keys if per_key[k][w].count]
        rows += window_rows + ([[""] * len(header)] if window_rows else [])
    rows += [["all", clock(stats.t_min)] + list(k) + stat_cells(totals[k]) for k in keys]
    print(render_table(header, rows, right))
    return 0


def stat_cells(ws: WindowStats) -> list[str]:
    return [str(ws.count), fmt_rate(ws.rate), fmt_ms(ws.p50_ms), fmt_ms(ws.p95_ms), fmt_ms(ws.p99_ms),
            f"{100 * ws.error_share:.1f}"]


def table_json(by, grid, stats, keys, per_key, totals) -> dict:
    rows = []
    for w in range(grid.count):
        for k in keys:
            ws = per_key[k][w]
            if ws.count:
                rows.append({"window": w, "start": round(grid.start(w), 3),
                             "offset_secs": round(grid.start(w) - stats.t_min, 3),
                             **dict(zip(by, k)), **ws.as_json()})
    return {
        "by": list(by),
        "window_secs": grid.window,
        **stats.as_json(),
        "rows": rows,
        "totals": [{**dict(zip(by, k)), **totals[k].as_json()} for k in keys],
    }


# --------------------------------------------------------------------------
# plot (hand-written SVG)
# --------------------------------------------------------------------------

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
           "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
DASHES = ("", "6,3", "2,2", "8,3,2,3")


def nice_ticks(lo: float, hi: float, n: int = 6) -> list[float]:
    """Round tick values (1, 2, 5 × 10^k steps) covering [lo, hi]."""
    if hi <= lo:
        hi = lo + 1
    raw = (hi - lo) / max(1, n)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    first = math.floor(lo / step) * step
    ticks, t = [], first
    while t <= hi + step * 1e-9:
        ticks.append(round(t, 12))
        t += step
    if ticks[-1] < hi:
        ticks.append(ticks[-1] + step)
    return ticks


def fmt_tick(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 1e6 or abs(v) < 1e-3:
        return f"{v:.3g}"
    return f"{v:.6g}"


@dataclass
class Line:
    label: str
    points: list  # (x seconds, y or NaN for no data)


class Chart:
    """A line chart as SVG text: axes with ticks and labels, grid, legend.

    Hand-written because CI has only the standard library; the output opens
    in any browser.
    """

    W, H = 900, 420
    LEFT, RIGHT, TOP, BOTTOM = 85, 200, 40, 50

    def __init__(self, title: str, xlabel: str, ylabel: str, log_y: bool = False):
        self.title, self.xlabel, self.ylabel, self.log_y = title, xlabel, ylabel, log_y
        self.lines: list[Line] = []

    def add(self, line: Line) -> None:
        self.lines.append(line)

    def _y_range(self, ys: list[float]) -> tuple[list[float], callable]:
        """Ticks and a value→pixel function for the y axis."""
        top, bottom = self.TOP, self.H - self.BOTTOM
        if self.log_y:
            pos = [y for y in ys if y > 0] or [1.0]
            lo_e, hi_e = math.floor(math.log10(min(pos))), math.ceil(math.log10(max(pos)))
            if hi_e == lo_e:
                hi_e += 1
            ticks = [10.0 ** e for e in range(lo_e, hi_e + 1)]

            def to_px(y):
                y = max(y, 10.0 ** lo_e)
                return bottom - (math.log10(y) - lo_e) / (hi_e - lo_e) * (bottom - top)
        else:
            ticks = nice_ticks(0.0, max(ys + [0.0]) or 1.0)

            def to_px(y):
                return bottom - (y - ticks[0]) / (ticks[-1] - ticks[0]) * (bottom - top)
        return ticks, to_px

    def svg(self) -> str:
        xs = [x for ln in self.lines for x, _ in ln.points]
        ys = [y for ln in self.lines for _, y in ln.points if not math.isnan(y)]
        xticks = nice_ticks(0.0, max(xs + [1.0]), 10)
        left, right = self.LEFT, self.W - self.RIGHT
        bottom = self.H - self.BOTTOM

        def x_px(x):
            return left + (x - xticks[0]) / (xticks[-1] - xticks[0]) * (right - left)

        yticks, y_px = self._y_range(ys)
        out = [
            '<?xml version="1.0" encoding="UTF-8"?>',
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.W}" height="{self.H}" '
            f'viewBox="0 0 {self.W} {self.H}" font-family="sans-serif" font-size="12">',
            f'<rect width="{self.W}" height="{self.H}" fill="white"/>',
            f'<text x="{self.W / 2:.0f}" y="22" text-anchor="middle" font-size="15" '
            f'font-weight="bold">{esc(self.title)}</text>',
        ]
        for t in xticks:
            px = x_px(t)
            out.append(f'<line x1="{px:.1f}" y1="{self.TOP}" x2="{px:.1f}" y2="{bottom}" stroke="#e5e5e5"/>')
            out.append(f'<line x1="{px:.1f}" y1="{bottom}" x2="{px:.1f}" y2="{bottom + 5}" stroke="black"/>')
            out.append(f'<text x="{px:.1f}" y="{bottom + 18}" text-anchor="middle">{fmt_tick(t)}</text>')
        for t in yticks:
            py = y_px(t)
            out.append(f'<line x1="{left}" y1="{py:.1f}" x2="{right}" y2="{py:.1f}" stroke="#e5e5e5"/>')
            out.append(f'<line x1="{left - 5}" y1="{py:.1f}" x2="{left}" y2="{py:.1f}" stroke="black"/>')
            out.append(f'<text x="{left - 8}" y="{py + 4:.1f}" text-anchor="end">{fmt_tick(t)}</text>')
        out.append(f'<line x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="black"/>')
        out.append(f'<line x1="{left}" y1="{self.TOP}" x2="{left}" y2="{bottom}" stroke="black"/>')
        out.append(f'<text x="{(left + right) / 2:.0f}" y="{self.H - 12}" text-anchor="middle">'
                   f'{esc(self.xlabel)}</text>')
        out.append(f'<text transform="translate(16 {(self.TOP + bottom) / 2:.0f}) rotate(-90)" '
                   f'text-anchor="middle">{esc(self.ylabel)}</text>')
        for i, ln in enumerate(self.lines):
            out += self._line_svg(i, ln, x_px, y_px)
        return "\n".join(out + ["</svg>", ""])

    def _line_svg(self, i: int, ln: Line, x_px, y_px) -> list[str]:
        """One series: polylines broken where there is no data, plus a legend entry."""
        color = PALETTE[i % len(PALETTE)]
        dash = DASHES[(i // len(PALETTE)) % len(DASHES)]
        style = f'fill="none" stroke="{color}" stroke-width="2"' + (f' stroke-dasharray="{dash}"' if dash else "")
        out, run = [], []
        for x, y in ln.points + [(0, math.nan)]:
            if math.isnan(y):
                if len(run) > 1:
                    out.append(f'<polyline {style} points="{" ".join(run)}"/>')
                elif run:
                    out.append(f'<circle cx="{run[0].split(",")[0]}" cy="{run[0].split(",")[1]}" r="3" '
                               f'fill="{color}"/>')
                run = []
            else:
                run.append(f"{x_px(x):.1f},{y_px(y):.1f}")
        ly = self.TOP + 10 + 18 * i
        lx = self.W - self.RIGHT + 15
        out.append(f'<line x1="{lx}" y1="{ly}" x2="{lx + 24}" y2="{ly}" {style}/>')
        out.append(f'<text x="{lx + 30}" y="{ly + 4}">{esc(ln.label[:24])}</text>')
        return out


def esc(s: str) -> str:
    return html.escape(s, quote=True)


def safe_name(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", s) or "_"


def cmd_plot(args) -> int:
    by = parse_by(args.by)
    if "op" not in by:
        return usage_error("plot: --by must include op")
    col, stats = collect(args.logs, by, args.window)
    if not stats.lines:
        return no_data(stats)
    grid = make_grid(col, stats, args.window, args.windows)
    os.makedirs(args.out, exist_ok=True)
    written = write_rate_charts(col, grid, by, args.out) + [write_latency_chart(col, grid, args.out)]
    write_index(args.out, written, stats, grid)
    print(describe_input(stats))
    print(f"# windows of {grid.window:g} s")
    for p in written + ["index.html"]:
        print(os.path.join(args.out, p))
    return 0


def write_rate_charts(col: Collector, grid: Grid, by: tuple, out: str) -> list[str]:
    """One chart per op: its rate over time, a line per group (node by default).
    Comparing the lines is how a node that falls behind shows up."""
    rest = [f for f in by if f != "op"]
    op_i = by.index("op")
    groups: dict[str, list[tuple]] = {}
    for key in col.series:
        groups.setdefault(key[op_i], []).append(key)
    names = []
    for op in sorted(groups, key=lambda o: sort_key((o,), ("op",))):
        chart = Chart(f"{op}: rate over time", "seconds since start", "operations / s")
        for key in sorted(groups[op], key=lambda k: sort_key(k, by)):
            ws = windows_of(col.series[key], grid)
            label = " ".join(f"{f}={key[by.index(f)]}" for f in rest) or op
            chart.add(Line(label, [(grid.mid(w), s.rate) for w, s in enumerate(ws)]))
        name = f"rate-{safe_name(op)}.svg"
        write_file(os.path.join(out, name), chart.svg())
        names.append(name)
    return names


def write_latency_chart(col: Collector, grid: Grid, out: str) -> str:
    """p95 latency of every op over time on one log-scale chart: ops differ by
    orders of magnitude, and a rising line is the slowdown to look at."""
    chart = Chart("p95 latency over time per operation", "seconds since start", "p95 latency (ms, log scale)",
                  log_y=True)
    for (op,), s in sorted(merge_series(col, ("op",)).items(), key=lambda kv: sort_key(kv[0], ("op",))):
        ws = windows_of(s, grid)
        chart.add(Line(op, [(grid.mid(w), x.p95_ms) for w, x in enumerate(ws)]))
    name = "latency-p95.svg"
    write_file(os.path.join(out, name), chart.svg())
    return name


def write_index(out: str, names: list[str], stats: ReadStats, grid: Grid) -> None:
    """A page showing every chart at once, for a quick look in a browser."""
    imgs = "\n".join(f'<p><img src="{esc(n)}" alt="{esc(n)}"></p>' for n in [names[-1]] + names[:-1])
    write_file(os.path.join(out, "index.html"),
               f"<!doctype html><meta charset='utf-8'><title>oprates</title>\n"
               f"<p>{stats.lines:,} records, run {stats.span:.1f} s, windows of {grid.window:g} s</p>\n{imgs}\n")


def write_file(path: str, text: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


# --------------------------------------------------------------------------
# trend
# --------------------------------------------------------------------------


@dataclass
class Trend:
    """How one group changed between the first and the last third of the run."""

    key: dict
    samples: int
    first: WindowStats
    last: WindowStats
    slope_ms_per_min: float
    r2: float
    p50_per_window: list
    rate_per_window: list

    @property
    def eligible(self) -> bool:
        return (self.samples >= MIN_SAMPLES and self.first.count >= MIN_THIRD_SAMPLES
                and self.last.count >= MIN_THIRD_SAMPLES)

    @property
    def growth(self) -> float:
        """Median latency, last third over first third (NaN if a third is
        empty). A floor of 1 µs keeps ops that log 0 µs from dividing by zero."""
        return max(self.last.p50_ms, 0.001) / max(self.first.p50_ms, 0.001)

    @property
    def added_ms(self) -> float:
        return self.last.p50_ms - self.first.p50_ms

    @property
    def added_load(self) -> float:
        """Extra busy time per second of run that the latency growth costs,
        at the final rate: 1.0 = one more thread busy all the time. It weighs
        a growth by how often the operation runs."""
        if math.isnan(self.added_ms):
            return math.nan
        return self.added_ms / 1000 * self.last.rate

    @property
    def rate_change(self) -> float:
        """Relative change of the rate: -0.12 = fell 12%."""
        return self.last.rate / self.first.rate - 1 if self.first.rate else math.nan

    def as_json(self) -> dict:
        return {
            **self.key,
            "samples": self.samples,
            "eligible": self.eligible,
            "first_third": self.first.as_json(),
            "last_third": self.last.as_json(),
            "latency_growth": _num(self.growth),
            "p50_added_ms": _num(self.added_ms),
            "added_load": _num(self.added_load),
            "p50_slope_ms_per_min": _num(self.slope_ms_per_min),
            "p50_fit_r2": _num(self.r2),
            "rate_change": _num(self.rate_change),
            "p50_ms_per_window": [_num(v) for v in self.p50_per_window],
            "rate_per_window": [round(v, 3) for v in self.rate_per_window],
        }


def least_squares(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Slope and r² of the best straight line through the points: a steady
    growth fits well (r² near 1); a single spike does not."""
    n = len(points)
    if n < 2:
        return math.nan, math.nan
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    sxy = sum((x - mx) * (y - my) for x, y in points)
    syy = sum((y - my) ** 2 for _, y in points)
    if sxx == 0:
        return math.nan, math.nan
    slope = sxy / sxx
    r2 = (sxy * sxy) / (sxx * syy) if syy else 0.0
    return slope, r2


def thirds(series: Series, col: Collector, stats: ReadStats) -> tuple[WindowStats, WindowStats]:
    """Stats of the first and the last third of the run (by time). Thirds
    rather than the first and last window: they hold enough samples to be
    stable, and one odd window (a start-up burst) cannot decide the verdict."""
    r = col.resolution
    third = stats.span / 3
    first, last, ef, el = [], [], 0, 0
    for b, a in series.durs.items():
        mid = (b + 0.5) * r
        if mid < stats.t_min + third:
            first.append(a)
            ef += series.errors.get(b, 0)
        elif mid >= stats.t_max - third:
            last.append(a)
            el += series.errors.get(b, 0)
    secs = max(min(third, stats.span), 1e-3)
    return summarize(first, ef, secs), summarize(last, el, secs)


def trend_of(key: dict, series: Series, col: Collector, grid: Grid, stats: ReadStats) -> Trend:
    ws = windows_of(series, grid)
    # Windows with very few samples make the fitted line follow noise.
    pts = [(grid.mid(w), s.p50_ms) for w, s in enumerate(ws) if s.count >= 3]
    slope, r2 = least_squares(pts)
    first, last = thirds(series, col, stats)
    return Trend(
        key=key,
        samples=sum(len(a) for a in series.durs.values()),
        first=first,
        last=last,
        slope_ms_per_min=slope * 60,
        r2=r2,
        p50_per_window=[s.p50_ms for s in ws],
        rate_per_window=[s.rate for s in ws],
    )


def verdict_pool(trends: list[Trend], include_waits: bool) -> list[Trend]:
    """The groups the verdict may name: enough samples, not a deliberate wait."""
    return [t for t in trends if t.eligible and (include_waits or t.key.get("op") not in DELIBERATE_WAITS)]


def median_rate_change(pool: list[Trend]) -> float:
    """The typical rate change. When every operation falls alike the crawl is
    running out of work (the frontier drains), which is not a bottleneck; an
    operation that falls much more than the others is."""
    changes = sorted(t.rate_change for t in pool)
    return changes[len(changes) // 2] if changes else 0.0


def relevant_growth(pool: list[Trend]) -> list[Trend]:
    """Groups whose latency growth costs real time (see MIN_RELEVANT_LOAD)."""
    if not pool:
        return []
    floor = max(MIN_RELEVANT_LOAD, RELEVANT_LOAD_SHARE * max(t.added_load for t in pool))
    return [t for t in pool if t.added_load >= floor]


def verdict(trends: list[Trend], include_waits: bool) -> tuple[Trend | None, Trend | None]:
    """The group whose median latency grew most, and the one whose rate fell most.

    Latency growth is ranked by factor (last third / first third), among
    groups whose growth costs real time when there are any. Otherwise a
    20 µs operation that grows to 100 µs (5x, and harmless) would outrank the
    one that adds milliseconds to every page (3x, and the bottleneck).
    """
    pool = verdict_pool(trends, include_waits)
    if not pool:
        return None, None
    worst_lat = max(relevant_growth(pool) or pool, key=lambda t: (t.growth, t.added_load))
    worst_rate = min(pool, key=lambda t: t.rate_change)
    return worst_lat, worst_rate


def notable_growth(t: Trend) -> bool:
    """Worth a headline: grew NOTABLE_GROWTH-fold and costs real time."""
    return t.growth >= NOTABLE_GROWTH and t.added_load >= MIN_RELEVANT_LOAD


def label(key: dict) -> str:
    op = key.get("op", "?")
    rest = " ".join(f"{k}={v}" for k, v in key.items() if k != "op")
    return f"{op} ({rest})" if rest else op


def latency_sentence(t: Trend, span: float) -> str:
    s = (f"{label(t.key)}: median latency grew {t.growth:.1f}x ({fmt_ms(t.first.p50_ms)} ms → "
         f"{fmt_ms(t.last.p50_ms)} ms) over {span:.0f} s")
    return s + f"; rate {rate_words(t.rate_change)}"


def rate_sentence(t: Trend, span: float) -> str:
    return (f"{label(t.key)}: rate {rate_words(t.rate_change)} ({fmt_rate(t.first.rate)}/s → "
            f"{fmt_rate(t.last.rate)}/s) over {span:.0f} s; median latency {fmt_ms(t.first.p50_ms)} ms → "
            f"{fmt_ms(t.last.p50_ms)} ms")


def rate_words(change: float) -> str:
    if abs(change) < 0.005:
        return "steady"
    if change < 0:
        return f"fell {-100 * change:.0f}%"
    return f"rose {100 * change:.0f}%"


def cmd_trend(args) -> int:
    by = parse_by(args.by)
    if "op" not in by:
        return usage_error("trend: --by must include op")
    col, stats = collect(args.logs, by, args.window)
    if not stats.lines:
        return no_data(stats)
    grid = make_grid(col, stats, args.window, args.windows)
    per_op = [trend_of({"op": op}, s, col, grid, stats) for (op,), s in merge_series(col, ("op",)).items()]
    per_op.sort(key=lambda t: sort_key((t.key["op"],), ("op",)))
    if by == ("op",):
        groups = per_op
    else:
        groups = [trend_of(dict(zip(by, k)), s, col, grid, stats) for k, s in col.series.items()]
        groups.sort(key=lambda t: sort_key(tuple(t.key[f] for f in by), by))
    worst_lat, worst_rate = verdict(groups, args.include_waits)
    if args.json:
        print_json(trend_json(by, grid, stats, per_op, groups, worst_lat, worst_rate, args))
    else:
        print(trend_report(by, grid, stats, per_op, groups, worst_lat, worst_rate, args))
    return 0


def trend_json(by, grid, stats, per_op, groups, worst_lat, worst_rate, args) -> dict:
    def pick(t, extra):
        return None if t is None else {**t.key, **extra(t)}

    out = {
        "by": list(by),
        "window_secs": grid.window,
        "windows": grid.count,
        **stats.as_json(),
        "excluded_from_verdict": [] if args.include_waits else sorted(DELIBERATE_WAITS),
        "min_samples": MIN_SAMPLES,
        "worst_latency_growth": pick(worst_lat, lambda t: {
            "factor": _num(t.growth), "first_p50_ms": _num(t.first.p50_ms),
            "last_p50_ms": _num(t.last.p50_ms), "added_load": _num(t.added_load),
            "rate_change": _num(t.rate_change),
            "notable": notable_growth(t)}),
        "worst_rate_decline": pick(worst_rate, lambda t: {
            "decline": _num(-t.rate_change), "first_rate": round(t.first.rate, 3),
            "last_rate": round(t.last.rate, 3), "notable": -t.rate_change >= NOTABLE_DECLINE,
            "median_rate_change": round(median_rate_change(verdict_pool(groups, args.include_waits)), 4)}),
        "ops": {t.key["op"]: t.as_json() for t in per_op},
    }
    if groups is not per_op:
        out["series"] = [t.as_json() for t in groups]
    return out


def trend_report(by, grid, stats, per_op, groups, worst_lat, worst_rate, args) -> str:
    """The human verdict first (what to look at), then the evidence."""
    excluded = "" if args.include_waits else f"; {', '.join(sorted(DELIBERATE_WAITS))} excluded (deliberate)"
    out = [describe_input(stats),
           f"# {grid.count} windows of {grid.window:g} s; first third vs last third of the run"
           f"; groups with < {MIN_SAMPLES} samples ignored{excluded}", ""]
    if worst_lat is None:
        out.append("Not enough samples in any operation for a verdict.")
    else:
        if notable_growth(worst_lat):
            out.append("LATENCY  " + latency_sentence(worst_lat, stats.span))
        else:
            out.append(f"LATENCY  nothing stands out: no operation's median grew {NOTABLE_GROWTH:g}x while costing "
                       f"{100 * MIN_RELEVANT_LOAD:g}% of a thread or more (largest growth: {label(worst_lat.key)} "
                       f"{worst_lat.growth:.2f}x, {fmt_signed(worst_lat.added_load, '.3f')} busy s/s)")
        if -worst_rate.rate_change >= NOTABLE_DECLINE:
            out.append("RATE     " + rate_sentence(worst_rate, stats.span))
            typical = median_rate_change(verdict_pool(groups, args.include_waits))
            if -typical >= NOTABLE_DECLINE:
                out.append(f"         (the typical operation's rate {rate_words(typical)} too: when all fall "
                           "alike the crawl is running out of work, not held back by one operation)")
        else:
            out.append(f"RATE     nothing stands out: no operation's rate fell {100 * NOTABLE_DECLINE:.0f}% or more "
                       f"(largest fall: {label(worst_rate.key)} {rate_words(worst_rate.rate_change)})")
    out.append("")
    out.append(trend_table(groups, by))
    if groups is not per_op:
        out += ["", "All groups of each op together:", trend_table(per_op, ("op",))]
    return "\n".join(out)


def growth_cell(t: Trend) -> str:
    if math.isnan(t.first.p50_ms) or math.isnan(t.last.p50_ms):
        return "-"
    return f"{t.growth:.2f}x"


def why_not_eligible(t: Trend) -> str:
    if t.samples < MIN_SAMPLES:
        return "few samples"
    third = "first" if t.first.count < MIN_THIRD_SAMPLES else "last"
    return f"< {MIN_THIRD_SAMPLES} in the {third} third"


def fmt_signed(x: float, spec: str, unit: str = "") -> str:
    return "-" if not math.isfinite(x) else f"{x:+{spec}}{unit}"


def trend_table(trends: list[Trend], by: tuple) -> str:
    header = list(by) + ["samples", "p50 first", "p50 last", "growth", "+load", "slope ms/min", "r2",
                         "rate first", "rate last", "change", "p50 per window"]
    rows = []
    for t in trends:
        note = "" if t.eligible else f" ({why_not_eligible(t)})"
        rows.append([t.key[f] for f in by] + [
            str(t.samples), fmt_ms(t.first.p50_ms), fmt_ms(t.last.p50_ms),
            growth_cell(t), fmt_signed(t.added_load, ".2f"), fmt_signed(t.slope_ms_per_min, ".3g"),
            "-" if math.isnan(t.r2) else f"{t.r2:.2f}",
            fmt_rate(t.first.rate), fmt_rate(t.last.rate), fmt_signed(100 * t.rate_change, ".0f", "%"),
            sparkline(t.p50_per_window) + note])
    right = set(range(len(by), len(header) - 1))
    return render_table(header, rows, right)


# --------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------


def parse_by(spec: str) -> tuple:
    fields = tuple(f.strip() for f in spec.split(",") if f.strip())
    bad = [f for f in fields if f not in KEY_FIELDS]
    if bad or not fields:
        raise SystemExit(f"oprates: --by takes a comma-separated list of {', '.join(KEY_FIELDS)} (got {spec!r})")
    return fields


def positive_float(s: str) -> float:
    try:
        v = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {s}") from None
    if not v > 0 or not math.isfinite(v):
        raise argparse.ArgumentTypeError(f"must be > 0: {s}")
    return v


def no_data(stats: ReadStats) -> int:
    print(describe_input(stats), file=sys.stderr)
    print("oprates: no timing records found", file=sys.stderr)
    return 1


def usage_error(msg: str) -> int:
    print(f"oprates: {msg}", file=sys.stderr)
    return 2


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="oprates.py",
        description="Per-operation rates and latencies over time from crawler timing logs (--timing-log).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="See scripts/README.md for a worked example.",
    )
    sub = ap.add_subparsers(dest="cmd", required=True)

    def common(p, by: str, window: float | None, windows: int):
        p.add_argument("logs", nargs="+", help="timing log files or directories (*.jsonl inside, recursively)")
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

    r = sub.add_parser("trend", help="which operation slows down or falls behind over the run, and by how much")
    common(r, "op", None, 10)
    r.add_argument("--json", action="store_true", help="machine-readable output")
    r.add_argument("--include-waits", action="store_true",
                   help=f"let deliberate waits ({', '.join(sorted(DELIBERATE_WAITS))}) into the verdict")
    r.set_defaults(func=cmd_trend)
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


if __name__ == "__main__":
    sys.exit(main())
