"""The bottleneck rules: each of the five words, the order of the rules, the run's verdict."""

import os
import re
import subprocess
import sys
import tempfile
import unittest

from oprates.bottleneck import NO_WORD, analyse, decide
from oprates.timeline import WindowFacts
from oprates.tests.synth import Crawl

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "oprates.py")
LIMITING = re.compile(r"^limiting: (store|dispatcher|capacity|politeness|cpu) "
                      r"\((\d+) of (\d+) main-phase windows, \d+% of their pages; .*\)$")


def facts(lease_ms=None, busy=0.3, disp=0.1, held=990.0, cap=1000.0, ready=500.0, pages=500, domains=20,
          backlog=None):
    """One window; gauge knobs set to None mean 'not reported'."""
    lease = {"store": 0, "capacity": 0, "politeness": 0, "dispatcher": 0, "cpu": 0}
    lease.update({k: v * 1000 for k, v in ({"capacity": 10} if lease_ms is None else lease_ms).items()})
    gauges = {}
    if held is not None:
        gauges.update(credits_held=held, credits_capacity=cap)
    if ready is not None:
        gauges["frontier_ready"] = ready
    if backlog is not None:
        gauges["frontier_write_backlog"] = backlog
    return WindowFacts(index=0, start=0.0, secs=5.0, pages=pages, ops=pages * 5, domains=domains, lease_us=lease,
                       busy_by_node={} if busy is None else {"n1": busy},
                       cpu_by_role={} if disp is None else {"dispatcher": disp},
                       gauges=gauges, ready_median=ready)


class DecideTest(unittest.TestCase):
    def word(self, **kw):
        return decide(facts(**kw)).word

    def test_cpu_when_a_machine_is_saturated(self):
        self.assertEqual(self.word(busy=0.95), "cpu")
        # It beats everything else, even a busy dispatcher and idle credits.
        self.assertEqual(self.word(busy=0.95, disp=1.0, held=10), "cpu")

    def test_dispatcher_when_its_process_is_saturated(self):
        self.assertEqual(self.word(disp=0.97), "dispatcher")

    def test_dispatcher_when_it_does_not_hand_out_ready_work(self):
        self.assertEqual(self.word(held=500, ready=2000), "dispatcher")
        # The floor is max(10, 1% of capacity): 5 ready URLs are not "work it could hand out".
        self.assertEqual(self.word(held=500, ready=5), "politeness")
        self.assertEqual(self.word(held=500, cap=100000, ready=500), "politeness")

    def test_politeness_when_credits_are_idle_and_nothing_is_ready(self):
        self.assertEqual(self.word(held=300, ready=0), "politeness")
        # Busy fetching or relaying behind the per-domain caps: still the caps.
        self.assertEqual(self.word(held=300, ready=0, lease_ms={"capacity": 80, "dispatcher": 20}), "politeness")

    def test_what_holds_capped_domains_decides_when_nothing_is_ready(self):
        # Few domains, each at its in-flight cap, their URLs waiting for the
        # store: credits are free, but the store is what is slow.
        self.assertEqual(self.word(held=300, ready=0, lease_ms={"store": 93, "dispatcher": 5}), "store")
        self.assertEqual(self.word(held=300, ready=0, lease_ms={"cpu": 70, "capacity": 30}), "cpu")
        self.assertEqual(self.word(held=300, ready=0, lease_ms={"politeness": 95, "store": 5}), "politeness")

    def test_store_when_the_dispatcher_waits_for_frontier_writes(self):
        # Credits idle and URLs ready would say "dispatcher", but it is
        # paused for the store's frontier writes.
        self.assertEqual(self.word(held=300, ready=2000, backlog=15_000), "store")
        self.assertEqual(self.word(held=300, ready=2000, backlog=1_000), "dispatcher")

    def test_store_when_page_writes_dominate(self):
        self.assertEqual(self.word(lease_ms={"store": 50, "capacity": 30, "cpu": 20}), "store")
        # 40% is enough even when another group is larger.
        self.assertEqual(self.word(lease_ms={"store": 40, "capacity": 45, "cpu": 15}), "store")

    def test_capacity_when_credits_are_full_and_urls_are_busy_fetching(self):
        self.assertEqual(self.word(lease_ms={"capacity": 60, "store": 20, "politeness": 20}), "capacity")

    def test_breakdown_words(self):
        self.assertEqual(self.word(lease_ms={"politeness": 70, "capacity": 30}), "politeness")
        self.assertEqual(self.word(lease_ms={"cpu": 70, "capacity": 30}), "cpu")
        # Dispatcher-group waits blame the dispatcher only when it is busy.
        self.assertEqual(self.word(lease_ms={"dispatcher": 70, "capacity": 30}, disp=0.6), "dispatcher")
        self.assertEqual(self.word(lease_ms={"dispatcher": 70, "capacity": 30}, disp=0.2), "capacity")

    def test_without_gauges_the_breakdown_decides(self):
        none = dict(busy=None, disp=None, held=None, ready=None)
        self.assertEqual(self.word(lease_ms={"store": 60, "capacity": 40}, **none), "store")
        self.assertEqual(self.word(lease_ms={"politeness": 90, "capacity": 10}, **none), "politeness")
        d = decide(facts(lease_ms={"capacity": 1}, **none))
        self.assertIn("no gauges", d.reason)
        self.assertEqual(decide(facts(lease_ms={}, **none)).word, NO_WORD)


