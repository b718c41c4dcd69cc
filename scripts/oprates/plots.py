"""`plot`: SVG line charts of rate and latency over time.

Written by hand because CI has only the standard library; the output opens
in any browser. One chart per operation shows its rate with a line per node
(the node that falls behind stands out), one chart shows every operation's
p95 latency on a log scale (a rising line is a slowdown).
"""

from __future__ import annotations

import html
import math
import os
import re
from dataclasses import dataclass

from .formatting import describe_input, no_data, usage_error
from .reading import ReadStats
from .windows import Collector, Grid, collect, make_grid, merge_series, parse_by, sort_key, windows_of

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
    """A line chart as SVG text: axes with ticks and labels, grid, legend."""

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
