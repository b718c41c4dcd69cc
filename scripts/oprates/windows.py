"""Operation records bucketed by group and time, cut into windows, summarised.

Durations are kept (as compact int arrays) rather than summarised as they
come, because percentiles of a window cannot be computed from percentiles of
its parts. Timestamps are first bucketed at a fine resolution that coarsens
as the run grows (see RESOLUTION_LADDER), so memory stays bounded whatever
the run's length, and windows can still start where the run starts.
"""

from __future__ import annotations

import dataclasses
import math
from array import array
from dataclasses import dataclass

from .formatting import num
from .ops import op_rank
from .reading import KEY_FIELDS, ReadStats, find_log_files, key_of, read_records

# Timestamps are first bucketed at a fine resolution that coarsens (by whole
# factors, so buckets merge exactly) as the run grows: memory stays bounded by
# MAX_FINE_BUCKETS per series whatever the run length, and windows can still
# start where the run starts and, without --window, cut it into ~N equal parts.
# With --window W the ladder is W/1024, W/512, ... W instead.
RESOLUTION_LADDER = (0.01, 0.1, 1.0, 10.0, 60.0, 600.0, 3600.0, 86400.0)
MAX_FINE_BUCKETS = 2048


class Series:
    """Durations (µs) and error counts of one group, per fine time bucket."""

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

    def clipped(self, t_end: float) -> "Collector":
        """A read-only copy holding only the buckets that start before
        `t_end` (trend leaves a run's tail out this way)."""
        out = Collector(self.by, None)
        out.ladder, out.resolution = self.ladder, self.resolution
        last = math.ceil(t_end / self.resolution) - 1  # the last bucket starting before t_end
        for key, s in self.series.items():
            c = Series()
            c.durs = {b: a for b, a in s.durs.items() if b <= last}
            c.errors = {b: n for b, n in s.errors.items() if b <= last}
            if c.durs:
                out.series[key] = c
        return out


def collect(paths: list[str], by: tuple, window: float | None, on_record=None,
            on_gauges=None) -> tuple[Collector, ReadStats]:
    """Reads all logs into a Collector. `on_record(ts, dur_us, ok, rec)` and
    `on_gauges(GaugeLine)` see every record too, so one pass over the files
    can feed other views (the phases of the run) at the same time."""
    stats = ReadStats()
    col = Collector(by, window)
    add = col.add
    records = read_records(find_log_files(paths, stats), stats, on_gauges)
    if on_record is None:
        for ts, dur, ok, rec in records:
            add(key_of(rec, by), ts, dur, ok)
    else:
        for ts, dur, ok, rec in records:
            add(key_of(rec, by), ts, dur, ok)
            on_record(ts, dur, ok, rec)
    return col, stats


def stats_until(stats: ReadStats, t_end: float) -> ReadStats:
    """The read statistics as if the run had ended just before `t_end`."""
    return dataclasses.replace(stats, t_max=min(stats.t_max, math.nextafter(t_end, -math.inf)))


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
    """Count, errors and latency percentiles of one group in one window."""

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
            "p50_ms": num(self.p50_ms),
            "p95_ms": num(self.p95_ms),
            "p99_ms": num(self.p99_ms),
            "error_share": round(self.error_share, 4),
        }


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
            out.append(op_rank(v))
        elif f == "pid" and v.isdigit():
            out.append((0, f"{int(v):012d}"))
        else:
            out.append((0, v))
    return tuple(out)


def parse_by(spec: str) -> tuple:
    """The `--by` fields; exits with a usage message on an unknown one."""
    fields = tuple(f.strip() for f in spec.split(",") if f.strip())
    bad = [f for f in fields if f not in KEY_FIELDS]
    if bad or not fields:
        raise SystemExit(f"oprates: --by takes a comma-separated list of {', '.join(KEY_FIELDS)} (got {spec!r})")
    return fields