class ReportTest(unittest.TestCase):
    def test_store_bound_run_with_a_tail(self):
        crawl = (Crawl()
                 .add(4, pages=30, ready=300, credits_held=400)  # ramp
                 .add(30, pages=100, store_wait_ms=40, store_batch_ms=200, fetch_ms=10)
                 .add(10, pages=20, domains=2, ready=0, credits_held=30, politeness_ms=500, fetch_ms=30))  # tail
        with tempfile.TemporaryDirectory() as d:
            report, stats = analyse([crawl.write(d)], 5.0)
            text = subprocess.run([sys.executable, SCRIPT, "bottleneck", d], capture_output=True, text=True,
                                  check=True).stdout
        self.assertEqual(stats.bad_lines, 0)
        s = report.summary()
        self.assertEqual(s.word, "store")
        self.assertTrue(s.evidence["gauges"])
        self.assertGreater(s.evidence["credits_use"], 0.9)
        self.assertEqual(report.phases.labels[-2:], ["tail", "tail"])
        self.assertEqual(report.part("tail")["limiting"], "politeness")
        last = text.rstrip("\n").splitlines()[-1]
        m = LIMITING.match(last)
        self.assertIsNotNone(m, last)
        self.assertEqual(m.group(1), "store")
        self.assertIn("credits 9", last)
        self.assertIn("lease time: store", last)
        self.assertRegex(text, r"\ntail: \d+ s from .*limited by politeness")

    def test_capacity_bound_run(self):
        crawl = Crawl().add(20, pages=150, fetch_ms=80, slot_ms=40)
        with tempfile.TemporaryDirectory() as d:
            report, _ = analyse([crawl.write(d)], 5.0)
        self.assertEqual(report.summary().word, "capacity")

    def test_each_word_from_gauges_end_to_end(self):
        cases = {
            "cpu": dict(machine_busy=0.97),
            "dispatcher": dict(credits_held=400, ready=3000),
            "politeness": dict(credits_held=300, ready=0, politeness_ms=100),
            "store": dict(store_wait_ms=50),
            "capacity": dict(fetch_ms=50),
        }
        for word, knobs in cases.items():
            with self.subTest(word=word), tempfile.TemporaryDirectory() as d:
                report, _ = analyse([Crawl().add(12, **knobs).write(d)], 5.0)
                self.assertEqual(report.summary().word, word, [x.reason for x in report.decisions])


if __name__ == "__main__":
    unittest.main()
