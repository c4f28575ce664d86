"""A fair A/B (nvgg/ab.py, `nvgg ab`): the interval and the classes, the rounds in kept sessions on
new values, the command with its rows faked (conftest: fake_gpu, fake_rows), and for real on the CPU."""

import dataclasses
import json
import math
import random
import shutil
import statistics
import types

import jsonschema
import pytest
import torch
from conftest import made_result, submission_path

from nvgg import ab, cases, datapath, timing
from nvgg.result import SCHEMA, Row


def test_t_quantiles_and_the_interval_of_a_ratio():
    assert ab.t975(1) == 12.706 and ab.t975(9) == 2.262 and ab.t975(22) == 2.086 and ab.t975(500) == 1.96
    assert ab.ratio([10.0], [11.0]) is None  # one round: no interval
    same = ab.ratio([10.0] * 6, [10.0] * 6)
    assert (same.ratio, same.lo, same.hi, same.n) == (1.0, 1.0, 1.0, 6) and same.classify(0.02) == "same"
    # paired: a drift shared by both versions of a round cancels
    base = [10.0, 12.0, 9.0, 11.0, 10.5]
    r = ab.ratio(base, [t * 1.03 for t in base])
    assert math.isclose(r.ratio, 1.03) and math.isclose(r.lo, 1.03) and r.classify(0.02) == "slower"
    assert ab.ratio(base, [t / 1.05 for t in base]).classify(0.02) == "faster"


def test_a_round_a_pause_hit_on_one_version_is_trimmed_and_a_steady_change_is_not():
    """ab.ratio trims TRIM of the rounds' log ratios off each end (Yuen): one round of twelve that
    a host pause hit on one version (1.45) put a plain t interval past ±5% (unsure); trimmed, the
    same rounds are same, and 3% slower rounds with the same pause are still slower. Under 5
    rounds nothing is trimmed."""
    rng = random.Random(3)
    base = [300 * (1 + rng.gauss(0, 0.15)) for _ in range(12)]  # host-bound: rounds 15% apart, paired
    same = [b * (1 + rng.gauss(0, 0.005)) for b in base]  # paired: their ratio within about 0.5%
    same[4] *= 1.45
    plain, trimmed = ab.ratio(base, same, trim=0), ab.ratio(base, same)
    assert plain.hi > 1.05 and plain.classify(0.02, 0.05) == "unsure"
    assert trimmed.classify(0.02, 0.05) == "same" and trimmed.hi < 1.02 and trimmed.dof == 7
    slower = [t * 1.03 for t in same]
    slower[4] = base[4] * 1.03  # the pause now on the base's side of another round
    slower[7] = base[7] * 1.03 / 1.45
    assert ab.ratio(base, slower).classify(0.02, 0.05) == "slower"
    assert ab.ratio(base[:4], same[:4]).dof == 3  # 4 rounds: nothing trimmed


@pytest.mark.parametrize("lo, hi, klass", [
    (1.025, 1.04, "slower"), (0.95, 0.97, "faster"), (0.99, 1.015, "same"), (0.99, 1.03, "unsure"), (0.9, 1.1, "unsure"),
])
def test_classes_against_the_floor(lo, hi, klass):
    assert ab.Ratio(math.sqrt(lo * hi), lo, hi, 8).classify(0.02) == klass


def test_a_noisy_equal_pair_is_same_and_a_3_percent_slower_one_slower():
    rng = random.Random(7)
    base = [100 * (1 + rng.gauss(0, 0.004)) for _ in range(12)]
    assert ab.ratio(base, [100 * (1 + rng.gauss(0, 0.004)) for _ in range(12)]).classify(0.02) == "same"
    assert ab.ratio(base, [103 * (1 + rng.gauss(0, 0.004)) for _ in range(12)]).classify(0.02) == "slower"
    g = ab.geomean([ab.Ratio(1.02, 1.01, 1.03, 10), ab.Ratio(1.04, 1.03, 1.05, 10)])
    assert math.isclose(g.ratio, math.sqrt(1.02 * 1.04)) and g.lo < g.ratio < g.hi and g.hi - g.lo < 0.02


