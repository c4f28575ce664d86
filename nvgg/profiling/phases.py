"""Device-side phases of the persistent kernel, from its instrumented build.

The instrumented build (never the timed one) writes `%globaltimer` readings (ns) into an int64
buffer of shape [ctas, SLOTS], one row per CTA:

    slot 0 START          kernel entry (first thread of the CTA)
    slot 1 DESC_READY     tensor maps initialised (producer warp)
    slot 2 FIRST_MMA      first wgmma issued (first consumer warpgroup)
    slot 3 MAINLOOP_DONE  last tile's mainloop finished (first consumer warpgroup)
    slot 4 EPILOGUE_DONE  last tile's epilogue finished (first consumer warpgroup)
    slot 5 EXIT           just before the CTA exits (first thread)
    slot 6 PHASE0_DONE    the CTA's share of phase 0 done (every warp past the CTA barrier)
    slot 7 BARRIER_DONE   the grid barrier passed (first thread)
    slot 8 SWITCHES       how many group switches the producer made (a count, not a time)
    slot 9..              the time each switch's descriptor update and fence were done

A slot a CTA never reached holds 0 (a CTA with no tile has only START and EXIT). This module turns
the buffer into per-phase medians and maxima over CTAs, the setup share of kernel time, and a
Chrome/Perfetto trace with one track per CTA.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from pathlib import Path

START, DESC_READY, FIRST_MMA, MAINLOOP_DONE, EPILOGUE_DONE, EXIT = range(6)
PHASE0_DONE, BARRIER_DONE, SWITCHES, FIRST_SWITCH = range(6, 10)
MAX_SWITCHES = 56
SLOTS = FIRST_SWITCH + MAX_SWITCHES

# (name, from slot, to slot): the phases reported, in kernel order. The producer's descriptor setup
# runs beside phase 0; "to first MMA" runs from the later of the barrier and the descriptors (the
# barrier, in the current kernel: its producer sets up the maps before it waits).
PHASES = (
    ("descriptor setup", START, DESC_READY),
    ("phase 0", START, PHASE0_DONE),
    ("grid barrier", PHASE0_DONE, BARRIER_DONE),
    ("to first MMA", (DESC_READY, BARRIER_DONE), FIRST_MMA),
    ("mainloops", FIRST_MMA, MAINLOOP_DONE),
    ("last epilogue", MAINLOOP_DONE, EPILOGUE_DONE),
    ("exit", EPILOGUE_DONE, EXIT),
)


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


def _rows(buffer) -> list[list[int]]:
    rows = buffer.tolist() if hasattr(buffer, "tolist") else buffer
    if not rows or len(rows[0]) < FIRST_SWITCH:
        raise ValueError(f"a phase buffer needs rows of at least {FIRST_SWITCH} slots")
    return rows


def _at(row, slot) -> int:
    """The reading of `slot`, or the latest of a tuple of slots (0 if any is missing)."""
    if isinstance(slot, tuple):
        values = [row[s] for s in slot]
        return 0 if min(values) <= 0 else max(values)
    return row[slot]


def analyse(buffer) -> PhaseReport:
    rows = _rows(buffer)
    worked = [r for r in rows if r[FIRST_MMA] > 0]
    start0 = min(r[START] for r in rows)
    kernel_ns = max(r[EXIT] for r in rows) - start0
    phases = []
    for name, a, b in PHASES:
        spans = [(r[b] - _at(r, a)) / 1e3 for r in worked if _at(r, a) > 0 and r[b] > 0]
        if spans:
            phases.append(PhaseStats(name, len(spans), statistics.median(spans), max(spans)))
    first_mma = [(r[FIRST_MMA] - r[START]) / 1e3 for r in worked]
    share = [(r[FIRST_MMA] - r[START]) / (r[EXIT] - r[START]) for r in worked if r[EXIT] > r[START]]
    switches = [min(int(r[SWITCHES]), MAX_SWITCHES, len(r) - FIRST_SWITCH) for r in rows]
    return PhaseReport(
        ctas=len(rows), ctas_with_work=len(worked), kernel_us=kernel_ns / 1e3,
        time_to_first_mma_us=statistics.median(first_mma) if first_mma else 0.0,
        setup_share=statistics.median(share) if share else 0.0,
        switches_median=statistics.median(switches) if switches else 0.0,
        phases=tuple(phases),
    )


def chrome_trace(buffer, *, name: str = "nvgg persistent kernel") -> dict:
    """Chrome trace events (the JSON Perfetto and chrome://tracing open): one track per CTA, a
    complete event per phase, an instant event per group switch; times in µs from the first START."""
    rows = _rows(buffer)
    t0 = min(r[START] for r in rows)
    events = [{"name": "process_name", "ph": "M", "pid": 0, "args": {"name": name}}]
    for cta, r in enumerate(rows):
        events.append({"name": "thread_name", "ph": "M", "pid": 0, "tid": cta, "args": {"name": f"CTA {cta}"}})
        for phase, a, b in PHASES:
            if _at(r, a) > 0 and r[b] > 0:
                events.append({"name": phase, "ph": "X", "pid": 0, "tid": cta, "ts": (_at(r, a) - t0) / 1e3,
                               "dur": (r[b] - _at(r, a)) / 1e3})
        count = min(int(r[SWITCHES]), MAX_SWITCHES, len(r) - FIRST_SWITCH)
        for i in range(count):
            events.append({"name": "group switch", "ph": "i", "s": "t", "pid": 0, "tid": cta,
                           "ts": (r[FIRST_SWITCH + i] - t0) / 1e3})
    return {"traceEvents": events, "displayTimeUnit": "ns"}


def write_trace(buffer, path: str | Path) -> None:
    from ..report import write_json
    write_json(path, chrome_trace(buffer))
