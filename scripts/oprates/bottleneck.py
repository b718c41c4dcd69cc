"""`bottleneck`: which resource limits the crawl's rate, window by window.

Brendan Gregg's USE method asks, for every resource, how busy it is
(utilisation) and how much work queues for it (saturation); the bottleneck
is the resource that is saturated. The crawler's resources and the evidence
for each:

- cpu: the machine's cores (gauge machine_busy_seconds; parse time);
- dispatcher: the one process that leases every URL and reads every result
  (its cpu_seconds; URLs it could lease but does not; start_wait and
  result_wait);
- capacity: the credits, i.e. the URLs the supervisors may hold at once, and
  the children's fetch slots (credits_held / credits_capacity; slot_wait
  and fetch);
- politeness: the per-domain delays and in-flight caps, or simply too few
  domains left (politeness_wait, domain_wait; nothing ready to lease);
- store: the page writes (store_wait, and every `store` batch's duration
  counted once for each page in it), and the frontier writes when the
  dispatcher stops leasing until they catch up (frontier_write_backlog).

Every window gets exactly one word, by the rules of `decide` (first match
wins), and the run's main phase (phases.py) gets the word that holds for
most of its pages. Where the gauge lines carry the store's work (commands
and documents per collection and command), the evidence says what the store
did per page, so a "store" verdict also says which writes to make cheaper.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from .formatting import clock, describe_input, fmt_count, fmt_pct, no_data, num, print_json
from .ops import GROUPS
from .phases import MAIN, SLOWDOWN, TAIL, Phases, detect_phases
from .reading import ReadStats, find_log_files, read_records
from .timeline import Timeline, WindowFacts

# 1. cpu: the busiest node's machine is at least this busy (all cores).
CPU_BUSY = 0.90
# 2. dispatcher: its process uses at least this many cores (it is single-
#    threaded where it matters: leasing and recording results)...
DISPATCHER_SATURATED_CORES = 0.90
# ...or credits are not saturated while at least max(READY_MIN,
# READY_CAPACITY_SHARE × credits_capacity) URLs are ready on average: it has
# work it could hand out and does not.
READY_MIN = 10
READY_CAPACITY_SHARE = 0.01
# 3. Credits count as saturated from this share of the capacity held.
CREDITS_SATURATED = 0.90
# 4. With credits saturated, the lease-time breakdown decides: the largest
#    group, except that the store wins from this share on (page writes that
#    hold a third or more of the lease time slow every page, whichever
#    group is nominally largest)...
STORE_SHARE = 0.40
# ...and time in the dispatcher group counts against the dispatcher only if
# it is busy (else the waits are in the relay and the children's queues,
# i.e. capacity).
DISPATCHER_BUSY_CORES = 0.5

# The store's work per page in a summary line: write commands first (they
# are what a page costs the store), cells under this many documents per
# page left out (handshakes, the odd robots.txt read).
WRITE_COMMANDS = ("insert", "update", "delete")
STORE_LINE_MIN_DOCS = 0.01

# 2b. store: the dispatcher leases nothing while its frontier writes are
#     this far behind (MAX_WRITE_BACKLOG in dispatcher/src/state.rs; it
#     was 100,000 before 2026-11-26); a window whose mean backlog is at
#     least half of it spent much of its time paused for the store.
WRITE_BACKLOG_PAUSE = 20_000
WRITE_BACKLOG_SHARE = 0.5

WORDS = ("store", "dispatcher", "capacity", "politeness", "cpu")
NO_WORD = "-"  # a window with nothing to decide from
DEFAULT_WINDOW = 5.0


@dataclass
class Decision:
    """One window's word, and the evidence for it in a few words (JSON `reason`)."""

    word: str
    reason: str


