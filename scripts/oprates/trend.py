"""`trend`: which operation slows down or falls behind over the run.

Per group it compares the median latency and the rate of the first third of
the run with the last third (growth = last/first) and fits a least-squares
line through the per-window medians (slope, r²). The latency verdict is the
largest growth among groups whose growth costs real time (added load = added
median × final rate ≥ 1% of a thread and ≥ 10% of the largest added load),
so a 20 µs operation that doubles cannot outrank one that adds milliseconds
to every page. Groups with < 20 samples and waits (politeness_wait is slow
on purpose; the queue waits grow behind whatever is slow) are left out of
the verdict but still listed.

The run's tail is left out first (see phases.py): when only a few slow hosts
are left, every latency looks like it grew, and the verdict would describe
the last minutes instead of the crawl.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .formatting import (clock, describe_input, fmt_ms, fmt_rate, fmt_signed, no_data, num, print_json,
                         render_table, sparkline, usage_error)
from .ops import DELIBERATE_WAITS, WAIT_OPS
from .phases import Phases, detect_phases
from .reading import ReadStats
from .timeline import Timeline
from .windows import (Collector, Grid, Series, WindowStats, collect, make_grid, merge_series, parse_by, sort_key,
                      stats_until, summarize, windows_of)

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
# A latency whose per-window medians fit a line this well grew steadily: a
# slowdown over time, not a jump in a few windows (see `verdict`).
STEADY_R2 = 0.8
# Windows of the phase detection (ramp, main, slowdown, tail), whatever --window is.
PHASE_WINDOW = 5.0


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
            "latency_growth": num(self.growth),
            "p50_added_ms": num(self.added_ms),
            "added_load": num(self.added_load),
            "p50_slope_ms_per_min": num(self.slope_ms_per_min),
            "p50_fit_r2": num(self.r2),
            "rate_change": num(self.rate_change),
            "p50_ms_per_window": [num(v) for v in self.p50_per_window],
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


def excluded_ops(include_waits: bool) -> frozenset:
    """Ops the verdict may not name: the waits, unless asked for."""
    return frozenset() if include_waits else WAIT_OPS


def verdict_pool(trends: list[Trend], include_waits: bool) -> list[Trend]:
    """The groups the verdict may name: enough samples, not a wait."""
    excluded = excluded_ops(include_waits)
    return [t for t in trends if t.eligible and t.key.get("op") not in excluded]


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

    Among those, a steady growth (per-window medians on a line, r2 of at
    least STEADY_R2) outranks one that jumped in a few windows: the cause of
    a slowdown over time grows steadily, while what waits behind it grows by
    fits. In a crawl whose parse slowed by 300 µs a second of run time,
    parse grew 4.10x (r2 1.00) and fetch, whose tasks share the child's
    threads with parse, 4.26x (r2 0.50), and fetch was named.
    """
    pool = verdict_pool(trends, include_waits)
    if not pool:
        return None, None
    relevant = relevant_growth(pool) or pool
    steady = [t for t in relevant if not math.isnan(t.r2) and t.r2 >= STEADY_R2]
    worst_lat = max(steady or relevant, key=lambda t: (t.growth, t.added_load))
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


@dataclass
class TailCut:
    """What trend left out: the tail after the main phase."""

    phases: Phases
    start: float | None  # the tail's first second, None when there is no tail
    secs: float  # how long the tail is
    analysed_secs: float

    def as_json(self) -> dict:
        p = self.phases
        return {
            "window_secs": PHASE_WINDOW,
            "basis": p.basis,
            "tail_left_out": self.start is not None,
            "tail_start": self.start,
            "tail_secs": round(self.secs, 3),
            "analysed_secs": round(self.analysed_secs, 3),
        }

    def sentence(self) -> str:
        return (f"# tail left out: the last {self.secs:.1f} s (from {clock(self.start)}), after the main phase, "
                f"when the crawl had run out of work ({self.phases.basis}); the verdict covers the first "
                f"{self.analysed_secs:.1f} s")


def cut_tail(col: Collector, stats: ReadStats, timeline: Timeline) -> tuple[Collector, ReadStats, TailCut]:
    """The collector and read statistics without the run's tail."""
    facts = timeline.facts()
    phases = detect_phases(facts)
    if phases.tail_start is None:
        return col, stats, TailCut(phases, None, 0.0, stats.span)
    start = facts[phases.tail_start].start
    if start <= stats.t_min or start > stats.t_max:
        return col, stats, TailCut(phases, None, 0.0, stats.span)
    kept = stats_until(stats, start)
    return col.clipped(start), kept, TailCut(phases, start, stats.t_max - start, kept.span)