def test_a_round_times_the_kept_session_again_on_new_values():
    row = Row(cases.get("test-1"), "sequential", "torch", device="cpu")
    datapath._ROUNDS.clear()
    first = datapath.run_round(row)
    assert first.status == "ok" and len(datapath._ROUNDS) == 1
    (session,) = datapath._ROUNDS.values()
    values = session.batch[0][0][0][0].view(torch.uint8).clone()
    second = datapath.run_round(row)
    assert second.status == "ok" and session.rounds == 2 and second.stats is not None
    assert not torch.equal(values, session.batch[0][0][0][0].view(torch.uint8))  # each round times values of its own
    assert datapath.run_round(Row(cases.get("test-2"), "sequential", "torch", device="cpu")).status == "ok"
    assert [k[0] for k in datapath._ROUNDS] == ["test-2"]  # the case before let go: an A/B goes case by case
    datapath._ROUNDS.clear()


def _two_versions(tmp_path, names=("v1", "v2")):
    paths = []
    for v in names:
        (tmp_path / v).mkdir()
        shutil.copy(submission_path("honest"), tmp_path / v / "submission.py")
        shutil.copy(submission_path("slowdown"), tmp_path / v / "slowdown.py")
        paths.append(str(tmp_path / v / "submission.py"))
    return paths


def test_ab_alternates_rounds_until_decided_and_writes_its_file(cli, fake_gpu, fake_rows, tmp_path):
    rng = random.Random(3)

    def answer(row):  # v2 3% slower; both drift together from round to round
        drift = 1 + 0.05 * math.sin(len(fake_rows.seen) / 3)
        t = (103.0 if "v2" in row.source else 100.0) * drift * (1 + rng.gauss(0, 0.002))
        return made_result(row.case.id, "submission", "submission", t, source=row.source, revision=row.revision)

    fake_rows.answer = answer
    doc = tmp_path / "ab.json"
    v1, v2 = _two_versions(tmp_path)
    out = cli("ab", "--case", "3,4", "--submission", v1, "--submission", v2, "--json", str(doc))
    assert out.exit_code == 0, out.output
    raw = json.loads(doc.read_text())
    jsonschema.validate(raw, json.loads(SCHEMA.read_text()))
    for case in raw["cases"]:
        base, other = case["versions"]
        assert (base["name"], other["name"]) == ("v1/submission.py", "v2/submission.py")
        assert other["vs_base"]["class"] == "slower" and 1.02 < other["vs_base"]["ratio"] < 1.04
        assert len(base["rounds"]) == len(other["rounds"]) >= ab.MIN_ROUNDS and case["stopped"].startswith("decided")
    assert raw["geomean"]["v2/submission.py"]["class"] == "slower"
    assert all(v["first"]["status"] == "ok" for case in raw["cases"] for v in case["versions"])
    # each version's first run (not a round), then rounds of both versions in a random order each round
    assert [r.source for r in fake_rows.seen[:2]] == ["v1/submission.py", "v2/submission.py"]
    assert all(sorted(turn) == ["v1/submission.py", "v2/submission.py"] for turn in fake_rows.rounds)
    assert {turn[0] for turn in fake_rows.rounds} == {"v1/submission.py", "v2/submission.py"}
    assert sum(len(v["rounds"]) for case in raw["cases"] for v in case["versions"]) == 2 * len(fake_rows.rounds)
    # a round's versions share a core, the next round the next one (timing.pin; A/Bs side by side
    # start at cores of their own)
    import os
    from nvgg import timing
    cores = timing.cores()
    assert fake_rows.cores == [cores[(os.getpid() + i) % len(cores)] for i in range(len(fake_rows.rounds))]


def test_ab_tells_what_it_needs(cli, fake_gpu, fake_rows, tmp_path):
    v1, _ = _two_versions(tmp_path)
    out = cli("ab", "--submission", v1)
    assert out.exit_code == 2 and "pass --submission at least twice" in out.stderr and fake_rows.seen == []
    assert cli("ab", "--submission", v1, "--submission", v1).exit_code == 2  # the same file twice
    assert cli("ab", "--submission", v1, "--submission", _, "--rounds", "2").exit_code == 2


def test_ab_for_real_on_the_cpu_and_a_kept_result_ends_it(cli, tmp_path):
    v1, v2 = _two_versions(tmp_path)
    doc = tmp_path / "ab.json"
    out = cli("ab", "--case", "test-1", "--submission", v1, "--submission", v2, "--rounds", "5", "--json", str(doc))
    assert out.exit_code == 0, out.output
    (case,) = json.loads(doc.read_text())["cases"]
    assert [len(v["rounds"]) for v in case["versions"]] == [5, 5]
    assert all(r["status"] == "ok" for v in case["versions"] for r in v["rounds"])
    out = cli("ab", "--case", "test-1", "--submission", v1, "--submission", submission_path("kept"), "--rounds", "5")
    assert out.exit_code == 1 and "failed: case test-1: kept.py: WRONG: right when checked, wrong when timed" in out.stderr, out.output