def decide(f: WindowFacts) -> Decision:
    """The resource that limits the rate in one window (first rule that
    holds). Rules 1-3 need gauges; without them, rule 4 alone decides."""
    busy = f.busy
    if busy is not None and busy >= CPU_BUSY:
        return Decision("cpu", f"machine {f.busiest_node} {fmt_pct(busy)} busy")
    disp = f.dispatcher_cores
    if disp is not None and disp >= DISPATCHER_SATURATED_CORES:
        return Decision("dispatcher", f"dispatcher uses {disp:.2f} cores")
    backlog = f.gauges.get("frontier_write_backlog")
    if backlog is not None and backlog >= WRITE_BACKLOG_SHARE * WRITE_BACKLOG_PAUSE:
        return Decision("store", f"{backlog:,.0f} frontier writes behind: the dispatcher waits for them to lease more")
    use = f.credits_use
    if use is not None and use < CREDITS_SATURATED:
        ready = f.ready
        floor = max(READY_MIN, READY_CAPACITY_SHARE * (f.credits_capacity or 0))
        if ready is not None and ready >= floor:
            return Decision("dispatcher", f"credits {fmt_pct(use)} used while {ready:,.0f} URLs are ready")
        # Nothing (much) to lease although credit is free: every domain
        # with work has its most URLs in flight, or there is no work left.
        # What holds those URLs decides: a slow store or CPU holds them as
        # surely as a Crawl-delay does; time fetching or in the relay means
        # the per-domain caps (politeness settings) bind, not the credits.
        left = "nothing" if not ready else f"only {ready:,.0f}"
        capped = f"credits {fmt_pct(use)} used and {left} ready to lease"
        share = f.lease_share()
        if share:
            largest = max(GROUPS, key=lambda g: share[g])
            if share["store"] >= STORE_SHARE or largest == "store":
                return Decision("store", f"{capped}; the leased URLs wait for the store "
                                         f"({fmt_pct(share['store'])} of lease time)")
            if largest == "cpu":
                return Decision("cpu", f"{capped}; parse {fmt_pct(share['cpu'])} of lease time")
        return Decision("politeness", f"{capped}: the rest waits on domain delays or in-flight caps")
    share = f.lease_share()
    if not share:
        if use is not None:
            return Decision("capacity", f"credits {fmt_pct(use)} used, no lease-time records")
        return Decision(NO_WORD, "no gauges and no lease-time records")
    saturated = ("credits saturated" if use is not None else "credits unknown" if f.gauge_lines else "no gauges")
    largest = max(GROUPS, key=lambda g: share[g])
    pct = f"{largest} {fmt_pct(share[largest])} of lease time"
    if share["store"] >= STORE_SHARE or largest == "store":
        return Decision("store", f"{saturated}; store {fmt_pct(share['store'])} of lease time")
    if largest == "dispatcher":
        if disp is not None and disp >= DISPATCHER_BUSY_CORES:
            return Decision("dispatcher", f"{saturated}; {pct}, dispatcher {disp:.2f} cores")
        why = "an idle dispatcher" if disp is not None else "dispatcher CPU unknown"
        return Decision("capacity", f"{saturated}; {pct} with {why}: the relay and the children's queues")
    return Decision(largest, f"{saturated}; {pct}")


@dataclass
class Summary:
    """The run's verdict: the main phase's word, the evidence, and the tail."""

    word: str
    windows: int  # main-phase windows with that word
    main_windows: int
    page_share: float  # of the main phase's pages, those in windows with that word
    evidence: dict

    def line(self) -> str:
        e = self.evidence
        parts = [f"{self.windows} of {self.main_windows} main-phase windows, {fmt_pct(self.page_share)} of their pages"]
        if e["credits_use"] is not None:
            parts.append(f"credits {fmt_pct(e['credits_use'])} used")
        if e["frontier_ready"] is not None:
            parts.append(f"ready {e['frontier_ready']:,.0f}")
        if e["lease_share"]:
            parts.append("lease time: " + ", ".join(f"{g} {fmt_pct(e['lease_share'][g])}" for g in
                                                    sorted(GROUPS, key=lambda g: -e["lease_share"][g])))
        machine = []
        if e["machine_busy"] is not None:
            machine.append(f"machine busy {fmt_pct(e['machine_busy'])}")
        if e["dispatcher_cores"] is not None:
            machine.append(f"dispatcher {e['dispatcher_cores']:.2f} cores")
        if machine:
            parts.append(", ".join(machine))
        store = store_line(e["store_per_page"])
        if store:
            parts.append(store)
        if not e["gauges"]:
            parts.append("no gauges in these logs: decided from the lease-time breakdown alone")
        return f"limiting: {self.word} ({'; '.join(parts)})"


