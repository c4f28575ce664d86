"""The card's clocks while a row is timed: SM and memory clocks, temperature, power and the
reasons the driver gives for holding the clocks down, sampled through NVML (nvidia-ml-py) on a
thread beside the timing loop, and summarised into the row.

A row measured while the card throttled (a power cap, a thermal slowdown, a hardware brake) is
flagged: its time is the kernel's at a lower clock than the next run may see. The reasons'
bits are NVML's clock event reasons (nvml.h, `nvmlClocksEventReason*`; the older name is
`ClocksThrottleReason`): idle, application clocks and sync boost are settings, not throttling.

The energy a call comes from the same span: NVML's energy counter, read on a thread of its own
while the timed repetitions run (EnergyMeter, the timer's observer), gives the card's board power
over a window between two of its changes, with a bound that holds whatever held the reads up
(`window_bound`); times the span's wall time a call, that is the energy the card drew a call as
the leaderboard's loop runs the calls, L2 clears and the host's gaps included. The card's idle
power, read once before a process's first row (`idle`), is given beside it and subtracted.
"""

from __future__ import annotations

import math
import statistics
import threading
import time
from typing import Callable

PERIOD_S = 0.05

# nvml.h: the reasons that mean the card ran slower than it was set to
THROTTLING = {
    0x4: "power cap",                  # SwPowerCap
    0x8: "hardware slowdown",          # HwSlowdown
    0x20: "thermal (software)",        # SwThermalSlowdown
    0x40: "thermal (hardware)",        # HwThermalSlowdown
    0x80: "power brake",               # HwPowerBrakeSlowdown
}


def reasons_text(mask: int) -> list[str]:
    """The throttling reasons in an NVML reason mask, in nvml.h's order."""
    return [name for bit, name in THROTTLING.items() if mask & bit]


def _handle(pynvml, device):
    """The NVML handle of a torch CUDA device: by PCI bus id where torch gives it (NVML's indices
    ignore CUDA_VISIBLE_DEVICES), else by index."""
    import torch
    props = torch.cuda.get_device_properties(device)
    bus = getattr(props, "pci_bus_id", None)
    if bus is not None:
        pci = f"{getattr(props, 'pci_domain_id', 0):08X}:{bus:02X}:{getattr(props, 'pci_device_id', 0):02X}.0"
        try:
            return pynvml.nvmlDeviceGetHandleByPciBusId(pci)
        except Exception:
            pass
    return pynvml.nvmlDeviceGetHandleByIndex(device.index or 0)


def _reasons(pynvml, h) -> int:
    for name in ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"):
        fn = getattr(pynvml, name, None)
        if fn is not None:
            return int(fn(h))
    return 0


def _energy(pynvml, h) -> int | None:
    """The card's energy counter in mJ since the driver loaded (Volta and later), None where the
    driver does not keep it."""
    try:
        return int(pynvml.nvmlDeviceGetTotalEnergyConsumption(h))
    except Exception:
        return None


# The energy a call is measured inside the timed span: a thread reads NVML's energy counter while
# the timer's repetitions run, and the span goes on, at most ENERGY_SPAN_S from its first
# repetition, until two of the counter's changes bound the power within ENERGY_WITHIN. The counter
# moves about every 100 ms and a read takes about 3 ms on an H100 (NOTES): a change is then
# bracketed to about two reads (6 ms), and two changes 0.35 s apart bound the power within about
# 2% (`window_bound`), what the half-second span of `± rerun` mostly holds. Where the reading
# thread waits behind the launching one the brackets widen and the span holds longer; past
# ENERGY_SPAN_S the tightest window is kept with its wider bound.
ENERGY_WITHIN = 0.03
ENERGY_SPAN_S = 0.75
MJ_STEP = 1  # the counter counts whole mJ: each end's value is off the energy by under one

# A change of the counter seen by a read: (when the read before it began, when this read ended,
# the counter's value in mJ). The read before returned the old value, so it sampled the counter
# before the change, and no earlier than it began; this read sampled it after the change and no
# later than it ended: the change lies between the two, whatever held either thread up.
Change = tuple[float, float, int]


