"""A fair A/B (nvgg/ab.py, `nvgg ab`): the interval and the classes, the rounds in kept sessions on
new values, the command with its rows faked (conftest: fake_gpu, fake_rows), and for real on the CPU."""

import dataclasses
import json
import math
import random
import shutil
import statistics
import types
from pathlib import Path

import jsonschema
import pytest
import torch
from conftest import made_result, submission_path

from nvgg import ab, cases, datapath, timing
from nvgg.result import SCHEMA, Row


def test_t_quantiles_and_the_interval_of_a_ratio():
    # Student's t from any table: 97.5% at 1, 9, 22, 500 degrees of freedom; 99.5% at 2; 99.75% at 4
    assert [round(timing.t975(df), 3) for df in (1, 9, 22, 500)] == [12.706, 2.262, 2.074, 1.965]
    assert round(timing.t_quantile(0.995, 2), 3) == 9.925 and round(timing.t_quantile(0.9975, 4), 3) == 5.598
    assert timing.t_quantile(0.025, 5) == pytest.approx(-2.571, abs=1e-3) and timing.t975(0) == math.inf
    assert timing.t975(1e9) == pytest.approx(1.95996, abs=1e-5)  # the normal's
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
    assert plain.hi > 1.05 and plain.classify(0.02) == "unsure"
    assert trimmed.classify(0.02) == "same" and trimmed.hi < 1.02 and trimmed.dof == 7
    slower = [t * 1.03 for t in same]
    slower[4] = base[4] * 1.03  # the pause now on the base's side of another round
    slower[7] = base[7] * 1.03 / 1.45
    assert ab.ratio(base, slower).classify(0.02) == "slower"
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


def test_the_commands_least_rounds_is_the_first_look():
    """--rounds' floor is written as a number in the command (read before nvgg.ab and torch are
    imported: nvgg/commands/__init__.py); it is the A/B's own first look."""
    from nvgg.commands import ab as ab_command
    assert ab_command.MIN_ROUNDS == ab.MIN_ROUNDS