def test_a_suspect_round_ends_the_case_like_a_failed_one():
    from nvgg.result import Flag
    ok = made_result("3", "submission", "submission", 40.0)
    fast = made_result("3", "submission", "submission", 0.1, flags=[Flag("below-sol", "below the floor")])
    case = ab.CaseAB("3", ["a", "b"], [[ok, ok], [ok, fast]])
    assert case.failed() is fast and case.times(1) == [40.0]
    assert ab._stop(case, 2, 0.02, math.inf) == "a round failed (suspect: below-sol)"


def test_a_spent_budget_leaves_each_case_its_least_rounds(monkeypatch):
    """Past the budget each case still gets MIN_ROUNDS, the least that can class it, then stops."""
    from nvgg import rows
    import itertools
    wide = itertools.cycle([7.0, 13.0, 9.0, 12.0])  # b's rounds 30% apart: never decided in 5
    monkeypatch.setattr(rows, "run_in", lambda pool, row, rounds=False: made_result(
        row.case.id, "submission", "submission", 10.0 if row.source == "a" else next(wide), source=row.source))
    monkeypatch.setattr(rows, "round_in", lambda pool, asked, core=None, window_s=None: [rows.run_in(pool, row) for row in asked])
    versions = [[Row(cases.get(c), submission=f"/w/{v}/s.py", source=v) for v in ("a", "b")] for c in ("3", "4")]
    done = ab.run(versions, floor=0.02, max_rounds=30, budget_s=1e-9)
    assert ab.MIN_ROUNDS == 5 and [len(case.results[0]) for case in done] == [5, 5]
    assert all(case.stopped == "time budget spent after 5 rounds" for case in done)


def test_the_budget_is_shared_after_the_first_runs_and_slow_rounds_get_longer_windows(monkeypatch):
    """On a clock of its own: the workers' start and first runs (40 s, on the first case only) come
    off the whole budget, and each case's rounds share what is left (100 s: 30 s each for two
    cases; charged to case 3 alone, they left it 10 s). A round whose begin and check take 0.75 s
    makes the next round's windows 0.75 s (ab.round_window_s), within ROUND_S and ROUND_MAX_S."""
    import itertools
    from nvgg import rows
    now = [0.0]
    monkeypatch.setattr(ab, "time", types.SimpleNamespace(monotonic=lambda: now[0]))  # ab's clock alone
    started = set()
    wide = itertools.cycle([7.0, 13.0, 9.0, 12.0])  # b's rounds 30% apart: never decided

    def run_in(pool, row, rounds=False):
        if row.source not in started:  # a worker's start and its first run: 20 s
            started.add(row.source)
            now[0] += 20.0
        return made_result(row.case.id, "submission", "submission", 10.0 if row.source == "a" else next(wide),
                           source=row.source)

    windows = []

    def round_in(pool, asked, core=None, window_s=None):
        windows.append(window_s)
        now[0] += 0.75 + window_s  # new values and the checks, then the windows
        return [run_in(pool, row) for row in asked]

    monkeypatch.setattr(rows, "run_in", run_in)
    monkeypatch.setattr(rows, "round_in", round_in)
    versions = [[Row(cases.get(c), submission=f"/w/{v}/s.py", source=v) for v in ("a", "b")] for c in ("3", "4")]
    done = ab.run(versions, floor=0.02, max_rounds=100, budget_s=100.0)
    rounds = [len(case.results[0]) for case in done]
    assert rounds == [21, 20], rounds  # 1.0 s, then 1.5 s a round: past 30 s after 21; then past 100 s in all
    assert windows[:3] == [rows.ROUND_S, 0.75, 0.75] and set(windows[21:]) == {rows.ROUND_S, 0.75}
    assert 100.0 <= now[0] < 100.0 + 1.5
    assert ab.round_window_s(0.3, 0.25) == rows.ROUND_S and ab.round_window_s(9.0, 0.25) == ab.ROUND_MAX_S
    assert ab.round_window_s(1.3, 0.25) == pytest.approx(1.05)


