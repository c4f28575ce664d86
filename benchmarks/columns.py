"""What the benchmark tables share: a column's value over interleaved passes, and its cell text.
(The scripts run as `python benchmarks/NAME.py`, which puts this folder on the import path.)"""

from __future__ import annotations

import statistics


def median(values):
    """The median of a column's passes, or the first pass's message where a pass did not time."""
    bad = [v for v in values if not isinstance(v, float)]
    return bad[0] if bad else statistics.median(values)


def cell(v, digits: int = 1) -> str:
    return f"{v:.{digits}f}" if isinstance(v, float) else str(v)[:60]
