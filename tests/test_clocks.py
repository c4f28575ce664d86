"""The card's clocks while a row is timed (nvgg/clocks.py): samples summarised, throttling read
from the driver's reasons."""

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


def _samples(energy):
    return [{"t": i * 0.05, "sm_mhz": 1980, "mem_mhz": 2619, "temp_c": 50, "power_w": 400.0, "reasons": 0,
             "energy_mj": e} for i, e in enumerate(energy)]


def test_energy_a_call_only_where_the_counter_resolves_the_window():
    long = clocks.summarise(_samples([1000, 1020, 1020, 1041, 1062, 1080, 1100, 1120]))
    assert (long["energy_mj"], long["energy_updates"]) == (120, 6)
    e = clocks.energy_per_call(long, calls=600)
    assert e["mj_per_call"] == 0.2 and e["calls"] == 600 and "within about 33%" in e["note"]
    short = clocks.summarise(_samples([1000, 1000, 1040]))
    e = clocks.energy_per_call(short, calls=150)
    assert e["mj_per_call"] is None and "changed 1 time(s) in the 0.10 s timed, 5 needed" in e["note"]
    assert clocks.energy_per_call(clocks.summarise(_samples([None, 5])), calls=15) == {}  # a driver without the counter
    from nvgg.report import energy_line
    assert energy_line(clocks.energy_per_call(long, 600)).startswith("energy: 0.200 mJ a call (NVML's counter over 0.35 s")
    assert energy_line(clocks.energy_per_call(short, 150)).startswith("energy: no figure (too short")
    assert energy_line({}) == ""
