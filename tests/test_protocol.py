"""The evaluator's protocol as data (nvgg/protocol.py, protocols/*.toml) and what nvgg makes of it
(nvgg/leaderboard.py's parent side, the --protocol option): the plan's order, the stop rule and
statistics against hand-made timings, the causes of a departure, the refusals before any work, and
a compare whose rows and worker are faked, end to end to its JSON."""

import json
import math

import pytest

from conftest import made_result, submission_path
from nvgg import leaderboard, protocol as P
from nvgg.errors import NvggError
from nvgg.flags import first_call_flag

EVAL = P.get("evaluator")
STOP = EVAL.stop


def test_the_evaluator_protocol_reads_as_its_script_sets_it():
    assert EVAL.name == "evaluator-2026-01-29" and "c10f284" in EVAL.source
    assert (EVAL.inputs, EVAL.seed_step, EVAL.rtol, EVAL.atol) == (15, 42, 1e-3, 1e-3)
    assert EVAL.clear_bytes == 16000 * 1024 * 1024 * 4 and EVAL.environment == {"CUTE_DSL_DISABLE_FILE_CACHING": "1"}
    bench, board = EVAL.mode("benchmark"), EVAL.mode("leaderboard")
    assert (bench.warmup, bench.warmup_repeats, bench.warmup_budget_ns, bench.repeats, bench.budget_ns) == \
        ("first", 100, 1e8, 100, 1e10)
    assert (board.warmup, board.warmup_repeats, board.warmup_budget_ns, board.repeats, board.budget_ns) == \
        ("each", 50, 5e8, 100, 3e10)
    assert bench.recheck is False and board.recheck == "last" and board.stop_at_failure and not bench.stop_at_failure
    assert bench.timed_inputs == board.timed_inputs == "originals"


def test_the_fresh_clone_proposal_differs_only_where_it_says():
    pr = P.get("evaluator-pr501")
    assert pr.mode("benchmark").timed_inputs == "fresh-clones" and pr.mode("benchmark").keep_clones == 2
    assert pr.mode("leaderboard").timed_inputs == "originals"  # a rechecked loop keeps them
    assert (pr.inputs, pr.seed_step, pr.clear_shape, pr.stop) == (EVAL.inputs, EVAL.seed_step, EVAL.clear_shape, EVAL.stop)


@pytest.mark.parametrize("spec, says", [
    ("nope", "unknown protocol 'nope': choose from evaluator-2026-01-29, evaluator-pr501, evaluator"),
    ("evaluator:fast", "has no mode 'fast': choose benchmark or leaderboard"),
    ("evaluator:", "no mode after ':'"),
    ("  ", "no protocol named"),
])
def test_a_protocol_or_mode_there_is_not_is_refused_by_name(spec, says):
    with pytest.raises(NvggError, match=".*") as err:
        P.parse(spec)
    assert says in str(err.value) and err.value.code == 2


def test_a_malformed_protocol_file_is_one_error(tmp_path, monkeypatch):
    (tmp_path / "broken.toml").write_text('name = "broken"\n[modes.benchmark]\nwarmup = "sometimes"\n')
    monkeypatch.setattr(P, "folder", lambda: tmp_path)
    P.get.cache_clear()
    try:
        with pytest.raises(NvggError, match="protocol file .*broken.toml is malformed"):
            P.get("broken")
    finally:
        P.get.cache_clear()


def test_a_mode_plans_its_warmups_then_each_benchmark_in_the_files_order():
    bench = P.plan(EVAL, EVAL.mode("benchmark"), ["3", "1", "4"])
    assert [(p.case, p.warmup, p.repeats) for p in bench] == [("3", True, 100), ("3", False, 100), ("1", False, 100),
                                                              ("4", False, 100)]
    assert [p.index for p in bench] == [0, 0, 1, 2]
    board = P.plan(EVAL, EVAL.mode("leaderboard"), ["1", "2"])
    assert [(p.case, p.warmup, p.recheck) for p in board] == [("1", True, False), ("2", True, False),
                                                              ("1", False, "last"), ("2", False, "last")]
    assert board[0].budget_ns == 5e8 and board[2].budget_ns == 3e10


