"""`tls`: TLS handshakes per page, from the children's gauge lines.

A child's gauge line carries running totals since it started of its
handshakes (`tls_handshakes.full`, `tls_handshakes.resumed`) and of the
requests whose handshake failed (`tls_failures.<why>`); each process's last
line (a child writes one more as it stops) summed over the processes,
divided by the `fetch` records of the same logs, is handshakes per page.
"""

from __future__ import annotations

from .formatting import describe_input, no_data, print_json
from .reading import ReadStats, find_log_files, read_records

PREFIXES = ("tls_handshakes.", "tls_failures.")


def tls_figures(paths: list[str]) -> tuple[dict, ReadStats]:
    stats = ReadStats()
    last = {}  # pid -> {key: value}, its last line's

    def on_gauges(g):
        values = {k: v for k, v in g.values.items() if k.startswith(PREFIXES)}
        if values:
            last[g.pid] = values

    fetches = 0
    for _ts, _dur, _ok, rec in read_records(find_log_files(paths, stats), stats, on_gauges):
        if rec.get("op") == "fetch":
            fetches += 1
    totals = {}
    for values in last.values():
        for k, v in values.items():
            totals[k] = totals.get(k, 0) + v
    full = totals.get("tls_handshakes.full", 0)
    resumed = totals.get("tls_handshakes.resumed", 0)
    out = {
        "processes": len(last),
        "fetches": fetches,
        "full": full,
        "resumed": resumed,
        "failed": {k.split(".", 1)[1]: v for k, v in sorted(totals.items()) if k.startswith("tls_failures.")},
        "handshakes_per_page": round((full + resumed) / fetches, 4) if fetches else None,
        "full_per_page": round(full / fetches, 4) if fetches else None,
    }
    return out, stats


def cmd_tls(args) -> int:
    out, stats = tls_figures(args.logs)
    if not stats.lines and not out["processes"]:
        return no_data(stats)
    if args.json:
        print_json(out)
        return 0
    print(describe_input(stats))
    per = out["handshakes_per_page"]
    print(f"TLS handshakes: {out['full']:g} full, {out['resumed']:g} resumed, by {out['processes']} process(es), "
          f"for {out['fetches']} fetches: {per if per is not None else '-'} a page "
          f"({out['full_per_page'] if out['full_per_page'] is not None else '-'} full)")
    if out["failed"]:
        print("failed handshakes by why: " + ", ".join(f"{k} {v:g}" for k, v in out["failed"].items()))
    return 0
