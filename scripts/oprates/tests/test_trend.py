"""trend leaves the run's tail out, but never a slowdown: the signal it exists for."""

import contextlib
import io
import json
import tempfile
import unittest

from oprates.cli import main
from oprates.tests.synth import Crawl, LogWriter, T0
from oprates.trend import trend_of, verdict
from oprates.windows import collect, make_grid, merge_series


def run(*argv) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = main(list(argv))
    if status:
        raise AssertionError(f"oprates {argv} exited {status}")
    return out.getvalue()


def trend_json(path, *extra) -> dict:
    return json.loads(run("trend", path, "--json", *extra))


def tail_crawl(old_format: bool) -> Crawl:
    """30 s over 20 domains, then 20 s of two slow Crawl-delay hosts whose
    fetches take 6x longer: the shape that once made trend blame fetch."""
    c = Crawl(old_format=old_format).add(30, pages=100, fetch_ms=5)
    return c.add(20, pages=10, domains=2, fetch_ms=30, politeness_ms=100, ready=0, credits_held=20)


def slowdown_crawl(gauges: bool) -> Crawl:
    """parse grows 0.3 ms per second and the rate falls to a quarter of its
    peak, while all 20 domains stay busy: per-domain in-flight caps leave
    nothing 'ready' in the frontier and credits idle, as in the real crawl of
    tests/tests/timing_trend.rs."""
    c = Crawl()
    for i in range(60):
        parse = 0.1 + 0.3 * i
        knobs = dict(pages=int(min(80, 400 / parse)), parse_ms=parse, ready=0, credits_held=320, credits_capacity=512)
        if not gauges:
            knobs["machine_busy"] = None
        c.add(1, **knobs)
    return c


class TrendTailTest(unittest.TestCase):
    def test_old_logs_tail_is_left_out(self):
        with tempfile.TemporaryDirectory() as d:
            path = tail_crawl(old_format=True).write(d)
            t = trend_json(path)
            text = run("trend", path)
        self.assertTrue(t["phases"]["tail_left_out"], t["phases"])
        self.assertAlmostEqual(t["phases"]["tail_start"], T0 + 30, delta=5)
        self.assertLess(t["phases"]["analysed_secs"], 36)
        self.assertLess(t["ops"]["fetch"]["latency_growth"], 1.5, "the slow hosts' fetches are the tail's")
        self.assertFalse(t["worst_latency_growth"]["notable"], t["worst_latency_growth"])
        self.assertIn("# tail left out: the last ", text)
        self.assertNotIn("fetch: median latency grew", text)

    def test_new_logs_tail_is_left_out(self):
        with tempfile.TemporaryDirectory() as d:
            t = trend_json(tail_crawl(old_format=False).write(d))
        self.assertTrue(t["phases"]["tail_left_out"])
        self.assertIn("nothing ready", t["phases"]["basis"])
        self.assertLess(t["ops"]["fetch"]["latency_growth"], 1.5)

    def test_without_the_cut_the_tail_would_blame_fetch(self):
        """The log above is the trap: over the whole run, fetch 'grew' 6x."""
        with tempfile.TemporaryDirectory() as d:
            col, stats = collect([tail_crawl(old_format=True).write(d)], ("op",), None)
        grid = make_grid(col, stats, None, 10)
        trends = [trend_of({"op": op}, s, col, grid, stats) for (op,), s in merge_series(col, ("op",)).items()]
        worst, _ = verdict(trends, include_waits=False)
        self.assertEqual(worst.key["op"], "fetch")
        self.assertGreater(worst.growth, 4)


class TrendSlowdownTest(unittest.TestCase):
    def check_parse_named(self, gauges: bool):
        with tempfile.TemporaryDirectory() as d:
            t = trend_json(slowdown_crawl(gauges).write(d))
        self.assertFalse(t["phases"]["tail_left_out"], t["phases"])
        worst = t["worst_latency_growth"]
        self.assertEqual(worst["op"], "parse", worst)
        self.assertGreaterEqual(worst["factor"], 2.0)
        # The waits are not named even when they grow (they are behind parse).
        self.assertIn("store_wait", t["excluded_from_verdict"])

    def test_slowdown_with_gauges_is_kept(self):
        self.check_parse_named(gauges=True)

    def test_slowdown_without_gauges_is_kept(self):
        self.check_parse_named(gauges=False)

    def test_a_steady_growth_outranks_a_bigger_jump(self):
        """parse grows steadily (about 2.5x between the thirds); fetch, which
        shares the child's threads with it, jumps 6x in the last quarter (as
        in a real crawl whose parse slowed: fetch 4.26x, r2 0.50, against
        parse 4.10x, r2 1.00). The cause is the steady one."""
        c = Crawl()
        for i in range(60):
            c.add(1, pages=60, parse_ms=1 + 0.05 * i, fetch_ms=1 if i < 45 else 6)
        with tempfile.TemporaryDirectory() as d:
            t = trend_json(c.write(d))
        worst = t["worst_latency_growth"]
        fetch = t["ops"]["fetch"]
        self.assertEqual(worst["op"], "parse", fetch)
        # Not for want of a bigger growth elsewhere, nor of one that costs time.
        self.assertGreater(fetch["latency_growth"], 2 * worst["factor"])
        self.assertGreater(fetch["added_load"], worst["added_load"])
        self.assertLess(fetch["p50_fit_r2"], 0.8)

    def test_growing_store_is_named_as_in_the_end_to_end_test(self):
        """The synthetic log of tests/tests/timing_trend.rs, in short: two
        nodes, steady fetch, store growing 1 → 21 ms, politeness_wait growing
        more (deliberate: not named), a few bad lines."""
        with tempfile.TemporaryDirectory() as d:
            w = LogWriter(d)
            for n, node in enumerate(["n1", "n2"]):
                for i in range(1200):
                    t = T0 + i * 0.1 + n * 0.03
                    jitter = (i * 7919 + n * 31) % 400
                    kw = dict(node=node, pid=100 + n, domain="a.test")
                    w.op(t, "fetch", 1800 + jitter, outcome="timeout" if i % 97 == 0 else "ok", **kw)
                    w.op(t + 0.01, "parse", 80 + jitter // 10, **kw)
                    if i % 5 == 0:
                        w.op(t + 0.02, "store", 1000 + i * 0.1 * 170 + jitter, **kw)
                        w.op(t + 0.03, "politeness_wait", 1000 + i * 0.1 * 5000, outcome="waited", **kw)
            w.raw("crawler-child", 100, "not json at all")
            w.write()
            t = trend_json(d)
            by_node = trend_json(d, "--by", "op,node")
        self.assertEqual(t["bad_lines"], 1)
        self.assertEqual(t["worst_latency_growth"]["op"], "store")
        self.assertTrue(3.0 <= t["worst_latency_growth"]["factor"] < 6.0)
        self.assertFalse(t["phases"]["tail_left_out"])
        self.assertEqual(by_node["worst_latency_growth"]["op"], "store")


if __name__ == "__main__":
    unittest.main()