def test_the_statistics_are_the_evaluators():
    s = P.stats([1.0, 2.0, 3.0, 4.0])
    assert (s.runs, s.mean, s.best, s.worst) == (4, 2.5, 1.0, 4.0)
    assert s.std == pytest.approx(math.sqrt(5 / 3)) and s.err == pytest.approx(math.sqrt(5 / 3) / 2)
    assert P.stats([7.0]).std == 0.0


def _runs(durations, per_rep_ns, repeats=100, budget_ns=1e10):
    """How many repetitions a pass makes when each takes `per_rep_ns` of wall time."""
    done = []
    for i, d in enumerate(durations[:repeats]):
        done.append(d)
        if P.stops(STOP, done, (i + 1) * per_rep_ns, budget_ns):
            break
    return len(done)


def test_the_stop_rule_waits_for_three_repetitions_and_100_ms():
    steady = [20_000.0] * 100  # err 0: stops as soon as it may look
    assert _runs(steady, 60e6) == 3          # the third repetition, past 100 ms
    assert _runs(steady, 20e6) == 6          # 120 ms after the sixth
    assert _runs(steady, 200e6) == 3         # never before the third


def test_the_stop_rule_ends_at_its_relative_error_or_its_repetitions():
    noisy = [20_000.0 * (1 + 0.05 * (-1) ** i) for i in range(100)]  # 5% either way: err/mean under 0.1% needs n > 2500
    assert _runs(noisy, 20e6) == 100
    # a first repetition of 100x the rest holds the error up: all 100 run
    assert _runs([2_000_000.0] + [20_000.0] * 99, 20e6) == 100
    tight = [20_000.0 * (1 + 0.001 * (-1) ** i) for i in range(100)]
    n = _runs(tight, 20e6)
    s = P.stats(tight[:n])
    assert 6 <= n < 100 and s.err / s.mean < 1e-3
    assert P.stats(tight[:n - 1]).err / s.mean >= 1e-3 or n == 6


def test_the_budget_is_a_calls_mean_times_the_runs_and_the_wall_limit_is_120_s():
    noisy = [20_000.0 * (1 + 0.05 * (-1) ** i) for i in range(100)]
    assert _runs(noisy, 20e6, budget_ns=1e5) == 6       # 20 µs x 6 runs > 100 µs, first looked at past 100 ms
    assert _runs(noisy, 60e9) == 3                      # 180 s after three: the wall limit


def test_a_first_repetition_on_unseen_tensors_is_named_with_what_it_adds():
    durations = [7700.0] + [138.0] * 99
    d = P.explain(durations, 138.0, 1.0, inputs="originals")
    assert d.departs and d.difference_us == pytest.approx(75.62)
    assert "first timed repetition took 7700.0 µs a call (55.8x the rest)" in d.cause
    assert "tensors the check never saw" in d.cause and "adds 75.6 µs to the mean of 100 (138.0 µs without it)" in d.cause


def test_outliers_and_host_work_are_named_where_they_explain_the_mean():
    out = P.explain([100.0] * 90 + [400.0] * 10, 100.0, 1.0, inputs="originals")
    assert out.departs and "10 outlying repetition(s) after the first (up to 400.0 µs" in out.cause and \
        "add 30.0 µs" in out.cause
    hidden = P.explain([50.0] * 100, 90.0, 2.0, inputs="originals", host_us=[900.0] * 100, clear_us=20_000.0)
    assert hidden.departs and hidden.cause.startswith("host work hidden: the host takes 900 µs to issue a repetition's "
                                                      "15 calls and the L2 clear gives it a 20000 µs head start")
    assert "events time the device's work alone" in hidden.cause
    partly = P.explain([1100.0] * 100, 2300.0, 20.0, inputs="originals", host_us=[35_000.0] * 100, clear_us=30_000.0)
    assert partly.departs and "events time only the 5000 µs of it past that" in partly.cause
    shown = P.explain([150.0] * 100, 90.0, 2.0, inputs="originals", host_us=[30_000.0] * 100, clear_us=20_000.0)
    assert shown.departs and shown.cause.startswith("host work not hidden: the host takes 30000 µs")


