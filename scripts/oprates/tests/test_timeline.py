"""The per-window facts: lease-time breakdown and what the gauges say."""

import unittest

from oprates.reading import GaugeLine
from oprates.timeline import Timeline


def rec(op, dur_us, role="crawler-child", n=None, domain=None):
    r = {"op": op, "role": role}
    if n is not None:
        r["n"] = n
    if domain is not None:
        r["domain"] = domain
    return r


class BreakdownTest(unittest.TestCase):
    def test_groups_and_store_per_page(self):
        tl = Timeline(5.0)
        add = tl.add_record
        add(1.0, 1000, True, rec("start_wait", 1000))
        add(1.0, 500, True, rec("result_wait", 500, role="dispatcher"))
        add(1.0, 2000, True, rec("politeness_wait", 2000))
        add(1.0, 3000, True, rec("domain_wait", 3000))
        add(1.0, 4000, True, rec("slot_wait", 4000))
        add(1.0, 6000, True, rec("fetch", 6000, domain="a.test"))
        add(1.5, 6000, False, rec("fetch", 6000, domain="b.test"))
        add(1.0, 700, True, rec("parse", 700))
        add(1.0, 100, True, rec("store_wait", 100))
        add(1.0, 5000, True, rec("store", 5000, n=10))  # every page of the batch waited 5 ms
        add(1.0, 9999, True, rec("store", 9999, role="dispatcher"))  # not a page write
        add(1.0, 9999, True, rec("queue_wait", 9999, role="dispatcher"))  # before the lease
        add(1.0, 9999, True, rec("frontier_insert", 9999, role="dispatcher", n=3))
        (f,) = tl.facts()
        self.assertEqual(f.lease_us, {"dispatcher": 1500, "politeness": 5000, "capacity": 16000, "cpu": 700,
                                      "store": 50100})
        self.assertEqual((f.pages, f.domains, f.ops), (2, 2, 13))
        share = f.lease_share()
        self.assertAlmostEqual(sum(share.values()), 1.0)
        self.assertAlmostEqual(share["store"], 50100 / 73300)

    def test_store_without_n_counts_once_in_old_logs(self):
        tl = Timeline(5.0)
        tl.add_record(1.0, 5000, True, rec("store", 5000))
        self.assertEqual(tl.facts()[0].lease_us["store"], 5000)

    def test_store_without_n_is_not_a_page_write_in_new_logs(self):
        tl = Timeline(5.0)
        tl.add_record(1.0, 5000, True, rec("store", 5000, domain="a.test"))  # the domain's politeness state
        tl.add_record(7.0, 2000, True, rec("store", 2000, n=3))
        self.assertEqual([f.lease_us["store"] for f in tl.facts()], [0, 6000])


class GaugeTest(unittest.TestCase):
    def test_deltas_and_levels(self):
        tl = Timeline(5.0)
        # Dispatcher: 0.5 s CPU per second; the machine (4 cores) 3 busy s per second.
        for i in range(6):
            tl.add_gauges(GaugeLine(100.0 + i, "n1", "dispatcher", "7", {
                "cpu_seconds": 0.5 * i, "machine_busy_seconds": 3.0 * i, "machine_cores": 4,
                "credits_held": 90 + 2 * i, "credits_capacity": 100, "frontier_ready": [0, 0, 5, 0, 0, 9][i]}))
            # A second node, idle, and a child with its own gauges.
            tl.add_gauges(GaugeLine(100.2 + i, "n2", "supervisor", "8", {
                "cpu_seconds": 0.01 * i, "machine_busy_seconds": 0.4 * i, "machine_cores": 2}))
            tl.add_gauges(GaugeLine(100.3 + i, "n2", "crawler-child", "9", {"store_queue": 4, "cpu_seconds": i}))
        f = tl.facts()[0]  # 100..105: samples 0-4, deltas 1-4
        self.assertAlmostEqual(f.busy_by_node["n1"], 0.75)
        self.assertAlmostEqual(f.busy_by_node["n2"], 0.2)
        self.assertEqual((f.busiest_node, f.busy), ("n1", 0.75))
        self.assertAlmostEqual(f.dispatcher_cores, 0.5)
        self.assertAlmostEqual(f.cpu_by_role["crawler-child"], 1.0)
        self.assertAlmostEqual(f.credits_use, 0.94)  # mean held 94 of 100
        self.assertEqual(f.ready, 1.0)
        self.assertEqual(f.ready_median, 0)
        self.assertEqual(f.gauges["store_queue"], 4)

    def test_restarted_pid_is_not_a_negative_delta(self):
        tl = Timeline(5.0)
        tl.add_gauges(GaugeLine(100.0, "n1", "dispatcher", "7", {"cpu_seconds": 50.0}))
        tl.add_gauges(GaugeLine(101.0, "n1", "dispatcher", "7", {"cpu_seconds": 0.1}))
        self.assertIsNone(tl.facts()[0].dispatcher_cores)


if __name__ == "__main__":
    unittest.main()
