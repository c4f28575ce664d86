"""The CLI through typer's CliRunner: thin commands, one-line errors, exit codes, JSON."""

import json

import pytest
from typer.testing import CliRunner

from nvgg import runner as runner_mod, timing
from nvgg.cli import app
from nvgg.commands import profile as profile_cmd
from nvgg.errors import NvggError
from nvgg.runner import Result

cli = CliRunner()


def test_cases_lists_all_fourteen():
    out = cli.invoke(app, ["cases", "--json", "-"])
    assert out.exit_code == 0
    rows = json.loads(out.stdout)
    assert len(rows) == 14 and rows[2]["id"] == "3" and rows[2]["bytes"] == 18_481_152


def test_sol_json_has_the_contract_keys():
    out = cli.invoke(app, ["sol", "--case", "1,2,3,4", "--profile", "h200", "--json", "-"])
    assert out.exit_code == 0
    rows = json.loads(out.stdout)
    assert {"case", "profile", "bytes", "flops", "memory_us", "compute_us", "sol_us", "bound"} <= set(rows[0])
    b200 = {r["case"]: r["sol_us"] for r in rows if r["profile"] == "b200"}
    assert round(b200["1"], 3) == 18.833 and round(b200["4"], 3) == 1.525
    assert {r["profile"] for r in rows} == {"h200", "b200"}


@pytest.mark.parametrize("argv, words", [
    (["run", "--case", "9"], "unknown case '9'"),
    (["run", "--shape", "m: [64]; n: [256]"], "lacks k"),
    (["sol", "--case", "1", "--profile", "a100"], "unknown profile 'a100'"),
    (["run", "--case", "3", "--strategy", "graph"], "needs a CUDA GPU"),
    (["run", "--case", "3", "--strategy", "fast"], "unknown strategy 'fast'"),
    (["run", "--case", "3", "--submission", "/nope/submission.py"], "does not exist"),
    (["run", "--case", "3", "--cases", "/nope.yaml"], "does not exist"),
    (["compare", "--strategy", "bogus"], "unknown strategy 'bogus'"),
])
def test_bad_input_is_one_line_and_non_zero(argv, words):
    out = cli.invoke(app, argv)
    assert out.exit_code == 2
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and words in lines[0] and "Traceback" not in out.output


def _fake(case, strategy, backend, t, status="ok"):
    stats = timing.reduce([t, t, t], batch=15, method="leaderboard", clock="cuda events")
    return Result(case=case, strategy=strategy, backend=backend, status=status,
                  stats=stats if status == "ok" else None, env={"gpu": "TestGPU"})


def _many(make):
    """A fake runner.run_many: each row through `make(row)`, reported as it finishes."""
    def fake_many(rows, *, timeout_s=None, on_result=None, on_start=None):
        out = []
        for row in rows:
            res = make(row)
            out.append(res)
            if on_result:
                on_result(res)
        return out
    return fake_many


def _rows(monkeypatch, make):
    """Fake the worker's side of every row (runner.run_isolated): `make(row)` -> its Result; the
    rows seen, in order."""
    seen = []

    def fake(pool, row):
        seen.append(row)
        return make(row)

    monkeypatch.setattr(runner_mod, "run_isolated", fake)
    monkeypatch.setattr(runner_mod, "precheck", lambda row: None)  # the fake GPU would fail the real checks
    return seen


def test_run_passes_the_tensor_map_mode_and_refuses_it_off_the_persistent_strategy(monkeypatch):
    _as_gpu(monkeypatch)
    seen = _rows(monkeypatch, lambda row: _fake(row.case.id, "persistent", "cute", 42.0))
    out = cli.invoke(app, ["run", "--case", "3", "--strategy", "persistent", "--tensormaps", "HOST"])
    assert out.exit_code == 0, out.output
    assert seen[0].tensormaps == "host" and seen[0].strategy == "persistent"
    bad = cli.invoke(app, ["run", "--case", "3", "--tensormaps", "shared"])
    assert bad.exit_code == 2 and "shared" in bad.output