def test_fresh_clones_pay_on_every_repetition_and_noise_departs_nothing():
    fresh = P.explain([300.0] * 100, 138.0, 1.0, inputs="fresh-clones")
    assert fresh.departs and "every repetition's calls run on fresh clones" in fresh.cause and "300.0 µs" in fresh.cause
    calm = P.explain([138.0 + 0.5 * (-1) ** i for i in range(100)], 138.2, 1.0, inputs="originals")
    assert not calm.departs and calm.cause == ""
    lost = P.explain([138.0] * 50 + [160.0] * 50, 138.0, 0.5, inputs="originals")
    assert lost.departs and lost.cause.startswith("no cause nvgg measured")


def test_the_geometric_mean_is_the_rankings():
    assert P.geomean([213.0, 177.0, 50.0, 46.0]) == pytest.approx((213 * 177 * 50 * 46) ** 0.25)
    assert P.geomean([1.0, None]) is None and P.geomean([]) is None


def test_the_first_call_warning_needs_twice_the_seen_call_and_20_us_more():
    flag = first_call_flag({"first_us": 7700.0, "seen_us": 140.0, "inputs": 14})
    assert flag.kind == "first-call" and "took 7700 µs against 140 µs" in flag.text and "at least 75.6 µs" in flag.text
    assert first_call_flag({"first_us": 270.0, "seen_us": 140.0}) is None     # under twice
    assert first_call_flag({"first_us": 30.0, "seen_us": 12.0}) is None       # twice, but 18 µs more
    assert first_call_flag({}) is None


# ---------------------------------------------------------------- the command, its worker faked

def _passes(row, cases, spec):
    """What a worker returns for a per-tensor submission: a first repetition of 50x the rest."""
    proto, mode = P.parse(spec)
    out = []
    for p in P.plan(proto, mode, [c.id for c in cases]):
        durations = [500.0] + [10.0] * 99
        s = P.stats(durations)
        out.append({"case": p.case, "index": p.index, "warmup": p.warmup, "status": "ok", "message": "", "runs": s.runs,
                    "mean_us": s.mean, "std_us": s.std, "err_us": s.err, "best_us": s.best, "worst_us": s.worst,
                    "first_us": 500.0, "rest_mean_us": 10.0, "durations_us": durations, "host_us": [60.0] * 100,
                    "clear_us": [20_000.0] * 100, "inputs": p.inputs, "calls": 15})
    return out


@pytest.fixture
def fake_worker(monkeypatch):
    calls = []

    def run_once(fn, *, timeout_s=None, gpu=None, env=None, **kwargs):
        calls.append(dict(kwargs, env=env, timeout_s=timeout_s, fn=fn))
        return _passes(**kwargs)
    monkeypatch.setattr(leaderboard.procs, "run_once", run_once)
    monkeypatch.setattr(leaderboard, "check_memory", lambda *a: None)
    return calls


def _answer(row):
    if row.submission:
        return made_result(row.case.id, "submission", "submission", 10.0, source=row.label)
    return made_result(row.case.id, row.strategy, row.backend, 10.0)


