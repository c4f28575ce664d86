"""Device-side phases: nvgg's instrumented kernels and a user's probed kernels, one report.

A phase buffer is int64 [ctas, layout.slots], one row per CTA, `%globaltimer` readings (ns); which
column holds what is the `SlotLayout` (nvgg/kernels/phase_slots.py: a kernel family's
`phase_layout`, or `SlotLayout.for_probe` for a user's nvgg.probe.Probe, whose buffers end with an overflow row). A
slot a CTA never reached holds 0 (a CTA of ours with no tile has only START and EXIT). This module
turns one buffer, or the buffers of a call's launches of one kernel, into per-phase medians and
maxima over CTAs, the time to the first MMA and the setup share, plain statements of what a
probe's buffers show wrong (marks never reached, marks out of order, CTAs past the buffer's rows),
and a Chrome/Perfetto trace with one track per CTA.

`Phases` is what a phase run gives the profile command, whoever's kernel it measured: our
instrumented persistent kernel (profiling/device_phases.py) or a user's marked kernels
(profiling/submission_phases.py).
"""

from __future__ import annotations

import abc
import statistics
from dataclasses import asdict, dataclass

from ..kernels.phase_slots import SlotLayout


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
    kernel_us: float               # first reading to last (the median over launches, for several)
    time_to_first_mma_us: float | None  # median over CTAs with work, from their start; None: no such mark
    setup_share: float             # median over CTAs of (first MMA - start) / (end - start)
    switches_median: float
    phases: tuple[PhaseStats, ...]
    launches: int = 1
    notes: tuple[str, ...] = ()    # what the buffers show wrong, in words (probes)
    overflow_ctas: int = 0         # CTAs that marked past their buffer's rows (probes): their marks are lost
    errors: tuple[str, ...] = ()   # the notes that are bad input (a buffer the kernel overran), also in notes
    timer_step_ns: int | None = None  # the smallest difference between two distinct readings (probes)

    def to_dict(self) -> dict:
        out = asdict(self)
        out["phases"] = [asdict(p) for p in self.phases]
        out["notes"], out["errors"] = list(self.notes), list(self.errors)
        return out


@dataclass
class Behind:
    """A launch (or call) right behind another with nothing between them, against the moment the
    first one's last CTA made its last reading: when the second one's CTAs with work start
    (negative: before that moment, the two overlap), and when each issues its first MMA; medians
    and maxima over those CTAs, µs (the MMA figures None where no mark says first MMA)."""

    start_earliest_us: float
    start_median_us: float
    first_mma_median_us: float | None
    first_mma_max_us: float | None

    @property
    def overlap(self) -> bool:
        return self.start_earliest_us < 0


def behind(first, second) -> Behind | None:
    """The second of two back-to-back launches (or calls) against the first; each a list of
    (buffer, layout), one a launch. None where either has no reading."""
    def working(launches):
        for buffer, layout in launches:
            rows = _rows(buffer, layout)
            for r in (rows[:-1] if layout.probe else rows):
                if _readings(r, layout) and (layout.first_mma is None or r[layout.first_mma] > 0):
                    yield r, layout

    ends = [_end(r, layout) for r, layout in working(first)]
    later = list(working(second))
    if not ends or not later:
        return None
    end = max(ends)
    starts = [(_start(r, layout) - end) / 1e3 for r, layout in later]
    mmas = [(r[layout.first_mma] - end) / 1e3 for r, layout in later if layout.first_mma is not None]
    return Behind(min(starts), statistics.median(starts), statistics.median(mmas) if mmas else None,
                  max(mmas) if mmas else None)


class Phases(abc.ABC):
    """One case's phase run: its table, its trace, its JSON, and the evidence the verdict reads."""

    @property
    @abc.abstractmethod
    def main(self) -> PhaseReport | None:
        """The report of the kernel the verdict judges (the one that takes longest)."""

    @property
    @abc.abstractmethod
    def behind(self) -> Behind | None:
        """Where a launch right behind another starts, where the timed launches overlap."""

    @abc.abstractmethod
    def table(self) -> str:
        """The phases for people: spans over CTAs, a summary, the marks' cost."""

    @abc.abstractmethod
    def trace(self) -> dict:
        """A Chrome/Perfetto trace of the run's launches (`chrome_trace_launches`)."""

    @abc.abstractmethod
    def to_dict(self) -> dict:
        """The phases for scripts."""


def _rows(buffer, layout: SlotLayout) -> list[list[int]]:
    rows = buffer.tolist() if hasattr(buffer, "tolist") else [list(r) for r in buffer]
    if layout.probe:
        if len(rows) < 2 or any(len(r) != layout.slots for r in rows):
            raise ValueError(f"a probe buffer of {layout.kernel!r} has rows of {layout.slots} columns and at least "
                             "one CTA row before the overflow row")
    elif not rows or len(rows[0]) < layout.FIRST_SWITCH:
        raise ValueError(f"a phase buffer needs rows of at least {layout.FIRST_SWITCH} slots")
    return rows


