"""`nvgg tune` on a submission's declared space (nvgg/tune.py, commands/tune.py): the points, the
TUNE a file declares and the CONFIG it is given, the finalists and the winner (rows faked), and a
sweep for real on the CPU."""

import json
import random

import jsonschema
import pytest
from conftest import made_result, submission_path

from nvgg import space, tune
from nvgg.backends import submission as sub
from nvgg.errors import NvggError
from nvgg.result import SCHEMA


def test_the_commands_finalists_are_the_sweeps_own():
    """--finalists' default is written as a number in the command (read before nvgg.tune and torch
    are imported: nvgg/commands/__init__.py); it is the sweep's own."""
    from nvgg.commands import tune as tune_command
    assert tune_command.FINALISTS == tune.FINALISTS


def test_points_are_every_combination_the_default_first():
    assert tune.points_of({"work": [2, 1], "split": [1, 2, 4]})[:3] == [
        (("work", 2), ("split", 1)), (("work", 2), ("split", 2)), (("work", 2), ("split", 4))]
    assert len(tune.points_of({"work": [2, 1], "split": [1, 2, 4]})) == 6
    assert tune.name_of((("work", 2), ("split", 1))) == "work=2 split=1"


@pytest.mark.parametrize("source, says", [
    ("", "declares no TUNE to sweep: add a module-level TUNE dict"),
    ("TUNE = {}", "TUNE must be a non-empty dict of knob -> list of values"),
    ("TUNE = [1, 2]", "TUNE must be a non-empty dict of knob -> list of values"),
    ("TUNE = {'stages': 3}", "TUNE['stages'] must be a non-empty list of values"),
    ("TUNE = {'stages': []}", "TUNE['stages'] must be a non-empty list of values"),
    ("TUNE = {'stages': [3, [4]]}", "TUNE['stages'] holds [4]: values are numbers, strings or booleans"),
    ("TUNE = {'stages': [3, 3]}", "TUNE['stages'] names a value twice"),
    ("TUNE = {'two words': [1]}", "TUNE's knob 'two words' must be a name like 'stages'"),
])
def test_a_space_that_cannot_be_swept_is_refused_in_one_line(tmp_path, source, says):
    path = tmp_path / f"s{abs(hash(source))}.py"
    path.write_text(f"{source}\ndef custom_kernel(data):\n    return None\n")
    with pytest.raises(NvggError, match=".*") as info:
        sub.declared_space(str(path))
    assert says in str(info.value) and "\n" not in str(info.value)


def test_the_point_is_the_files_config_for_its_row_and_taken_back_after(tmp_path):
    path = tmp_path / "own.py"
    path.write_text("TUNE = {'work': [2, 1]}\nCONFIG = {'work': 2}\ndef custom_kernel(data):\n    return None\n")
    module = sub.load(path)
    sub.give_point(module, (("work", 1),))
    assert module.CONFIG == {"work": 1}
    sub.give_point(module, ())
    assert module.CONFIG == {"work": 2}  # the file's own again
    bare = tmp_path / "bare.py"
    bare.write_text("TUNE = {'work': [2, 1]}\ndef custom_kernel(data):\n    return None\n")
    module = sub.load(bare)
    sub.give_point(module, (("work", 1),))
    sub.give_point(module, ())
    assert not hasattr(module, "CONFIG")  # it set none of its own
    assert sub.declared_space(str(path)) == {"work": [2, 1]}


def _answers(times: dict, jitter: float = 0.0):
    rng = random.Random(1)

    def answer(row):
        t = times[tuple(row.point)] * (1 + rng.gauss(0, jitter))
        return made_result(row.case.id, "submission", "submission", t, source=row.source, point=dict(row.point))
    return answer