def test_a_host_loaded_past_its_cores_during_a_case_is_said_beside_the_case(monkeypatch):
    """The case keeps the highest load the host showed (at its start and after each round): a host
    running more threads than it has cores is said in the table and the JSON, beside the class (a
    version slowed throughout is a bias the rounds cannot show); a quiet host's case says nothing,
    and a platform without a load average leaves it unknown."""
    import itertools
    from conftest import REAL_HOST_LOAD
    from nvgg import report, rows, timing
    sizes = itertools.cycle([10.0, 10.2, 9.9, 10.1, 10.0])
    monkeypatch.setattr(rows, "run_in", lambda pool, row, rounds=False: made_result(
        row.case.id, "submission", "submission", next(sizes), source=row.source))
    monkeypatch.setattr(rows, "round_in", lambda pool, asked, core=None, window_s=None: [rows.run_in(pool, row) for row in asked])
    loads = {"3": itertools.chain([(1.5, 16), (3.0, 16), (2.0, 16)], itertools.repeat((1.0, 16))),  # at most 3 on 16
             "4": itertools.chain([(20.0, 64), (76.2, 64), (40.0, 64)], itertools.repeat((30.0, 64)))}  # 76 on 64
    now = ["3"]
    monkeypatch.setattr(timing, "host_load", lambda: next(loads[now[0]]))
    versions = [[Row(cases.get(c), submission=f"/w/{v}/s.py", source=v) for v in ("a", "b")] for c in ("3", "4")]
    done = ab.run(versions, floor=0.02, max_rounds=8, budget_s=1e9, on_case=lambda case, _: now.__setitem__(0, case.case))
    assert [(c.load, c.cores, c.oversubscribed) for c in done] == [(3.0, 16, False), (76.2, 64, True)]
    doc = report.ab_document(done, ab.geomeans(done), 0.02, done[0].first[0].env)
    jsonschema.validate(doc, json.loads(SCHEMA.read_text()))
    assert [c["host_load"] for c in doc["cases"]] == [{"load": 3.0, "cores": 16, "oversubscribed": False},
                                                     {"load": 76.2, "cores": 64, "oversubscribed": True}]
    text = report.ab_table(done, ab.geomeans(done), 0.02, {})
    assert [line for line in text.splitlines() if "load average" in line] == [
        "case 4: the host's load average reached 76 on 64 cores: a version slowed for the whole case by the others' "
        "load is a bias its interval does not show; A/B on a quieter host before trusting a faster or slower here"]
    monkeypatch.setattr(timing, "host_load", lambda: None)  # no load average on this platform
    (unknown,) = ab.run(versions[:1], floor=0.02, max_rounds=5, budget_s=1e9)
    assert (unknown.load, unknown.oversubscribed) == (None, False)
    assert report.ab_document([unknown], {}, 0.02, {})["cases"][0]["host_load"] is None
    load, cores = REAL_HOST_LOAD()  # Linux: the load average and the cores
    assert load >= 0 and cores >= 1