def store_line(per_page: dict) -> str:
    """`store per page: pages.insert 1.00 docs, ...`, or "" without store
    data: writes first, then the largest first, as a reader looks for the
    work that makes a store-bound crawl slow."""
    def order(cell):
        return (cell.rpartition(".")[2] not in WRITE_COMMANDS, -per_page[cell]["documents"], cell)

    shown = [c for c in sorted(per_page, key=order) if per_page[c]["documents"] >= STORE_LINE_MIN_DOCS]
    if not shown:
        return ""
    return "store per page: " + ", ".join(f"{c} {fmt_count(per_page[c]['documents'])} docs" for c in shown)


def store_per_page(facts: list[WindowFacts]) -> dict:
    """The store's commands and documents per page over some windows, per
    `collection.command`: what each page cost the store (empty without
    store data, or without pages to divide by)."""
    pages = sum(f.pages for f in facts)
    work: dict[str, dict] = {}
    for f in facts:
        for cell, kinds in f.store_work.items():
            w = work.setdefault(cell, {"documents": 0.0, "commands": 0.0})
            for k in w:
                w[k] += kinds.get(k, 0.0)
    if not pages:
        return {}
    return {cell: {k: n / pages for k, n in w.items()} for cell, w in sorted(work.items())}


def evidence(facts: list[WindowFacts], gauges: bool) -> dict:
    """Averages over some windows: what a summary line quotes."""
    def mean(vals):
        vals = [v for v in vals if v is not None]
        return sum(vals) / len(vals) if vals else None

    lease = {g: sum(f.lease_us[g] for f in facts) for g in GROUPS}
    total = sum(lease.values())
    held = [f.credits_held for f in facts if f.credits_use is not None]
    cap = [f.credits_capacity for f in facts if f.credits_use is not None]
    secs = sum(f.secs for f in facts)
    return {
        "gauges": gauges,
        "pages_per_sec": sum(f.pages for f in facts) / secs if secs else 0.0,
        "credits_use": sum(held) / sum(cap) if cap else None,
        "frontier_ready": mean(f.ready for f in facts),
        "frontier_queued": mean(f.queued for f in facts),
        "lease_share": {g: lease[g] / total for g in GROUPS} if total else {},
        "machine_busy": mean(f.busy for f in facts),
        "dispatcher_cores": mean(f.dispatcher_cores for f in facts),
        "domains": mean(f.domains for f in facts),
        "store_per_page": store_per_page(facts),
    }


def weighted_word(facts: list[WindowFacts], words: list[str]) -> tuple[str, int, float]:
    """The word holding for most pages (windows break ties; NO_WORD only if
    nothing else): (word, its windows, its share of the pages)."""
    pages, count = Counter(), Counter()
    for f, w in zip(facts, words):
        pages[w] += f.pages
        count[w] += 1
    candidates = [w for w in count if w != NO_WORD] or [NO_WORD]
    best = max(candidates, key=lambda w: (pages[w], count[w]))
    total = sum(pages.values())
    return best, count[best], pages[best] / total if total else count[best] / len(facts)


