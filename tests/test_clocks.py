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
