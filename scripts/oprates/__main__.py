"""`python3 -m oprates ARGS` (from scripts/) runs the same as `scripts/oprates.py ARGS`."""

import sys

from .cli import main

sys.exit(main())