def test_finalists_are_measured_again_and_the_winner_named_with_what_is_not_told_apart(cli, fake_gpu, fake_rows,
                                                                                       in_process, tmp_path):
    fast, close, other, default = ((("work", 1), ("split", 2)), (("work", 1), ("split", 1)),
                                   (("work", 2), ("split", 2)), (("work", 2), ("split", 1)))
    fake_rows.answer = _answers({default: 130.0, other: 129.0, close: 100.5, fast: 100.0})
    doc, cfg = tmp_path / "t.json", tmp_path / "c.json"
    out = cli("tune", "--submission", submission_path("tunable"), "--case", "3", "--json", str(doc), "--out", str(cfg))
    assert out.exit_code == 0, out.output
    first = [tuple(r.point) for r in fake_rows.seen[:4]]
    assert first == [default, other, close, fast]  # every point once, the default first
    assert not any(r.energy or r.span for r in fake_rows.seen)  # a sweep's rows skip the energy window and the span
    rounds = fake_rows.seen[4:]
    assert {tuple(r.point) for r in rounds} == {fast, default, close} and len(rounds) >= 3 * 5  # finalists only
    raw = json.loads(doc.read_text())
    jsonschema.validate(raw, json.loads(SCHEMA.read_text()))
    (case,) = raw["cases"]
    assert case["winner"] == {"work": 1, "split": 2} and case["not_apart"] == [{"work": 1, "split": 1}]
    assert case["gain"]["class"] == "slower" and case["gain"]["ratio"] == pytest.approx(1.3)
    assert [f["point"] for f in case["finalists"]] == [{"work": 1, "split": 2}, {"work": 2, "split": 1},
                                                       {"work": 1, "split": 1}]
    config = json.loads(cfg.read_text())
    jsonschema.validate(config, json.loads(SCHEMA.read_text()))
    assert config["cases"] == {"3": {"work": 1, "split": 2}} and config["space"] == {"work": [2, 1], "split": [1, 2]}
    assert (config["target"], config["arch"], raw["target"], raw["arch"]) == ("tunable.py", "", "tunable.py", "")
    out = cli("tune", "--submission", submission_path("tunable"), "--case", "3")
    assert ("case 3: winner work=1 split=2 (100.0 µs); not told apart from it: work=1 split=1; the default is 4 of 4 in "
            "the first pass, 1.300x (1.300-1.300) the winner's time (slower)") in out.stdout


def test_a_host_loaded_past_its_cores_during_the_finalists_rounds_is_said_in_the_cases_line(cli, fake_gpu, fake_rows,
                                                                                            in_process, monkeypatch):
    from nvgg import timing
    points = [(("work", w), ("split", s)) for w in (2, 1) for s in (1, 2)]
    fake_rows.answer = _answers(dict(zip(points, (130.0, 129.0, 100.5, 100.0))))
    for load, said in (((9.0, 4), True), ((3.9, 4), False)):
        monkeypatch.setattr(timing, "host_load", lambda: load)
        out = cli("tune", "--submission", submission_path("tunable"), "--case", "3")
        assert out.exit_code == 0, out.output
        (line,) = [x for x in out.stdout.splitlines() if x.startswith("case 3: winner")]
        assert line.endswith("; the host's load average reached 9 on 4 cores during the rounds: a point slowed throughout "
                             "by that load is a bias their intervals do not show") == said, line