def test_compare_sets_the_prediction_beside_the_steady_state(cli, fake_gpu, fake_rows, fake_worker, tmp_path):
    fake_rows.answer = _answer
    out = cli("compare", "--case", "1,2", "--submission", submission_path("honest"), "--protocol", "evaluator",
              "--json", str(tmp_path / "r.json"))
    assert out.exit_code == 0, out.output
    # one worker a row (the submission, and each of our strategies), every case in it, in order
    assert len(fake_worker) == 5 and all([c.id for c in w["cases"]] == ["1", "2"] for w in fake_worker)
    assert len([w for w in fake_worker if w["row"].submission]) == 1
    assert fake_worker[0]["env"] == {"CUTE_DSL_DISABLE_FILE_CACHING": "1"}
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["protocol"]["name"] == "evaluator-2026-01-29" and doc["protocol"]["order"] == ["1", "2"]
    rows = [r for r in doc["results"] if r["strategy"] == "submission"]
    p = rows[0]["protocol"]
    assert p["mean_us"] == pytest.approx(14.9) and p["steady_us"] == pytest.approx(10.0) and p["departs"]
    assert "first timed repetition took 500.0 µs" in p["cause"] and p["warmups"][0]["case"] == "1"
    assert doc["protocol_geomean_us"]["submission[honest.py]"] == pytest.approx(14.9)
    assert "leaderboard prediction: protocol evaluator-2026-01-29" in out.stdout
    assert "geomean of the means (the ranking) submission[honest.py]: 14.9 µs predicted, 10.0 µs steady" in out.stdout
    from nvgg.result import SCHEMA
    import jsonschema
    jsonschema.validate(doc, json.loads(SCHEMA.read_text()))


def test_a_failed_steady_row_is_not_predicted_and_a_failed_pass_fails_the_command(cli, fake_gpu, fake_rows, fake_worker,
                                                                                 monkeypatch):
    fake_rows.answer = lambda row: made_result(row.case.id, "submission", "submission", None, status="wrong",
                                               source=row.label)
    out = cli("compare", "--case", "1", "--submission", submission_path("honest"), "--protocol", "evaluator")
    assert not fake_worker and out.exit_code == 1
    fake_rows.answer = lambda row: made_result(row.case.id, "submission", "submission", 10.0, source=row.label)
    monkeypatch.setattr(leaderboard.procs, "run_once", lambda fn, **kw: [
        {"case": "1", "warmup": False, "status": "fail", "message": "checked on clones: input 3: mismatch"}])
    out = cli("compare", "--case", "1", "--submission", submission_path("honest"), "--protocol", "evaluator:leaderboard")
    assert out.exit_code == 1 and "under --protocol evaluator:leaderboard: checked on clones: input 3" in out.stderr


@pytest.mark.parametrize("argv, code, says", [
    (["run", "--case", "3", "--protocol", "nope"], 2, "unknown protocol 'nope'"),
    (["compare", "--protocol", "evaluator-pr501:fast"], 2, "has no mode 'fast'"),
    (["run", "--case", "3", "--protocol", "evaluator", "--quick"], 2, "--quick times one window"),
    (["compare", "--protocol", "evaluator", "--timer", "per-call"], 2, "--timer per-call contradicts it"),
    (["compare", "--protocol", "evaluator", "--timer", "cupti"], 2, "--timer cupti contradicts it"),
    (["compare", "--protocol", "evaluator", "--gpus", "0"], 2, "drop --gpus"),
    (["compare", "--protocol", "evaluator"], 3, "no GPU is visible"),
    (["ab", "--submission", "a.py", "--submission", "b.py", "--protocol", "evaluator:warm"], 2, "has no mode 'warm'"),
    # the other inputs are checked before the GPU is asked for
    (["compare", "--protocol", "evaluator", "--submission", "/no/such/submission.py"], 2, "does not exist"),
    (["run", "--case", "3", "--protocol", "evaluator", "--submission", "/no/such/submission.py"], 2, "does not exist"),
    (["compare", "--strategy", "none,persistent"], 2, "none stands alone"),
])
def test_protocol_refusals_are_one_line_before_any_work(cli, fake_rows, argv, code, says):
    out = cli(*argv)
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert out.exit_code == code and len(lines) == 1 and says in lines[0], out.output
    assert not fake_rows.seen


def test_a_protocol_with_a_config_map_is_refused(cli, fake_gpu, fake_rows, tmp_path):
    path = tmp_path / "map.json"
    path.write_text(json.dumps({"format": 1, "kind": "config", "target": "tunable.py", "arch": "",
                                "space": {"work": [2, 1], "split": [1, 2]}, "cases": {"1": {"work": 2, "split": 1}}}))
    out = cli("compare", "--case", "1", "--submission", submission_path("tunable"), "--protocol", "evaluator",
              "--config", str(path))
    assert out.exit_code == 2 and "--config sets a point a case: drop --config" in out.stderr and not fake_rows.seen


