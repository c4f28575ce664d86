"""The card's clocks while a row is timed: SM and memory clocks, temperature, power and the
reasons the driver gives for holding the clocks down, sampled through NVML (nvidia-ml-py) on a
thread beside the timing loop, and summarised into the row.

A row measured while the card throttled (a power cap, a thermal slowdown, a hardware brake) is
flagged: its time is the kernel's at a lower clock than the next run may see. The reasons'
bits are NVML's clock event reasons (nvml.h, `nvmlClocksEventReason*`; the older name is
`ClocksThrottleReason`): idle, application clocks and sync boost are settings, not throttling.

The energy a call comes from the same span: NVML's energy counter, read on a thread of its own
while the timed repetitions run (EnergyMeter, the timer's observer), gives the energy between its
first and its last change inside the span exactly to the mJ; over the calls completed between the
two (the timer's repetition end times), that is the energy the card drew a call as the
leaderboard's loop runs the calls, L2 clears and the host's gaps included (`energy_a_call`). Its
bound (`window_of`) adds the calls the window's ends may count wrong, the counter's whole mJ and
the power's spread from one step of the counter to the next. The card's idle power, read once
before a process's first row (`idle`), is given beside it and subtracted.
"""

from __future__ import annotations

import bisect
import math
import statistics
import threading
import time
from typing import Callable, Sequence

from .timing import pin, t975

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
# the timer's repetitions run. The counter moves in steps (NOTES.md, Energy), a handful of them
# in the half-second span of `± rerun`. A figure needs MIN_CHANGES (two steps of the
# counter, for the power's spread from one to the next); the meter holds the span for them alone,
# at most ENERGY_SPAN_S from its first repetition, and never to tighten the bound: a default row's
# energy costs no time beyond the timer's own span.
MIN_CHANGES = 3
ENERGY_SPAN_S = 0.75
MJ_STEP = 1  # the counter counts whole mJ: each end's value is off the energy by under one

# A change of the counter seen by a read: (when the read before it began, when this read ended,
# the counter's value in mJ). The read before returned the old value, so it sampled the counter
# before the change, and no earlier than it began; this read sampled it after the change and no
# later than it ended: the change lies between the two, whatever held either thread up. It is
# placed at its bracket's middle.
Change = tuple[float, float, int]


def _middle(change: Change) -> float:
    return (change[0] + change[1]) / 2


def _ended_in(ends: Sequence[float], t0: float, t1: float) -> int:
    """How many of the repetitions (their sorted end times) ended in (t0, t1]."""
    return bisect.bisect_right(ends, t1) - bisect.bisect_right(ends, t0)


def miscount(change: Change, ends: Sequence[float]) -> int:
    """How many repetitions a window's end at `change` may count wrong: the change lies somewhere
    in its bracket, so the repetitions that ended between it and the bracket's middle are on the
    wrong side (at most those of the fuller half of the bracket: its half-bracket over the
    repetition period, counted from the end times); and one more, the repetition the end cuts,
    whose energy lies partly on each side while it counts on one."""
    a, b, _ = change
    t = _middle(change)
    return max(_ended_in(ends, a, t), _ended_in(ends, t, b)) + 1


def steps(changes: list[Change], ends: Sequence[float]) -> list[tuple[int, int]]:
    """The counter's steps across `changes`: (mJ, repetitions completed between the two changes'
    middles), each exact to the counter; a step in which no repetition ended is joined to the next
    (the last to the one before), so each step's energy a repetition is finite and the steps still
    add up to the window."""
    out: list[tuple[int, int]] = []
    mj = reps = 0
    for c0, c1 in zip(changes, changes[1:]):
        mj += c1[2] - c0[2]
        reps += _ended_in(ends, _middle(c0), _middle(c1))
        if reps > 0:
            out.append((mj, reps))
            mj = reps = 0
    if (mj or reps) and out:
        out[-1] = (out[-1][0] + mj, out[-1][1] + reps)
    return out


def window_of(changes: list[Change], ends: Sequence[float]) -> dict:
    """The energy a repetition over the widest window: from the first to the last of `changes` (the
    changes whose brackets closed inside the span), the counter's difference over the repetitions
    that ended between the two changes' middles. `within` its relative bound, the sum of
    `within_parts`, each a worst case or a 95% interval:
      count: the repetitions counted may be off by `miscount` at each end;
      mj: the counter's difference is off the energy by under MJ_STEP;
      spread: the power's own wander, from the energy a repetition of each step of the counter
        inside the window: t975(K-1)·sd/√K of their mean, K the steps.
    {"note": why} where the window has under two steps with repetitions in them."""
    if len(changes) < MIN_CHANGES:
        return {"note": f"NVML's energy counter changed {len(changes)} time(s) inside the span: a figure needs "
                        f"{MIN_CHANGES} (two steps, for the power's spread from one to the next)"}
    per = [mj / reps for mj, reps in steps(changes, ends)]
    first, last = changes[0], changes[-1]
    mj, reps, seconds = last[2] - first[2], _ended_in(ends, _middle(first), _middle(last)), _middle(last) - _middle(first)
    if len(per) < 2 or mj <= 0 or seconds <= 0:
        return {"note": f"NVML's energy counter changed {len(changes)} time(s) inside the span, with repetitions "
                        f"completed in {len(per)} of its steps: a figure needs two"}
    mean = statistics.fmean(per)
    parts = {"count": (miscount(first, ends) + miscount(last, ends)) / reps, "mj": MJ_STEP / mj,
             "spread": t975(len(per) - 1) * statistics.stdev(per) / math.sqrt(len(per)) / mean}
    return {"mj": mj, "reps": reps, "seconds": seconds, "steps": len(per), "within": sum(parts.values()),
            "within_parts": parts}