def test_points_near_the_fastest_left_out_of_the_rounds_are_named(cli, fake_gpu, fake_rows, in_process, tmp_path):
    """More points within the floor than the rounds take: the ones not measured again are said,
    not silently dropped from the winner's company; --finalists takes them in."""
    fast, close, other, default = ((("work", 1), ("split", 2)), (("work", 1), ("split", 1)),
                                   (("work", 2), ("split", 2)), (("work", 2), ("split", 1)))
    fake_rows.answer = _answers({default: 130.0, other: 129.0, close: 101.5, fast: 100.0})
    doc = tmp_path / "t.json"
    out = cli("tune", "--submission", submission_path("tunable"), "--case", "3", "--json", str(doc), "--finalists", "2")
    assert out.exit_code == 0, out.output
    (case,) = json.loads(doc.read_text())["cases"]
    assert [f["point"] for f in case["finalists"]] == [{"work": 1, "split": 2}, {"work": 2, "split": 1}]
    assert case["near"] == [{"work": 1, "split": 1}]  # 1.5% off, inside the 2% floor; 'other' at 29% is not near
    assert "; 1 more within 2.0% of the fastest in the first pass, not measured again" in out.stdout
    assert "--finalists N (now 2) takes more into the rounds" in out.stderr
    assert {tuple(r.point) for r in fake_rows.seen[4:]} == {fast, default}  # the rounds: the two finalists only
    fake_rows.seen.clear()
    out = cli("tune", "--submission", submission_path("tunable"), "--case", "3", "--json", str(doc), "--finalists", "3")
    assert out.exit_code == 0, out.output
    (case,) = json.loads(doc.read_text())["cases"]
    assert case["near"] == [] and {tuple(r.point) for r in fake_rows.seen[4:]} == {fast, default, close}
    assert cli("tune", "--submission", submission_path("tunable"), "--case", "3", "--finalists", "1").exit_code == 2


def _then_in_rounds(times: dict, point: tuple, in_rounds):
    """Answers: each point its time in `times`; past the first pass (a row a point), `point`'s
    rows answer `in_rounds(n)`, n the count of rows asked for so far."""
    seen = []

    def answer(row):
        seen.append(row)
        t = times[tuple(row.point)]
        if len(seen) > len(times) and tuple(row.point) == point:
            t = in_rounds(len(seen))
        return made_result(row.case.id, "submission", "submission", t, source=row.source, point=dict(row.point))
    return answer


def _tuned_case_3(cli) -> dict:
    """`nvgg tune` of the tunable fixture on case 3, its JSON."""
    out = cli("tune", "--submission", submission_path("tunable"), "--case", "3", "--json", "-")
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)


def test_the_rounds_overturn_a_first_pass_that_was_luck(cli, fake_gpu, fake_rows, in_process):
    lucky, truly, default = (("work", 1), ("split", 1)), (("work", 1), ("split", 2)), (("work", 2), ("split", 1))
    times = {default: 200.0, (("work", 2), ("split", 2)): 210.0, lucky: 100.0, truly: 102.0}
    fake_rows.answer = _then_in_rounds(times, lucky, lambda n: 110.0)  # in the rounds it shows its real time
    (case,) = _tuned_case_3(cli)["cases"]
    assert case["winner"] == {"work": 1, "split": 2} and case["not_apart"] == []


def test_the_rounds_fastest_wins_even_where_they_cannot_tell_it_apart(cli, fake_gpu, fake_rows, in_process):
    """The first pass put A ahead; in the rounds B is 4% faster, with an interval that reaches into
    the floor ('unsure'): B wins, A is named as not told apart, and no finalist reads below 1x."""
    a, b, default = (("work", 1), ("split", 1)), (("work", 1), ("split", 2)), (("work", 2), ("split", 1))
    times = {default: 200.0, (("work", 2), ("split", 2)): 210.0, a: 100.0, b: 101.0}
    # in the rounds: 96, 100, 96, 100, ... against A's 100
    fake_rows.answer = _then_in_rounds(times, b, lambda n: 96.0 if n % 2 else 100.0)
    doc = _tuned_case_3(cli)
    (case,) = doc["cases"]
    assert case["winner"] == {"work": 1, "split": 2} and case["not_apart"] == [{"work": 1, "split": 1}], case
    ct = tune.kept_cases(doc)["3"]
    assert all(ct.against_winner(p).ratio >= 1.0 for p in ct.final_points if p != ct.winner)