def test_tensor_map_mode_refusals_are_one_line_exit_2(monkeypatch):
    # through the real runner: refused before any input is generated or kernel compiled
    for args, says in ((["run", "--case", "3", "--strategy", "graph", "--backend", "cute", "--tensormaps", "host"],
                        "the graph strategy launches one kernel per group"),
                       (["run", "--case", "3", "--strategy", "persistent", "--backend", "torch", "--tensormaps", "host"],
                        "the torch backend has none"),
                       (["compile", "--arch", "sm_100a", "--case", "3", "--strategy", "sequential", "--tensormaps", "device"],
                        "the sequential strategy has none to choose")):
        out = cli.invoke(app, args)
        assert out.exit_code == 2, (args, out.output)
        assert says in out.output and out.output.count("\n") == 1, out.output


def test_run_calls_the_runner_with_parsed_arguments(monkeypatch, tmp_path):
    seen = _rows(monkeypatch, lambda row: _fake(row.case.id, "graph", "torch", 42.0))
    out = cli.invoke(app, ["run", "--case", "3", "--strategy", "graph", "--backend", "torch", "--timer", "per-call",
                           "--json", str(tmp_path / "r.json")])
    assert out.exit_code == 0, out.output
    [row] = seen
    assert (row.case.id, row.strategy, row.backend, row.profile, row.timer, row.tensormaps, row.submission) == (
        "3", "graph", "torch", None, "per-call", None, None)
    assert "TestGPU" in out.stdout and "42.00" in out.stdout
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["results"][0]["time_us"] == 42.0


def test_compare_gate_fails_on_regression_and_passes_within_budget(monkeypatch, tmp_path):
    baseline = tmp_path / "base.json"
    times = {"sequential": 100.0, "graph": 50.0}

    monkeypatch.setattr(runner_mod, "run_many", _many(lambda row: _fake(row.case.id, row.strategy, "torch", times[row.strategy])))
    args = ["compare", "strategies", "--case", "3,4", "--strategy", "sequential,graph", "--backend", "torch"]
    out = cli.invoke(app, args + ["--json", str(baseline)])
    assert out.exit_code == 0, out.output
    assert "2.00x" in out.stdout  # graph over sequential
    times["graph"] = 52.0  # +4%: inside a 5% budget
    assert cli.invoke(app, args + ["--baseline", str(baseline), "--max-regression", "5"]).exit_code == 0
    times["graph"] = 60.0  # +20%
    out = cli.invoke(app, args + ["--baseline", str(baseline), "--max-regression", "5"])
    assert out.exit_code == 1 and "regression: 3 graph/torch: slower +20.0%" in out.stderr
    assert "slower +20.0% (noise ±4.0%)" in out.stdout and "same +0.0%" in out.stdout  # the class in the table


def test_plain_compare_is_compare_strategies(monkeypatch):
    seen = []
    monkeypatch.setattr(runner_mod, "run_many", _many(lambda row: seen.append((row.case.id, row.strategy)) or
                                                      _fake(row.case.id, row.strategy, "torch", 1.0)))
    assert cli.invoke(app, ["compare"]).exit_code == 0
    assert seen == [(c, s) for c in ("1", "2", "3", "4") for s in ("persistent", "multistream", "graph", "sequential")]


def test_compare_exits_non_zero_on_a_wrong_result(monkeypatch):
    monkeypatch.setattr(runner_mod, "run_many", _many(lambda row: _fake("3", "graph", "torch", 1.0, status="wrong")))
    out = cli.invoke(app, ["compare", "--case", "3", "--strategy", "graph"])
    assert out.exit_code == 1 and "WRONG" in out.stdout


def test_run_on_cpu_end_to_end():
    out = cli.invoke(app, ["run", "--case", "test-2"])
    assert out.exit_code == 0, out.output
    assert "(CPU)" in out.stdout and "sequential/torch" in out.stdout and "different bits" in out.stdout


def test_compare_for_real_on_cpu():
    out = cli.invoke(app, ["compare", "--case", "test-1", "--strategy", "sequential,graph", "--backend", "torch"])
    assert out.exit_code == 0, out.output
    assert "sequential/torch" in out.stdout and "| n/a [1] |" in out.stdout
    assert "[1] the graph strategy needs a CUDA GPU" in out.stdout  # a long reason once, under the table


