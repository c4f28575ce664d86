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


MIN_ENERGY_UPDATES = 5  # counter changes a timed window needs before its energy is quoted


def energy_per_call(clocks: dict, calls: int) -> dict:
    """The energy a call from the counter's change over the timed window (the samples at its ends):
    mJ a call where the counter changed at least MIN_ENERGY_UPDATES times within it (each end can
    miss up to one step of it: about 2/updates of the figure), else why there is no figure. The
    window holds the L2 clears between repetitions too: their energy is in the figure."""
    if clocks.get("energy_mj") is None or not calls:
        return {}
    updates, seconds = clocks.get("energy_updates", 0), clocks.get("seconds", 0.0)
    out = {"mj": clocks["energy_mj"], "seconds": seconds, "updates": updates, "calls": calls, "mj_per_call": None}
    if updates < MIN_ENERGY_UPDATES:
        out["note"] = (f"too short for NVML's energy counter: it changed {updates} time(s) in the {seconds:.2f} s "
                       f"timed, {MIN_ENERGY_UPDATES} needed")
    else:
        out["mj_per_call"] = clocks["energy_mj"] / calls
        out["note"] = f"within about {2 / updates:.0%}; the L2 clears between repetitions included"
    return out


class Sampler:
    """`with Sampler(device) as s:` samples every PERIOD_S until the block ends (and once at each
    end, so the shortest row has two samples); `s.summary()` is what the row keeps. Where NVML
    cannot be read (no driver, a CPU run) the summary says why and nothing is flagged."""

    def __init__(self, device, period_s: float = PERIOD_S):
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
        self._thread = threading.Thread(target=self._loop, name="nvgg-clocks", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
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
                "energy_mj": _energy(nv, h),
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
    energy = [s.get("energy_mj") for s in samples]
    if len(samples) >= 2 and None not in energy:
        out["energy_mj"] = energy[-1] - energy[0]
        out["energy_updates"] = sum(b != a for a, b in zip(energy, energy[1:]))
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