def test_tune_tells_what_it_needs_before_any_row(cli, fake_gpu, fake_rows, in_process, tmp_path):
    out = cli("tune", "--case", "3")
    assert out.exit_code == 2 and "pass --submission FILE (its declared TUNE) or --backend cute" in out.stderr
    out = cli("tune", "--case", "3", "--backend", "torch")
    assert out.exit_code == 2 and "only the cute backend's kernels have knobs to sweep" in out.stderr
    out = cli("tune", "--case", "3", "--submission", submission_path("tunable"), "--submission", submission_path("honest"))
    assert out.exit_code == 2 and "sweeps one submission" in out.stderr
    out = cli("tune", "--case", "3", "--submission", submission_path("honest"))
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert out.exit_code == 2 and len(lines) == 1 and "declares no TUNE to sweep" in lines[0], out.output
    (tmp_path / "file").write_text("")
    out = cli("tune", "--case", "3", "--submission", submission_path("tunable"), "--out", str(tmp_path / "file" / "c.json"))
    assert out.exit_code == 2 and "--out" in out.stderr and "cannot be written" in out.stderr, out.output
    out = cli("tune", "--case", "3", "--submission", submission_path("tunable"), "--out", str(tmp_path / "same.json"),
              "--json", str(tmp_path / "same.json"))
    assert out.exit_code == 2 and "--json and --out name the same file" in out.stderr
    assert fake_rows.seen == []


def test_a_sweep_for_real_on_the_cpu(cli, tmp_path):
    """Every point checked and timed in the file's own worker with its CONFIG, the finalists'
    rounds run, the files written. (Which point wins on a shared CPU is noise: the choice itself
    is tested above with its times given.)"""
    doc, cfg = tmp_path / "t.json", tmp_path / "c.json"
    out = cli("tune", "--submission", submission_path("tunable"), "--case", "test-1", "--rounds", "5",
              "--json", str(doc), "--out", str(cfg))
    assert out.exit_code == 0, out.output
    raw = json.loads(doc.read_text())
    jsonschema.validate(raw, json.loads(SCHEMA.read_text()))
    (case,) = raw["cases"]
    assert [p["point"] for p in case["points"]] == [{"work": 2, "split": 1}, {"work": 2, "split": 2},
                                                    {"work": 1, "split": 1}, {"work": 1, "split": 2}]
    assert all(p["status"] == "ok" and p["stats"]["mean_us"] > 0 and p["checked_inputs"] > 0 for p in case["points"])
    assert case["winner"] in [p["point"] for p in case["points"]]
    assert all(len(f["rounds"]) >= 5 and all(r["point"] == f["point"] for r in f["rounds"]) for f in case["finalists"])
    assert json.loads(cfg.read_text())["cases"] == {"test-1": case["winner"]}


def test_the_config_map_is_what_run_compare_and_ab_give_the_submission(cli, fake_gpu, fake_rows, tmp_path):
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"format": 1, "kind": "config", "target": "tunable.py", "arch": "",
                               "space": {"work": [2, 1], "split": [1, 2]},
                               "cases": {"3": {"work": 1, "split": 2}, "4": {"work": 2, "split": 1}}}))
    assert cli("run", "--case", "3", "--submission", submission_path("tunable"), "--config", str(cfg)).exit_code == 0
    assert cli("compare", "--case", "3,4", "--submission", submission_path("tunable"), "--config", str(cfg),
               "--strategy", "persistent").exit_code == 0
    assert [(r.case.id, r.point) for r in fake_rows.seen if r.submission] == [
        ("3", (("work", 1), ("split", 2))), ("3", (("work", 1), ("split", 2))), ("4", (("work", 2), ("split", 1)))]
    assert all(r.point == () for r in fake_rows.seen if not r.submission)  # our kernels' rows take no point
    out = cli("run", "--case", "1", "--submission", submission_path("tunable"), "--config", str(cfg))
    assert out.exit_code == 2 and "has no point for case 1 (it holds 3, 4): tune those cases" in out.stderr
    out = cli("run", "--case", "3", "--config", str(cfg))
    assert out.exit_code == 2 and "--config holds a submission's points (its CONFIG): add --submission" in out.stderr
    other = tmp_path / "r.json"
    other.write_text(json.dumps({"format": 1, "kind": "results", "results": []}))
    out = cli("ab", "--case", "3", "--submission", submission_path("tunable"), "--submission", submission_path("honest"),
              "--config", str(other))
    assert out.exit_code == 2 and "is an nvgg results file, not a config map" in out.stderr
    out = cli("run", "--case", "3", "--submission", submission_path("tunable"), "--config", str(tmp_path / "none.json"))
    assert out.exit_code == 2 and "config map" in out.stderr and "does not exist" in out.stderr