# --- profile across the benchmarks, submissions, verdicts, Markdown, timeouts --------------------------

def _as_gpu(monkeypatch):
    import torch
    from nvgg import backends
    monkeypatch.setattr(runner_mod, "default_device", lambda: torch.device("cuda"))
    monkeypatch.setattr(backends, "best", lambda device: "cute")


def _cupti(kernel_us=30.0, host=2.0, launches=1):
    return {"calls": 15, "activities": launches, "kernel_us": kernel_us, "sum_us": kernel_us, "span_us": kernel_us,
            "gaps_us": 0.0, "event_us": kernel_us + host, "host_overhead_us": host, "gaps_shown": True,
            "gaps_note": "", "kernels": [{"name": "my_gemm_kernel", "per_call": launches, "mean_us": kernel_us / launches}]}


def test_profile_without_a_case_covers_the_benchmarks_in_one_table(monkeypatch):
    _as_gpu(monkeypatch)

    def fake_row(row):
        res = _fake(row.case.id, "persistent", "cute", 32.0)
        res.cupti = _cupti()
        res.setup_us["launch_host"] = 31.0  # the host as slow as the GPU: host-bound
        return res

    seen = _rows(monkeypatch, fake_row)
    out = cli.invoke(app, ["profile", "--cupti"])
    assert out.exit_code == 0, out.output
    assert [(r.case.id, r.timer, r.strategy) for r in seen] == [(c, "cupti", "persistent") for c in ("1", "2", "3", "4")]
    table = [line for line in out.stdout.splitlines() if "persistent/cute" in line]
    assert len(table) >= 4 and "host-bound: launches take 31.0 µs a call against 30.0 µs of kernels" in out.stdout
    assert "my_gemm_kernel" in out.stdout and "time = kernel µs + host+launch µs" in out.stdout


def test_profile_phases_keeps_the_cases_it_measured_when_one_is_wrong(monkeypatch):
    """A case the instrumented build gets wrong (device_phases.run raises NvggError) costs that
    case alone: the cases measured before it are rendered, then the failure is one line, exit 2."""
    _as_gpu(monkeypatch)
    from nvgg import isolation
    monkeypatch.setenv("NVGG_ISOLATION", "off")
    rendered = {}

    def fake_call(self, key, call):
        if call.kwargs["case"].id == "2":
            raise NvggError("the instrumented kernel is wrong on case 2: 3 of 7168 outputs differ")
        return "phases of " + call.kwargs["case"].id

    monkeypatch.setattr(isolation.Pool, "call", fake_call)
    monkeypatch.setattr(profile_cmd, "_render", lambda picked, results, ncu, occ, runs, *rest: rendered.update(runs))
    out = cli.invoke(app, ["profile", "--phases", "--case", "1,2,3"])
    assert out.exit_code == 2 and "Traceback" not in out.output
    assert rendered == {"1": "phases of 1", "3": "phases of 3"}
    assert "case 2: phases: the instrumented kernel is wrong on case 2" in out.output


def test_profile_ncu_exactly_as_users_call_it(monkeypatch, tmp_path):
    _as_gpu(monkeypatch)
    from nvgg.profiling import ncu
    calls = []

    def fake_profile(target, out_dir, **kwargs):
        calls.append(target)
        return ncu.NcuReport([ncu.KernelMetrics("k", 10.0, 2e6, 70.0, 10.0, 50.0, 60.0, 90, 1024, 132, 256)])

    monkeypatch.setattr(ncu, "profile", fake_profile)
    out = cli.invoke(app, ["profile", "--ncu", "--out", str(tmp_path)])
    assert out.exit_code == 0, out.output
    assert [t["case"]["id"] for t in calls] == ["1", "2", "3", "4"] and calls[0]["strategy"] == "persistent"
    assert out.stdout.count("| k ") == 4 and "case 4: total 10.00 µs" in out.stdout


