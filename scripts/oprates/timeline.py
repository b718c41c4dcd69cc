"""The run as fixed windows of resource facts: pages/s, domains, where URLs
spent their lease time, and what the gauges say (machine CPU, dispatcher
CPU, credits, the frontier, the store's work).

This is the view the bottleneck report and the phase detection need. It is
separate from the per-operation windows (windows.py) because it keeps sums
and gauge deltas rather than every duration, and because its windows are
aligned to whole multiples of the window length in wall-clock time, so a
window reads as `12:00:05` whatever the first record's time was.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .ops import GROUPS, LEASE_GROUP
from .reading import GaugeLine

# Cumulative gauges: their meaning is in the difference between two
# consecutive lines of one process, not in the value.
CUMULATIVE_GAUGES = frozenset({"cpu_seconds", "machine_busy_seconds"})
# Per-machine facts repeated by every process that reports them, never summed.
MACHINE_GAUGES = frozenset({"machine_cores"})
# The store's work as the MongoDB driver counts it (shared/store/src/work.rs):
# `store.<collection>.<command>.commands` and `...documents`, cumulative per
# process like cpu_seconds, and a key appears only once its count is non-zero.
STORE_PREFIX = "store."
STORE_KINDS = ("commands", "documents")


class _Acc:
    """What one window has gathered so far."""

    __slots__ = ("pages", "ops", "domains", "lease", "store_plain", "busy", "cpu", "levels", "ready", "store",
                 "gauge_lines")

    def __init__(self):
        self.pages = 0
        self.ops = 0
        self.domains: set = set()
        self.lease = dict.fromkeys(GROUPS, 0)  # µs per group
        self.store_plain = 0  # µs of `store` records without `n` (see Timeline.add_record)
        self.busy: dict[str, list] = {}  # node -> [Σ busy s, Σ Δt·cores]
        self.cpu: dict[tuple, list] = {}  # (role, process) -> [Σ cpu s, Σ Δt]
        self.levels: dict[str, dict] = {}  # gauge -> process -> [Σ value, samples]
        self.ready: list = []  # frontier_ready samples
        self.store: dict[str, dict] = {}  # "collection.command" -> kind -> Σ increase over processes
        self.gauge_lines = 0


@dataclass
class WindowFacts:
    """One window of the run: rates, the lease-time breakdown and gauges.

    A gauge-derived value is None when no process reported it in this
    window (older logs have no gauges at all).
    """

    index: int
    start: float
    secs: float  # the part of the window inside the run
    pages: int  # fetch records, whatever their outcome
    ops: int  # operation records of any kind
    domains: int  # distinct domains fetched
    lease_us: dict  # group -> µs of lease time charged to it
    busy_by_node: dict = field(default_factory=dict)  # node -> machine busy fraction
    cpu_by_role: dict = field(default_factory=dict)  # role -> cores used by its processes
    gauges: dict = field(default_factory=dict)  # level gauge -> window mean, summed over processes
    # "collection.command" -> {"commands": n, "documents": n}: the store's
    # work in this window, summed over processes (empty in older logs).
    store_work: dict = field(default_factory=dict)
    ready_median: float | None = None
    gauge_lines: int = 0

    @property
    def rate(self) -> float:
        """Pages per second."""
        return self.pages / self.secs

    @property
    def op_rate(self) -> float:
        return self.ops / self.secs

    @property
    def busy(self) -> float | None:
        """Machine busy fraction of the busiest node: one saturated machine
        limits the crawl even when the others idle."""
        return max(self.busy_by_node.values()) if self.busy_by_node else None

    @property
    def busiest_node(self) -> str | None:
        return max(self.busy_by_node, key=self.busy_by_node.get) if self.busy_by_node else None

    @property
    def dispatcher_cores(self) -> float | None:
        return self.cpu_by_role.get("dispatcher")

    @property
    def credits_held(self) -> float | None:
        return self.gauges.get("credits_held")

    @property
    def credits_capacity(self) -> float | None:
        return self.gauges.get("credits_capacity")

    @property
    def credits_use(self) -> float | None:
        """Leased URLs over what the live supervisors may hold: near 1 means
        every credit is out, and only faster work (or more credits) helps."""
        held, cap = self.credits_held, self.credits_capacity
        if held is None or not cap:
            return None
        return held / cap

    @property
    def ready(self) -> float | None:
        return self.gauges.get("frontier_ready")

    @property
    def queued(self) -> float | None:
        return self.gauges.get("frontier_queued")

    @property
    def lease_total_us(self) -> int:
        return sum(self.lease_us.values())

    def lease_share(self) -> dict:
        """Each group's share of the window's lease time (empty if none)."""
        total = self.lease_total_us
        return {g: self.lease_us[g] / total for g in GROUPS} if total else {}


class Timeline:
    """Gathers WindowFacts from operation records and gauge lines, fed as
    the files are read (`add_record`, `add_gauges`)."""

    def __init__(self, window: float):
        self.window = window
        self._acc: dict[int, _Acc] = {}
        self.t_min = math.inf
        self.t_max = -math.inf
        self.gauge_processes: set = set()
        # Whether any `store` record carries `n` (a crawler that logs batches).
        self.batched_store = False
        # Per process: the previous gauge line, for the cumulative deltas.
        self._prev: dict[tuple, GaugeLine] = {}

    def _at(self, ts: float) -> _Acc:
        if ts < self.t_min:
            self.t_min = ts
        if ts > self.t_max:
            self.t_max = ts
        w = int(ts // self.window)
        a = self._acc.get(w)
        if a is None:
            a = self._acc[w] = _Acc()
        return a

    def add_record(self, ts: float, dur_us: int, ok: bool, rec: dict) -> None:
        a = self._at(ts)
        a.ops += 1
        op = rec["op"]
        if op == "fetch":
            a.pages += 1
            d = rec.get("domain")
            if d is not None:
                a.domains.add(d)
        group = LEASE_GROUP.get(op)
        if group is None:
            return
        if op == "store":
            # Page writes: a batch's duration once per page in it. A crawler
            # that logs `n` also logs other writes as `store` without it (the
            # domains' politeness state), which are not on a page's path, so
            # those count only in older logs, where page batches had no `n`.
            # The dispatcher's own `store` writes are never a page's path.
            if rec.get("role") == "dispatcher":
                return
            n = rec.get("n")
            if n is None:
                a.store_plain += dur_us
                return
            self.batched_store = True
            dur_us *= n
        a.lease[group] += dur_us

    def add_gauges(self, g: GaugeLine) -> None:
        a = self._at(g.ts)
        a.gauge_lines += 1
        proc = g.process
        self.gauge_processes.add(proc)
        v = g.values
        for name, value in v.items():
            if name in CUMULATIVE_GAUGES or name in MACHINE_GAUGES or name.startswith(STORE_PREFIX):
                continue
            per_proc = a.levels.setdefault(name, {})
            s = per_proc.get(proc)
            if s is None:
                per_proc[proc] = [value, 1]
            else:
                s[0] += value
                s[1] += 1
        if "frontier_ready" in v:
            a.ready.append(v["frontier_ready"])
        prev = self._prev.get(proc)
        self._prev[proc] = g
        if prev is None or g.ts <= prev.ts:
            return
        dt = g.ts - prev.ts
        pv = prev.values
        if "cpu_seconds" in v and "cpu_seconds" in pv:
            d = v["cpu_seconds"] - pv["cpu_seconds"]
            if d >= 0:  # a negative step is a restarted process reusing the pid
                s = a.cpu.setdefault((g.role, proc), [0.0, 0.0])
                s[0] += d
                s[1] += dt
        cores = v.get("machine_cores")
        if cores and "machine_busy_seconds" in v and "machine_busy_seconds" in pv:
            d = v["machine_busy_seconds"] - pv["machine_busy_seconds"]
            if d >= 0:
                s = a.busy.setdefault(g.node, [0.0, 0.0])
                s[0] += d
                s[1] += dt * cores
        _add_store_work(a.store, v, pv)

    @property
    def has_gauges(self) -> bool:
        return bool(self.gauge_processes)

    def facts(self) -> list[WindowFacts]:
        """Every window from the first to the last that has data, empty
        ones included: a window with no pages is a data point too."""
        if not self._acc:
            return []
        lo, hi = min(self._acc), max(self._acc)
        empty = _Acc()
        return [self._facts(w, self._acc.get(w, empty)) for w in range(lo, hi + 1)]

    def _lease(self, a: _Acc) -> dict:
        lease = dict(a.lease)
        if not self.batched_store:
            lease["store"] += a.store_plain
        return lease

    def _facts(self, w: int, a: _Acc) -> WindowFacts:
        start = w * self.window
        secs = max(min(start + self.window, self.t_max) - max(start, self.t_min), 1e-3)
        busy = {node: s[0] / s[1] for node, s in a.busy.items() if s[1] > 0}
        cpu: dict[str, float] = {}
        for (role, _), s in a.cpu.items():
            if s[1] > 0:
                cpu[role] = cpu.get(role, 0.0) + s[0] / s[1]
        levels = {name: sum(s[0] / s[1] for s in per_proc.values()) for name, per_proc in a.levels.items()}
        store = {cell: {k: kinds.get(k, 0.0) for k in STORE_KINDS} for cell, kinds in a.store.items()}
        ready = sorted(a.ready)
        return WindowFacts(
            index=w,
            start=start,
            secs=secs,
            pages=a.pages,
            ops=a.ops,
            domains=len(a.domains),
            lease_us=self._lease(a),
            busy_by_node=busy,
            cpu_by_role=cpu,
            gauges=levels,
            store_work=store,
            ready_median=_median(ready),
            gauge_lines=a.gauge_lines,
        )


def _add_store_work(store: dict, v: dict, pv: dict) -> None:
    """Adds one process's store work between two consecutive gauge lines to
    a window (a process's first line is only its baseline: what it did
    before is left out, at most one gauge interval's work). A key the
    earlier line lacks counted 0 then (keys appear once non-zero), so the
    first batch of a kind is not lost; a negative step is a restarted
    process reusing the pid, whose work since its start is not this
    difference, so it is left out rather than guessed."""
    for name, value in v.items():
        if not name.startswith(STORE_PREFIX):
            continue
        cell, _, kind = name[len(STORE_PREFIX):].rpartition(".")
        if kind not in STORE_KINDS or not cell:
            continue
        d = value - pv.get(name, 0.0)
        if d > 0:
            kinds = store.setdefault(cell, {})
            kinds[kind] = kinds.get(kind, 0.0) + d


def _median(sorted_vals: list) -> float | None:
    if not sorted_vals:
        return None
    n = len(sorted_vals)
    return sorted_vals[n // 2] if n % 2 else (sorted_vals[n // 2 - 1] + sorted_vals[n // 2]) / 2