@dataclass
class Report:
    facts: list
    decisions: list
    phases: Phases
    gauges: bool
    window: float

    def indices(self, label: str) -> list[int]:
        return self.phases.windows(label)

    def summary(self) -> Summary | None:
        main = self.indices(MAIN)
        if not main:
            return None
        facts = [self.facts[i] for i in main]
        word, n, share = weighted_word(facts, [self.decisions[i].word for i in main])
        return Summary(word, n, len(main), share, evidence(facts, self.gauges))

    def part(self, label: str) -> dict | None:
        """Tail or slowdown: how long, and what limited it."""
        idx = self.indices(label)
        if not idx:
            return None
        facts = [self.facts[i] for i in idx]
        word, n, share = weighted_word(facts, [self.decisions[i].word for i in idx])
        return {"windows": len(idx), "secs": sum(f.secs for f in facts), "start": facts[0].start,
                "limiting": word, "limiting_windows": n, "evidence": evidence(facts, self.gauges)}


def analyse(paths: list[str], window: float) -> tuple[Report, ReadStats]:
    stats = ReadStats()
    tl = Timeline(window)
    add = tl.add_record
    for ts, dur, ok, rec in read_records(find_log_files(paths, stats), stats, tl.add_gauges):
        add(ts, dur, ok, rec)
    facts = tl.facts()
    return Report(facts, [decide(f) for f in facts], detect_phases(facts), tl.has_gauges, window), stats


def cmd_bottleneck(args) -> int:
    report, stats = analyse(args.logs, args.window)
    if not stats.lines:
        return no_data(stats)
    if args.json:
        print_json(report_json(report, stats))
    else:
        print(report_text(report, stats))
    return 0


def window_line(f: WindowFacts, phase: str, d: Decision) -> str:
    share = f.lease_share()
    lease = " ".join(f"{g} {fmt_pct(share[g]) if share else '-'}" for g in GROUPS)
    disp = "-" if f.dispatcher_cores is None else f"{f.dispatcher_cores:.2f}"
    ready = "-" if f.ready is None else f"{f.ready:,.0f}"
    return (f"{clock(f.start)}  {phase:<8}  {fmt_count(f.rate) + '/s':>9}  {d.word:<10}  "
            f"busy {fmt_pct(f.busy):>4}  disp {disp:>4}  credits {fmt_pct(f.credits_use):>4}  "
            f"ready {ready:>7}  {lease}")


def part_line(name: str, p: dict, phases: Phases) -> str:
    e = p["evidence"]
    facts = [f"{fmt_count(e['pages_per_sec'])} pages/s"]
    if e["domains"] is not None and phases.main_domains:
        facts.append(f"{e['domains']:.1f} domains per window against {phases.main_domains:g} in the main phase")
    if e["frontier_ready"] is not None:
        facts.append(f"ready {e['frontier_ready']:,.0f}")
    if e["credits_use"] is not None:
        facts.append(f"credits {fmt_pct(e['credits_use'])} used")
    return (f"{name}: {p['secs']:.0f} s from {clock(p['start'])} ({plural(p['windows'], 'window')}), "
            f"limited by {p['limiting']} ({p['limiting_windows']} of {p['windows']}); " + ", ".join(facts))


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def report_text(r: Report, stats: ReadStats) -> str:
    out = [describe_input(stats),
           f"# windows of {r.window:g} s; pages/s = fetch records per second; the word is the resource that "
           "limits the rate (scripts/README.md, bottleneck)"]
    if r.gauges:
        out.append("# busy = busiest machine's CPU; disp = dispatcher cores; credits = leased / capacity; "
                   "ready = URLs leasable now; then each group's share of the lease time")
    else:
        out.append("# no gauge lines in these logs (older crawler): machine, dispatcher, credits and frontier "
                   "unknown, every window decided from the lease-time breakdown alone")
    out.append("")
    for f, lab, d in zip(r.facts, r.phases.labels, r.decisions):
        out.append(window_line(f, lab, d))
    out.append("")
    s = r.summary()
    if s is not None:
        lo, hi = r.phases.main
        main = r.facts[lo:hi + 1]
        out.append(f"main phase: {clock(main[0].start)}–{clock(main[-1].start + r.window)} "
                   f"({sum(f.secs for f in main):.0f} s, {plural(len(main), 'window')}), "
                   f"{fmt_count(s.evidence['pages_per_sec'])} pages/s on average, peak {fmt_count(r.phases.peak)}/s")
    for name, label in (("slowdown", SLOWDOWN), ("tail", TAIL)):
        p = r.part(label)
        if p is not None:
            out.append(part_line(name, p, r.phases))
    if r.part(TAIL) is None:
        out.append(f"tail: none (a tail needs {r.phases.basis})")
    out.append(s.line() if s is not None else "limiting: unknown (no main phase: no records with a rate)")
    return "\n".join(out)