def test_a_sweep_cut_short_resumes_without_running_again_what_it_measured(cli, fake_gpu, fake_rows, in_process,
                                                                          tmp_path):
    fake_rows.answer = _answers({(("work", 2), ("split", 1)): 130.0, (("work", 2), ("split", 2)): 129.0,
                                 (("work", 1), ("split", 1)): 100.5, (("work", 1), ("split", 2)): 100.0})
    doc = tmp_path / "t.json"
    assert cli("tune", "--submission", submission_path("tunable"), "--case", "3,4", "--json", str(doc)).exit_code == 0
    whole = json.loads(doc.read_text())
    cut = json.loads(doc.read_text())  # as a sweep stopped in case 4's first pass leaves it
    cut["cases"][1].update(winner=None, not_apart=[], gain=None, finalists=[], points=cut["cases"][1]["points"][:2])
    doc.write_text(json.dumps(cut))
    fake_rows.seen.clear()
    out = cli("tune", "--submission", submission_path("tunable"), "--case", "3,4", "--json", str(doc), "--resume")
    assert out.exit_code == 0, out.output
    first_pass = [(r.case.id, r.point) for r in fake_rows.seen[:2]]
    assert first_pass == [("4", (("work", 1), ("split", 1))), ("4", (("work", 1), ("split", 2)))]
    assert {r.case.id for r in fake_rows.seen} == {"4"}  # case 3 kept whole
    again = json.loads(doc.read_text())
    jsonschema.validate(again, json.loads(SCHEMA.read_text()))
    assert again["cases"][0] == whole["cases"][0]  # kept as it was measured, its rounds too
    assert [c["winner"] for c in again["cases"]] == [{"work": 1, "split": 2}] * 2
    assert len(again["cases"][1]["points"]) == 4


def test_resume_refuses_what_it_cannot_go_on_from(cli, fake_gpu, fake_rows, in_process, tmp_path):
    doc = tmp_path / "t.json"
    out = cli("tune", "--submission", submission_path("tunable"), "--case", "3", "--resume")
    assert out.exit_code == 2 and "name that file with --json" in out.stderr
    doc.write_text(json.dumps({"format": 1, "kind": "config", "target": "x", "arch": "", "space": {}, "cases": {}}))
    out = cli("tune", "--submission", submission_path("tunable"), "--case", "3", "--json", str(doc), "--resume")
    assert out.exit_code == 2 and "is an nvgg config file" in out.stderr
    doc.write_text(json.dumps({"format": 1, "kind": "tune", "target": "tunable.py", "revision": "", "arch": "",
                               "floor": 0.02, "space": {"work": [1]}, "cases": []}))
    out = cli("tune", "--submission", submission_path("tunable"), "--case", "3", "--json", str(doc), "--resume")
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert out.exit_code == 2 and len(lines) == 1 and "start a new sweep" in lines[0], out.output
    assert fake_rows.seen == []