GRID_LIMIT = 1 << 31  # CTAs a grid's x dimension can have, and more than any other (CUDA)


def _at(row, slot) -> int:
    """The reading of `slot`, or the latest of a tuple of slots (0 if any is missing)."""
    if isinstance(slot, tuple):
        values = [row[s] for s in slot]
        return 0 if min(values) <= 0 else max(values)
    return row[slot]


def _readings(row, layout: SlotLayout) -> list[int]:
    return [row[c] for c in range(len(layout.names)) if row[c] > 0]


def _start(row, layout: SlotLayout) -> int:
    return min(_readings(row, layout))


def _end(row, layout: SlotLayout) -> int:
    return max(_readings(row, layout))


def extent(buffer, layout: SlotLayout) -> tuple[int, int] | None:
    """One launch's earliest and latest reading over its CTAs (ns, %globaltimer); None where no
    CTA marked."""
    rows = _rows(buffer, layout)
    mine = [r for r in (rows[:-1] if layout.probe else rows) if _readings(r, layout)]
    if not mine:
        return None
    return min(_start(r, layout) for r in mine), max(_end(r, layout) for r in mine)


def analyse(buffer, layout: SlotLayout) -> PhaseReport:
    """One launch's buffer."""
    return analyse_launches([buffer], layout)


def analyse_launches(buffers, layout: SlotLayout) -> PhaseReport:
    """The launches of one kernel in a call (a probe's buffers, or one of ours), as one report:
    statistics over all their CTAs; the kernel time is the median of the launches' spans."""
    marked, spans, lost, unmarked, overflow, empty, rows_total = [], [], [], [], 0, 0, 0
    for i, buffer in enumerate(buffers):
        rows = _rows(buffer, layout)
        if layout.probe:
            rows, over = rows[:-1], rows[-1]
            reach = max(over)
            where = f"launch {i} of {layout.kernel}" if len(buffers) > 1 else layout.kernel
            if reach >= GRID_LIMIT:  # no grid has that many CTAs: a time, written into the overflow row
                lost.append(f"{where}: its overflow row holds a time, not a CTA count: the kernel was told the buffer "
                            f"holds {len(rows) + 1} rows, one too many (pass rows = size(0) - 1)")
            elif reach > len(rows):
                overflow += reach - len(rows)
                lost.append(f"{where}: CTAs up to index {reach - 1} marked but its buffer holds {len(rows)}: the marks of "
                             f"{reach - len(rows)} CTAs are lost; pass the launch's CTA count to buffer()")
        mine = [r for r in rows if _readings(r, layout)]
        if layout.probe and not mine and len(buffers) > 1:
            unmarked.append(f"launch {i} of {layout.kernel}: no CTA reached any mark")
        empty += len(rows) - len(mine)
        rows_total += len(rows)
        if mine:
            spans.append(max(_end(r, layout) for r in mine) - min(_start(r, layout) for r in mine))
        marked += mine
    fm = layout.first_mma
    worked = [r for r in marked if fm is None or r[fm] > 0]
    phases, backwards = [], []
    for name, a, b in layout.phases:
        durations = [r[b] - _at(r, a) for r in (marked if layout.probe else worked) if _at(r, a) > 0 and r[b] > 0]
        late = sum(d < 0 for d in durations)
        if layout.probe and late:
            backwards.append(f"'{layout.names[b]}' came before '{layout.names[a]}' in {late} CTAs (left out of '{name}')")
            durations = [d for d in durations if d >= 0]
        if durations:
            us = [d / 1e3 for d in durations]
            phases.append(PhaseStats(name, len(us), statistics.median(us), max(us)))
    first_mma, share = [], []
    if fm is not None:
        first_mma = [(r[fm] - _start(r, layout)) / 1e3 for r in worked]
        share = [(r[fm] - _start(r, layout)) / (_end(r, layout) - _start(r, layout)) for r in worked
                 if _end(r, layout) > _start(r, layout)]
    switches = [min(int(r[layout.SWITCHES]), layout.max_switches, len(r) - layout.FIRST_SWITCH)
                for r in marked] if layout.max_switches else []
    notes, step = [], None
    if layout.probe:
        notes = unmarked + _probe_notes(marked, empty, rows_total, layout) + backwards + lost
        step = _timer_step(marked, layout)
    return PhaseReport(
        ctas=len(marked), ctas_with_work=len(worked) if fm is not None else len(marked),
        kernel_us=statistics.median(spans) / 1e3 if spans else 0.0,
        time_to_first_mma_us=(statistics.median(first_mma) if first_mma else 0.0) if fm is not None else None,
        setup_share=statistics.median(share) if share else 0.0,
        switches_median=statistics.median(switches) if switches else 0.0,
        phases=tuple(phases), launches=len(buffers), notes=tuple(notes), overflow_ctas=overflow, errors=tuple(lost),
        timer_step_ns=step,
    )


