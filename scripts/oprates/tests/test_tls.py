"""`tls`: handshakes per page from the children's last gauge lines."""

import os
import tempfile
import unittest

from oprates.tls import tls_figures


def gauge(ts, pid, full, resumed, **failed):
    values = {"tls_handshakes.full": full, "tls_handshakes.resumed": resumed, "child_pending": 3}
    values |= {f"tls_failures.{k}": v for k, v in failed.items()}
    body = ",".join(f'"{k}":{v}' for k, v in values.items())
    return f'{{"ts":{ts},"node":"n1","role":"crawler-child","pid":{pid},"gauges":{{{body}}}}}\n'


def fetch(ts, pid):
    return f'{{"ts":{ts},"node":"n1","role":"crawler-child","pid":{pid},"op":"fetch","dur_us":900,"outcome":"ok"}}\n'


class TlsTest(unittest.TestCase):
    def test_last_line_of_each_child_over_the_fetches(self):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "crawler-child-1.jsonl"), "w") as f:
                f.write(gauge(1, 1, 1, 0) + "".join(fetch(1.5, 1) for _ in range(10)) + gauge(2, 1, 2, 3))
            with open(os.path.join(d, "crawler-child-2.jsonl"), "w") as f:
                f.write("".join(fetch(1.5, 2) for _ in range(10)) + gauge(2, 2, 1, 0, unknown_issuer=2))
            out, stats = tls_figures([d])
        self.assertEqual((out["full"], out["resumed"], out["fetches"], out["processes"]), (3, 3, 20, 2))
        self.assertEqual(out["handshakes_per_page"], 0.3)
        self.assertEqual(out["failed"], {"unknown_issuer": 2})
        self.assertEqual(stats.gauge_lines, 3)


if __name__ == "__main__":
    unittest.main()
