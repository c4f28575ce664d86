"""A verdict for each measured row: why this strategy takes the time it takes, as one short phrase
for the table and the numbers behind it for the JSON.

Each finding is computed from what was measured for that row, and only where its evidence was
measured; the first that holds, in this order, is the verdict:

1. host-bound: the host takes as long to issue a call as the GPU takes to run it (host launch time
   per call, measured unsynchronised, against the CUPTI kernel time, or the event time where CUPTI
   did not run): the GPU waits for the launches.
2. launch gaps: the idle time between a call's own kernels (CUPTI) is a fifth of the call or more.
3. setup: the persistent kernel's first MMA comes after a third of its time or more (phases);
   where its timed launches are programmatic and the phases were also measured right behind
   another launch, after a third of a call's time or more past the end of the call before.
4. under-filled or wave quantization: a launch has fewer tiles than the GPU has CTA slots, or its
   last wave is less than half full within the first three (tiles, SMs, resident CTAs an SM); the
   launches of multistream and graph overlap, so their tiles count together.
5. memory-, compute- or latency-bound: where Nsight Compute ran, DRAM or the tensor pipe at 60% of
   peak or more, or neither.
6. otherwise the distance to the speed of light and which floor it is (the SOL model).

Before all of them: a row whose time cannot be the work's (below the speed of light, work escaping
the events) or was measured while the card throttled has that as its verdict (flags.py):
no finding about where the time goes stands on a time that is not the kernel's.

The thresholds are where a finding becomes the main cost, not measurements; every number they
compare was measured in the same run.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

HOST_BOUND = 0.9  # host time a call at or above this share of the GPU time: the GPU waits
GAP_SHARE = 0.2
SETUP_SHARE = 0.3
FULL_COVERAGE = 0.8
HALF_WAVE = 0.5
FEW_WAVES = 3
BUSY_PCT = 60.0
CONCURRENT = ("multistream", "graph")  # strategies whose per-group launches overlap on the GPU


@dataclass(frozen=True)
class Verdict:
    kind: str
    phrase: str
    evidence: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


def judge(result, *, phases=None, ncu=None, behind=None) -> Verdict | None:
    """The verdict on a measured Result (None where it was not timed); `phases` (a PhaseReport),
    `behind` (device_phases.Behind: the same build launched right behind another) and `ncu` (an
    NcuReport) add the evidence of those observers where they ran."""
    if result.stats is None or result.status != "ok":
        return None
    time_us = result.stats.mean_us
    if result.stats.clock != "cuda events":
        return Verdict("cpu", "CPU run: no device verdict", {"time_us": time_us})
    flags = getattr(result, "flags", None) or []
    if flags:
        first = sorted(flags, key=lambda f: f.kind == "throttled")[0]
        return Verdict(first.kind, first.text, {"time_us": time_us, "flags": [f.kind for f in flags]})
    for finding in (_host_bound, _gaps, _setup, _waves):
        verdict = finding(result, time_us, phases, behind)
        if verdict is not None:
            return verdict
    if ncu is not None and ncu.kernels:
        return _ncu_bound(ncu, time_us)
    return _sol(result, time_us)


def _host_bound(result, time_us, *_):
    host = result.setup_us.get("launch_host")
    if host is None:
        return None
    cu = result.cupti or {}
    device_us, what = (cu["kernel_us"], "of kernels") if cu.get("kernel_us") else (time_us, "measured")
    if host >= HOST_BOUND * device_us:
        return Verdict("host-bound", f"host-bound: launches take {host:.1f} µs a call against {device_us:.1f} µs {what}",
                       {"launch_host_us": host, "device_us": device_us, "time_us": time_us})
    return None


def _gaps(result, time_us, *_):
    cu = result.cupti or {}
    if cu.get("activities", 0) <= 1 or not cu.get("gaps_shown", False):
        return None
    if cu["gaps_us"] >= GAP_SHARE * time_us:
        return Verdict("launch gaps", f"launch gaps: {cu['gaps_us']:.1f} µs idle between a call's "
                                      f"{cu['activities']:g} kernels of {time_us:.1f} µs",
                       {"gaps_us": cu["gaps_us"], "launches": cu["activities"], "time_us": time_us})
    return None


def _setup(result, time_us, phases, behind):
    if phases is None or not phases.ctas_with_work:
        return None
    if behind is not None and behind.first_mma_median_us is not None:
        # the timed calls run back to back: what a call waits for is its first MMA after the call
        # before ends, within the call's time (a probe without a first-MMA mark has no such time)
        share = behind.first_mma_median_us / time_us
        if share < SETUP_SHARE:
            return None
        return Verdict("setup", f"setup: first MMA {behind.first_mma_median_us:.1f} µs after the call before ends, "
                                f"of {time_us:.1f} µs a call ({share:.0%})",
                       {"first_mma_after_previous_us": behind.first_mma_median_us, "time_us": time_us,
                        "setup_share": share})
    if phases.setup_share >= SETUP_SHARE:
        return Verdict("setup", f"setup: first MMA at {phases.time_to_first_mma_us:.1f} µs of a "
                                f"{phases.kernel_us:.1f} µs kernel ({phases.setup_share:.0%})",
                       {"time_to_first_mma_us": phases.time_to_first_mma_us, "kernel_us": phases.kernel_us,
                        "setup_share": phases.setup_share})
    return None


def _waves(result, time_us, *_):
    tiles, sms = result.tiles, result.sms
    if not tiles or not sms:
        return None
    slots = sms * max(result.ctas_per_sm or 1, 1)
    if result.strategy in CONCURRENT and len(tiles) > 1:
        tiles = [sum(tiles)]  # their launches run side by side: together they fill the GPU
    waves = [t / slots for t in tiles]
    coverage = sum(min(w, 1.0) for w in waves) / len(waves)
    evidence = {"tiles": tiles, "sms": sms, "ctas_per_sm": result.ctas_per_sm or 1, "waves": waves,
                "coverage": coverage}
    if max(waves) < 1.0 and coverage < FULL_COVERAGE:
        where = f"{tiles[0]} tiles" if len(tiles) == 1 else f"{len(tiles)} launches of {min(tiles)}-{max(tiles)} tiles"
        return Verdict("under-filled", f"under-filled: {where} on {slots} CTA slots ({coverage:.0%} busy)", evidence)
    if len(tiles) == 1 and 1.0 < waves[0] < FEW_WAVES:
        last = waves[0] - math.floor(waves[0])
        if 0 < last < HALF_WAVE:
            return Verdict("wave quantization", f"wave quantization: {tiles[0]} tiles = {waves[0]:.2f} waves on "
                                                f"{slots} CTA slots (last wave {last:.0%} full)", evidence)
    return None


def _ncu_bound(ncu, time_us):
    kernels = ncu.kernels
    total = sum(k.duration_us for k in kernels) or 1.0

    def weighted(attr):
        values = [(getattr(k, attr), k.duration_us) for k in kernels if getattr(k, attr) is not None]
        return sum(v * d for v, d in values) / sum(d for _, d in values) if values else None

    dram, tensor = weighted("dram_pct"), weighted("tensor_pct")
    pipe = _pipe_label(kernels)
    evidence = {"dram_pct": dram, "tensor_pct": tensor, "tensor_pipe": sorted({k.tensor_pipe for k in kernels if k.tensor_pipe}),
                "ncu_kernel_us": total, "time_us": time_us}
    for name in ("tmem_pct", "tmem_pipe_pct"):  # tensor memory (sm_100): evidence, not a verdict of its own
        value = weighted(name)
        if value is not None:
            evidence[name] = value
    if dram is not None and dram >= BUSY_PCT and (tensor is None or dram >= tensor):
        return Verdict("memory-bound", f"memory-bound: DRAM at {dram:.0f}% of peak (ncu)", evidence)
    if tensor is not None and tensor >= BUSY_PCT:
        return Verdict("compute-bound", f"compute-bound: {pipe} {tensor:.0f}% busy (ncu)", evidence)
    return Verdict("latency-bound", f"latency-bound: DRAM {_pct(dram)}, {pipe} {_pct(tensor)} of peak (ncu)",
                   evidence)


def _pipe_label(kernels) -> str:
    """What the tensor figure measured: the MMA pipe of the kernels' architecture (its kernel
    family's ncu set, named in each kernel's `tensor_label`), or a note that nvgg reads no pipe on it."""
    labels = {k.tensor_label for k in kernels if getattr(k, "tensor_label", None)}
    if not labels:
        return "tensor pipe (not read on this architecture)"
    return " / ".join(sorted(labels))


def _sol(result, time_us):
    if result.sol is None:
        return Verdict("device", f"device time {time_us:.1f} µs (no GPU profile for a floor)", {"time_us": time_us})
    gap = time_us / result.sol.sol_us
    return Verdict("device", f"device: {gap:.1f}x the {result.sol.bound} floor of {result.sol.profile}",
                   {"time_us": time_us, "sol_us": result.sol.sol_us, "bound": result.sol.bound, "gap": gap})


def _pct(x) -> str:
    return "—" if x is None else f"{x:.0f}%"
