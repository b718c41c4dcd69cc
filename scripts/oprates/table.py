"""`table`: the numbers per window and group (count, rate, p50/p95/p99, errors).

The plain view behind the other commands: when a verdict looks odd, the
table shows what it was computed from, window by window.
"""

from __future__ import annotations

from .formatting import clock, describe_input, fmt_ms, fmt_rate, no_data, print_json, render_table
from .ops import SUCCESS_OUTCOMES
from .windows import WindowStats, collect, make_grid, parse_by, sort_key, whole_run, windows_of


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