def test_the_clear_that_cannot_fit_is_refused_before_any_work(cli, fake_gpu, fake_rows, monkeypatch):
    from nvgg import inputs
    monkeypatch.setattr(inputs, "memory_free", lambda device: 40 * 10**9)
    out = cli("compare", "--case", "1", "--submission", submission_path("honest"), "--protocol", "evaluator")
    assert out.exit_code == 2 and "its L2 clear alone allocates 62.5 GiB" in out.stderr and not fake_rows.seen


def test_ab_predicts_each_version_beside_its_rounds(cli, fake_gpu, fake_rows, fake_worker, tmp_path):
    fake_rows.answer = _answer
    other = tmp_path / "v2" / "honest.py"
    other.parent.mkdir()
    other.write_text(open(submission_path("honest")).read())
    out = cli("ab", "--case", "1,2", "--submission", submission_path("honest"), "--submission", str(other),
              "--protocol", "evaluator", "--json", str(tmp_path / "ab.json"))
    assert out.exit_code == 0, out.output
    assert len(fake_worker) == 2 and all([c.id for c in w["cases"]] == ["1", "2"] for w in fake_worker)
    doc = json.loads((tmp_path / "ab.json").read_text())
    assert doc["protocol"]["name"] == "evaluator-2026-01-29" and len(doc["protocol_rows"]) == 4
    assert {r["case"] for r in doc["protocol_rows"]} == {"1", "2"} and all(r["departs"] for r in doc["protocol_rows"])
    assert len(doc["protocol_geomean_us"]) == 2
    assert "predicted geomean" in out.stdout and "/ submission[" in out.stdout and ": 1.000 (one run" in out.stdout
    from nvgg.result import SCHEMA
    import jsonschema
    jsonschema.validate(doc, json.loads(SCHEMA.read_text()))


def test_compare_strategy_none_runs_the_submissions_alone(cli, fake_gpu, fake_rows):
    fake_rows.answer = _answer
    out = cli("compare", "--case", "1,2", "--strategy", "none", "--submission", submission_path("honest"))
    assert out.exit_code == 0 and [r.submission is not None for r in fake_rows.seen] == [True, True], out.output
    out = cli("compare", "--case", "1", "--strategy", "none")
    assert out.exit_code == 2 and "--strategy none leaves nothing to compare" in out.stderr


def test_the_first_repetition_is_named_beside_a_larger_cause_and_the_edge_is_said():
    """A per-tensor torch submission: host-bound in the steady state, its host work hidden by the
    clear, and its first repetition still adds 17 µs: both named, the larger first."""
    durations = [1855.6] + [167.2] * 99
    d = P.explain(durations, 575.0, 40.0, inputs="originals", host_us=[6739.0] * 100, clear_us=37_000.0)
    assert d.departs and d.cause.index("host work hidden") < d.cause.index("the first timed repetition took 1855.6")
    assert "adds 16.9 µs to the mean of 100" in d.cause and d.caveat == ""
    edge = P.explain([720.0] * 100, 1867.0, 30.0, inputs="originals", host_us=[37_552.0] * 100, clear_us=36_962.0)
    assert edge.caveat.startswith("at the edge: the host's 37552 µs to issue a repetition's calls is within 25% of "
                                  "the clear's 36962 µs head start") and "up to 626 µs" in edge.caveat


def test_the_first_call_warning_shows_in_the_rows_check():
    from nvgg.flags import flags_of
    from nvgg.report.results import results_table
    r = made_result("4", "submission", "submission", 18.7, source="per_tensor.py",
                    first_sight={"first_us": 4047.2, "seen_us": 742.4, "inputs": 14})
    r.flags = flags_of(r)
    assert [f.kind for f in r.flags] == ["first-call"] and not r.suspect
    table = results_table([r])
    assert "a first call on new tensors took 4047 µs against 742 µs on tensors seen before" in table