def test_profile_a_submission_with_cupti_and_a_timeout(monkeypatch, tmp_path):
    _as_gpu(monkeypatch)
    from nvgg import isolation
    timeouts = []
    monkeypatch.setattr(isolation.Pool, "__enter__", lambda self: timeouts.append(self.timeout_s) or self)

    def fake_row(row):
        res = _fake(row.case.id, "submission", "submission", 40.0)
        res.backend, res.cupti = "submission", _cupti(kernel_us=36.0, launches=8)
        return res

    seen = _rows(monkeypatch, fake_row)
    mine = tmp_path / "mine.py"
    mine.write_text("def custom_kernel(data):\n    return None\n")
    out = cli.invoke(app, ["profile", "--cupti", "--submission", str(mine), "--case", "3", "--timeout", "20",
                           "--json", str(tmp_path / "p.json")])
    assert out.exit_code == 0, out.output
    [row] = seen
    assert row.timer == "cupti" and row.case.id == "3" and row.submission == str(mine.resolve()) and timeouts == [20.0]
    assert "my_gemm_kernel" in out.stdout and "| 8 " in out.stdout
    doc = json.loads((tmp_path / "p.json").read_text())
    assert doc["results"][0]["cupti"]["kernels"][0]["name"] == "my_gemm_kernel" and doc["results"][0]["verdict"]["kind"]


@pytest.mark.parametrize("args, says", [
    (["profile", "--occupancy", "--submission", "mine.py"], "a submission is profiled with --cupti, --ncu and --phases"),
    (["profile", "--phases", "--submission", "nonexistent.py", "--case", "3"], "submission nonexistent.py does not exist"),
    (["profile", "--phases", "--submission", "tests", "--case", "3"], "submission tests is a folder"),
    (["profile", "--phases", "--case", "3", "--trace", "README.md/t.json"], "--trace README.md/t.json cannot be written"),
    (["profile", "--phases", "--case", "3", "--json", "/"], "--json / is a folder"),
    (["profile", "--cupti", "--timeout", "0"], "Invalid value for '--timeout'"),
    (["run", "--case", "3", "--timeout", "-1"], "Invalid value for '--timeout'"),
    (["compare", "--max-regression", "-5"], "Invalid value for '--max-regression'"),
    (["compare", "--max-regression", "5"], "--max-regression is the slowdown --baseline allows"),
    (["compare", "--submission", "tests"], "submission tests is a folder"),
    (["compare", "--baseline", "README.md"], "baseline README.md is not an nvgg result file"),
    (["compare", "--markdown", "/"], "--markdown / is a folder"),
    (["compare", "--json", "/proc/nvgg/out.json"], "--json /proc/nvgg/out.json cannot be written"),
    (["run", "--case", "test-1", "--json", "/proc/out.json"], "--json /proc/out.json cannot be written"),
    (["compare", "--submission", "tests/fixtures/submissions/honest.py", "--submission", "README.md/honest.py"],
     "submission README.md/honest.py does not exist"),
    (["compare", "--submission", "tests/fixtures/submissions/honest.py", "--submission", "examples/honest.py"],
     "submission examples/honest.py does not exist"),
    (["profile", "--phases", "--trace", "t.json"], "--trace writes one case's phases"),
    (["profile", "--cupti", "--case", "3", "--trace", "t.json"], "--trace writes the phases inside the kernel"),
    (["profile", "--phases", "--case", "3", "--strategy", "graph"], "--phases instruments the persistent cute kernel"),
    (["profile", "--phases", "--case", "3", "--backend", "torch"], "--phases instruments the persistent cute kernel"),
])
def test_profile_and_timeout_refusals(monkeypatch, args, says):
    _as_gpu(monkeypatch)
    out = cli.invoke(app, args)
    assert out.exit_code == 2 and says in out.output, out.output


