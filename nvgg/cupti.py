"""Kernel activity records through CUPTI, as PyTorch's profiler (Kineto) collects them.

For one call: the device activities it launched (kernels, copies, sets), the sum of their
durations, the span from the first start to the last end, and the idle time inside that span
(span minus the union of the activities). Event time minus the union (the kernel time) is what
the host and the launches add. Tracing slows the host's launches (and the profiler's start delays
the first ones it sees), so the gaps seen under the profiler are an upper bound on the gaps of an
untraced run; the kernel durations are not affected.

`per_call` turns one recording per call into the summary the tables show, defined so that its
columns add up: the untraced event time of a call = its kernel time (CUPTI, the union) + what the
host and the launches added; the gaps between a call's own kernels are part of the latter, shown
only where tracing did not inflate them past it.

`Recorder` is the data path's observer (datapath.Observer) for a row timed with the "cupti"
timer: after the timed run, once its calls are found right, each call of the batch recorded on its
own (`calls`) and summarised beside the event time.
"""

from __future__ import annotations

import warnings

from dataclasses import asdict, dataclass
from typing import Callable

import torch

from .timing import L2Flush


@dataclass(frozen=True)
class Activity:
    name: str
    kind: str
    start_ns: int
    end_ns: int

    @property
    def us(self) -> float:
        return (self.end_ns - self.start_ns) / 1e3


@dataclass(frozen=True)
class CallProfile:
    activities: int
    busy_us: float      # union of activity intervals
    sum_us: float       # sum of durations (counts overlap twice)
    span_us: float      # first start to last end
    idle_us: float      # span - busy: gaps between activities

    def to_dict(self) -> dict:
        return asdict(self)


def record(fn: Callable[[], object], device: torch.device | None = None) -> list[Activity]:
    """Run fn once under the profiler and return the device activities it caused, by start."""
    with warnings.catch_warnings():
        # one recording is one profiler cycle: its note that events are cleared between cycles
        # ("Profiler clears events at the end of each cycle") says nothing about this use
        warnings.filterwarnings("ignore", message="Profiler clears events")
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            fn()
            torch.cuda.synchronize(device)
    out = []
    for e in prof.profiler.kineto_results.events():
        if e.device_type() == torch.autograd.DeviceType.CUDA and e.duration_ns() > 0:
            kind = str(e.activity_type()) if hasattr(e, "activity_type") else "device"  # torch >= 2.12
            out.append(Activity(e.name(), kind, e.start_ns(), e.start_ns() + e.duration_ns()))
    return sorted(out, key=lambda a: a.start_ns)


def summarize(acts: list[Activity]) -> CallProfile:
    if not acts:
        return CallProfile(0, 0.0, 0.0, 0.0, 0.0)
    busy, cur_start, cur_end = 0, acts[0].start_ns, acts[0].end_ns
    for a in acts[1:]:
        if a.start_ns > cur_end:
            busy += cur_end - cur_start
            cur_start, cur_end = a.start_ns, a.end_ns
        else:
            cur_end = max(cur_end, a.end_ns)
    busy += cur_end - cur_start
    span = max(a.end_ns for a in acts) - acts[0].start_ns
    return CallProfile(len(acts), busy / 1e3, sum(a.end_ns - a.start_ns for a in acts) / 1e3, span / 1e3, (span - busy) / 1e3)


def per_call(calls: list[list[Activity]], event_us: float) -> dict:
    """Mean over calls (each call's activities recorded on its own) of what one call launched,
    beside `event_us`, the call's untraced event time. Keys: calls, activities (launches a call),
    kernel_us (union), sum_us, span_us, gaps_us (idle inside a call's span; 0 for one activity),
    host_overhead_us (event_us - kernel_us: host work, launch latency, gaps; negative where
    untraced calls overlap their kernels), gaps_shown (False
    where the traced gaps exceed the untraced host overhead: tracing slowed the launches between
    them), gaps_note, and kernels: [{name, per_call, mean_us}] by total time."""
    if not calls:
        raise ValueError("no calls recorded")
    n = len(calls)
    sums = [summarize(acts) for acts in calls]
    kernel_us = sum(s.busy_us for s in sums) / n
    gaps_us = sum(s.idle_us for s in sums) / n
    host_us = event_us - kernel_us
    by_name: dict[str, list[float]] = {}
    for acts in calls:
        for a in acts:
            by_name.setdefault(a.name, []).append(a.us)
    kernels = sorted(({"name": name, "per_call": len(d) / n, "mean_us": sum(d) / len(d)} for name, d in by_name.items()),
                     key=lambda k: -k["per_call"] * k["mean_us"])
    shown = gaps_us <= max(host_us, 0.0) + 1e-9
    note = "" if shown else (f"gaps not shown: {gaps_us:.1f} µs between a call's kernels under tracing exceed the "
                             f"{host_us:.1f} µs an untraced call spends outside them (tracing slows the launches)")
    if host_us < 0:
        # each call traced alone runs its kernels from start to end; untraced, back to back, a
        # programmatic launch starts while the call before finishes
        note = " ".join(x for x in (note, f"host and launch {host_us:.1f} µs: untraced, the calls' kernels overlap "
                                          "(programmatic launches start behind the call before)") if x)
    return {"calls": n, "activities": sum(s.activities for s in sums) / n, "kernel_us": kernel_us,
            "sum_us": sum(s.sum_us for s in sums) / n, "span_us": sum(s.span_us for s in sums) / n,
            "gaps_us": gaps_us, "event_us": event_us, "host_overhead_us": host_us, "gaps_shown": shown,
            "gaps_note": note, "kernels": kernels}


def calls(launches, device: torch.device, event_us: float) -> dict:
    """CUPTI activity records of each call of the batch, recorded one call at a time with L2
    flushed before each (so every activity belongs to its call), summarised beside the event
    time: kernels by name, launches, kernel time, gaps inside a call, host overhead (`per_call`)."""
    flush = L2Flush(device)
    recorded = []
    for launch in launches:
        flush()
        torch.cuda.synchronize(device)
        recorded.append(record(launch, device))
    return per_call(recorded, event_us)


class Recorder:
    """CUPTI's records of a timed row's calls (`calls`), as its Result's `cupti`: an observer of
    the data path (datapath.Observer). Nothing runs beside the timed repetitions: the calls are
    recorded again after them, and only once what they returned is found right."""

    after_check = True
    repetitions = None

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def record(self, result, timed) -> None:
        if timed.device.type == "cuda":
            result.cupti = calls(timed.launches, timed.device, timed.stats.mean_us)