def test_our_kernels_space_swept_its_refusals_listed_and_its_map_given_to_compare(cli, fake_gpu, fake_rows, in_process,
                                                                                 tmp_path, monkeypatch):
    """On a (fake) sm_100a GPU: every point the family accepts run as a persistent cute row with its
    point, the model's choice the default; the map of the winners is what compare's rows build."""
    import torch

    from nvgg.backends import base
    monkeypatch.setattr(base, "_capability", lambda index: (10, 0))
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d: type("P", (), {"multi_processor_count": 148}))

    def answer(row):  # the 128-row tiles fastest, one CTA or a pair alike
        t = (100.0 if row.point and dict(row.point)["mma_n"] == 128 else 120.0)
        return made_result(row.case.id, "persistent", "cute", t, point=dict(row.point))

    fake_rows.answer = answer
    doc, cfg = tmp_path / "t.json", tmp_path / "c.json"
    out = cli("tune", "--backend", "cute", "--case", "4", "--json", str(doc), "--out", str(cfg))
    assert out.exit_code == 0, out.output
    first = fake_rows.seen[:8]
    assert all((r.strategy, r.backend, r.tensormaps) == ("persistent", "cute", None) for r in fake_rows.seen)
    # every point once, the default (the B200 model's choice) first: known even where a budget cuts the pass
    assert len({r.point for r in first}) == 8
    assert dict(first[0].point) == {"mma_n": 256, "cta_group": 2, "tensormaps": "host"}
    raw = json.loads(doc.read_text())
    jsonschema.validate(raw, json.loads(SCHEMA.read_text()))
    (case,) = raw["cases"]
    assert (raw["target"], raw["arch"]) == ("persistent/cute", "sm_100a") and case["refused"] == []
    assert case["default"] == {"mma_n": 256, "cta_group": 2, "tensormaps": "host"}  # the B200 model's choice
    assert case["winner"]["mma_n"] == 128 and case["gain"]["ratio"] == pytest.approx(1.2)
    fake_rows.seen.clear()
    out = cli("compare", "--case", "4", "--strategy", "persistent,graph", "--backend", "cute", "--config", str(cfg))
    assert out.exit_code == 0, out.output
    assert [(r.strategy, r.point) for r in fake_rows.seen] == [
        ("persistent", tuple(case["winner"].items())), ("graph", ())]
    out = cli("compare", "--case", "4", "--config", str(cfg), "--tensormaps", "host", "--strategy", "persistent")
    assert out.exit_code == 2 and "drop --tensormaps" in out.stderr
    # a map of our kernel that no row takes: refused, not silently measuring the untuned choice
    mine = tmp_path / "mine.py"
    mine.write_text("def custom_kernel(data):\n    return None\n")
    for args in (["compare", "--strategy", "graph"], ["run", "--submission", str(mine)],
                 ["profile", "--cupti", "--submission", str(mine)]):
        out = cli(*args, "--case", "4", "--config", str(cfg))
        lines = [line for line in out.stderr.splitlines() if line.strip()]
        assert out.exit_code == 2 and len(lines) == 1 and "no row here runs that kernel" in lines[0], (args, out.output)
    assert len(fake_rows.seen) == 2  # the compare above, nothing since
    out = cli("compare", "--case", "4", "--config", str(cfg), "--submission", str(mine))  # beside our kernel's rows
    assert out.exit_code == 0 and any(r.point for r in fake_rows.seen[2:]), out.output
    del fake_rows.seen[2:]
    bad = json.loads(cfg.read_text())
    bad["cases"]["4"] = {"mma_n": 128}
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    out = cli("run", "--case", "4", "--config", str(tmp_path / "bad.json"))
    assert out.exit_code == 2 and "sets mma_n, cta_group, tensormaps; got mma_n" in out.stderr
    bad["cases"]["4"] = {"mma_n": 96, "cta_group": 1, "tensormaps": "host"}
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    out = cli("run", "--case", "4", "--config", str(tmp_path / "bad.json"))
    assert out.exit_code == 2 and "case 4's point is one the sm_100a kernel refuses: mma_n must be one of" in out.stderr
    monkeypatch.setattr(base, "_capability", lambda index: (9, 0))
    out = cli("run", "--case", "4", "--config", str(cfg))
    assert out.exit_code == 2 and "holds sm_100a builds of our kernel and this machine has sm_90a" in out.stderr
    assert fake_rows.seen[2:] == []  # none of the refused ones ran a row