def test_a_suspect_round_ends_the_case_like_a_failed_one():
    from nvgg.result import Flag
    ok = made_result("3", "submission", "submission", 40.0)
    fast = made_result("3", "submission", "submission", 0.1, flags=[Flag("below-sol", "below the floor")])
    case = ab.CaseAB("3", ["a", "b"], [[ok, ok], [ok, fast]])
    assert case.failed() is fast and case.times(1) == [40.0]
    assert case.look(2, 0.02) == "a round failed (suspect: below-sol)"  # at any round, a look or not


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
    from nvgg import rows, timing
    from nvgg.report import ab as report
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
    # at 1.045 the interval must clear +2% (slower); at 1.01 fit inside ±2% (same)
    wide = ab.Ratio(1.045, 1.0, 1.09, 5)
    assert wide.rounds_to_decide(0.02) == fewest(wide.spread, math.log(1.045) - math.log(1.02), 5)
    near = ab.Ratio(1.01, 0.96, 1.06, 5)
    assert near.rounds_to_decide(0.02) == fewest(near.spread, math.log(1.02) - math.log(1.01), 5)
    # at a stricter look's level more rounds: its t is wider
    assert near.rounds_to_decide(0.02, level=0.99) > near.rounds_to_decide(0.02)
    # 5 rounds far from the floor (3 kept, t 4.30): the normal quantile would ask 3, fewer than ran
    far = ab.Ratio(1.127, 0.977, 1.301, 5, 2)
    assert far.classify(0.02) == "unsure" and math.ceil((1.96 * far.spread / (math.log(1.127) - math.log(1.02))) ** 2) == 3
    assert far.rounds_to_decide(0.02) == 6  # 6 rounds keep 4: t 3.18 x 0.074 / √6 = 0.097 under 0.100
    decided = ab.ratio([100.0] * 6, [100.0 + 0.01 * i for i in range(6)])
    assert decided.classify(0.02) == "same" and decided.rounds_to_decide(0.02) == 6
    from nvgg.report import ab as report
    done = ab.CaseAB("3", ["v1", "v2"], [[made_result("3", "s", "s", t) for t in base],
                                         [made_result("3", "s", "s", t) for t in other]], "12 rounds")
    text = report.ab_table([done], {}, 0.02, {})
    assert (f"case 3 v2: too noisy to tell apart at ±2.0% in 12 rounds: its rounds' ratios spread "
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


def test_a_host_bound_case_looks_longer_at_the_same_band_and_says_its_rule(monkeypatch):
    """A version whose host time to issue a call is most of the call (timing.HOST_SHARE) spreads wide
    from round to round: its case looks up to HOST_ROUNDS times --rounds, at the asked band (a 3%
    change is never same within a wider one). Every class says the rule that made it: the band,
    host-bound or not, the looks and the level of the look it stopped at, in the table and the JSON."""
    from nvgg import rows
    from nvgg.report import ab as report

    def results(times, host):
        out = [made_result("3", "s", "s", t) for t in times]
        for r in out:
            r.setup_us["launch_host"] = host
        return out

    # a 3% change whose rounds spread ±2.5% (cut): at 8 rounds its interval straddles +2%
    rng = random.Random(11)
    base = [100.0] * 60
    slower = [103.0 * math.exp(rng.gauss(0, 0.025)) for _ in range(60)]
    for host, most in ((95.0, 3 * 8), (10.0, 8)):
        case = ab.CaseAB("3", ["v1", "v2"], [results(base[:8], host), results(slower[:8], host)], first=results([100.0, 103.0], host))
        design = case.plan(8)
        assert case.host_bound == (host == 95.0) and design.most == most and design.looks[0] == ab.MIN_ROUNDS
        assert sum(design.alphas) == pytest.approx(ab.ALPHA) and design.alphas[-1] == pytest.approx(ab.ALPHA / 2)
        stopped = case.look(8, 0.02)
        (r,) = case.ratios()[1:]
        assert r.classify(0.02) != "same" and r.level == pytest.approx(design.level(8)) and r.level > 0.95
        assert stopped == ("" if host == 95.0 else "8 rounds")  # host-bound: the rounds go on
        doc = report.ab_document([case], ab.geomeans([case]), 0.02, case.first[0].env)
        jsonschema.validate(doc, json.loads(SCHEMA.read_text()))
        (c,) = doc["cases"]
        assert c["rule"]["band"] == 0.02 and c["rule"]["host_bound"] == (host == 95.0)
        assert c["rule"]["looks"][-1] == most and c["rule"]["level"] == r.level == c["versions"][1]["vs_base"]["level"]
        assert "same_within" not in c and doc["geomean_rule"] == report.GEOMEAN_RULE
        text = report.ab_table([case], ab.geomeans([case]), 0.02, {})
        assert f"±2.0%, {'host-bound, ' if host == 95.0 else ''}up to {most} rounds, look at {r.level:.1%}" in text
        assert ("case 3: host-bound" in text) == (host == 95.0)
    # the host-bound case's rounds to its last look: the 3% change is slower there
    case = ab.CaseAB("3", ["v1", "v2"], [results(base, 95.0), results(slower, 95.0)], first=results([100.0, 103.0], 95.0))
    case.plan(20)
    assert case.design.most == 60 and case.look(60, 0.02) in ("decided after 60 rounds", "60 rounds")
    assert case.ratios()[1].classify(0.02) == "slower"
    cpu = results([100.0, 100.0], 100.0)  # a CPU run: its calls are host time alone, nothing waits on a GPU
    for r in cpu:
        r.stats = dataclasses.replace(r.stats, clock="host clock (CPU run)")
    assert not ab.CaseAB("test-1", ["v1", "v2"], [[], []], first=cpu).host_bound


def test_looks_follow_the_design_and_a_spent_budget_takes_the_next_looks_level():
    design = ab.Design.of(30)
    assert design.looks == (5, 8, 12, 18, 27, 30) and design.most == 30
    assert ab.Design.of(5).looks == (5,) and ab.Design.of(5).alphas == (ab.ALPHA,)
    assert ab.Design.of(90).looks == (5, 8, 12, 18, 27, 41, 62, 90)
    assert [design.look(n) for n in (5, 6, 8, 9, 30)] == [0, 1, 1, 2, 5]
    assert ab.Design.from_dict(design.to_dict()).looks == design.looks
    # steady rounds 1% apart: undecided at 6 rounds off the schedule, looked at when the budget is spent
    times = [100.0 * (1 + 0.01 * (-1) ** i) for i in range(7)]
    case = ab.CaseAB("3", ["a", "b"], [[made_result("3", "s", "s", 100.0)] * 7,
                                        [made_result("3", "s", "s", t) for t in times]])
    case.plan(30)
    assert case.look(6, 0.02) == "" and case.level == 1 - ab.ALPHA  # not a look: nothing drawn
    assert case.look(6, 0.02, budget_spent=True).startswith(("time budget spent", "decided"))
    assert case.level == pytest.approx(design.level(8))  # the look it took the place of


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


@pytest.mark.parametrize("model, trials", [("gpu", 1000), ("host-3%", 300)])
def test_the_printed_interval_holds_the_truth_wherever_a_case_stops(model, trials):
    """Simulated A/Bs through ab.CaseAB's own looks (tests/fixtures/ab_sim.py; the full table:
    benchmarks/ab_coverage.py): at true ratios 1.000, 1.015, 1.025 and 1.04 the interval printed
    where the case stopped holds the truth in at least 94% of them (a fixed 95% level looked at every
    round from the fifth held 92% at 5 rounds alone); same is never called where the interval leaves
    ±floor; a change past the floor is called same no more often than the intervals miss; a 3%
    change in a host-bound case (rounds ±3% apart, a pause now and then) is called same almost
    never (within a ±5% band: 63-68% of the time), and slower in most A/Bs."""
    import sys
    sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
    import ab_sim
    for true in (1.0, 1.015, 1.025, 1.04, 1.03):
        got = ab_sim.coverage(true, model, trials, seed=int(true * 1000))
        assert got["covered"] >= 0.94, (true, got)
        assert got["same_outside_band"] == 0
        if true > 1.02:
            assert got["classes"].get("same", 0) <= 0.02 * trials, (true, got)
        if true >= 1.03:
            assert got["classes"].get("slower", 0) >= 0.6 * trials, (true, got)
    # the budget forcing a look off the schedule (after 6 rounds) keeps the coverage
    forced = ab_sim.coverage(1.025, model, trials, seed=9, budget_rounds=6)
    assert forced["covered"] >= 0.94 and forced["rounds"] <= 6


def test_the_geomean_says_its_rule_and_one_noisy_case_sets_its_width():
    """Over the cases: a geomean of 1.027 (1.009-1.046) excludes 1 and leaves ±2%: unsure, never same
    (as it was within the ±5% band of a host-bound case, unsaid). Where one case's noise dominates, its
    interval is that case's own (its t at 2 degrees of freedom, Welch-Satterthwaite's), not a t at
    the cases' degrees of freedom summed (2.01 for 53, a third too narrow and more)."""
    g = ab.Ratio(1.027, 1.009, 1.046, 20, 11)
    assert g.classify(0.02) == "unsure"
    wide = ab.Ratio(1.0, 0.90, 1.0 / 0.90, 5, 2)  # ±10.5% in logs at t 4.30
    narrow = [ab.Ratio(1.0, 0.999, 1.001, 30, 17)] * 3
    m = ab.geomean([wide] + narrow)
    half = (math.log(m.hi) - math.log(m.lo)) / 2
    assert half >= math.log(1 / 0.90) / 4 and half == pytest.approx(math.log(1 / 0.90) / 4, rel=1e-3)
    assert m.dof == pytest.approx(2.0, abs=0.05)  # Welch-Satterthwaite: the noisy case's own
    summed = timing.t975(2 + 3 * 17) / timing.t975(2)
    assert summed < 0.5  # what summing the degrees of freedom gave: under half the width
    alike = ab.geomean([ab.Ratio(1.01, 1.0, 1.02, 10, 5)] * 4)
    assert alike.lo < 1.01 < alike.hi and math.log(alike.hi / alike.lo) == pytest.approx(math.log(1.02 / 1.0) / 2)