def cmd_trend(args) -> int:
    by = parse_by(args.by)
    if "op" not in by:
        return usage_error("trend: --by must include op")
    timeline = Timeline(PHASE_WINDOW)
    full_col, stats = collect(args.logs, by, args.window, timeline.add_record, timeline.add_gauges)
    if not stats.lines:
        return no_data(stats)
    col, kept, cut = cut_tail(full_col, stats, timeline)
    grid = make_grid(col, kept, args.window, args.windows)
    per_op = [trend_of({"op": op}, s, col, grid, kept) for (op,), s in merge_series(col, ("op",)).items()]
    per_op.sort(key=lambda t: sort_key((t.key["op"],), ("op",)))
    if by == ("op",):
        groups = per_op
    else:
        groups = [trend_of(dict(zip(by, k)), s, col, grid, kept) for k, s in col.series.items()]
        groups.sort(key=lambda t: sort_key(tuple(t.key[f] for f in by), by))
    worst_lat, worst_rate = verdict(groups, args.include_waits)
    if args.json:
        print_json(trend_json(by, grid, stats, per_op, groups, worst_lat, worst_rate, args, cut))
    else:
        print(trend_report(by, grid, stats, per_op, groups, worst_lat, worst_rate, args, cut))
    return 0


def trend_json(by, grid, stats, per_op, groups, worst_lat, worst_rate, args, cut: TailCut) -> dict:
    def pick(t, extra):
        return None if t is None else {**t.key, **extra(t)}

    out = {
        "by": list(by),
        "window_secs": grid.window,
        "windows": grid.count,
        **stats.as_json(),
        "excluded_from_verdict": sorted(excluded_ops(args.include_waits)),
        "min_samples": MIN_SAMPLES,
        "phases": cut.as_json(),
        "worst_latency_growth": pick(worst_lat, lambda t: {
            "factor": num(t.growth), "first_p50_ms": num(t.first.p50_ms),
            "last_p50_ms": num(t.last.p50_ms), "added_load": num(t.added_load),
            "rate_change": num(t.rate_change),
            "notable": notable_growth(t)}),
        "worst_rate_decline": pick(worst_rate, lambda t: {
            "decline": num(-t.rate_change), "first_rate": round(t.first.rate, 3),
            "last_rate": round(t.last.rate, 3), "notable": -t.rate_change >= NOTABLE_DECLINE,
            "median_rate_change": round(median_rate_change(verdict_pool(groups, args.include_waits)), 4)}),
        "ops": {t.key["op"]: t.as_json() for t in per_op},
    }
    if groups is not per_op:
        out["series"] = [t.as_json() for t in groups]
    return out


def excluded_words(per_op: list[Trend], include_waits: bool) -> str:
    """The header's note on the waits left out (only those in the logs)."""
    present = sorted(t.key["op"] for t in per_op if t.key["op"] in excluded_ops(include_waits))
    if not present or set(present) <= DELIBERATE_WAITS:
        # Older logs: the only wait is the deliberate one (and the old wording).
        return "" if include_waits else f"; {', '.join(present or ['politeness_wait'])} excluded (deliberate)"
    return f"; waits excluded ({', '.join(present)}: slow on purpose or behind a bottleneck, not one)"


def trend_report(by, grid, stats, per_op, groups, worst_lat, worst_rate, args, cut: TailCut) -> str:
    """The human verdict first (what to look at), then the evidence."""
    span = cut.analysed_secs
    out = [describe_input(stats),
           f"# {grid.count} windows of {grid.window:g} s; first third vs last third of the run"
           f"; groups with < {MIN_SAMPLES} samples ignored{excluded_words(per_op, args.include_waits)}"]
    if cut.start is not None:
        out.append(cut.sentence())
    out.append("")
    if worst_lat is None:
        out.append("Not enough samples in any operation for a verdict.")
    else:
        if notable_growth(worst_lat):
            out.append("LATENCY  " + latency_sentence(worst_lat, span))
        else:
            out.append(f"LATENCY  nothing stands out: no operation's median grew {NOTABLE_GROWTH:g}x while costing "
                       f"{100 * MIN_RELEVANT_LOAD:g}% of a thread or more (largest growth: {label(worst_lat.key)} "
                       f"{worst_lat.growth:.2f}x, {fmt_signed(worst_lat.added_load, '.3f')} busy s/s)")
        if -worst_rate.rate_change >= NOTABLE_DECLINE:
            out.append("RATE     " + rate_sentence(worst_rate, span))
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
