"""The command line: the shim, `-m oprates`, every command on old-format logs,
and the bottleneck report's last line."""

import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

from oprates.tests.synth import Crawl

SCRIPTS = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SHIM = os.path.join(SCRIPTS, "oprates.py")
LAST_LINE = re.compile(r"^limiting: (store|dispatcher|capacity|politeness|cpu) \(\d+ of \d+ main-phase windows, "
                       r"\d+% of their pages; .+\)$")


def oprates(*args, cwd=None, module=False) -> subprocess.CompletedProcess:
    cmd = [sys.executable] + (["-m", "oprates"] if module else [SHIM]) + list(args)
    return subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env={**os.environ, "TZ": "UTC"})


class OldLogsTest(unittest.TestCase):
    """Logs written before gauges, `n` and the wait steps still work everywhere."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.logs = Crawl(old_format=True).add(20, pages=50).add(6, pages=5, domains=2).write(
            os.path.join(cls.tmp.name, "logs"))

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def ok(self, *args, **kw) -> str:
        r = oprates(*args, **kw)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout

    def test_table(self):
        text = self.ok("table", self.logs, "--window", "10")
        self.assertTrue(text.startswith("# "), text)
        self.assertIn("fetch", text)
        self.assertNotIn("gauge", text.splitlines()[0])
        t = json.loads(self.ok("table", self.logs, "--json", "--by", "op"))
        fetch = next(r for r in t["totals"] if r["op"] == "fetch")
        self.assertEqual(fetch["count"], 20 * 50 + 6 * 5)
        self.assertEqual((t["bad_lines"], t["gauge_lines"]), (0, 0))

    def test_plot(self):
        out = os.path.join(self.tmp.name, "plots")
        self.ok("plot", self.logs, "--out", out)
        for name in ("rate-fetch.svg", "rate-parse.svg", "latency-p95.svg", "index.html"):
            self.assertTrue(os.path.getsize(os.path.join(out, name)) > 100, name)
        with open(os.path.join(out, "latency-p95.svg")) as f:
            self.assertTrue(f.read().rstrip().endswith("</svg>"))

    def test_trend(self):
        text = self.ok("trend", self.logs)
        self.assertIn("LATENCY", text)
        self.assertIn("politeness_wait excluded (deliberate)", text)
        t = json.loads(self.ok("trend", self.logs, "--json", "--by", "op,pid"))
        for key in ("worst_latency_growth", "worst_rate_decline", "ops", "series", "phases", "excluded_from_verdict"):
            self.assertIn(key, t)

    def test_bottleneck_says_there_are_no_gauges(self):
        text = self.ok("bottleneck", self.logs)
        self.assertIn("no gauge lines", text)
        last = text.rstrip("\n").splitlines()[-1]
        self.assertRegex(last, LAST_LINE)
        self.assertIn("no gauges in these logs", last)

    def test_module_entry_point(self):
        self.assertIn("LATENCY", self.ok("trend", self.logs, cwd=SCRIPTS, module=True))


class BottleneckCliTest(unittest.TestCase):
    def test_text_and_json(self):
        with tempfile.TemporaryDirectory() as d:
            logs = Crawl().add(3, pages=20).add(15, pages=120, store_wait_ms=30).write(d)
            with open(os.path.join(d, "crawler-child-42.jsonl"), "a") as f:
                f.write('{"ts":1700000001.0,"op":"fet\n')
            text = oprates("bottleneck", logs)
            js = oprates("bottleneck", logs, "--json", "--window", "3")
        self.assertEqual(text.returncode, 0, text.stderr)
        lines = text.stdout.rstrip("\n").splitlines()
        self.assertRegex(lines[-1], LAST_LINE)
        self.assertTrue(lines[-1].startswith("limiting: store ("), lines[-1])
        self.assertIn("1 bad line(s) skipped", text.stdout)
        windows = [ln for ln in lines if re.match(r"^\d\d:\d\d:\d\d  ", ln)]
        self.assertEqual(len(windows), 4)
        self.assertRegex(windows[1], r"^\d\d:\d\d:\d\d  main +[\d,.]+/s  store +busy +\d+%  disp [\d.]+  "
                                     r"credits +\d+%  ready +[\d,]+  store \d+% capacity \d+% politeness \d+% "
                                     r"dispatcher \d+% cpu \d+%$")
        j = json.loads(js.stdout)
        self.assertEqual(j["window_secs"], 3.0)
        self.assertEqual(j["limiting"]["word"], "store")
        self.assertTrue(j["gauges"])
        self.assertEqual({w["phase"] for w in j["windows"]} - {"ramp", "main", "slowdown", "tail"}, set())
        self.assertEqual(j["windows"][2]["limit"], "store")
        for key in ("machine_busy", "dispatcher_cores", "credits_use", "frontier_ready", "lease_share"):
            self.assertIn(key, j["windows"][2])

    def test_no_records(self):
        with tempfile.TemporaryDirectory() as d:
            r = oprates("bottleneck", d)
        self.assertEqual(r.returncode, 1)
        self.assertIn("no timing records", r.stderr)

    def test_shim_leaves_no_bytecode(self):
        cache = os.path.join(SCRIPTS, "oprates", "__pycache__")
        if os.path.exists(cache):
            self.skipTest("a __pycache__ exists already (tests run without PYTHONDONTWRITEBYTECODE)")
        with tempfile.TemporaryDirectory() as d:
            oprates("table", d)
        self.assertFalse(os.path.exists(cache), "the shim wrote bytecode into the source tree")


if __name__ == "__main__":
    unittest.main()