def window_bound(first: Change, last: Change) -> float:
    """The relative error bound on the mean power between two changes (`power_of`), inf where the
    brackets leave the window's length unknown.

    Each change is placed at its bracket's middle, off by at most half the bracket: the window's
    length d is off by at most h, the half-brackets' sum, and its energy e (the values'
    difference) by under MJ_STEP. The true power then lies in [(e - MJ_STEP) / (d + h),
    (e + MJ_STEP) / (d - h)], and e / d is off it by at most (h / d + MJ_STEP / e) / (1 - h / d)
    of itself (the upper side; the lower is narrower)."""
    (a0, b0, v0), (a1, b1, v1) = first, last
    d = (a1 + b1) / 2 - (a0 + b0) / 2
    h = (b0 - a0) / 2 + (b1 - a1) / 2
    e = v1 - v0
    if d <= h or e <= MJ_STEP:
        return math.inf
    return (h / d + MJ_STEP / e) / (1 - h / d)


def best_window(changes: list[Change]) -> tuple[int, int, float] | None:
    """(i, j, bound) of the two changes whose window's power is bound tightest; None under two
    changes or where no window's length is known."""
    best = None
    for j in range(1, len(changes)):
        for i in range(j):
            bound = window_bound(changes[i], changes[j])
            if bound < math.inf and (best is None or bound < best[2]):
                best = (i, j, bound)
    return best


def power_of(changes: list[Change], span_s: float) -> dict:
    """The mean power between the two changes whose window is bound tightest: the values'
    difference over the time between the brackets' middles, `within` its relative bound
    (`window_bound`), `updates` the changes seen from one end to the other; {"note": why} where
    no two of the changes seen in the span's `span_s` place a window."""
    best = best_window(changes)
    if best is None:
        why = ("too few to place a window between two of its changes" if len(changes) < 2 else
               "none two far enough apart for the reads around them to place a window between them")
        return {"note": f"NVML's energy counter changed {len(changes)} time(s) in the {span_s:.2f} s timed: {why}"}
    i, j, bound = best
    (a0, b0, v0), (a1, b1, v1) = changes[i], changes[j]
    seconds = (a1 + b1) / 2 - (a0 + b0) / 2
    return {"watts": (v1 - v0) / 1000 / seconds, "seconds": seconds, "updates": j - i, "within": bound}


ENERGY_NOTE = ("the card's board power, idle included, over a window of the timed repetitions (their L2 clears "
               "and the host's gaps among them), from NVML's energy counter, times the span's wall time a call; "
               "`within` bounds the window's power: its two ends each lie between the reads around a change of "
               "the counter, and the counter counts whole mJ; not bounded: NVML's own measurement, and the "
               "power outside the window. mj_above_idle: the same less the idle power (idle_watts), read once "
               "before this process's first row")


def energy_a_call(power: dict, span_s: float, calls: int, idle: dict) -> dict:
    """The energy a call: the window's power (`power_of`) times the span's wall time a call
    (`span_s` / `calls`, the host's clock: exact to it), so the energy the card drew a call while
    the calls ran the leaderboard's way; and the same above the idle power (`idle`), where read.
    The bound is the power's; the window stands for the whole span."""
    wall_us = span_s / calls * 1e6 if calls else 0.0
    out = {"span_s": round(span_s, 3), "calls": calls, "wall_us": wall_us, "idle_watts": idle.get("watts")}
    if out["idle_watts"] is None:
        out["idle_note"] = idle.get("note", "no idle power read")
    if "watts" not in power or not calls:
        return {**out, "mj_per_call": None, "mj_above_idle": None, "note": power.get("note", "no calls timed")}
    above = None if out["idle_watts"] is None else (power["watts"] - out["idle_watts"]) * wall_us / 1000
    return {**out, **power, "seconds": round(power["seconds"], 3), "mj_per_call": power["watts"] * wall_us / 1000,
            "mj_above_idle": above, "note": ENERGY_NOTE}