def test_compare_writes_markdown_with_verdicts(monkeypatch, tmp_path):
    def fake_row(row):
        r = _fake(row.case.id, "graph", "torch", 50.0)
        r.verdict = {"kind": "host-bound", "phrase": "host-bound: launches take 55.0 µs a call against 50.0 µs measured"}
        return r

    monkeypatch.setattr(runner_mod, "run_many", _many(fake_row))
    md = tmp_path / "summary.md"
    out = cli.invoke(app, ["compare", "--case", "1,2,3,4", "--strategy", "graph", "--backend", "torch", "--markdown", str(md)])
    assert out.exit_code == 0, out.output
    text = md.read_text()
    assert text.startswith("## nvgg compare") and "| case" in text and "|---" in text.replace(" ", "")
    assert text.count("host-bound: launches take 55.0 µs") == 4 and "geomean µs over benchmarks" in text


# --- profile --phases --submission: the user's own kernel's marks ------------------------------

def _submission_phases(case_id="4", overflow=False):
    from nvgg.kernels.phase_slots import SlotLayout
    from nvgg.profiling import phases as ph
    from nvgg.profiling.submission_phases import KernelPhases, SubmissionPhases
    marks = ["start", "maps_ready", "first_mma", "epilogue_done"]
    rows = [[1_000, 3_000, 4_000, 101_000], [1_500, 3_100, 4_500, 99_000], [3, 3, 3, 3] if overflow else [0, 0, 0, 0]]
    layout = SlotLayout.for_probe("cute_gemm", marks)
    run = SubmissionPhases(case=case_id, path="mine.py", checked_inputs=3, instrumented_us=102.0, plain_us=100.0,
                           instrumented_calls_us=[101.0, 102.0, 103.0, 104.0], plain_calls_us=[99.0, 100.0, 100.0, 101.0],
                           call_cupti_us=102.0, call_marked_us=100.0,
                           kernels=[KernelPhases("cute_gemm", marks, ph.analyse(rows, layout))],
                           launches=[{"kernel": "cute_gemm", "marks": marks, "rows": rows}],
                           next_call=ph.Behind(4.0, 4.5, 7.5, 8.0))
    if overflow:
        run.errors = list(run.kernels[0].report.errors)
    return run


def test_profile_phases_of_a_submission(monkeypatch, tmp_path):
    _as_gpu(monkeypatch)
    from nvgg.profiling import submission_phases
    seen = []

    def fake_run(path, case, timeout_s=None):
        seen.append((path, case.id, timeout_s))
        return _submission_phases(case.id)

    monkeypatch.setattr(submission_phases, "run", fake_run)
    mine = tmp_path / "mine.py"
    mine.write_text("def custom_kernel(data):\n    return None\n")
    trace, doc = tmp_path / "t.json", tmp_path / "p.json"
    out = cli.invoke(app, ["profile", "--phases", "--submission", str(mine), "--case", "4", "--timeout", "90",
                           "--trace", str(trace), "--json", str(doc)])
    assert out.exit_code == 0, out.output
    assert seen == [(str(mine), "4", 90.0)]
    text = out.stdout
    row = next(line for line in text.splitlines() if "start → maps_ready" in line)
    assert [c.strip() for c in row.strip("|").split("|")] == ["cute_gemm", "start → maps_ready", "2", "1.800", "2.000"]
    assert "time to first MMA 3.00 µs (median), setup share 3.0%" in text
    assert ("CUPTI kernel time a call 102.00 µs with marks (quartiles 101.25-103.75) vs 100.00 µs without "
            "(99.25-100.75): +2.0% (medians of 4 calls each" in text)
    assert "the marks span 100.00 µs of the call's 102.00 µs kernel time (CUPTI, 98.0%)" in text
    assert "start at +4.00 µs from this call's last mark (earliest; median +4.50), first MMA at +7.50 µs" in text
    # the calls do not overlap: nothing for the verdict's setup judgement to read
    assert _submission_phases().behind is None
    assert "the calls do not overlap" in text
    events = json.loads(trace.read_text())["traceEvents"]
    assert {e["tid"] for e in events if e["ph"] == "X"} == {0, 1}
    kernels = json.loads(doc.read_text())["phases"]["4"]["kernels"]
    assert kernels[0]["kernel"] == "cute_gemm" and kernels[0]["phases"][0]["median_us"] == pytest.approx(1.8)


