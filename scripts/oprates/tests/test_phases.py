"""Phase detection: ramp and main by rate; after the main phase, a tail only
when the crawl has run out of work, else a slowdown."""

import unittest

from oprates.phases import detect_phases
from oprates.timeline import WindowFacts


def window(i, rate, domains=20, ready=None):
    return WindowFacts(index=i, start=5.0 * i, secs=5.0, pages=int(rate * 5), ops=int(rate * 25), domains=domains,
                       lease_us={}, gauges={} if ready is None else {"frontier_ready": ready}, ready_median=ready)


def run(spec):
    """spec: (rate, domains, ready) per window."""
    return detect_phases([window(i, *w) for i, w in enumerate(spec)])


class PhasesTest(unittest.TestCase):
    def test_ramp_main_and_tail_with_gauges(self):
        p = run([(40, 20, 900), (100, 20, 900), (90, 20, 900), (95, 20, 500), (10, 3, 0), (8, 2, 0)])
        self.assertEqual(p.labels, ["ramp", "main", "main", "main", "tail", "tail"])
        self.assertEqual((p.main, p.tail_start, p.peak), ((1, 3), 4, 100))

    def test_a_dip_inside_the_main_phase_stays_main(self):
        p = run([(100, 20, 900), (30, 20, 900), (100, 20, 900)])
        self.assertEqual(p.labels, ["main"] * 3)

    def test_slowdown_while_work_is_ready(self):
        p = run([(100, 20, 900), (60, 20, 900), (30, 20, 900), (20, 3, 40)])
        self.assertEqual(p.labels, ["main", "main", "slowdown", "slowdown"])
        self.assertIsNone(p.tail_start)

    def test_nothing_ready_but_every_domain_busy_is_a_slowdown(self):
        # Per-domain in-flight caps reached because the children are slow:
        # the frontier has nothing "ready", yet the crawl has plenty of work.
        p = run([(100, 20, 0), (60, 20, 0), (30, 20, 0), (20, 20, 0)])
        self.assertEqual(p.labels, ["main", "main", "slowdown", "slowdown"])

    def test_tail_is_the_trailing_run_only(self):
        p = run([(100, 20, 900), (10, 2, 0), (20, 20, 300), (10, 2, 0), (5, 1, 0)])
        self.assertEqual(p.labels, ["main", "slowdown", "slowdown", "tail", "tail"])

    def test_without_gauges_domains_decide(self):
        p = run([(100, 40, None), (95, 40, None), (10, 4, None), (10, 4, None)])
        self.assertEqual(p.labels, ["main", "main", "tail", "tail"])
        p = run([(100, 40, None), (95, 40, None), (30, 30, None), (10, 10, None)])
        self.assertEqual(p.labels, ["main", "main", "slowdown", "slowdown"])

    def test_without_gauges_or_domains_nothing_is_cut(self):
        p = run([(100, 0, None), (95, 0, None), (10, 0, None)])
        self.assertEqual(p.labels, ["main", "main", "slowdown"])
        self.assertIn("no tail", p.basis)

    def test_a_burst_in_a_sliver_of_a_window_sets_no_peak(self):
        facts = [window(i, rate) for i, rate in enumerate([100, 100, 90, 95])]
        facts.append(WindowFacts(index=4, start=20.0, secs=0.05, pages=20, ops=20, domains=5, lease_us={}))
        p = detect_phases(facts)
        self.assertEqual(p.peak, 100)
        self.assertEqual(p.labels[:4], ["main"] * 4)

    def test_no_fetches_uses_all_operations(self):
        facts = [WindowFacts(index=i, start=5.0 * i, secs=5.0, pages=0, ops=ops, domains=0, lease_us={})
                 for i, ops in enumerate([10, 500, 480, 100])]
        self.assertEqual(detect_phases(facts).labels, ["ramp", "main", "main", "slowdown"])


if __name__ == "__main__":
    unittest.main()
