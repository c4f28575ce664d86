"""`nvgg compare` (nvgg/commands/compare.py): the rows it asks for, the table, the Markdown, the
gate against a baseline, the exit code; for real on the CPU and with the rows faked."""

import json
import re

from conftest import made_result


def test_compare_for_real_on_the_cpu(cli):
    out = cli("compare", "--case", "test-1", "--strategy", "sequential,graph", "--backend", "torch")
    assert out.exit_code == 0, out.output
    assert "sequential/torch" in out.stdout and re.search(r"\| n/a \[\d\] \|", out.stdout)
    assert re.search(r"\[\d\] the graph strategy needs a CUDA GPU", out.stdout)  # a long reason once, under the table


def test_plain_compare_is_every_strategy_on_the_benchmarks(cli, fake_gpu, fake_rows):
    assert cli("compare").exit_code == 0
    assert [(r.case.id, r.strategy, r.backend) for r in fake_rows.seen] == [
        (c, s, "cute") for c in ("1", "2", "3", "4") for s in ("persistent", "multistream", "graph", "sequential")]


def test_the_builds_ahead_are_said_before_the_first_row(cli, fake_gpu, fake_rows, monkeypatch):
    from nvgg import prebuild
    asked = []

    def ahead(todo, timeout_s=None, on_note=None):
        asked.append(([r.name for r in todo], timeout_s))
        on_note("building the rows' kernels ahead: 3 builds, 2 at once")
    monkeypatch.setattr(prebuild, "ahead", ahead)
    out = cli("compare", "--case", "3", "--strategy", "persistent,graph", "--timeout", "90")
    assert out.exit_code == 0, out.output
    assert asked == [(["3 persistent/cute", "3 graph/cute"], 90.0)]
    lines = out.stderr.splitlines()
    assert lines[0].startswith("building the rows' kernels ahead: 3 builds, 2 at once (") and "3 persistent/cute" in lines[1]


def test_each_tensor_map_mode_is_a_row_of_the_persistent_strategy(cli, fake_gpu, fake_rows):
    assert cli("compare", "--case", "3", "--strategy", "persistent,graph", "--tensormaps", "all").exit_code == 0
    assert [r.name for r in fake_rows.seen] == ["3 persistent[device]/cute", "3 persistent[host]/cute", "3 graph/cute"]
    out = cli("compare", "--case", "3", "--strategy", "graph", "--tensormaps", "host")
    assert out.exit_code == 2 and "add the persistent strategy" in out.stderr


def test_the_gate_fails_on_a_regression_and_passes_within_budget(cli, fake_gpu, fake_rows, tmp_path):
    baseline = tmp_path / "base.json"
    times = {"sequential": 100.0, "graph": 50.0}
    fake_rows.answer = lambda row: made_result(row.case.id, row.strategy, "torch", times[row.strategy])
    args = ["compare", "strategies", "--case", "3,4", "--strategy", "sequential,graph", "--backend", "torch"]
    out = cli(*args, "--json", str(baseline))
    assert out.exit_code == 0, out.output
    assert "2.00x" in out.stdout  # graph over sequential
    times["graph"] = 52.0  # +4%: inside a 5% budget
    assert cli(*args, "--baseline", str(baseline), "--max-regression", "5").exit_code == 0
    times["graph"] = 60.0  # +20%
    out = cli(*args, "--baseline", str(baseline), "--max-regression", "5")
    assert out.exit_code == 1 and "regression: 3 graph/torch: slower +20.0%" in out.stderr
    assert "slower +20.0% (noise ±4.0%)" in out.stdout and "same +0.0%" in out.stdout  # the class in the table


def test_a_baseline_written_before_the_format_was_recorded_is_read(cli, fake_gpu, fake_rows):
    """tests/fixtures/results/format0-compare.json: written by nvgg at a1b53d0 (no format key)."""
    from conftest import FIXTURES
    old = json.loads((FIXTURES / "results" / "format0-compare.json").read_text())
    times = {(r["case"], r["strategy"]): r["time_us"] for r in old["results"] if r["time_us"]}
    fake_rows.answer = lambda row: made_result(row.case.id, row.strategy, "torch", times[(row.case.id, row.strategy)] * 1.5)
    out = cli("compare", "--case", "test-1,test-2", "--strategy", "sequential", "--backend", "torch",
              "--baseline", str(FIXTURES / "results" / "format0-compare.json"))
    assert out.exit_code == 1 and out.stderr.count("regression: test-") == 2, out.output


def test_a_wrong_row_exits_1(cli, fake_gpu, fake_rows):
    fake_rows.answer = lambda row: made_result("3", "graph", "torch", None, status="wrong")
    out = cli("compare", "--case", "3", "--strategy", "graph")
    assert out.exit_code == 1 and "WRONG" in out.stdout


