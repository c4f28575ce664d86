"""The card's clocks while a row is timed (nvgg/clocks.py): samples summarised, throttling read
from the driver's reasons."""

import time

import pytest
import torch

from nvgg import clocks


def test_idle_and_application_clock_reasons_are_settings_not_throttling():
    samples = [{"t": i * 0.05, "sm_mhz": 1755, "mem_mhz": 2619, "temp_c": 60, "power_w": 690.0, "reasons": 0x1 | 0x2}
               for i in range(4)]
    calm = clocks.summarise(samples)
    assert calm["throttled"] == "" and calm["reasons"] == [] and calm["sm_mhz"] == [1755, 1755, 1755]


def test_the_sampler_says_why_it_sampled_nothing_on_a_cpu():
    with clocks.Sampler(torch.device("cpu")) as s:
        pass
    assert s.summary() == {"samples": 0, "error": "no CUDA device: clocks not sampled", "throttled": ""}


def _counter(watts: float, step_s: float):
    """A simulated NVML energy counter: mJ since start, moving only every `step_s`."""
    t0 = time.monotonic()
    return lambda: int(watts * step_s * 1000 * int((time.monotonic() - t0) / step_s))


def test_power_from_the_counters_steps_and_the_energy_a_call():
    calls = []
    power = clocks.power_window(_counter(300.0, 0.02), lambda: (calls.append(1), time.sleep(0.001)), updates=5,
                                budget_s=2.0)
    # 5 steps of 20 ms: about 0.1 s, well under the 2-s budget (a loaded CI machine can stretch it)
    assert power["updates"] == 5 and 0.07 < power["seconds"] < 1.0 and calls
    # exact energy between two steps; the ends' times uncertain by the read before each change
    assert abs(power["watts"] - 300.0) <= 300.0 * power["within"] + 1e-9, power
    e = clocks.energy_per_call(power, call_us=140.0)
    assert e["mj_per_call"] == pytest.approx(power["watts"] * 0.14)  # 300 W for 140 µs: 42 mJ
    from nvgg.report import energy_line
    assert energy_line(e).startswith(f"energy: {e['mj_per_call']:.3f} mJ a call ({power['watts']:.0f} W over ")


def test_no_energy_figure_where_the_counter_does_not_move_or_is_missing():
    frozen = clocks.power_window(lambda: 1000, lambda: time.sleep(0.001), updates=5, budget_s=0.2)
    note = ("NVML's energy counter changed 0 time(s) in 0.2 s (0 seen within 6 ms of the read before, after the "
            "first); 5 updates between two such changes needed")
    assert frozen == {"note": note}
    e = clocks.energy_per_call(frozen, 140.0)
    assert e["mj_per_call"] is None
    from nvgg.report import energy_line
    assert energy_line(e) == f"energy: no figure ({note})"
    assert clocks.power_window(lambda: None, lambda: None) == {} and clocks.energy_per_call({}, 1.0) == {}
    assert energy_line({}) == ""


def _reads_taking(read, usual_s: float, every: int, late_s: float):
    """`read`, taking `usual_s`, and `late_s` every `every`-th time (a reader kept waiting)."""
    n = [0]

    def slow():
        n[0] += 1
        time.sleep(late_s if n[0] % every == 0 else usual_s)
        return read()
    return slow


def test_the_window_ends_only_on_changes_seen_soon_after_the_read_before():
    """A change seen by a read that came late is placed in time only to that lateness: the window's
    ends skip such changes, so its time stays certain to twice the sharp limit."""
    power = clocks.power_window(_reads_taking(_counter(300.0, 0.02), 0.001, 8, 0.015), lambda: time.sleep(0.001),
                                updates=5, budget_s=2.0, sharp_s=0.004)
    assert power["updates"] >= 5 and power["within"] <= 2 * 0.004 / power["seconds"], power
    assert abs(power["watts"] - 300.0) <= 300.0 * power["within"] + 1e-9, power
    late = clocks.power_window(_reads_taking(_counter(300.0, 0.02), 0.015, 1, 0.015), lambda: time.sleep(0.001),
                               updates=5, budget_s=0.3, sharp_s=0.004)
    assert "watts" not in late and "(0 seen within 4 ms of the read before" in late["note"], late


def test_a_sampler_without_a_period_reads_at_its_two_ends_alone(monkeypatch):
    """An A/B's round: the clocks read when it begins and ends, no thread beside the launching one."""
    import threading
    import types
    from nvgg import clocks, profiles
    reads = []
    nv = types.SimpleNamespace(NVML_CLOCK_SM=0, NVML_CLOCK_MEM=1, NVML_TEMPERATURE_GPU=0,
                               nvmlDeviceGetClockInfo=lambda h, which: reads.append(which) or 1980,
                               nvmlDeviceGetTemperature=lambda h, what: 50,
                               nvmlDeviceGetPowerUsage=lambda h: 300_000,
                               nvmlDeviceGetCurrentClocksEventReasons=lambda h: 0,
                               nvmlDeviceGetCurrentClocksThrottleReasons=lambda h: 0)
    monkeypatch.setattr(profiles, "nvml", lambda: nv)
    monkeypatch.setattr(clocks, "_handle", lambda nvml, device: object())
    before = set(threading.enumerate())
    sampler = clocks.Sampler(types.SimpleNamespace(type="cuda"), period_s=None).__enter__()
    started = [t for t in threading.enumerate() if t not in before]  # only its own: others may end meanwhile
    assert not started and sampler._thread is None and len(sampler.samples) == 1
    sampler.__exit__(None, None, None)
    summary = sampler.summary()
    assert summary["samples"] == 2 and summary["sm_mhz"] == [1980, 1980, 1980] and not summary["throttled"]
