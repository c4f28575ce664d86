"""What the benchmark scripts share: a column's value over interleaved passes, its cell text, and
the refusal of bad input. (The scripts run as `python benchmarks/NAME.py`, which puts this folder
on the import path.)"""

from __future__ import annotations

import os
import statistics
import sys


def refuse(message: str) -> None:
    """Bad input (or no GPU): one line on stderr naming the script, exit 2, before any long work."""
    print(f"{os.path.basename(sys.argv[0])}: {message}", file=sys.stderr)
    raise SystemExit(2)


def median(values):
    """The median of a column's passes, or the first pass's message where a pass did not time."""
    bad = [v for v in values if not isinstance(v, float)]
    return bad[0] if bad else statistics.median(values)


def cell(v, digits: int = 1) -> str:
    return f"{v:.{digits}f}" if isinstance(v, float) else str(v)[:60]
