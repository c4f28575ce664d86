"""Device-side phases of a persistent kernel, from its instrumented build.

An instrumented build (never the timed one) writes `%globaltimer` readings (ns) into an int64
buffer [ctas, layout.slots], one row per CTA; which slot holds what is the kernel family's
`SlotLayout` (nvgg/kernels/phase_slots.py: SM90, SM100). A slot a CTA never reached holds 0 (a CTA
with no tile has only START and EXIT). This module turns the buffer into per-phase medians and
maxima over CTAs, the setup share of kernel time, and a Chrome/Perfetto trace with one track per CTA.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from pathlib import Path

from ..kernels.phase_slots import SM90, SlotLayout


@dataclass(frozen=True)
class PhaseStats:
    name: str
    ctas: int
    median_us: float
    max_us: float


@dataclass(frozen=True)
class PhaseReport:
    ctas: int
    ctas_with_work: int
    kernel_us: float               # first START to last EXIT
    time_to_first_mma_us: float    # median over CTAs with work, from their START
    setup_share: float             # median over CTAs of (FIRST_MMA - START) / (EXIT - START)
    switches_median: float
    phases: tuple[PhaseStats, ...]

    def to_dict(self) -> dict:
        out = asdict(self)
        out["phases"] = [asdict(p) for p in self.phases]
        return out


def _rows(buffer, layout: SlotLayout) -> list[list[int]]:
    rows = buffer.tolist() if hasattr(buffer, "tolist") else buffer
    if not rows or len(rows[0]) < layout.FIRST_SWITCH:
        raise ValueError(f"a phase buffer needs rows of at least {layout.FIRST_SWITCH} slots")
    return rows


def _at(row, slot) -> int:
    """The reading of `slot`, or the latest of a tuple of slots (0 if any is missing)."""
    if isinstance(slot, tuple):
        values = [row[s] for s in slot]
        return 0 if min(values) <= 0 else max(values)
    return row[slot]


def analyse(buffer, layout: SlotLayout = SM90) -> PhaseReport:
    rows = _rows(buffer, layout)
    START, FIRST_MMA, EXIT = layout.START, layout.FIRST_MMA, layout.EXIT
    worked = [r for r in rows if r[FIRST_MMA] > 0]
    start0 = min(r[START] for r in rows)
    kernel_ns = max(r[EXIT] for r in rows) - start0
    phases = []
    for name, a, b in layout.phases:
        spans = [(r[b] - _at(r, a)) / 1e3 for r in worked if _at(r, a) > 0 and r[b] > 0]
        if spans:
            phases.append(PhaseStats(name, len(spans), statistics.median(spans), max(spans)))
    first_mma = [(r[FIRST_MMA] - r[START]) / 1e3 for r in worked]
    share = [(r[FIRST_MMA] - r[START]) / (r[EXIT] - r[START]) for r in worked if r[EXIT] > r[START]]
    switches = [min(int(r[layout.SWITCHES]), layout.max_switches, len(r) - layout.FIRST_SWITCH) for r in rows]
    return PhaseReport(
        ctas=len(rows), ctas_with_work=len(worked), kernel_us=kernel_ns / 1e3,
        time_to_first_mma_us=statistics.median(first_mma) if first_mma else 0.0,
        setup_share=statistics.median(share) if share else 0.0,
        switches_median=statistics.median(switches) if switches else 0.0,
        phases=tuple(phases),
    )


def chrome_trace(buffer, layout: SlotLayout = SM90, *, name: str = "nvgg persistent kernel") -> dict:
    """Chrome trace events (the JSON Perfetto and chrome://tracing open): one track per CTA, a
    complete event per phase, an instant event per group switch; times in µs from the first START."""
    rows = _rows(buffer, layout)
    t0 = min(r[layout.START] for r in rows)
    events = [{"name": "process_name", "ph": "M", "pid": 0, "args": {"name": name}}]
    for cta, r in enumerate(rows):
        events.append({"name": "thread_name", "ph": "M", "pid": 0, "tid": cta, "args": {"name": f"CTA {cta}"}})
        for phase, a, b in layout.phases:
            if _at(r, a) > 0 and r[b] > 0:
                events.append({"name": phase, "ph": "X", "pid": 0, "tid": cta, "ts": (_at(r, a) - t0) / 1e3,
                               "dur": (r[b] - _at(r, a)) / 1e3})
        count = min(int(r[layout.SWITCHES]), layout.max_switches, len(r) - layout.FIRST_SWITCH)
        for i in range(count):
            if r[layout.FIRST_SWITCH + i] > 0:
                events.append({"name": "group switch", "ph": "i", "s": "t", "pid": 0, "tid": cta,
                               "ts": (r[layout.FIRST_SWITCH + i] - t0) / 1e3})
    return {"traceEvents": events, "displayTimeUnit": "ns"}


def write_trace(buffer, path: str | Path, layout: SlotLayout = SM90) -> None:
    from ..report import write_json
    write_json(path, chrome_trace(buffer, layout))