def test_compare_writes_markdown_with_verdicts(cli, fake_gpu, fake_rows, tmp_path):
    from nvgg.verdict import Verdict

    def answer(row):
        r = made_result(row.case.id, "graph", "torch", 50.0)
        r.verdict = Verdict("host-bound", "host-bound: launches take 55.0 µs a call against 50.0 µs measured")
        return r

    fake_rows.answer = answer
    md = tmp_path / "summary.md"
    out = cli("compare", "--case", "1,2,3,4", "--strategy", "graph", "--backend", "torch", "--markdown", str(md))
    assert out.exit_code == 0, out.output
    text = md.read_text()
    assert text.startswith("## nvgg compare") and "| case" in text and "|---" in text.replace(" ", "")
    assert text.count("host-bound: launches take 55.0 µs") == 4 and "geomean µs over benchmarks" in text


def test_the_example_workflow_runs_as_written(cli, fake_gpu, fake_rows, tmp_path):
    """examples/ci/nvgg-gate.yml: its compare line, with the job summary and the baseline it names,
    is accepted by the CLI and writes the summary, the JSON and the JUnit file (rows faked); the
    JUnit file is the one its publishing step reads, published whether the gate passed or not, and
    a valid JUnit report (tests/fixtures/junit.xsd) of a test case a case and strategy."""
    import shlex
    import xml.etree.ElementTree as ET
    from pathlib import Path

    import xmlschema
    import yaml
    from conftest import FIXTURES, ROOT
    flow = yaml.safe_load((ROOT / "examples/ci/nvgg-gate.yml").read_text())
    steps = flow["jobs"]["gate"]["steps"]
    line = next(step["run"] for step in steps if "nvgg compare" in step.get("run", ""))
    summary = tmp_path / "step_summary.md"
    args = shlex.split(line.replace("$GITHUB_STEP_SUMMARY", str(summary)))
    assert args[0].endswith("nvgg")
    junit = args[args.index("--junit") + 1]
    publish = next(step for step in steps if step.get("uses", "").startswith("mikepenz/action-junit-report@"))
    assert publish["with"]["report_paths"] == junit and publish["if"] == "always()"
    assert flow["jobs"]["gate"]["permissions"]["checks"] == "write"  # the action's check run needs it
    args = [str(tmp_path / a) if a.endswith((".json", ".xml")) else a for a in args[1:]]
    baseline = Path(args[args.index("--baseline") + 1])
    first = cli("compare", "strategies", "--case", "benchmarks", "--json", str(baseline))
    assert first.exit_code == 0, first.output
    out = cli(*args)
    assert out.exit_code == 0, out.output
    assert summary.read_text().startswith("## nvgg compare") and "vs baseline" in summary.read_text()
    assert json.loads(Path(args[args.index("--json") + 1]).read_text())["results"]
    written = tmp_path / junit
    xmlschema.XMLSchema(str(FIXTURES / "junit.xsd")).validate(str(written))
    root = ET.parse(written).getroot()
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("16", "0", "0")
    assert [s.get("name") for s in root] == ["case 1", "case 2", "case 3", "case 4"]


def test_a_gate_that_would_check_nothing_is_refused(cli, fake_gpu, fake_rows, tmp_path):
    """A baseline that shares no row with the run, or a profile that does not exist: one line and
    exit 2 before any row runs; a run in which no row was measured exits 1."""
    base = tmp_path / "base.json"
    assert cli("compare", "--case", "3", "--strategy", "graph", "--backend", "torch", "--json", str(base)).exit_code == 0
    fake_rows.seen.clear()
    out = cli("compare", "--case", "4", "--strategy", "graph", "--backend", "torch", "--baseline", str(base))
    assert out.exit_code == 2 and "shares no row with this run (it holds cases 3 of graph/torch)" in out.stderr
    out = cli("compare", "--case", "3", "--strategy", "sequential", "--backend", "torch", "--baseline", str(base))
    assert out.exit_code == 2 and "shares no row" in out.stderr
    out = cli("compare", "--case", "3", "--profile", "nope")
    assert out.exit_code == 2 and "unknown profile 'nope'" in out.stderr and not fake_rows.seen
    fake_rows.answer = lambda row: made_result(row.case.id, row.strategy, row.backend, None, status="unsupported",
                                               message="not here")
    out = cli("compare", "--case", "3,4", "--strategy", "graph")
    assert out.exit_code == 1 and "nothing was measured" in out.stderr


def test_the_markdown_notes_stand_apart_from_the_table(cli, fake_gpu, fake_rows, tmp_path):
    fake_rows.answer = lambda row: made_result(row.case.id, row.strategy, "torch", None, status="error",
                                               message="crashed: the process died (killed by SIGSEGV)")
    md = tmp_path / "summary.md"
    cli("compare", "--case", "3", "--strategy", "graph", "--backend", "torch", "--markdown", str(md))
    lines = md.read_text().splitlines()
    note = next(i for i, line in enumerate(lines) if "[1] crashed" in line)
    assert lines[note - 1] == "" and lines[note].startswith("- [1] ") and lines[note - 2].startswith("|")
