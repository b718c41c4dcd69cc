"""Reading timing logs: files, lines, and what was (not) read.

Every crawler process started with `--timing-log DIR/` writes one JSON
object per line to `DIR/<role>-<pid>.jsonl`. Two kinds of line:

    operation: {"ts":1700000000.123456,"node":"n1","role":"crawler-child",
                "pid":42,"op":"fetch","dur_us":1234,"outcome":"ok",
                "domain":"a.test"}          (batch ops may add "n": items)
    gauges:    {"ts":...,"node":...,"role":...,"pid":...,
                "gauges":{"cpu_seconds":1.5,"frontier_ready":120,...}}

Bad lines (a process killed mid-write, a stray edit) are counted and
reported, never fatal: a half-broken log still says most of what happened.
The reader streams, so millions of lines need no more memory than the
aggregates built from them.
"""

from __future__ import annotations

import gzip
import json
import math
import os
from dataclasses import dataclass, field

from .ops import SUCCESS_OUTCOMES

# Fields a series can be grouped by (`--by`).
KEY_FIELDS = ("op", "node", "role", "pid", "domain")


@dataclass
class ReadStats:
    """What was read, so every output can say how much it is based on.

    `lines`, `t_min` and `t_max` count operation records only: gauge lines
    (counted in `gauge_lines`) must not move the windows of the commands
    that look at operations.
    """

    files: int = 0
    lines: int = 0
    bad_lines: int = 0
    unreadable: list = field(default_factory=list)
    bad_examples: list = field(default_factory=list)
    t_min: float = math.inf
    t_max: float = -math.inf
    gauge_lines: int = 0

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
            "gauge_lines": self.gauge_lines,
        }


class BadLine(Exception):
    """A line that is not a timing record; the message says why."""


class GaugeLine:
    """One gauge line: a process's state at `ts`.

    `values` holds only the finite numbers; a null (the process could not
    measure it) is simply absent, so consumers never see None or NaN.
    """

    __slots__ = ("ts", "node", "role", "pid", "values")

    def __init__(self, ts: float, node: str, role: str, pid: str, values: dict):
        self.ts, self.node, self.role, self.pid, self.values = ts, node, role, pid, values

    @property
    def process(self) -> tuple:
        """Identifies the process: pids repeat across machines."""
        return (self.node, self.role, self.pid)

    def __repr__(self) -> str:
        return f"GaugeLine({self.ts}, {self.node!r}, {self.role!r}, {self.pid!r}, {self.values!r})"


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


def parse_line(line: str):
    """Returns (ts, dur_us, ok, record) for an operation line, a GaugeLine
    for a gauge line, None for a blank one.

    Raises BadLine for anything else: a half-written last line, a non-object,
    a missing or non-numeric field, a bad `n`. Checking types here keeps the
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
    if op is None and "gauges" in rec:
        return _gauge_line(float(ts), rec)
    if type(dur) not in _NUMBER or not 0 <= dur < math.inf:
        raise BadLine("missing or bad dur_us")
    if type(op) is not str or not op:
        raise BadLine("missing op")
    n = rec.get("n")
    if n is not None and (type(n) not in _NUMBER or not 0 <= n < math.inf):
        raise BadLine("bad n")
    return float(ts), int(dur), rec.get("outcome", "ok") in SUCCESS_OUTCOMES, rec


def _gauge_line(ts: float, rec: dict) -> GaugeLine:
    g = rec["gauges"]
    if type(g) is not dict:
        raise BadLine("gauges is not an object")
    values = {k: float(v) for k, v in g.items() if type(v) in _NUMBER and math.isfinite(v)}
    return GaugeLine(ts, _text(rec.get("node")), _text(rec.get("role")), _text(rec.get("pid")), values)


def _text(v) -> str:
    return "-" if v is None else str(v)


def batch_size(rec: dict) -> int:
    """Items a record covers: `n` on batch operations, 1 when absent
    (older logs, and every per-URL operation)."""
    n = rec.get("n")
    return 1 if n is None else int(n)


def read_records(files: list[str], stats: ReadStats, on_gauges=None):
    """Yields (ts, dur_us, ok, record) for every good operation line.

    Gauge lines are counted and handed to `on_gauges(GaugeLine)` if given,
    never yielded: the commands that look at operations stay as they were.
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
                    if type(parsed) is GaugeLine:
                        stats.gauge_lines += 1
                        if on_gauges is not None:
                            on_gauges(parsed)
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
