import json

import pytest

from nvgg import outputs, report, timing
from nvgg.errors import NvggError
from nvgg.result import Result


def _r(case, strategy, t, backend="cute", status="ok"):
    stats = timing.reduce([t], batch=15, method="leaderboard", clock="cuda events")
    return Result(case=case, strategy=strategy, backend=backend, status=status, stats=stats)


def test_geomean_over_benchmarks_only_when_all_ran():
    rs = [_r("1", "graph", 4.0), _r("2", "graph", 9.0), _r("1", "persistent", 1.0)]
    assert report.geomeans(rs, {"1", "2"}) == {"graph/cute": pytest.approx(6.0)}


def test_speedup_is_against_sequential_on_the_same_backend():
    rs = [_r("1", "sequential", 10.0), _r("1", "graph", 5.0), _r("1", "graph", 5.0, backend="torch")]
    assert report.speedups(rs) == {0: 1.0, 1: 2.0}


def _row(t, std=0.0, runs=30, status="ok", **extra):
    """A baseline row as --json writes it: a mean, its spread over `runs` repetitions."""
    stats = {"mean_us": t, "std_us": std, "err_us": std / runs ** 0.5, "runs": runs}
    return dict({"case": "1", "status": status, "time_us": t, "stats": stats}, **extra)


def _timed(case, strategy, t, std=0.0, runs=30, **kw):
    r = _r(case, strategy, t, **kw)
    r.stats = timing.Stats(runs=runs, batch=15, mean_us=t, std_us=std, err_us=std / runs ** 0.5, best_us=t,
                           worst_us=t, median_us=t, method="leaderboard", clock="cuda events")
    return r


def test_gate_fails_slowdowns_beyond_the_noise_and_lost_correctness():
    base = {("1", "graph", "cute", ""): _row(10.0, std=0.05), ("2", "graph", "cute", ""): _row(10.0, std=0.05)}
    rs = [_timed("1", "graph", 10.04, std=0.05), _r("2", "graph", 1.0, status="wrong")]
    lines = report.gate(rs, base, 5.0)
    assert len(lines) == 1 and "was ok, now wrong" in lines[0]
    assert rs[0].gate.kind == "same" and not rs[0].gate.fails
    slow = _timed("1", "graph", 10.6, std=0.05)
    lines = report.gate([slow], base, 5.0)
    assert len(lines) == 1 and "slower +6.0%" in lines[0] and slow.gate.kind == "slower"


def test_gate_compares_each_variant_with_its_own_baseline():
    base = {("1", "persistent", "cute", "host"): _row(10.0), ("1", "persistent", "cute", "device"): _row(20.0)}
    host, device = _timed("1", "persistent", 12.0), _timed("1", "persistent", 12.0)
    host.tensormaps, device.tensormaps = "host", "device"
    lines = report.gate([host, device], base, 5.0)
    assert len(lines) == 1 and "persistent[host]/cute" in lines[0] and "+20.0%" in lines[0]
    assert device.gate.kind == "faster"
    # a mode the baseline lacks (a config map's point against a default run): its one row of that case
    tuned = _timed("1", "persistent", 9.0)
    tuned.tensormaps = "device"
    only_host = {("1", "persistent", "cute", "host"): _row(10.0)}
    assert report.gate([tuned], only_host, 5.0) == []
    assert tuned.gate.kind == "faster" and "against the baseline's host maps" in tuned.gate.text()
    slow = _timed("1", "persistent", 12.0)
    slow.tensormaps = "device"
    assert len(report.gate([slow], only_host, 5.0)) == 1 and slow.gate.kind == "slower"
    # submissions are told apart by file name
    mine = _timed("1", "submission", 12.0, backend="submission")
    mine.source = "mine.py"
    assert report.gate([mine], {("1", "submission", "submission", "other.py"): _row(10.0)}, 5.0) == []
    assert len(report.gate([mine], {("1", "submission", "submission", "mine.py"): _row(10.0)}, 5.0)) == 1


def test_write_json_is_atomic_and_round_trips(tmp_path):
    path = tmp_path / "sub" / "out.json"
    outputs.write_json(path, {"results": [{"case": "1", "strategy": "graph", "backend": "cute", "status": "ok",
                                          "time_us": 3.0, "stats": None}]})
    assert report.load_baseline(path)[("1", "graph", "cute", "")]["time_us"] == 3.0
    assert [p.name for p in path.parent.iterdir()] == ["out.json"]


def test_bad_baseline_files(tmp_path):
    with pytest.raises(NvggError, match="does not exist"):
        report.load_baseline(tmp_path / "none.json")
    bad = tmp_path / "bad.json"
    for content in (json.dumps({"foo": 1}), "not json", json.dumps({"results": [1, 2]}), json.dumps([]),
                    json.dumps({"results": [{"case": "1", "status": "ok", "stats": {"mean_us": "fast"}}]}),
                    json.dumps({"results": [{"case": "1", "status": "ok", "stats": {"mean_us": 0, "err_us": 0, "std_us": 0}}]})):
        bad.write_text(content)
        with pytest.raises(NvggError, match="not an nvgg file|is not JSON|has rows nvgg cannot read back"):
            report.load_baseline(bad)
    with pytest.raises(NvggError, match="is a folder"):
        report.load_baseline(tmp_path)


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
    assert report.spread_cell(steady, notes) == report.fmt_us(steady.rerun_us) and not notes
    assert report.spread_cell(wandering, notes) == f"{report.fmt_us(wandering.rerun_us)} [1]"
    assert report.spread_cell(short, notes) == f"{report.fmt_us(short.err_us)} [2]"
    (noisy, too_short) = notes
    assert noisy.startswith("too noisy to tell versions 2% apart") and "too few 0.1-s blocks" in too_short
