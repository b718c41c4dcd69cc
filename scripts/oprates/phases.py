"""The phases of a run: ramp, main, slowdown, tail.

A crawl's last minutes often crawl only the few hosts that are slow on
purpose (Crawl-delay): every rate falls and their slow fetches dominate the
latencies. That is the crawl running out of work, not a bottleneck, and a
verdict computed over it blames whatever those hosts do. So both `trend` and
`bottleneck` first find the main phase and set the tail apart.

- main: the windows from the first to the last whose pages/s is at least
  MAIN_SHARE of the peak window's;
- ramp: the windows before it;
- after it, a window is tail or slowdown. Tail means the crawl has run out of
  work; a slowdown (the rate falls while there is work) is exactly what must
  stay visible, so a window only counts as tail when the evidence says so:
    * with gauges, the frontier has nothing ready to lease (frontier_ready is
      0 in at least half the window's samples) *and*, when the logs name
      domains, at most TAIL_DOMAIN_SHARE as many distinct domains were
      fetched as in a typical main-phase window. The second test matters:
      per-domain in-flight caps also leave nothing "ready" while the children
      are the bottleneck and every domain is still being crawled;
    * without gauges (older logs), only the domain test, and a run whose logs
      name no domains has no tail.
  The tail is the trailing run of such windows; a tail-like window followed
  by a slowdown is a slowdown.

When no window has a fetch (logs of the dispatcher alone), the rate of all
operations stands in for pages/s.
"""

from __future__ import annotations

from dataclasses import dataclass

from .timeline import WindowFacts

# A window belongs to the main phase's span when its rate is at least this
# share of the peak window's.
MAIN_SHARE = 0.5
# After the main phase, a window is tail-like only when it fetched at most
# this share of the distinct domains of a typical main-phase window.
TAIL_DOMAIN_SHARE = 0.2

RAMP, MAIN, SLOWDOWN, TAIL = "ramp", "main", "slowdown", "tail"


@dataclass
class Phases:
    labels: list  # one of RAMP, MAIN, SLOWDOWN, TAIL per window
    main: tuple | None  # (first, last) window index into the facts list
    tail_start: int | None  # index of the first tail window
    peak: float  # the peak window's rate
    basis: str  # the tail test, in words
    main_domains: float | None  # typical distinct domains per main-phase window

    def windows(self, label: str) -> list[int]:
        return [i for i, lab in enumerate(self.labels) if lab == label]


def rates(facts: list[WindowFacts]) -> list[float]:
    """Pages/s per window, or operations/s when nothing was fetched."""
    if any(f.pages for f in facts):
        return [f.rate for f in facts]
    return [f.op_rate for f in facts]


def detect_phases(facts: list[WindowFacts]) -> Phases:
    """Labels every window (see the module's doc) and finds the tail."""
    n = len(facts)
    r = rates(facts)
    # The run's first and last windows may cover a fraction of a second, and
    # a burst there would set a peak that no whole window reaches.
    full = max((f.secs for f in facts), default=0.0)
    peak = max((x for x, f in zip(r, facts) if f.secs >= 0.5 * full), default=0.0)
    if peak <= 0:
        return Phases([MAIN] * n, (0, n - 1) if n else None, None, 0.0, "no records", None)
    above = [i for i in range(n) if r[i] >= MAIN_SHARE * peak]
    lo, hi = above[0], above[-1]
    labels = [RAMP] * lo + [MAIN] * (hi - lo + 1)
    domains_known = any(f.domains for f in facts)
    main_domains = _median([facts[i].domains for i in range(lo, hi + 1)]) if domains_known else None
    has_ready = any(f.ready_median is not None for f in facts)

    def tail_like(f: WindowFacts) -> bool:
        out_of_domains = domains_known and f.domains <= TAIL_DOMAIN_SHARE * main_domains
        if has_ready:
            nothing_ready = f.ready_median is None or f.ready_median == 0
            return nothing_ready and (out_of_domains or not domains_known)
        return out_of_domains

    tail_start = n
    while tail_start - 1 > hi and tail_like(facts[tail_start - 1]):
        tail_start -= 1
    labels += [SLOWDOWN] * (tail_start - hi - 1) + [TAIL] * (n - tail_start)
    basis = tail_rule(has_ready, main_domains)
    return Phases(labels, (lo, hi), tail_start if tail_start < n else None, peak, basis, main_domains)


def tail_rule(has_ready: bool, main_domains: float | None) -> str:
    """The tail test of a run, in words (reports quote it)."""
    domains = (f"at most {100 * TAIL_DOMAIN_SHARE:g}% of the main phase's {main_domains:g} domains per window"
               if main_domains is not None else None)
    if has_ready:
        return "nothing ready in the frontier" + (f" and {domains}" if domains else "")
    if domains:
        return f"{domains}, no gauges"
    return "no gauges and no domains in the logs, so no tail is cut"


def _median(vals: list) -> float:
    s = sorted(vals)
    m = len(s)
    return s[m // 2] if m % 2 else (s[m // 2 - 1] + s[m // 2]) / 2
