#!/usr/bin/env python3
"""oprates: per-operation rates and latencies over time from the crawler's
timing logs, and which resource limits the crawl.

    oprates.py table      LOGS... [--window 60] [--by op,role] [--json]
    oprates.py plot       LOGS... --out DIR [--window SECS] [--by op,node]
    oprates.py trend      LOGS... [--window SECS] [--by op] [--json]
    oprates.py bottleneck LOGS... [--window 5] [--json]
    oprates.py tls        LOGS... [--json]

The code is the package beside this file, scripts/oprates/ (see its
__init__.py); this file only keeps `python3 scripts/oprates.py ARGS` working
from anywhere. scripts/README.md explains the commands.
"""

import os
import sys

# The package beside this file, not some other `oprates` on the path; no
# __pycache__ left in the source tree.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True

from oprates.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
