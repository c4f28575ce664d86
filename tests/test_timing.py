import math

import pytest

from nvgg import timing


def test_reduce_matches_hand_computed_statistics():
    s = timing.reduce([1.0, 2.0, 3.0, 4.0], batch=15, method="leaderboard", clock="cuda events")
    assert s.mean_us == 2.5 and s.median_us == 2.5 and s.best_us == 1.0 and s.worst_us == 4.0
    assert s.std_us == pytest.approx(math.sqrt(5 / 3))          # sample std, n - 1
    assert s.err_us == pytest.approx(math.sqrt(5 / 3) / 2)      # std / sqrt(n)
    assert s.runs == 4 and s.batch == 15


def test_stopping_rule_min_reps_precision_and_cap():
    # identical samples: precise after the minimum of 3
    assert not timing._done([5.0, 5.0], 0.0, 3, 100, 1e-3, 1e9)
    import time
    now = time.perf_counter()
    assert timing._done([5.0, 5.0, 5.0], now, 3, 100, 1e-3, 1e9)
    # noisy samples: keep going until the cap
    noisy = [1.0, 9.0, 1.0, 9.0]
    assert not timing._done(noisy, now, 3, 100, 1e-3, 1e9)
    assert timing._done(noisy, now, 3, 4, 1e-3, 1e9)
    # or until the time budget is spent
    assert timing._done(noisy, now - 10, 3, 100, 1e-3, 5.0)


def test_cpu_timer_counts_calls_and_labels_the_clock():
    calls = []
    t = timing.CpuTimer(min_reps=3, max_reps=5, budget_s=1.0)
    s = t.batch([lambda: calls.append(1)] * 4)
    assert s.clock == "host clock (CPU run)" and s.method == "cpu" and s.batch == 4
    assert 3 <= s.runs <= 5 and len(calls) == 4 * s.runs
