"""GPU tests of the phases inside a user's own kernel: the two examples (CuTe DSL with tensor maps
made in the kernel, CUDA C++ through load_inline) checked on every case and profiled through
their probe marks; an instrumented submission run without nvgg; bad input as one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from nvgg import cases, datapath, inputs, reference
from nvgg.backends import submission as sub
from nvgg.cli import app
from nvgg.strategies import AsSubmitted

pytestmark = [pytest.mark.gpu, pytest.mark.probe]  # the GPU suite's second part (README)

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = {"cute": ROOT / "examples/cute_grouped_gemm/submission.py",
            "cuda": ROOT / "examples/cuda_grouped_gemm/submission.py"}
FIXTURES = Path(__file__).resolve().parent / "fixtures"
MARKS = ["start", "maps_ready", "first_tma_landed", "first_mma", "mainloop_done", "epilogue_done"]


def _hopper_or_later():
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("the examples use TMA (sm_90 and later)")


@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_examples_are_right_on_every_case(example):
    _hopper_or_later()
    module = sub.load(EXAMPLES[example])
    for case in cases.select("all"):
        session = datapath.setup(case, strategy=AsSubmitted(), backend=sub.SubmissionBackend(module), batch=2)
        assert datapath.check(session), f"{example} on case {case.id}: {session.result.message}"
        assert session.result.checked_inputs == 2


@pytest.mark.parametrize("case_id", ["3", "4"])
@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_examples_phases_in_kernel_order_adding_up_to_the_kernel_time(example, case_id):
    _hopper_or_later()
    from nvgg.profiling import submission_phases
    run = submission_phases.run(str(EXAMPLES[example]), cases.get(case_id), timeout_s=600)
    assert run.checked_inputs == submission_phases.INPUTS and not run.errors
    (kernel,) = run.kernels
    rep = kernel.report
    assert kernel.marks == MARKS and rep.launches == 1
    assert [p.name for p in rep.phases] == [f"{a} → {b}" for a, b in zip(MARKS, MARKS[1:])]
    # in kernel order: every CTA with work reached every mark, none before the one declared ahead of it
    # (a CTA whose tile lies outside its group marks "start" and returns)
    assert rep.ctas_with_work > 0 and not [n for n in rep.notes if "came before" in n or "skipped" in n]
    assert all("marked nothing after 'start'" in n for n in rep.notes), rep.notes
    assert all(p.ctas == rep.ctas_with_work for p in rep.phases)
    assert 0 < rep.time_to_first_mma_us < rep.kernel_us and 0 < rep.setup_share < 1
    # the marks' span (the first CTA's start to the last CTA's last mark) is the kernel's CUPTI time
    (launch,) = run.marked
    assert launch.record is not None and 0.95 <= run.share <= 1, (run.call_marked_us, run.marked_cupti_us)
    assert run.plain_us > 0 and run.instrumented_us > 0 and launch.next_call is not None


def test_the_marked_example_runs_without_nvgg_and_gives_the_same_output(tmp_path):
    """The competition's harness imports no nvgg: in a process where nvgg cannot be imported the
    CuTe DSL example runs with no marks; its output equals, bit for bit, the output of the same
    example with nvgg present and the marks compiled in."""
    _hopper_or_later()
    data = inputs.generate(cases.get("4"), "cuda")
    saved = tmp_path / "data.pt"
    abc, sf, blocked, sizes = data
    torch.save(([(a.view(torch.uint8), b.view(torch.uint8), c) for a, b, c in abc], sf, blocked, sizes), saved)
    script = textwrap.dedent(f"""
        import importlib.util, sys, torch
        if {{without}}:
            sys.modules["nvgg"] = None  # import nvgg fails, as where it is not installed
        abc, sf, blocked, sizes = torch.load({str(saved)!r})
        abc = [(a.view(torch.float4_e2m1fn_x2), b.view(torch.float4_e2m1fn_x2), c) for a, b, c in abc]
        spec = importlib.util.spec_from_file_location("submission", {str(EXAMPLES["cute"])!r})
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        assert (module.PHASES is None) == {{without}}, module.PHASES
        out = module.custom_kernel((abc, sf, blocked, sizes))
        torch.cuda.synchronize()
        torch.save([c.cpu() for c in out], sys.argv[1])
    """)
    outs = {}
    for without in (True, False):
        env = dict(os.environ, NVGG_PROBES="0" if without else "1")
        if without:  # nvgg off sys.path too: only the CuTe DSL and torch
            env["PYTHONPATH"] = os.pathsep.join(p for p in env.get("PYTHONPATH", "").split(os.pathsep)
                                                if p and Path(p).resolve() != ROOT)
        target = tmp_path / f"out_{without}.pt"
        proc = subprocess.run([sys.executable, "-c", script.replace("{without}", str(without)), str(target)],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-2000:]
        outs[without] = torch.load(target)
    want = reference.reference(data)
    for plain, marked, ref in zip(outs[True], outs[False], want):
        assert torch.equal(plain, marked)
        assert reference.check([plain.cuda()], [ref]).ok


@pytest.mark.parametrize("fixture, says", [
    ("probe_unmarked.py", "asked for no probe buffer in a call: mark its kernels with nvgg.probe"),
    ("probe_repeated.py", "probe 'repeated' names mark 'start' 2 times"),
    ("probe_overrun.py", "case test-1: overrun: CTAs up to index 7 marked but its buffer holds 5: the marks of 3 CTAs are lost"),
])
def test_bad_marks_are_one_line_and_exit_2(fixture, says, tmp_path):
    doc = tmp_path / "p.json"
    out = CliRunner().invoke(app, ["profile", "--phases", "--submission", str(FIXTURES / fixture), "--case", "test-1",
                                   "--timeout", "300", "--json", str(doc)])
    assert out.exit_code == 2, out.output
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("nvgg:")]
    assert len(errors) == 1 and says in errors[0], out.output
    # the rest of stderr is progress and the file written, never a traceback
    assert all(line.startswith(("[1/1]", "wrote ")) for line in lines if line not in errors), out.output
    if fixture == "probe_overrun.py":  # the rest of the run is kept: the report and its JSON
        row = next(line for line in out.stdout.splitlines() if "start → exit" in line)
        assert [c.strip() for c in row.strip("|").split("|")][:4] == ["overrun", "0", "start → exit", "5"], out.stdout
        kernels = json.loads(doc.read_text())["phases"]["test-1"]["kernels"]
        assert kernels[0]["overflow_ctas"] == 3 and kernels[0]["ctas"] == 5


@pytest.mark.parametrize("case_id, launches", [("4", 4), ("1", 16)])
def test_a_kernel_launched_several_times_a_call_is_reported_launch_by_launch(case_id, launches):
    """tests/fixtures/probe_launches.py: its decode kernel runs twice a group (A, then B) with a
    torch.mm and a copy into C after each pair. Checked: each launch's spans (every CTA of the launch
    reached all three marks, in order) and the pooled ones over all its CTAs; every launch matched to
    its own decode_kernel record, in launch order, never to the GEMMs between; the marks' span within
    each launch's record and their share of the marked launches' kernel time at most 100%, that
    kernel time below the call's; launch i of the next call starting after launch i of this one
    ended (one stream: no overlap), for every launch."""
    from nvgg.profiling import submission_phases
    fixture = _fixture_module("probe_launches.py")
    case = cases.get(case_id)
    run = submission_phases.run(str(FIXTURES / "probe_launches.py"), case, timeout_s=600)
    assert run.checked_inputs == submission_phases.INPUTS and not run.errors and not run.notes, run.notes
    (kernel,) = run.kernels
    ctas = [fixture.ctas(rows) for m, n, _ in case.groups for rows in (m, n)]
    assert kernel.kernel == "decode" and kernel.report.launches == launches and len(ctas) == launches
    assert [rep.ctas for rep in kernel.each] == ctas and kernel.report.ctas == sum(ctas)
    for rep in kernel.each + [kernel.report]:
        assert [p.name for p in rep.phases] == ["start → first_row", "first_row → done"]
        assert all(p.ctas == rep.ctas for p in rep.phases) and not rep.notes, rep.notes
    assert [m.index for m in run.marked] == list(range(launches))
    assert all(m.record.startswith("decode_kernel") for m in run.marked), [m.record for m in run.marked]
    assert sum(name.startswith("decode_kernel") for name, _, _ in run.cupti_kernels) == launches
    assert len({name for name, _, _ in run.cupti_kernels}) > 1  # the GEMM's and the copy's records too
    for m in run.marked:
        assert 0 < m.covered_us <= m.cupti_us and m.span_us <= m.cupti_us + submission_phases.TOLERANCE_US
    assert 0 < run.share <= 1 and run.marked_cupti_us < run.call_cupti_us
    assert all(m.next_call is not None and m.next_call.start_earliest_us > 0 for m in run.marked)
    text = run.table()
    assert f"| decode   | all {launches}" in text and "the calls do not overlap" in text
    assert f"kernel time of the {launches} launch(es) they mark (CUPTI, " in text
    names = [e["args"]["name"] for e in run.trace()["traceEvents"] if e["name"] == "process_name"]
    assert names == [f"decode (launch {i})" for i in range(launches)]


def _fixture_module(name: str):
    import importlib.util
    spec = importlib.util.spec_from_file_location(name.removesuffix(".py"), FIXTURES / name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