def _probe_notes(marked, empty: int, rows: int, layout: SlotLayout) -> list[str]:
    """Marks not reached, in words: CTAs that stopped after a mark (returned early: no tile, say)
    grouped by the last mark they reached, and marks skipped by CTAs that reached a later one."""
    if not marked:
        return [f"{layout.kernel}: no CTA reached any mark"]
    notes = []
    if empty:
        notes.append(f"{empty} of {rows} buffer rows hold no mark (CTAs that returned before their first mark, "
                     "or rows past the grid)")
    count = len(layout.names)
    stopped, skipped = [0] * count, [0] * count
    for r in marked:
        last = max(c for c in range(count) if r[c] > 0)
        for c in range(last):
            skipped[c] += r[c] == 0
        stopped[last] += last < count - 1 and all(r[c] > 0 for c in range(last))
    for c, name in enumerate(layout.names):
        if stopped[c]:
            notes.append(f"{stopped[c]} of {len(marked)} CTAs marked nothing after '{name}' (returned early, no tile?)")
    for c, name in enumerate(layout.names):
        if skipped[c]:
            notes.append(f"'{name}' skipped by {skipped[c]} of {len(marked)} CTAs that reached a later mark")
    return notes


def _timer_step(rows, layout: SlotLayout) -> int | None:
    values = sorted({v for r in rows for v in _readings(r, layout)})
    steps = [b - a for a, b in zip(values, values[1:])]
    return min(steps) if steps else None


def chrome_trace(buffer, layout: SlotLayout, *, name: str = "nvgg persistent kernel") -> dict:
    """Chrome trace events (the JSON Perfetto and chrome://tracing open) of one launch."""
    return chrome_trace_launches([(name, buffer, layout)])


def chrome_trace_launches(launches) -> dict:
    """Launches side by side, one process each ([(name, buffer, layout)]): one track per CTA, a
    complete event per phase, an instant event per group switch (ours) or per mark (probes);
    times in µs from the earliest reading of any launch."""
    parsed = []
    for name, buffer, layout in launches:
        rows = _rows(buffer, layout)
        parsed.append((name, rows[:-1] if layout.probe else rows, layout))
    starts = [_start(r, layout) for _, rows, layout in parsed for r in rows if _readings(r, layout)]
    t0 = min(starts) if starts else 0
    events = []
    for pid, (name, rows, layout) in enumerate(parsed):
        events.append({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": name}})
        for cta, r in enumerate(rows):
            if not _readings(r, layout):
                continue
            events.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": cta, "args": {"name": f"CTA {cta}"}})
            for phase, a, b in layout.phases:
                if _at(r, a) > 0 and r[b] >= _at(r, a):
                    events.append({"name": phase, "ph": "X", "pid": pid, "tid": cta, "ts": (_at(r, a) - t0) / 1e3,
                                   "dur": (r[b] - _at(r, a)) / 1e3})
            if layout.probe:
                events += [{"name": mark, "ph": "i", "s": "t", "pid": pid, "tid": cta, "ts": (r[c] - t0) / 1e3}
                           for c, mark in enumerate(layout.names) if r[c] > 0]
                continue
            count = min(int(r[layout.SWITCHES]), layout.max_switches, len(r) - layout.FIRST_SWITCH)
            for i in range(count):
                if r[layout.FIRST_SWITCH + i] > 0:
                    events.append({"name": "group switch", "ph": "i", "s": "t", "pid": pid, "tid": cta,
                                   "ts": (r[layout.FIRST_SWITCH + i] - t0) / 1e3})
    from ..result import document
    return document("trace", traceEvents=events, displayTimeUnit="ns")


def chrome_trace_cases(runs: dict) -> dict:
    """Several cases' phase runs in one trace ({case id: Phases}): each case's processes (a launch
    each) numbered after the cases before it and named "case ID: ..."; each case's times from its
    own earliest reading (the cases ran one after another, not side by side). One case: its own
    trace."""
    if len(runs) == 1:
        return next(iter(runs.values())).trace()
    events, base = [], 0
    for cid, run in runs.items():
        mine = run.trace()["traceEvents"]
        for event in mine:
            event = dict(event, pid=event["pid"] + base)
            if event["name"] == "process_name":
                event["args"] = {"name": f"case {cid}: {event['args']['name']}"}
            events.append(event)
        base += 1 + max((e["pid"] for e in mine), default=-1)
    from ..result import document
    return document("trace", traceEvents=events, displayTimeUnit="ns")
