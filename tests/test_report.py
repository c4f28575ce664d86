import json

import pytest

from nvgg import report, timing
from nvgg.report import results
from nvgg.result import Result


def _r(case, strategy, t, backend="cute", status="ok"):
    stats = timing.reduce([t], batch=15, method="leaderboard", clock="cuda events")
    return Result(case=case, strategy=strategy, backend=backend, status=status, stats=stats)


def test_geomean_over_benchmarks_only_when_all_ran():
    rs = [_r("1", "graph", 4.0), _r("2", "graph", 9.0), _r("1", "persistent", 1.0)]
    assert results.geomeans(rs, {"1", "2"}) == {"graph/cute": pytest.approx(6.0)}


def test_speedup_is_against_sequential_on_the_same_backend():
    rs = [_r("1", "sequential", 10.0), _r("1", "graph", 5.0), _r("1", "graph", 5.0, backend="torch")]
    assert results.speedups(rs) == {0: 1.0, 1: 2.0}


def test_result_json_round_trip():
    r = _r("3", "persistent", 7.5)
    back = Result.from_dict(json.loads(json.dumps(r.to_dict())))
    assert back.stats == r.stats and back.time_us == 7.5


def test_the_spread_column_says_what_a_rerun_will_show_or_why_it_cannot():
    ends = [i * 0.02 for i in range(50)]
    steady = timing.reduce([50.0 + 0.01 * (i % 3) for i in range(50)], batch=15, method="leaderboard",
                           clock="cuda events", ends_s=ends)
    wandering = timing.reduce([55.0 if (i // 5) % 2 else 92.0 for i in range(50)], batch=15, method="leaderboard",
                              clock="cuda events", ends_s=ends)
    short = timing.reduce([50.0, 50.2, 49.9], batch=15, method="leaderboard", clock="cuda events",
                          ends_s=[0.0, 0.01, 0.02])
    notes: dict = {}
    assert results.spread_cell(steady, notes) == report.fmt_us(steady.rerun_us) and not notes
    assert results.spread_cell(wandering, notes) == f"{report.fmt_us(wandering.rerun_us)} [1]"
    assert results.spread_cell(short, notes) == f"{report.fmt_us(short.err_us)} [2]"
    (noisy, too_short) = notes
    assert noisy.startswith("too noisy to tell versions 2% apart") and "too few 0.1-s blocks" in too_short