ENERGY_NOTE = ("the card's board power, idle included, over a window of the timed repetitions (their L2 clears and "
               "the host's gaps among them), NVML's energy counter from its first to its last change inside the span, "
               "per call completed in the window; `within` covers the calls counted (each end of the window lies "
               "between the reads around a change), the counter's whole mJ, and the power's spread from one step of "
               "the counter to the next (a 95% interval); not covered: NVML's own measurement, and a drift of the "
               "power over longer than the span. mj_above_idle: the same less the idle power (idle_watts, read once "
               "before this process's first row) over the window")


def energy_a_call(changes: list[Change], ends: Sequence[float], batch: int, span_s: float, idle: dict) -> dict:
    """The energy a call (`window_of`): the window's energy over the calls completed in it (`batch`
    a repetition), so the energy the card drew a call as the leaderboard's loop runs the calls;
    the window's power and its wall time a call beside it, and the same above the idle power
    (`idle`) where read. `changes` those inside the span of `span_s`, `ends` its repetitions'."""
    out = {"span_s": round(span_s, 3), "idle_watts": idle.get("watts")}
    if out["idle_watts"] is None:
        out["idle_note"] = idle.get("note", "no idle power read")
    w = window_of(changes, ends)
    if "mj" not in w:
        return {**out, "mj_per_call": None, "mj_above_idle": None, "note": w["note"]}
    calls = w["reps"] * batch
    above = None if out["idle_watts"] is None else (w["mj"] - out["idle_watts"] * 1000 * w["seconds"]) / calls
    return {**out, "mj_per_call": w["mj"] / calls, "within": w["within"], "within_parts": w["within_parts"],
            "watts": w["mj"] / 1000 / w["seconds"], "seconds": round(w["seconds"], 3), "updates": w["steps"],
            "calls": calls, "wall_us": w["seconds"] / calls * 1e6, "mj_above_idle": above, "note": ENERGY_NOTE}


class EnergyMeter:
    """The energy a call, measured beside a timed span: the timer's observer (timing.Windowed),
    `before_start` as its first repetition begins, `wants_more` at each repetition's end (the span
    goes on while it does), `after_finish` after its last; then `result` with the timer's
    repetition end times (timing.Windowed.ends). As a row's observer (datapath.Observer) it is
    that timer observer (`repetitions`): its own `start` and `stop` do nothing, and it records the
    energy a call once the timed calls are found right.

    A thread reads the counter (`read_mj`, mJ) without pause and keeps each change it sees with its
    bracket (Change), timed by `clock` (the timer's clock); only changes whose bracket closed
    before the span ended count, so the window lies inside the repetitions. A thread of its own, on
    every core the process may use: the launching thread is pinned to one (timing.pin) and would
    otherwise share it."""

    after_check = True  # a wrong row's calls have no energy a call worth keeping

    def __init__(self, read_mj: Callable[[], int | None], clock: Callable[[], float] = time.perf_counter, *,
                 idle: dict | None = None, longest_s: float = ENERGY_SPAN_S):
        self.read_mj, self.clock = read_mj, clock
        self.idle = idle or {}
        self.longest_s = longest_s
        self.changes: list[Change] = []
        self.started = self.finished = 0.0
        self._ended = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def repetitions(self) -> "EnergyMeter":
        """What the timer tells of its repetitions' exact span: the meter itself."""
        return self

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def record(self, result, timed) -> None:
        """The energy a call (`result`) over the timed run's repetitions, into the row's Result."""
        result.energy = self.result(timed.ends, timed.stats.batch)

    def before_start(self) -> None:
        self.started = self.clock()
        self._thread = threading.Thread(target=self._run, name="nvgg-energy", daemon=True)
        self._thread.start()

    def wants_more(self) -> bool:
        """Whether the span should go on for the meter: under MIN_CHANGES changes seen, the counter
        still read, and under `longest_s` since the span began."""
        return not self._ended and len(self.changes) < MIN_CHANGES and self.clock() - self.started < self.longest_s

    def after_finish(self) -> None:
        self.finished = self.clock()
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        pin(None)
        self.watch(self._stop.is_set)

    def watch(self, stop: Callable[[], bool]) -> list[Change]:
        """Read the counter until `stop()` says so (or a read fails), keeping its changes; the
        reading loop itself, which `before_start` runs on a thread."""
        before = self.clock()
        last = self.read_mj()
        while last is not None and not stop():
            began = self.clock()
            value = self.read_mj()
            ended = self.clock()
            if value is None:
                break
            if value != last:
                self.changes.append((before, ended, value))
                last = value
            before = began
        self._ended = True
        return self.changes

    def result(self, ends: Sequence[float], batch: int) -> dict:
        """The energy a call (`energy_a_call`) from the changes placed inside the span, over the
        repetitions that ended at `ends`, `batch` calls each."""
        inside = [c for c in self.changes if c[1] <= self.finished]
        return energy_a_call(inside, sorted(ends), batch, self.finished - self.started, self.idle)


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
    CPU run) the summary says why and nothing is flagged. A row's observer (datapath.Observer):
    `start` and `stop` are the block's two ends, and it records whatever the timed calls returned
    (a wrong row's clocks still say how the card ran)."""

    after_check = False
    repetitions = None

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

    def start(self) -> None:
        self.__enter__()

    def stop(self) -> None:
        self.__exit__(None, None, None)

    def record(self, result, timed) -> None:
        result.clocks = self.summary()

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
