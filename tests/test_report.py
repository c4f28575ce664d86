import json

import pytest

from nvgg import report, timing
from nvgg.errors import NvggError
from nvgg.runner import Result


def _r(case, strategy, t, backend="cute", status="ok"):
    stats = timing.reduce([t], batch=15, method="leaderboard", clock="cuda events")
    return Result(case=case, strategy=strategy, backend=backend, status=status, stats=stats)


def test_geomean_over_benchmarks_only_when_all_ran():
    rs = [_r("1", "graph", 4.0), _r("2", "graph", 9.0), _r("1", "persistent", 1.0)]
    assert report.geomeans(rs, {"1", "2"}) == {"graph/cute": pytest.approx(6.0)}


def test_speedup_is_against_sequential_on_the_same_backend():
    rs = [_r("1", "sequential", 10.0), _r("1", "graph", 5.0), _r("1", "graph", 5.0, backend="torch")]
    assert report.speedups(rs) == {0: 1.0, 1: 2.0}


def test_regressions_flag_slowdowns_and_lost_correctness():
    base = {("1", "graph", "cute", ""): {"status": "ok", "time_us": 10.0},
            ("2", "graph", "cute", ""): {"status": "ok", "time_us": 10.0}}
    rs = [_r("1", "graph", 10.4), _r("2", "graph", 1.0, status="wrong")]
    lines = report.regressions(rs, base, 5.0)
    assert len(lines) == 1 and "was ok, now wrong" in lines[0]
    assert len(report.regressions([_r("1", "graph", 10.6)], base, 5.0)) == 1


def test_regressions_compare_each_tensor_map_mode_with_its_own_baseline():
    base = {("1", "persistent", "cute", "host"): {"status": "ok", "time_us": 10.0},
            ("1", "persistent", "cute", "device"): {"status": "ok", "time_us": 20.0}}
    host, device = _r("1", "persistent", 12.0), _r("1", "persistent", 12.0)
    host.tensormaps, device.tensormaps = "host", "device"
    lines = report.regressions([host, device], base, 5.0)
    assert len(lines) == 1 and "persistent[host]/cute" in lines[0] and "+20.0%" in lines[0]
    # a file written before modes were recorded gates every mode of its row
    old = {("1", "persistent", "cute", ""): {"status": "ok", "time_us": 10.0}}
    assert len(report.regressions([host, device], old, 5.0)) == 2


def test_write_json_is_atomic_and_round_trips(tmp_path):
    path = tmp_path / "sub" / "out.json"
    report.write_json(path, {"results": [{"case": "1", "strategy": "graph", "backend": "cute", "time_us": 3.0}]})
    assert report.load_baseline(path)[("1", "graph", "cute", "")]["time_us"] == 3.0
    assert [p.name for p in path.parent.iterdir()] == ["out.json"]


def test_bad_baseline_files(tmp_path):
    with pytest.raises(NvggError, match="does not exist"):
        report.load_baseline(tmp_path / "none.json")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"foo": 1}))
    with pytest.raises(NvggError, match="not an nvgg result file"):
        report.load_baseline(bad)


def test_result_json_round_trip():
    r = _r("3", "persistent", 7.5)
    back = Result.from_dict(json.loads(json.dumps(r.to_dict())))
    assert back.stats == r.stats and back.time_us == 7.5