class EnergyMeter:
    """The energy a call, measured beside a timed span: the timer's observer (timing.Windowed),
    `before_start` as its first repetition begins, `wants_more` at each repetition's end (the span
    goes on while it does), `after_finish` after its last; then `result(calls)`.

    A thread reads the counter (`read_mj`, mJ) without pause and keeps each change it sees with its
    bracket (Change), timed by `clock`; only changes whose bracket closed before the span ended
    count, so the window lies inside the repetitions. A thread of its own, on every core the
    process may use: the launching thread is pinned to one (timing.pin) and would otherwise share
    it."""

    def __init__(self, read_mj: Callable[[], int | None], clock: Callable[[], float] = time.perf_counter, *,
                 idle: dict | None = None, within: float = ENERGY_WITHIN, longest_s: float = ENERGY_SPAN_S):
        self.read_mj, self.clock = read_mj, clock
        self.idle = idle or {}
        self.within, self.longest_s = within, longest_s
        self.changes: list[Change] = []
        self.best = math.inf  # the tightest bound of a window so far
        self.started = self.finished = 0.0
        self._ended = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def before_start(self) -> None:
        self.started = self.clock()
        self._thread = threading.Thread(target=self._run, name="nvgg-energy", daemon=True)
        self._thread.start()

    def wants_more(self) -> bool:
        """Whether the span should go on for the meter: no window bound within `within` yet, the
        counter still read, and under `longest_s` since the span began."""
        return not self._ended and self.best > self.within and self.clock() - self.started < self.longest_s

    def after_finish(self) -> None:
        self.finished = self.clock()
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        from .timing import pin
        pin(None)
        self.watch(self._stop.is_set)

    def watch(self, stop: Callable[[], bool]) -> list[Change]:
        """Read the counter until `stop()` says so (or a read fails), keeping its changes and the
        tightest bound so far; the reading loop itself, which `before_start` runs on a thread."""
        before = self.clock()
        last = self.read_mj()
        while last is not None and not stop():
            began = self.clock()
            value = self.read_mj()
            ended = self.clock()
            if value is None:
                break
            if value != last:
                change = (before, ended, value)
                for earlier in self.changes:
                    self.best = min(self.best, window_bound(earlier, change))
                self.changes.append(change)
                last = value
            before = began
        self._ended = True
        return self.changes

    def result(self, calls: int) -> dict:
        """The energy a call over the span (`energy_a_call`) from the changes placed inside it."""
        span_s = self.finished - self.started
        inside = [c for c in self.changes if c[1] <= self.finished]
        return energy_a_call(power_of(inside, span_s), span_s, calls, self.idle)


def meter(device) -> EnergyMeter | None:
    """An EnergyMeter reading `device`'s counter, with the card's idle power (`idle`); None where
    NVML or the counter cannot be read (a CPU run, no driver, a card without the counter)."""
    from .profiles import nvml
    nv = nvml() if getattr(device, "type", "cpu") == "cuda" else None
    if nv is None:
        return None
    try:
        h = _handle(nv, device)
    except Exception:
        return None
    if _energy(nv, h) is None:
        return None
    return EnergyMeter(lambda: _energy(nv, h), idle=idle(device))


_IDLE: dict = {}


def idle(device) -> dict:
    """The card's power before this process ran anything on it: NVML's power reading
    (nvmlDeviceGetPowerUsage), taken once a process, the first time asked (datapath.setup asks
    before its first row's work; a worker has made its CUDA context and nothing more). {"watts":
    W}, or {"note": why not} where NVML's utilisation says a kernel ran on the card in its last
    sample period (another process's work, or this one's where the first ask came late): a
    reading then is not the idle power. {} without NVML."""
    from .profiles import nvml
    key = getattr(device, "index", None) or 0
    if key in _IDLE:
        return _IDLE[key]
    nv = nvml() if getattr(device, "type", "cpu") == "cuda" else None
    if nv is None:
        return {}
    try:
        h = _handle(nv, device)
        watts = nv.nvmlDeviceGetPowerUsage(h) / 1000.0
    except Exception as exc:
        _IDLE[key] = {"note": f"NVML's power reading failed: {type(exc).__name__}"}
        return _IDLE[key]
    try:
        busy = int(nv.nvmlDeviceGetUtilizationRates(h).gpu)
    except Exception:
        busy = 0  # no utilisation on this card: the reading is taken as idle
    _IDLE[key] = ({"watts": watts} if busy == 0 else
                  {"note": f"the card was busy ({busy}% of NVML's last sample period) before this process's first "
                           f"row: its power then was not the idle power"})
    return _IDLE[key]


