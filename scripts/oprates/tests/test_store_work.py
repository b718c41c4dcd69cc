"""The store's work per page: cumulative per-process counters on the gauge
lines, differenced per process, summed, divided by the pages."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

from oprates.bottleneck import analyse, evidence, store_line, store_per_page
from oprates.reading import GaugeLine
from oprates.tests.synth import T0, Crawl, StoreCounters
from oprates.timeline import Timeline

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "oprates.py")
PAGES_PER_SEC = 100


def timeline_with_pages(secs: int) -> Timeline:
    """PAGES_PER_SEC fetch records in each of the first `secs` seconds."""
    tl = Timeline(5.0)
    for i in range(secs):
        for p in range(PAGES_PER_SEC):
            tl.add_record(T0 + i + (p + 0.5) / PAGES_PER_SEC * 0.98, 1000, True,
                          {"op": "fetch", "role": "crawler-child", "domain": f"d{p % 20}.test"})
    return tl


def gauges(tl: Timeline, ts: float, counters: StoreCounters, node="n1", role="crawler-child", pid="42"):
    tl.add_gauges(GaugeLine(ts, node, role, pid, counters.values()))


class StorePerPageTest(unittest.TestCase):
    def test_two_processes_cumulative_counters(self):
        # Two children with the same pid on two machines (processes are
        # told apart by node too) and the dispatcher; every process's
        # first line is its baseline, its counters cumulative after that.
        tl = timeline_with_pages(10)
        procs = {("n1", "crawler-child", "42"): StoreCounters(), ("n2", "crawler-child", "42"): StoreCounters(),
                 ("n1", "dispatcher", "10"): StoreCounters()}
        for (node, role, pid), c in procs.items():
            gauges(tl, T0, c, node, role, pid)
        for i in range(10):
            n1, n2, disp = procs.values()
            n1.add("pages.insert", 60, commands=2)
            n2.add("pages.insert", 40)
            disp.add("frontier.update", 101)
            disp.add("frontier.insert", 300)
            if i >= 3:  # a key that appears late counted 0 before
                disp.add("domains.update", 10)
            for (node, role, pid), c in procs.items():
                gauges(tl, T0 + i + 0.999, c, node, role, pid)
        facts = tl.facts()
        per_page = store_per_page(facts)
        self.assertEqual(set(per_page), {"pages.insert", "frontier.update", "frontier.insert", "domains.update"})
        self.assertAlmostEqual(per_page["pages.insert"]["documents"], 1.0)
        self.assertAlmostEqual(per_page["pages.insert"]["commands"], 0.03)
        self.assertAlmostEqual(per_page["frontier.update"]["documents"], 1.01)
        self.assertAlmostEqual(per_page["frontier.insert"]["documents"], 3.0)
        self.assertAlmostEqual(per_page["domains.update"]["documents"], 0.07)
        # Per window: each window's own increase, not the cumulative value.
        self.assertEqual([f.store_work["pages.insert"]["documents"] for f in facts], [500, 500])
        # Cumulative counters are no level gauges.
        self.assertFalse([k for f in facts for k in f.gauges if k.startswith("store.")])
        self.assertEqual(evidence(facts, True)["store_per_page"], per_page)

    def test_a_restart_is_neither_negative_nor_doubled(self):
        # Child 42 dies after 5 s; its successor, pid 43, counts from 0 again.
        tl = timeline_with_pages(10)
        old, new = StoreCounters(), StoreCounters()
        gauges(tl, T0, old, pid="42")
        for i in range(5):
            old.add("pages.insert", 100)
            gauges(tl, T0 + i + 0.999, old, pid="42")
        gauges(tl, T0 + 5.0005, new, pid="43")
        for i in range(5, 10):
            new.add("pages.insert", 100)
            gauges(tl, T0 + i + 0.999, new, pid="43")
        facts = tl.facts()
        self.assertEqual([f.store_work["pages.insert"]["documents"] for f in facts], [500, 500])
        self.assertAlmostEqual(store_per_page(facts)["pages.insert"]["documents"], 1.0)

    def test_a_restart_reusing_the_pid_is_left_out_not_negative(self):
        tl = timeline_with_pages(10)
        c = StoreCounters()
        gauges(tl, T0, c)
        for i in range(10):
            if i == 5:  # the restarted process's counters begin again
                c = StoreCounters()
            c.add("pages.insert", 100)
            gauges(tl, T0 + i + 0.999, c)
        facts = tl.facts()
        # The step down (500 -> 100) is dropped: that second's work is lost, nothing goes negative.
        self.assertEqual([f.store_work["pages.insert"]["documents"] for f in facts], [500, 400])
        self.assertAlmostEqual(store_per_page(facts)["pages.insert"]["documents"], 0.9)

    def test_no_store_data_no_figures(self):
        tl = timeline_with_pages(3)
        tl.add_gauges(GaugeLine(T0 + 0.5, "n1", "dispatcher", "10", {"cpu_seconds": 1.0}))
        tl.add_gauges(GaugeLine(T0 + 1.5, "n1", "dispatcher", "10", {"cpu_seconds": 1.2}))
        self.assertEqual(store_per_page(tl.facts()), {})
        self.assertEqual(store_line({}), "")


class StoreLineTest(unittest.TestCase):
    def test_writes_first_largest_first_small_cells_left_out(self):
        per_page = {
            "pages.insert": {"documents": 1.0, "commands": 0.02},
            "frontier.find": {"documents": 2.5, "commands": 0.01},
            "frontier.update": {"documents": 1.01, "commands": 0.01},
            "domains.update": {"documents": 0.1, "commands": 0.01},
            "robots.find": {"documents": 0.004, "commands": 0.004},
            "frontier.insert": {"documents": 1.02, "commands": 0.01},
        }
        self.assertEqual(store_line(per_page),
                         "store per page: frontier.insert 1.02 docs, frontier.update 1.01 docs, "
                         "pages.insert 1.00 docs, domains.update 0.10 docs, frontier.find 2.50 docs")

    def test_nothing_worth_showing(self):
        self.assertEqual(store_line({"none.other": {"documents": 0.0, "commands": 0.3}}), "")


class ReportTest(unittest.TestCase):
    WORK = {"pages.insert": 1.0, "frontier.insert": 1.01, "frontier.update": 1.01, "domains.update": 0.1,
            "robots.find": 0.004}

    def run_cli(self, d: str, *flags: str) -> str:
        return subprocess.run([sys.executable, SCRIPT, "bottleneck", d, *flags], capture_output=True, text=True,
                              check=True).stdout

    def test_the_store_verdict_names_the_store_work(self):
        crawl = Crawl(store_work=self.WORK).add(12, store_wait_ms=50)
        with tempfile.TemporaryDirectory() as d:
            crawl.write(d)
            text = self.run_cli(d)
            out = json.loads(self.run_cli(d, "--json"))
        last = text.rstrip("\n").splitlines()[-1]
        self.assertTrue(last.startswith("limiting: store ("), last)
        self.assertIn("; store per page: frontier.insert 1.01 docs, frontier.update 1.01 docs, "
                      "pages.insert 1.00 docs, domains.update 0.10 docs)", last)
        self.assertNotIn("robots.find", last)
        e = out["limiting"]["evidence"]
        self.assertEqual(e["store_per_page"]["pages.insert"], {"documents": 1.0, "commands": 0.01})
        self.assertEqual(e["store_per_page"]["robots.find"], {"documents": 0.004, "commands": 0.01})
        self.assertEqual(out["windows"][0]["store_work"]["pages.insert"], {"commands": 5, "documents": 500})
        self.assertFalse([k for w in out["windows"] for k in w["gauges"] if k.startswith("store.")])

    def test_logs_without_store_work_read_as_before(self):
        for crawl in (Crawl().add(12, store_wait_ms=50), Crawl(old_format=True).add(12)):
            with self.subTest(old_format=crawl.old_format), tempfile.TemporaryDirectory() as d:
                report, _ = analyse([crawl.write(d)], 5.0)
                s = report.summary()
                self.assertEqual(s.evidence["store_per_page"], {})
                self.assertNotIn("store per page", s.line())
                self.assertTrue(all(f.store_work == {} for f in report.facts))


if __name__ == "__main__":
    unittest.main()
