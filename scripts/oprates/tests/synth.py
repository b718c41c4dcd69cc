"""Synthetic timing logs for the tests: small, deterministic, in the crawler's format.

`LogWriter` writes operation and gauge lines to one file per process, as the
crawler does. `Crawl` simulates a run second by second from a few knobs
(pages per second, domains, how long each step takes, gauges), so a test can
say "the store is slow" or "only three hosts are left" and get logs with
that shape.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

T0 = 1_700_000_000.0  # a multiple of 5: windows start at whole seconds


class LogWriter:
    """Lines per process, written as `<role>-<pid>.jsonl` under `dir`."""

    def __init__(self, dir: str):
        self.dir = dir
        self.files: dict[tuple, list] = {}

    def _add(self, role: str, pid: int, rec: dict) -> None:
        self.files.setdefault((role, pid), []).append(json.dumps(rec, separators=(",", ":")))

    def op(self, ts: float, op: str, dur_us: float, *, node: str = "n1", role: str = "crawler-child",
           pid: int = 42, outcome: str = "ok", domain: str | None = None, n: int | None = None) -> None:
        rec = {"ts": round(ts, 6), "node": node, "role": role, "pid": pid, "op": op, "dur_us": int(dur_us),
               "outcome": outcome}
        if n is not None:
            rec["n"] = n
        if domain is not None:
            rec["domain"] = domain
        self._add(role, pid, rec)

    def gauges(self, ts: float, values: dict, *, node: str = "n1", role: str = "dispatcher", pid: int = 10) -> None:
        self._add(role, pid, {"ts": round(ts, 6), "node": node, "role": role, "pid": pid, "gauges": values})

    def raw(self, role: str, pid: int, line: str) -> None:
        self.files.setdefault((role, pid), []).append(line)

    def write(self) -> str:
        os.makedirs(self.dir, exist_ok=True)
        for (role, pid), lines in self.files.items():
            with open(os.path.join(self.dir, f"{role}-{pid}.jsonl"), "w", encoding="utf-8") as f:
                f.write("\n".join(lines) + "\n")
        return self.dir


class StoreCounters:
    """One process's cumulative store-work counters, as its gauge lines
    carry them (shared/store/src/work.rs): a key only once non-zero."""

    def __init__(self):
        self.counts: dict[str, float] = {}

    def add(self, cell: str, documents: float, commands: int = 1) -> None:
        for kind, n in (("documents", documents), ("commands", commands)):
            key = f"store.{cell}.{kind}"
            self.counts[key] = self.counts.get(key, 0) + n

    def values(self) -> dict:
        return {k: v for k, v in self.counts.items() if v}


@dataclass
class Second:
    """What happens in one second of a simulated crawl. Durations in ms, per page."""

    pages: int = 100
    domains: int = 20
    politeness_ms: float = 2.0
    domain_wait_ms: float = 0.0
    slot_ms: float = 0.0
    fetch_ms: float = 5.0
    parse_ms: float = 0.5
    store_wait_ms: float = 1.0
    store_batch_ms: float = 5.0  # one batch per second holding every page of it
    start_wait_ms: float = 0.5
    result_wait_ms: float = 0.2
    # Gauges (None: no gauge lines at all this second).
    machine_busy: float | None = 0.3  # fraction of all cores
    dispatcher_cores: float | None = 0.1
    credits_held: float | None = 990
    credits_capacity: float | None = 1000
    ready: float | None = 500
    queued: float | None = 5000


@dataclass
class Crawl:
    """A run as a list of seconds; `write` turns it into logs."""

    seconds: list = field(default_factory=list)
    cores: int = 2
    children: int = 2
    # Write what crawlers wrote before the wait steps, `n` and gauges existed.
    old_format: bool = False
    # The store's work: "collection.command" -> documents per page, one
    # command a second per cell, as cumulative gauges of child 42 (the
    # first line, at T0, is the baseline: no work yet, so no keys).
    store_work: dict = field(default_factory=dict)

    def add(self, count: int, **knobs) -> "Crawl":
        self.seconds += [Second(**knobs) for _ in range(count)]
        return self

    def write(self, dir: str) -> str:
        w = LogWriter(dir)
        busy = cpu = 0.0
        store = StoreCounters()
        if self.store_work:
            w.gauges(T0, store.values(), role="crawler-child", pid=42)
        for i, s in enumerate(self.seconds):
            t = T0 + i
            if self.old_format:
                self._old_second(w, t, s)
                continue
            for p in range(s.pages):
                ts = t + (p + 0.5) / s.pages * 0.98
                pid = 42 + p % self.children
                dom = f"d{p % max(1, s.domains)}.test"
                child = dict(pid=pid, domain=dom)
                w.op(ts, "start_wait", s.start_wait_ms * 1000, **child)
                if s.domain_wait_ms:
                    w.op(ts, "domain_wait", s.domain_wait_ms * 1000, **child)
                w.op(ts, "politeness_wait", s.politeness_ms * 1000, outcome="waited", **child)
                if s.slot_ms:
                    w.op(ts, "slot_wait", s.slot_ms * 1000, **child)
                w.op(ts, "fetch", s.fetch_ms * 1000, **child)
                w.op(ts, "parse", s.parse_ms * 1000, **child)
                w.op(ts, "store_wait", s.store_wait_ms * 1000, **child)
                w.op(ts, "result_wait", s.result_wait_ms * 1000, role="dispatcher", pid=10)
            if s.pages:
                w.op(t + 0.99, "store", s.store_batch_ms * 1000, pid=42, n=s.pages)
                w.op(t + 0.99, "report", 50, role="dispatcher", pid=10, n=s.pages)
            if self.store_work:
                for cell, per_page in self.store_work.items():
                    store.add(cell, per_page * s.pages)
                w.gauges(t + 0.997, store.values(), role="crawler-child", pid=42)
            if s.machine_busy is None:
                continue
            busy += s.machine_busy * self.cores
            cpu += s.dispatcher_cores
            w.gauges(t + 0.995, {
                "cpu_seconds": round(cpu, 6), "rss_bytes": 5e7,
                "machine_busy_seconds": round(busy, 6), "machine_cores": self.cores,
                "frontier_queued": s.queued, "frontier_ready": s.ready, "frontier_in_flight": s.credits_held,
                "credits_held": s.credits_held, "credits_capacity": s.credits_capacity,
            })
            w.gauges(t + 0.996, {"cpu_seconds": i * 0.01, "rss_bytes": 1e7,
                                 "machine_busy_seconds": round(busy, 6), "machine_cores": self.cores},
                     role="supervisor", pid=20)
        return w.write()

    def _old_second(self, w: LogWriter, t: float, s: Second) -> None:
        for p in range(s.pages):
            ts = t + (p + 0.5) / s.pages * 0.98
            child = dict(pid=42 + p % self.children, domain=f"d{p % max(1, s.domains)}.test")
            w.op(ts, "politeness_wait", s.politeness_ms * 1000, outcome="waited", **child)
            w.op(ts, "fetch", s.fetch_ms * 1000, outcome="ok" if p % 50 else "timeout", **child)
            w.op(ts, "parse", s.parse_ms * 1000, **child)
        if s.pages:
            w.op(t + 0.99, "store", s.store_batch_ms * 1000, pid=42)
        w.op(t + 0.5, "dispatch", 40, role="dispatcher", pid=10)
        w.op(t + 0.6, "report", 20, role="dispatcher", pid=10)