class Sampler:
    """`with Sampler(device) as s:` samples every PERIOD_S until the block ends (and once at each
    end, so the shortest row has two samples; `period_s=None`: those two alone, no thread beside
    the caller's); `s.summary()` is what the row keeps. Where NVML cannot be read (no driver, a
    CPU run) the summary says why and nothing is flagged."""

    def __init__(self, device, period_s: float | None = PERIOD_S):
        self.device, self.period_s = device, period_s
        self.samples: list[dict] = []
        self.error = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._nvml = self._h = None

    def __enter__(self) -> "Sampler":
        if getattr(self.device, "type", "cpu") != "cuda":
            self.error = "no CUDA device: clocks not sampled"
            return self
        from .profiles import nvml
        self._nvml = nvml()  # started once a process (profiles.nvml)
        if self._nvml is None:
            self.error = "NVML unavailable: no NVIDIA driver or library"
            return self
        try:
            self._h = _handle(self._nvml, self.device)
        except Exception as exc:
            self.error = f"NVML unavailable: {type(exc).__name__}: {exc}"
            return self
        self._sample()
        if self.period_s is not None:
            self._thread = threading.Thread(target=self._loop, name="nvgg-clocks", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._sample()
        elif self._h is not None and not self.error:  # no thread: the sample at this end too
            self._sample()

    def _loop(self) -> None:
        while not self._stop.wait(self.period_s):
            self._sample()

    def _sample(self) -> None:
        nv, h = self._nvml, self._h
        try:
            self.samples.append({
                "t": time.monotonic(),
                "sm_mhz": nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM),
                "mem_mhz": nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM),
                "temp_c": nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU),
                "power_w": nv.nvmlDeviceGetPowerUsage(h) / 1000.0,
                "reasons": _reasons(nv, h),
            })
        except Exception as exc:  # a reading the driver refuses ends the sampling, not the row
            self.error = f"NVML read failed: {type(exc).__name__}: {exc}"
            self._stop.set()

    def summary(self) -> dict:
        return summarise(self.samples, self.error)


def summarise(samples: list[dict], error: str = "") -> dict:
    """Samples -> the row's clocks: ranges and medians, the throttling reasons seen and in what
    share of the samples, and `throttled` (a sentence, "" when the card ran as set)."""
    if not samples:
        return {"samples": 0, "error": error or "no samples", "throttled": ""}
    sm = [s["sm_mhz"] for s in samples]
    mask = 0
    hits = 0
    for s in samples:
        bad = s["reasons"] & sum(THROTTLING)
        mask |= bad
        hits += bool(bad)
    out = {
        "samples": len(samples),
        "seconds": round(samples[-1]["t"] - samples[0]["t"], 3),
        "sm_mhz": [min(sm), statistics.median(sm), max(sm)],
        "mem_mhz": [min(s["mem_mhz"] for s in samples), max(s["mem_mhz"] for s in samples)],
        "temp_c_max": max(s["temp_c"] for s in samples),
        "power_w_max": round(max(s["power_w"] for s in samples), 1),
        "reasons": reasons_text(mask),
        "throttled_share": round(hits / len(samples), 3),
        "error": error,
    }
    out["throttled"] = throttled_text(out)
    return out


def throttled_text(summary: dict) -> str:
    """"throttled: power cap, SM clock 1410-1755 MHz while timed", or "" when no sample saw a
    throttling reason."""
    if not summary.get("reasons"):
        return ""
    lo, _, hi = summary["sm_mhz"]
    share = summary.get("throttled_share", 1.0)
    when = "while timed" if share >= 0.999 else f"in {share:.0%} of the samples while timed"
    return f"throttled: {', '.join(summary['reasons'])}, SM clock {lo}-{hi} MHz {when}"