def test_our_kernels_point_is_built_before_its_row_and_a_hang_is_told_by_the_cases_rows():
    """KernelTarget.prepare: the point built in its row's worker first (a compile never counts as
    a hang), then the row's limit: HANG_FACTOR x the case's median row once 3 rows are in, never
    under HANG_FLOOR_S; none (the pool's) before, or where the build failed (the row says why)."""
    from nvgg import cases, procs

    class Pool:
        def __init__(self, fails=False):
            self.calls, self.fails = [], fails

        def call(self, key, fn, **kwargs):
            self.calls.append((key, fn, kwargs))
            if self.fails:
                raise procs.ChildError("ValueError: no")

    target, case = tune.KernelTarget("sm_90a", 132, "cuda"), cases.get("4")
    point = target.points(case, target.space(None))[1]
    pool = Pool()
    assert target.prepare(pool, case, point, [0.3, 0.3]) is None
    assert target.prepare(pool, case, point, [0.2, 0.3, 0.4]) == tune.HANG_FLOOR_S
    assert target.prepare(pool, case, point, [1.0, 2.0, 2.0, 9.0]) == pytest.approx(2.0 * tune.HANG_FACTOR)
    key, fn, kwargs = pool.calls[0]
    assert (key, fn, kwargs["point"], kwargs["case"].id) == ("backend:cute", space.build, dict(point), "4")
    assert target.prepare(Pool(fails=True), case, point, [1.0] * 5) is None


def test_a_sweep_stopped_from_outside_keeps_every_point_measured_though_the_file_is_written_seldom(cli, fake_gpu,
                                                                                                fake_rows, in_process,
                                                                                                tmp_path):
    """The sweep's file is rewritten at most every WRITE_EVERY_S for a point; a Ctrl-C (or
    SIGTERM) between two writes still leaves every point measured in it."""
    answer = _answers({(("work", 2), ("split", 1)): 130.0, (("work", 2), ("split", 2)): 129.0,
                       (("work", 1), ("split", 1)): 100.5, (("work", 1), ("split", 2)): 100.0})

    def stop_at_the_third(row):
        if len(fake_rows.seen) == 3:
            raise KeyboardInterrupt
        return answer(row)
    fake_rows.answer = stop_at_the_third
    doc = tmp_path / "t.json"
    out = cli("tune", "--submission", submission_path("tunable"), "--case", "3", "--json", str(doc))
    assert out.exit_code == 130
    (case,) = json.loads(doc.read_text())["cases"]
    assert [p["point"] for p in case["points"]] == [{"work": 2, "split": 1}, {"work": 2, "split": 2}]
    assert case["winner"] is None


def test_each_cards_fastest_point_is_a_finalist_when_the_first_pass_was_spread_over_cards():
    """Card B runs 1.5% faster than card A: ranked together, B's points fill the finalists and A's
    fastest, the best point on a card of its own, would be left out; it goes in first."""
    from nvgg.tune import CaseTune, finalists
    points = [(("p", i),) for i in range(8)]
    times = {0: ("A", 100.0), 1: ("A", 101.0), 2: ("B", 98.6), 3: ("B", 98.7), 4: ("B", 98.8), 5: ("B", 98.9),
             6: ("B", 99.0), 7: ("A", 120.0)}
    ct = CaseTune(case="3", points=points, default=points[7])
    for i, (card, t) in times.items():
        r = made_result("3", "submission", "submission", t)
        r.env = dict(r.env, gpu_uuid=f"GPU-{card}")
        ct.first[points[i]] = r
    picked = finalists(ct, most=4)
    assert picked[0] == points[2] and points[0] in picked and len(picked) == 4
    assert picked == [points[2], points[7], points[0], points[3]]  # the fastest, the default, A's fastest, the next
    for r in ct.first.values():
        r.env = dict(r.env, gpu_uuid="GPU-A")  # one card: the fastest in order, as before
    assert finalists(ct, most=4) == [points[2], points[7], points[3], points[4]]