def test_an_unsure_ratio_says_how_many_rounds_its_spread_would_need():
    rng = random.Random(5)
    base = [100 * (1 + rng.gauss(0, 0.08)) for _ in range(12)]  # a host-bound row: rounds 8% apart
    other = [b * (1 + rng.gauss(0, 0.08)) for b in base]
    r = ab.ratio(base, other)
    assert r.classify(0.02) == "unsure"
    logs = sorted(math.log(o / b) for b, o in zip(base, other))
    # 12 rounds, 20% trimmed: the 2 lowest and 2 highest off, the spread winsorized to the 8 kept
    mean = sum(logs[2:10]) / 8
    wins = [logs[2]] * 2 + logs[2:10] + [logs[9]] * 2
    wvar = sum((x - sum(wins) / 12) ** 2 for x in wins) / 11
    sd = math.sqrt(11 * wvar / (8 * 7)) * math.sqrt(12)
    assert (r.n, r.dof) == (12, 7) and r.spread == pytest.approx(sd) and math.log(r.ratio) == pytest.approx(mean)
    assert ab.ratio(base, other, trim=0).spread == pytest.approx(statistics.stdev(logs))  # nothing trimmed: plain t
    distance = min(abs(mean - math.log(0.98)), abs(mean - math.log(1.02)))

    def fewest(spread, distance, ran):  # the fewest rounds past those run whose t interval fits
        k = ran + 1
        while timing.t975(k - 2 * int(0.2 * k) - 1) * spread / math.sqrt(k) > distance:
            k += 1
        return k

    assert r.rounds_to_decide(0.02) == fewest(sd, distance, 12) >= math.ceil((1.96 * sd / distance) ** 2) > 12
    # a host-bound case's two widths: at 1.045 the interval clears +2% (slower) long before it
    # could fit inside ±5%; at 1.01 it fits inside ±5% (same) sooner than it could clear +2%
    wide = ab.Ratio(1.045, 1.0, 1.09, 5)
    assert wide.rounds_to_decide(0.02, 0.05) == fewest(wide.spread, math.log(1.045) - math.log(1.02), 5)
    near = ab.Ratio(1.01, 0.92, 1.10, 5)
    assert near.rounds_to_decide(0.02, 0.05) == fewest(near.spread, math.log(1.05) - math.log(1.01), 5)
    # 5 rounds far from the floor (3 kept, t 4.30): the normal quantile would ask 3, fewer than ran
    far = ab.Ratio(1.127, 0.977, 1.301, 5, 2)
    assert far.classify(0.02) == "unsure" and math.ceil((1.96 * far.spread / (math.log(1.127) - math.log(1.02))) ** 2) == 3
    assert far.rounds_to_decide(0.02) == 6  # 6 rounds keep 4: t 3.18 x 0.074 / √6 = 0.097 under 0.100
    decided = ab.ratio([100.0] * 6, [100.0 + 0.01 * i for i in range(6)])
    assert decided.classify(0.02) == "same" and decided.rounds_to_decide(0.02) == 6
    from nvgg import report
    done = ab.CaseAB("3", ["v1", "v2"], [[made_result("3", "s", "s", t) for t in base],
                                         [made_result("3", "s", "s", t) for t in other]], "12 rounds")
    text = report.ab_table([done], {}, 0.02, {})
    assert (f"case 3 v2: too noisy to tell apart at ±2% in 12 rounds: its rounds' ratios spread "
            f"±{math.expm1(sd):.1%} (one standard deviation); at that spread about {r.rounds_to_decide(0.02)} rounds "
            "would decide") in text


def test_a_round_alternates_the_versions_windows_between_their_refill_and_their_check():
    """rows.round_in: every version begins (new values), then their windows take turns A B B A ...
    for at least MIN_WINDOWS each, then each ends (checked); a version whose window raised drops out
    of the round with its failure while the others finish."""
    from nvgg import procs, rows

    class Pool:
        def __init__(self, broken=""):
            self.calls, self.broken = [], broken

        def call(self, key, fn, *, limit_s=None, **kwargs):
            self.calls.append((fn.__name__, kwargs["row"].source))
            if fn.__name__ == "round_window" and kwargs["row"].source == self.broken:
                raise procs.ChildFailure("crashed: exit code -11")
            if fn.__name__ == "round_end":
                return made_result("3", "submission", "submission", 10.0, source=kwargs["row"].source)
            return None

    versions = [Row(cases.get("3"), submission=f"/w/{v}/s.py", source=v) for v in ("a", "b")]
    pool = Pool()
    a, b = rows.round_in(pool, versions, core=1)
    assert (a.source, b.source) == ("a", "b") and a.status == b.status == "ok"
    assert pool.calls[:2] == [("round_begin", "a"), ("round_begin", "b")]
    assert pool.calls[-2:] == [("round_end", "a"), ("round_end", "b")]
    windows = [who for fn, who in pool.calls if fn == "round_window"]
    assert len(windows) >= 2 * rows.MIN_WINDOWS and windows.count("a") == windows.count("b")
    assert windows[:8] == ["a", "b", "b", "a", "a", "b", "b", "a"]
    pool = Pool(broken="b")
    a, b = rows.round_in(pool, versions)
    assert a.status == "ok" and b.status == "error" and "crashed" in b.message
    assert ("round_end", "b") not in pool.calls and pool.calls[-1] == ("round_end", "a")