def test_profile_phases_of_a_submission_states_bad_input_in_one_line_and_keeps_the_rest(monkeypatch, tmp_path):
    _as_gpu(monkeypatch)
    from nvgg.errors import NvggError
    from nvgg.profiling import submission_phases

    def fake_run(path, case, timeout_s=None):
        if case.id == "3":
            raise submission_phases.CaseFailure("case 3 (with marks): submission timed out after 60 s (hang or far too slow)")
        return _submission_phases(case.id, overflow=case.id == "4")

    monkeypatch.setattr(submission_phases, "run", fake_run)
    mine = tmp_path / "mine.py"
    mine.write_text("def custom_kernel(data):\n    return None\n")
    doc = tmp_path / "p.json"
    out = cli.invoke(app, ["profile", "--phases", "--submission", str(mine), "--case", "2,3,4", "--json", str(doc)])
    assert out.exit_code == 2
    assert "case 2:" in out.stdout and "case 4:" in out.stdout and set(json.loads(doc.read_text())["phases"]) == {"2", "4"}
    errors = [line for line in out.stderr.splitlines() if line.startswith("nvgg: ")]
    assert errors == ["nvgg: case 3 (with marks): submission timed out after 60 s (hang or far too slow)",
                      "nvgg: case 4: cute_gemm: CTAs up to index 2 marked but its buffer holds 2: the marks of 1 CTAs "
                      "are lost; pass the launch's CTA count to buffer()"]

    # a problem of the submission itself (here: no marks) stops at the first case: one line
    def unmarked(path, case, timeout_s=None):
        raise NvggError("submission mine.py asked for no probe buffer in a call: mark its kernels with nvgg.probe")

    monkeypatch.setattr(submission_phases, "run", unmarked)
    out = cli.invoke(app, ["profile", "--phases", "--submission", str(mine)])
    assert out.exit_code == 2 and out.stderr.count("nvgg: ") == 1 and "asked for no probe buffer" in out.stderr


# --- kinds of bad input: files of the wrong shape, sizes that cannot fit, paths that cannot be written ----

def _bad_files(tmp_path):
    files = {
        "list.yaml": "cases:\n  - 1\n  - 2\n",
        "strings.yaml": 'cases:\n  mine: "m: 64"\n',
        "nested.yaml": "cases:\n  mine: {m: [[64]], n: 256, k: 256}\n",
        "binary.yaml": b"\xff\xfe\x00\x01",
        "status.json": json.dumps({"results": [{"case": "1", "status": "weird", "strategy": "s", "backend": "b"}]}),
        "rows.json": json.dumps({"results": "none"}),
        "flags.json": json.dumps({"results": [{"case": "1", "status": "ok", "flags": ["x"]}]}),
        "clocks.json": json.dumps({"results": [{"case": "1", "status": "ok", "clocks": ["x"]}]}),
        "binary.json": b"\xff\xfe\x00\x01",
    }
    for name, body in files.items():
        (tmp_path / name).write_bytes(body if isinstance(body, bytes) else body.encode())
    (tmp_path / "folder.yaml").mkdir()
    return tmp_path