def _evidence_json(e: dict) -> dict:
    return {k: _rounded(v) for k, v in e.items()}


def _rounded(v):
    """Floats to 4 decimals, also inside the (nested) dicts of the evidence."""
    if isinstance(v, float):
        return round(v, 4)
    if isinstance(v, dict):
        return {k: _rounded(x) for k, x in v.items()}
    return v


def report_json(r: Report, stats: ReadStats) -> dict:
    windows = []
    for f, lab, d in zip(r.facts, r.phases.labels, r.decisions):
        windows.append({
            "start": f.start,
            "clock": clock(f.start),
            "secs": round(f.secs, 3),
            "phase": lab,
            "limit": d.word,
            "reason": d.reason,
            "pages": f.pages,
            "pages_per_sec": round(f.rate, 3),
            "domains": f.domains,
            "machine_busy": num(f.busy),
            "busiest_node": f.busiest_node,
            "machine_busy_by_node": {k: num(v) for k, v in f.busy_by_node.items()},
            "dispatcher_cores": num(f.dispatcher_cores),
            "cpu_cores_by_role": {k: num(v) for k, v in f.cpu_by_role.items()},
            "credits_use": num(f.credits_use),
            "credits_held": num(f.credits_held),
            "credits_capacity": num(f.credits_capacity),
            "frontier_ready": num(f.ready),
            "frontier_ready_median": num(f.ready_median),
            "frontier_queued": num(f.queued),
            "gauges": {k: num(v) for k, v in sorted(f.gauges.items())},
            "store_work": {c: {k: num(n) for k, n in kinds.items()} for c, kinds in sorted(f.store_work.items())},
            "lease_secs": {g: round(f.lease_us[g] / 1e6, 6) for g in GROUPS},
            "lease_share": {g: round(v, 4) for g, v in f.lease_share().items()},
        })
    s = r.summary()
    lo_hi = r.phases.main
    return {
        "window_secs": r.window,
        **stats.as_json(),
        "gauges": r.gauges,
        "thresholds": {
            "cpu_busy": CPU_BUSY, "dispatcher_saturated_cores": DISPATCHER_SATURATED_CORES,
            "ready_min": READY_MIN, "ready_capacity_share": READY_CAPACITY_SHARE,
            "credits_saturated": CREDITS_SATURATED, "store_share": STORE_SHARE,
            "dispatcher_busy_cores": DISPATCHER_BUSY_CORES,
        },
        "windows": windows,
        "phases": {
            "peak_pages_per_sec": round(r.phases.peak, 3),
            "main_start": r.facts[lo_hi[0]].start if lo_hi else None,
            "main_end": r.facts[lo_hi[1]].start + r.window if lo_hi else None,
            "tail_basis": r.phases.basis,
            "main_domains": r.phases.main_domains,
        },
        "limiting": None if s is None else {
            "word": s.word, "windows": s.windows, "main_windows": s.main_windows,
            "page_share": round(s.page_share, 4), "evidence": _evidence_json(s.evidence), "text": s.line(),
        },
        "slowdown": _part_json(r.part(SLOWDOWN)),
        "tail": _part_json(r.part(TAIL)),
    }


def _part_json(p: dict | None) -> dict | None:
    if p is None:
        return None
    return {**p, "secs": round(p["secs"], 3), "evidence": _evidence_json(p["evidence"])}