def test_a_rounds_thread_runs_on_the_rounds_core_and_is_let_go_after(monkeypatch):
    """datapath.round_begin pins the worker's thread to the round's core (timing.pin), round_end
    gives it every core back; on the CPU the round times and checks as any run."""
    from nvgg import timing
    if not timing.cores():
        pytest.skip("this platform cannot pin a thread (no sched_setaffinity)")
    import os
    row = Row(cases.get("test-1"), "sequential", "torch", device="cpu")
    datapath._ROUNDS.clear()
    assert datapath.run_round(row).status == "ok"
    core = timing.cores()[-1]
    assert datapath.round_begin(row, core=core) is None
    assert os.sched_getaffinity(0) == {core}
    assert datapath.round_window(row, reps=2) is None
    result = datapath.round_end(row)
    assert result.status == "ok" and result.stats.runs == 2
    assert sorted(os.sched_getaffinity(0)) == timing.cores()
    datapath._ROUNDS.clear()


def test_a_host_bound_case_is_same_within_the_host_floor_and_says_so():
    """A version whose host time to issue a call is most of the call (timing.HOST_SHARE): its rounds
    spread wide, so an interval within ab.HOST_FLOOR (±5%) is "same" there, where at ±2% it would be
    "unsure"; an interval wholly beyond ±2% is "slower" either way (a tight 4% is a change)."""
    from nvgg import report
    base = [100.0 * (1 + 0.001 * (i % 3)) for i in range(8)]
    wide = [1.0 + 0.02 * (-1) ** i for i in range(8)]  # rounds 2% either side of 1.01: trimmed, ±2.7%

    def results(times, host):
        out = [made_result("3", "s", "s", t) for t in times]
        for r in out:
            r.setup_us["launch_host"] = host
        return out

    for host, within, tight, spread in ((95.0, ab.HOST_FLOOR, "slower", "same"), (10.0, 0.02, "slower", "unsure")):
        first = results([100.0, 104.0], host)
        for times, klass in (([t * 1.04 for t in base], tight), ([t * 1.01 * w for t, w in zip(base, wide)], spread)):
            case = ab.CaseAB("3", ["v1", "v2"], [results(base, host), results(times, host)], "8 rounds", first=first)
            assert case.host_bound == (host == 95.0) and case.same_within(0.02) == within
            doc = report.ab_document([case], ab.geomeans([case]), 0.02, {})
            (c,) = doc["cases"]
            assert (c["floor"], c["same_within"], c["host_bound"], c["versions"][1]["vs_base"]["class"]) == \
                (0.02, within, host == 95.0, klass)
            text = report.ab_table([case], ab.geomeans([case]), 0.02, {})
            assert ("case 3: host-bound, same within ±5%" in text) == (host == 95.0)
            assert text.splitlines()[4].split("|")[-2].strip() == klass  # v2's row, its class
    assert ab.CaseAB("3", ["v1", "v2"], [[], []]).same_within(0.08) == 0.08  # nothing known: the asked floor
    cpu = results([100.0, 100.0], 100.0)  # a CPU run: its calls are host time alone, nothing waits on a GPU
    for r in cpu:
        r.stats = dataclasses.replace(r.stats, clock="host clock (CPU run)")
    assert not ab.CaseAB("test-1", ["v1", "v2"], [[], []], first=cpu).host_bound


def test_a_submission_that_raises_in_a_window_leaves_its_worker_as_it_found_it(tmp_path):
    """A call that raises in a round ends the version's round with its error; the worker's thread runs
    on every core again and Python's collector is back on (the round held both)."""
    import gc
    import os
    from nvgg import timing
    (tmp_path / "late").mkdir()
    late = tmp_path / "late" / "submission.py"
    late.write_text(open(submission_path("honest")).read().replace("import slowdown\n", "") +
                    "\nFAIL = [False]\n\n\ndef custom_kernel(data):\n"
                    "    if FAIL[0]:\n        raise RuntimeError('late failure')\n    return compute(data)\n")
    row = Row(cases.get("test-1"), submission=str(late), source="late/submission.py", device="cpu")
    datapath._ROUNDS.clear()
    first = datapath.run_round(row)
    assert first.status == "ok", first.message
    from nvgg.backends import submission as sub
    sub.loaded(str(late)).FAIL[0] = True  # from now on each call raises
    # (the round's first call of it, the host time to issue one, raises already)
    failed = datapath.round_begin(row, core=(timing.cores() or [None])[-1]) or datapath.round_window(row, reps=1)
    assert failed is not None and failed.status == "error" and "late failure" in failed.message
    assert gc.isenabled() and not datapath._ROUNDS
    if timing.cores():
        assert sorted(os.sched_getaffinity(0)) == timing.cores()