@pytest.mark.parametrize("argv, words", [
    (["cases", "--cases", "{d}/list.yaml"], "each case needs an id"),
    (["cases", "--cases", "{d}/strings.yaml"], "expected a mapping"),
    (["cases", "--cases", "{d}/nested.yaml"], "must be an integer or a non-empty list of integers"),
    (["cases", "--cases", "{d}/binary.yaml"], "is not UTF-8 text"),
    (["cases", "--cases", "{d}/folder.yaml"], "is a folder"),
    (["report", "{d}/status.json"], "is not an nvgg result file"),
    (["report", "{d}/rows.json"], "is not an nvgg result file"),
    (["report", "{d}/flags.json"], "is not an nvgg result file"),
    (["compare", "--case", "test-1", "--baseline", "{d}/clocks.json"], "is not an nvgg result file"),
    (["report", "{d}/binary.json"], "is not UTF-8 text"),
    (["report", "{d}"], "is a folder"),
    (["compare", "--case", "test-1", "--baseline", "{d}/status.json"], "baseline"),
    (["run", "--shape", "m: [1000000000]; n: [4096]; k: [7168]"], "needs about"),
    (["compare", "--shape", "m: [1000000000]; n: [4096]; k: [7168]", "--strategy", "sequential"], None),
    (["sol", "--case", "3", "--json", "/proc/nvgg/sol.json"], "--json /proc/nvgg/sol.json cannot be written"),
    (["cases", "--json", "{d}"], "is a folder"),
    (["profile", "--phases", "--case", "3", "--trace", "-"], "--trace writes a file"),
    (["report", "{d}/status.json", "--plot", "-"], "--plot writes a file"),
    (["compare", "--json", "-", "--markdown", "-"], "would both print on stdout"),
    (["compile", "--arch", "sm_90a", "--case", "3", "--backend", "torch"], "the torch backend runs library kernels"),
    (["profile", "--cupti", "--out", "{d}"], "--clock-control and --out are Nsight Compute's"),
    (["profile", "--ncu", "--clock-control", "max"], "choose none or base"),
    (["profile", "--ncu", "--out", "/proc/nvgg"], "--out /proc/nvgg cannot be written"),
    (["profile", "--ncu", "--out", "{d}/list.yaml"], "is a file: pass a folder"),
])
def test_kinds_of_bad_input_are_one_line_exit_2(tmp_path, argv, words):
    d = _bad_files(tmp_path)
    out = cli.invoke(app, [a.format(d=d) for a in argv])
    assert "Traceback" not in out.output and (out.exception is None or isinstance(out.exception, SystemExit)), out.output
    if words is None:  # a compare keeps the row: n/a with the size it needs, exit 0 (nothing failed)
        assert "needs about" in out.stdout and out.exit_code == 0, out.output
        return
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert out.exit_code == 2 and len(lines) == 1 and words in lines[0], out.output


def test_the_example_workflow_runs_as_written(monkeypatch, tmp_path):
    """examples/ci/nvgg-gate.yml: its compare line, with the job summary and the baseline it names,
    is accepted by the CLI and writes the summary and the JSON (rows faked)."""
    import shlex
    from pathlib import Path
    import yaml
    flow = yaml.safe_load((Path(__file__).parent.parent / "examples/ci/nvgg-gate.yml").read_text())
    line = next(step["run"] for step in flow["jobs"]["gate"]["steps"] if "nvgg compare" in step.get("run", ""))
    summary = tmp_path / "step_summary.md"
    args = shlex.split(line.replace("$GITHUB_STEP_SUMMARY", str(summary)))
    assert args[0].endswith("nvgg")
    args = [str(tmp_path / a) if a.endswith(".json") else a for a in args[1:]]
    baseline = Path(args[args.index("--baseline") + 1])
    monkeypatch.setattr(runner_mod, "run_many", _many(lambda row: _fake(row.case.id, row.strategy, "cute", 10.0)))
    first = cli.invoke(app, ["compare", "strategies", "--case", "benchmarks", "--json", str(baseline)])
    assert first.exit_code == 0, first.output
    out = cli.invoke(app, args)
    assert out.exit_code == 0, out.output
    assert summary.read_text().startswith("## nvgg compare") and "vs baseline" in summary.read_text()
    assert json.loads(Path(args[args.index("--json") + 1]).read_text())["results"]


@pytest.mark.parametrize("argv, words", [
    (["run", "--case", "test-1", "--timer", "bogus"], "Invalid value for '--timer'"),
    (["run", "--bogus"], "No such option: --bogus"),
    (["compare", "strategies", "extra"], "unexpected extra argument"),
    (["sol", "--json"], "requires an argument"),
])
def test_usage_errors_are_one_line_from_the_command(argv, words):
    """The parser's own errors, as the installed command prints them (not through CliRunner)."""
    import subprocess
    import sys
    from pathlib import Path
    proc = subprocess.run([sys.executable, "-m", "nvgg", *argv], capture_output=True, text=True,
                          cwd=Path(__file__).parent.parent)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and words in lines[0], proc.stderr
