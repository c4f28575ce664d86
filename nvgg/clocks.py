"""The card's clocks while a row is timed: SM and memory clocks, temperature, power and the
reasons the driver gives for holding the clocks down, sampled through NVML (nvidia-ml-py) on a
thread beside the timing loop, and summarised into the row.

A row measured while the card throttled (a power cap, a thermal slowdown, a hardware brake) is
flagged: its time is the kernel's at a lower clock than the next run may see. The reasons'
bits are NVML's clock event reasons (nvml.h, `nvmlClocksEventReason*`; the older name is
`ClocksThrottleReason`): idle, application clocks and sync boost are settings, not throttling.
"""

from __future__ import annotations

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


MIN_ENERGY_UPDATES = 5  # counter changes the power window spans (NVML's updates every 100 ms: H100, 2026-11-27)
ENERGY_BUDGET_S = 2.0  # the most the power window runs
# An end of the window is a change seen by a read that followed the one before it within this: the
# change's time is known to that gap. NVML's energy read takes about 3 ms, but the thread that reads
# it waits for the interpreter behind the launching thread, and gaps of 18-23 ms occurred (H100,
# 2026-11-27), which alone would make a 0.5-s window's time 5% uncertain.
SHARP_S = 0.006


def _sharp_window(edges: list[tuple[float, int, float]], updates: int, sharp_s: float) -> tuple[int, int] | None:
    """The first (i, j) with j - i >= updates whose changes were both seen within `sharp_s` of the
    read before, i >= 1 (the first change seen may hold time before the work began); None if none."""
    starts = [i for i in range(1, len(edges)) if edges[i][2] <= sharp_s]
    for i in starts:
        for j in range(i + updates, len(edges)):
            if edges[j][2] <= sharp_s:
                return i, j
    return None


def power_window(read_mj: Callable[[], int | None], work: Callable[[], None], *, updates: int = MIN_ENERGY_UPDATES,
                 budget_s: float = ENERGY_BUDGET_S, sharp_s: float = SHARP_S) -> dict:
    """The card's mean power while `work()` runs again and again, from NVML's energy counter
    (`read_mj`), which moves in steps (every 100 ms on an H100): a thread reads it without pause
    and notes when it changes and how long after the read before; the window runs between two
    changes at least `updates` apart, each seen within `sharp_s` of the read before (SHARP_S), the
    first of them not the first change seen (which may hold time before the work began). Its
    energy is the counter's exact difference; only its ends' times are uncertain, each by the gap
    before its change. {} where the counter cannot be read; {"note": why} where no such window
    came within `budget_s`."""
    if read_mj() is None:
        return {}
    edges: list[tuple[float, int, float]] = []  # (time, value, time since the read before)
    found: list[tuple[int, int]] = []
    stop = threading.Event()

    def poll() -> None:
        last, before = read_mj(), time.monotonic()
        while not stop.is_set():
            value, now = read_mj(), time.monotonic()
            if value is None:
                return
            if value != last:
                edges.append((now, value, now - before))
                last = value
                window = _sharp_window(edges, updates, sharp_s)
                if window is not None:
                    found.append(window)
                    return
            before = now

    thread = threading.Thread(target=poll, name="nvgg-energy", daemon=True)
    thread.start()
    deadline = time.monotonic() + budget_s
    while thread.is_alive() and time.monotonic() < deadline:
        work()
    stop.set()
    thread.join()
    if not found:
        sharp = sum(1 for e in edges[1:] if e[2] <= sharp_s)
        return {"note": f"NVML's energy counter changed {len(edges)} time(s) in {budget_s:.1f} s ({sharp} seen within "
                        f"{sharp_s * 1e3:.0f} ms of the read before, after the first); {updates} updates between two "
                        f"such changes needed"}
    i, j = found[0]
    (t0, e0, d0), (t1, e1, d1) = edges[i], edges[j]
    seconds = t1 - t0
    return {"watts": (e1 - e0) / 1000 / seconds, "seconds": round(seconds, 3), "updates": j - i,
            "within": (d0 + d1) / seconds}


def energy_per_call(power: dict, call_us: float) -> dict:
    """mJ a call: the mean power while the calls ran back to back (`power_window`) times the
    call's measured time; or why there is no figure. {} without the counter."""
    if not power:
        return {}
    if "watts" not in power or not call_us:
        return {"mj_per_call": None, "note": power.get("note", "no time to multiply by")}
    return {**power, "mj_per_call": power["watts"] * call_us / 1000,
            "note": f"the card's mean power while the calls ran back to back, times the call's time; "
                    f"within about {power['within']:.1%}"}


def energy(device, launches, call_us: float) -> dict:
    """The energy a call of `launches` on `device` (energy_per_call over power_window: the batch
    run back to back, two batches in flight, no L2 clears between them); {} without NVML."""
    import torch

    from .profiles import nvml
    nv = nvml() if getattr(device, "type", "cpu") == "cuda" else None
    if nv is None:
        return {}
    try:
        h = _handle(nv, device)
    except Exception:
        return {}
    stream = torch.cuda.current_stream(device)
    pending: list = []

    def work() -> None:
        for launch in launches:
            launch()
        done = torch.cuda.Event()
        done.record(stream)
        pending.append(done)
        if len(pending) > 2:
            pending.pop(0).synchronize()

    power = power_window(lambda: _energy(nv, h), work)
    torch.cuda.synchronize(device)
    return energy_per_call(power, call_us)


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
