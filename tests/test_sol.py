import pytest

from nvgg import cases, profiles, sol


@pytest.mark.parametrize("case_id, published_us", [("1", 18.833), ("2", 10.667), ("3", 2.406), ("4", 1.525)])
def test_b200_reproduces_the_competitions_published_sol(case_id, published_us):
    s = sol.sol(cases.get(case_id), profiles.get("b200"))
    assert s.bound == "memory" and s.data_path == "fp4"
    assert s.sol_us == pytest.approx(published_us, abs=5e-4)


def test_hopper_uses_the_fp16_peak_and_is_compute_bound():
    s = sol.sol(cases.get("1"), profiles.get("h200"))
    assert s.data_path == "fp16" and s.bound == "compute"
    assert s.compute_us == pytest.approx(60_129_542_144 / 989e12 * 1e6)
    assert s.memory_us == pytest.approx(144_637_952 / 4.8e12 * 1e6)
    assert sol.gap(2 * s.sol_us, s) == pytest.approx(2.0)