def test_a_finalist_that_fails_or_is_flagged_in_the_rounds_is_out_and_never_the_winner(cli, fake_gpu, fake_rows,
                                                                                        in_process, tmp_path):
    """The point that looks fastest is the one most likely to cheat: 40% faster in the first pass,
    flagged `escaped` in its first round. It is out, named with its reason in the table and the JSON,
    the rounds begin again without it, and the map never gets it; a round that finds another
    finalist wrong puts that one out too. A case whose finalists all go out has no winner: exit 1."""
    from nvgg.result import Flag
    cheat, close, other, default = ((("work", 1), ("split", 2)), (("work", 1), ("split", 1)),
                                    (("work", 2), ("split", 2)), (("work", 2), ("split", 1)))
    times = {default: 101.0, other: 130.0, close: 100.0, cheat: 60.0}
    calls: dict = {}

    def answer(row, wrong=None):  # wrong: point -> its first call found wrong
        p = tuple(row.point)
        calls[p] = calls.get(p, 0) + 1
        flags = [Flag("escaped", "work ran on after the end event")] if p == cheat and calls[p] >= 3 else []
        if calls[p] >= (wrong or {}).get(p, 10**9):
            return made_result(row.case.id, "submission", "submission", None, status="wrong", source=row.source,
                               point=dict(row.point), message="input 2: 40 of 512 elements off")
        return made_result(row.case.id, "submission", "submission", times[p], source=row.source, point=dict(row.point),
                           flags=flags)

    fake_rows.answer = answer
    doc, cfg = tmp_path / "t.json", tmp_path / "c.json"
    out = cli("tune", "--submission", submission_path("tunable"), "--case", "3", "--json", str(doc), "--out", str(cfg))
    assert out.exit_code == 0, out.output
    raw = json.loads(doc.read_text())
    jsonschema.validate(raw, json.loads(SCHEMA.read_text()))
    (case,) = raw["cases"]
    assert case["winner"] == {"work": 1, "split": 1}  # the clean fastest
    ((gone),) = case["out"]
    assert gone["point"] == {"work": 1, "split": 2} and gone["result"]["flags"][0]["kind"] == "escaped"
    assert gone["reason"].startswith("out in round 1 of the finalists' rounds: suspect: escaped")
    assert {"work": 1, "split": 2} not in [f["point"] for f in case["finalists"]]  # the rounds began again without it
    assert json.loads(cfg.read_text())["cases"] == {"3": {"work": 1, "split": 1}}
    calls.clear()
    table = cli("tune", "--submission", submission_path("tunable"), "--case", "3")
    assert "work=1 split=2: out in round 1 of the finalists' rounds: suspect: escaped" in table.stdout
    assert "; out in the rounds: work=1 split=2" in table.stdout
    # every finalist out (the cheat flagged, the next two found wrong in the rounds begun again, the last point
    # wrong from its first pass): no winner, no map entry, exit 1
    calls.clear()
    fake_rows.answer = lambda row: answer(row, wrong={close: 2, default: 4, other: 1})
    out = cli("tune", "--submission", submission_path("tunable"), "--case", "3", "--json", str(doc), "--out", str(cfg))
    assert out.exit_code == 1, out.output
    (case,) = json.loads(doc.read_text())["cases"]
    assert case["winner"] is None and case["stopped"] == "every finalist went out in the rounds"
    assert {tuple(o["point"].items()) for o in case["out"]} == {cheat, close, default}
    assert json.loads(cfg.read_text())["cases"] == {}
    assert "case 3: no winner (every finalist went out in the rounds)" in out.stdout
