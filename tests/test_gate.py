"""The gate's classes from both runs' noise: numbers in, class out."""

import pytest

from nvgg import gate


def _row(mean, std, runs=25, clocks=None, status="ok"):
    return {"status": status, "time_us": mean, "clocks": clocks or {},
            "stats": {"mean_us": mean, "std_us": std, "err_us": std / runs ** 0.5}}


@pytest.mark.parametrize("new, old, kind, fails", [
    # inside the floor (4%): same
    (_row(103.5, 0.2), _row(100.0, 0.2), "same", False),
    # scattered repetitions (4.5%), a small change: same
    (_row(101.0, 4.5), _row(100.0, 4.5), "same", False),
    # inside one repetition's spread though past the floor, but the change and three standard
    # errors of it (3.7%) reach past the allowed 5%: unsure
    (_row(104.2, 4.5), _row(100.0, 4.5), "unsure", False),
    # 10% slower with 0.5% spread: slower, beyond the allowed 5%: fails
    (_row(110.0, 0.5), _row(100.0, 0.5), "slower", True),
    # 4.5% slower, beyond the noise, within the allowed 5%: slower, passes
    (_row(104.5, 0.3), _row(100.0, 0.3), "slower", False),
    # 10% faster: faster
    (_row(90.0, 0.5), _row(100.0, 0.5), "faster", False),
    # a spread of 8% is wider than the allowed 5%: the measurement cannot tell
    (_row(106.0, 8.0), _row(100.0, 8.0), "unsure", False),
    # two scattered repetitions: err 6/√2 = 4.2 µs, three of them 11.4% of the mean, wider than
    # the allowed 5% and than the 10% change: unsure
    (_row(110.0, 6.0, runs=2), _row(100.0, 0.5), "unsure", False),
])
def test_classes(new, old, kind, fails):
    found = gate.compare(new, old, 5.0)
    assert (found.kind, found.fails) == (kind, fails), found


def test_a_slowdown_under_throttling_or_other_clocks_is_unsure_not_a_failure():
    throttled = {"throttled": "throttled: power cap, SM clock 1410-1755 MHz while timed", "sm_mhz": [1410, 1600, 1755]}
    found = gate.compare(_row(110.0, 0.5, clocks=throttled), _row(100.0, 0.5), 5.0)
    assert found.kind == "unsure" and not found.fails and "power cap" in found.reason
    slower_clock = gate.compare(_row(110.0, 0.5, clocks={"sm_mhz": [1500, 1500, 1500]}),
                                _row(100.0, 0.5, clocks={"sm_mhz": [1980, 1980, 1980]}), 5.0)
    assert slower_clock.kind == "unsure" and "1500 MHz here vs 1980 MHz" in slower_clock.reason
    # a throttled baseline explains no slowdown (it made the baseline slower), nor does a faster clock here
    assert gate.compare(_row(110.0, 0.5), _row(100.0, 0.5, clocks=throttled), 5.0).kind == "slower"
    assert gate.compare(_row(110.0, 0.5, clocks={"sm_mhz": [1980, 1980, 1980]}),
                        _row(100.0, 0.5, clocks={"sm_mhz": [1500, 1500, 1500]}), 5.0).fails
    # the same clocks explain nothing
    same_clock = gate.compare(_row(110.0, 0.5, clocks={"sm_mhz": [1980, 1980, 1980]}),
                              _row(100.0, 0.5, clocks={"sm_mhz": [1980, 1980, 1980]}), 5.0)
    assert same_clock.kind == "slower" and same_clock.fails


def test_a_host_bound_rows_rerun_interval_widens_the_band():
    # 18% slower, repetitions scattered 5%: slower, and it fails
    plain = _row(118.0, 5.0, runs=200)
    assert gate.compare(plain, _row(100.0, 5.0, runs=200), 5.0).kind == "slower"
    # the baseline said a rerun may land 25% away (its blocks sat at two levels): the change is
    # inside that, and wider than the allowed 5%: unsure, not a failure
    levels = _row(100.0, 5.0, runs=200)
    levels["stats"]["rerun_us"] = 25.0
    found = gate.compare(plain, levels, 5.0)
    assert (found.kind, found.fails, found.band) == ("unsure", False, pytest.approx(0.25))
    # a rerun interval narrower than the other terms changes nothing
    levels["stats"]["rerun_us"] = 1.0
    assert gate.compare(plain, levels, 5.0).band == pytest.approx(0.05)


def test_lost_correctness_fails_and_untimed_rows_are_unsure():
    lost = gate.compare(_row(0, 0, status="wrong") | {"stats": None, "message": "input 2: mismatch"}, _row(100.0, 0.5), 5.0)
    assert lost.kind == "failed" and lost.fails and "was ok, now wrong (input 2: mismatch)" in lost.text()
    never = gate.compare(_row(100.0, 0.5), _row(0, 0, status="error") | {"stats": None}, 5.0)
    assert never.kind == "unsure" and not never.fails


def test_text_names_the_change_and_the_band():
    found = gate.compare(_row(110.0, 0.5), _row(100.0, 0.5), 5.0)
    assert found.text() == "slower +10.0% (noise ±4.0%): beyond the allowed 5%"
