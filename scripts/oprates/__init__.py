"""oprates: per-operation rates and latencies over time from the crawler's
timing logs, and which resource limits the crawl.

Every crawler process started with `--timing-log DIR/` writes one JSON line
per operation (and, newer ones, one gauge line per second) to
`DIR/<role>-<pid>.jsonl`; see reading.py for the format. A crawler of this
shape once slowed down over time, and worse with every node added; what
showed why was the rate and latency of each operation over time and per
node. The commands:

    table       the numbers per window and group          (table.py)
    plot        SVG charts of rate and p95 latency        (plots.py)
    trend       the operation that slows down, tail cut   (trend.py)
    bottleneck  the resource that limits the rate         (bottleneck.py)

Run as `python3 scripts/oprates.py CMD ...` (or `python3 -m oprates` from
scripts/). Python 3.11 standard library only: it must run in CI and on
machines without internet access. Modules: reading (files, lines, gauges),
ops (the steps of a URL's path), windows (per-operation windows and
percentiles), timeline (per-window resource facts), phases (ramp, main,
slowdown, tail), formatting, cli.
"""
