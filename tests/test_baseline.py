"""The baseline's gate (nvgg/baseline.py): rows read back from an earlier file by their key, each
row of a run judged against its own, a variant against its variant's row."""

import json

import pytest

from nvgg import baseline, timing
from nvgg.errors import NvggError
from nvgg.output import files
from nvgg.result import Result


def _r(case, strategy, t, backend="cute", status="ok"):
    stats = timing.reduce([t], batch=15, method="leaderboard", clock="cuda events")
    return Result(case=case, strategy=strategy, backend=backend, status=status, stats=stats)


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
    lines = baseline.gate(rs, base, 5.0)
    assert len(lines) == 1 and "was ok, now wrong" in lines[0]
    assert rs[0].gate.kind == "same" and not rs[0].gate.fails
    slow = _timed("1", "graph", 10.6, std=0.05)
    lines = baseline.gate([slow], base, 5.0)
    assert len(lines) == 1 and "slower +6.0%" in lines[0] and slow.gate.kind == "slower"


def test_gate_compares_each_variant_with_its_own_baseline():
    base = {("1", "persistent", "cute", "host"): _row(10.0), ("1", "persistent", "cute", "device"): _row(20.0)}
    host, device = _timed("1", "persistent", 12.0), _timed("1", "persistent", 12.0)
    host.tensormaps, device.tensormaps = "host", "device"
    lines = baseline.gate([host, device], base, 5.0)
    assert len(lines) == 1 and "persistent[host]/cute" in lines[0] and "+20.0%" in lines[0]
    assert device.gate.kind == "faster"
    # a mode the baseline lacks (a config map's point against a default run): its one row of that case
    tuned = _timed("1", "persistent", 9.0)
    tuned.tensormaps = "device"
    only_host = {("1", "persistent", "cute", "host"): _row(10.0)}
    assert baseline.gate([tuned], only_host, 5.0) == []
    assert tuned.gate.kind == "faster" and "against the baseline's host maps" in tuned.gate.text()
    slow = _timed("1", "persistent", 12.0)
    slow.tensormaps = "device"
    assert len(baseline.gate([slow], only_host, 5.0)) == 1 and slow.gate.kind == "slower"
    # submissions are told apart by file name
    mine = _timed("1", "submission", 12.0, backend="submission")
    mine.source = "mine.py"
    assert baseline.gate([mine], {("1", "submission", "submission", "other.py"): _row(10.0)}, 5.0) == []
    assert len(baseline.gate([mine], {("1", "submission", "submission", "mine.py"): _row(10.0)}, 5.0)) == 1


def test_write_json_is_atomic_and_round_trips(tmp_path):
    path = tmp_path / "sub" / "out.json"
    files.write_json(path, {"results": [{"case": "1", "strategy": "graph", "backend": "cute", "status": "ok",
                                          "time_us": 3.0, "stats": None}]})
    assert baseline.load_baseline(path)[("1", "graph", "cute", "")]["time_us"] == 3.0
    assert [p.name for p in path.parent.iterdir()] == ["out.json"]


def test_bad_baseline_files(tmp_path):
    with pytest.raises(NvggError, match="does not exist"):
        baseline.load_baseline(tmp_path / "none.json")
    bad = tmp_path / "bad.json"
    for content in (json.dumps({"foo": 1}), "not json", json.dumps({"results": [1, 2]}), json.dumps([]),
                    json.dumps({"results": [{"case": "1", "status": "ok", "stats": {"mean_us": "fast"}}]}),
                    json.dumps({"results": [{"case": "1", "status": "ok", "stats": {"mean_us": 0, "err_us": 0, "std_us": 0}}]})):
        bad.write_text(content)
        with pytest.raises(NvggError, match="not an nvgg file|is not JSON|has rows nvgg cannot read back"):
            baseline.load_baseline(bad)
    with pytest.raises(NvggError, match="is a folder"):
        baseline.load_baseline(tmp_path)
