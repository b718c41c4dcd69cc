"""Reading: gauge lines are gauges (not bad lines), `n` is read, bad lines counted."""

import gzip
import json
import os
import tempfile
import unittest

from oprates.reading import BadLine, GaugeLine, ReadStats, batch_size, find_log_files, parse_line, read_records


class ParseLineTest(unittest.TestCase):
    def test_operation_line(self):
        ts, dur, ok, rec = parse_line('{"ts":1700000000.5,"node":"n1","role":"crawler-child","pid":42,'
                                      '"op":"fetch","dur_us":1234,"outcome":"ok","domain":"a.test"}')
        self.assertEqual((ts, dur, ok, rec["op"]), (1700000000.5, 1234, True, "fetch"))
        self.assertEqual(batch_size(rec), 1, "no n means one item")

    def test_batch_size(self):
        *_, rec = parse_line('{"ts":1,"op":"store","dur_us":5000,"outcome":"ok","n":37}')
        self.assertEqual(batch_size(rec), 37)

    def test_bad_n(self):
        for n in ('"x"', "-1", "true"):
            with self.subTest(n=n), self.assertRaises(BadLine):
                parse_line('{"ts":1,"op":"store","dur_us":5,"n":%s}' % n)

    def test_gauge_line(self):
        g = parse_line('{"ts":1700000001.0,"node":"n1","role":"dispatcher","pid":7,'
                       '"gauges":{"cpu_seconds":1.5,"frontier_ready":12,"rss_bytes":null,"odd":"x"}}')
        self.assertIsInstance(g, GaugeLine)
        self.assertEqual(g.process, ("n1", "dispatcher", "7"))
        self.assertEqual(g.values, {"cpu_seconds": 1.5, "frontier_ready": 12.0}, "nulls and non-numbers dropped")

    def test_bad_lines(self):
        for line, why in [("not json", "not JSON"), ("[1]", "not a JSON object"),
                          ('{"ts":1,"op":"fetch"}', "dur_us"), ('{"ts":1,"dur_us":3}', "missing op"),
                          ('{"op":"fetch","dur_us":3}', "ts"), ('{"ts":1,"gauges":[1]}', "gauges")]:
            with self.subTest(line=line), self.assertRaisesRegex(BadLine, why):
                parse_line(line)
        self.assertIsNone(parse_line("   \n"))


class ReadRecordsTest(unittest.TestCase):
    def test_gauges_counted_apart_and_handed_on(self):
        with tempfile.TemporaryDirectory() as d:
            lines = [
                {"ts": 100.0, "node": "n1", "role": "crawler-child", "pid": 1, "op": "fetch", "dur_us": 10},
                {"ts": 101.0, "node": "n1", "role": "crawler-child", "pid": 1, "gauges": {"cpu_seconds": 0.5}},
                {"ts": 102.0, "node": "n1", "role": "crawler-child", "pid": 1, "op": "store", "dur_us": 10, "n": 4},
            ]
            with open(os.path.join(d, "crawler-child-1.jsonl"), "w") as f:
                f.write("\n".join(json.dumps(x) for x in lines) + "\n{\"ts\":103,\"op\":\"fe\n")
            with gzip.open(os.path.join(d, "dispatcher-2.jsonl.gz"), "wt") as f:
                f.write(json.dumps({"ts": 50.0, "node": "n1", "role": "dispatcher", "pid": 2,
                                    "gauges": {"credits_held": 3}}) + "\n")
            stats, seen = ReadStats(), []
            recs = list(read_records(find_log_files([d], stats), stats, seen.append))
        self.assertEqual([r[3]["op"] for r in recs], ["fetch", "store"])
        self.assertEqual((stats.files, stats.lines, stats.gauge_lines, stats.bad_lines), (2, 2, 2, 1))
        self.assertEqual(sorted(g.ts for g in seen), [50.0, 101.0])
        # Gauge timestamps do not move the operations' span.
        self.assertEqual((stats.t_min, stats.t_max), (100.0, 102.0))
        self.assertEqual(stats.as_json()["gauge_lines"], 2)


if __name__ == "__main__":
    unittest.main()
