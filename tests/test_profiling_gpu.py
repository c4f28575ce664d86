"""GPU tests of the observers: CUPTI records beside the event time, and Nsight Compute."""

import json
import shutil

import pytest
import torch
from typer.testing import CliRunner

from nvgg import cases, datapath
from nvgg.cli import app

pytestmark = pytest.mark.gpu


def test_cupti_timer_splits_kernel_time_from_host_overhead():
    res = datapath.run_one(cases.get("test-3"), strategy="sequential", backend="torch", device=torch.device("cuda"),
                         timer="cupti")
    cu = res.cupti
    assert res.status == "ok" and cu["calls"] == 15
    # the torch backend launches several kernels per group (expand A, expand B, GEMM, ...)
    assert cu["activities"] >= 2 * 3 and sum(k["per_call"] for k in cu["kernels"]) == pytest.approx(cu["activities"])
    assert 0 < cu["kernel_us"] <= cu["span_us"] and cu["gaps_us"] == pytest.approx(cu["span_us"] - cu["kernel_us"])
    assert cu["host_overhead_us"] == pytest.approx(res.stats.mean_us - cu["kernel_us"])


@pytest.mark.skipif(shutil.which("ncu") is None, reason="ncu not on PATH")
def test_ncu_profile_reports_counters(tmp_path):
    out = CliRunner().invoke(app, ["profile", "--ncu", "--case", "test-3", "--backend", "torch", "--strategy", "sequential",
                                   "--out", str(tmp_path), "--json", str(tmp_path / "p.json")])
    assert out.exit_code == 0, out.output
    doc = json.loads((tmp_path / "p.json").read_text())["ncu"]["test-3"]
    assert doc["kernels"] and all(k["duration_us"] > 0 for k in doc["kernels"])
    assert doc["dram_bytes"] > 0 and any(k["registers"] for k in doc["kernels"])
    assert list(tmp_path.glob("*.ncu-rep"))


@pytest.mark.sm90
def test_phases_of_the_persistent_kernel(tmp_path):
    from nvgg.profiling import device_phases
    run = device_phases.run(cases.get("3"))
    rep = run.report
    assert rep.ctas_with_work > 0 and rep.kernel_us > 0
    assert 0 < rep.time_to_first_mma_us < rep.kernel_us and 0 < rep.setup_share < 1
    names = [p.name for p in rep.phases]
    # the default build's (chunks) names: A streamed beside the main loops, the first stage of
    # the first tile's A decoded in the CTA, the first B copy and the first copied A stage
    assert names[:8] == ["tensor maps", "to first B copy", "A streamed (beside the MMAs)", "first stage of A, in the CTA",
                         "to first B stage seen", "to first MMA", "to first copied A stage", "mainloops"]
    by = {p.name: p for p in rep.phases}
    # every CTA with work marks its start's chains: its B copy is issued before its stage is seen,
    # which the MMA warps look for after their own stage of A and before their first MMA; its
    # first copied A stage comes after its first MMA (medians over CTAs keep each CTA's order)
    assert all(by[n].ctas >= rep.ctas_with_work for n in ("to first B copy", "to first B stage seen"))
    assert 0 < by["to first B copy"].median_us <= by["to first B stage seen"].median_us <= rep.time_to_first_mma_us
    assert by["first stage of A, in the CTA"].median_us <= by["to first B stage seen"].median_us
    assert rep.time_to_first_mma_us <= by["to first copied A stage"].median_us < rep.kernel_us
    trace = json.loads(json.dumps(run.trace()))
    assert (trace["format"], trace["kind"]) == (1, "trace")
    assert sum(e["ph"] == "X" for e in trace["traceEvents"]) >= rep.ctas_with_work * 3
    assert run.plain_us > 0 and run.instrumented_us > 0
    # launched right behind another (programmatic, both outputs checked): CTAs start on SMs the
    # first launch leaves before its last CTA exits (case 3: 128 CTAs on 132 SMs, and CTAs of
    # half tiles end early), and no first MMA comes before the first launch's end
    behind = run.behind
    assert behind.start_earliest_us < 0 < behind.first_mma_median_us <= behind.first_mma_max_us
    assert behind.start_earliest_us <= behind.start_median_us < behind.first_mma_median_us
    assert "right behind another launch" in run.table()


def test_cupti_agrees_with_events_for_one_kernel():
    # launched in plain stream order: programmatic launches overlap the calls' kernels, which the
    # events see and the per-call traces do not (test_cupti.py)
    from nvgg.backends.cute import CuteBackend
    from nvgg.kernels.sm90.family import Sm90Kernels
    serial = CuteBackend(tensormaps="host", family=Sm90Kernels(programmatic=False))
    res = datapath.run_one(cases.get("1"), strategy="persistent", backend=serial, device=torch.device("cuda"),
                           timer="cupti")
    assert res.status == "ok" and res.cupti["activities"] == 1 and res.cupti["gaps_us"] == 0
    # each traced call runs alone after an L2 flush, the batch's calls back to back after one: the
    # traced kernel is the slower by a few percent on case 1 (NOTES.md, Timer and flags), so 5%
    assert res.cupti["kernel_us"] == pytest.approx(res.stats.mean_us, rel=0.05)


@pytest.mark.sm90
def test_occupancy_api_agrees_with_the_arithmetic():
    from nvgg.backends import get
    from nvgg.profiling.occupancy_report import report
    rows = report(cases.get("3"), get("cute"), "persistent", torch.device("cuda"), None)
    assert len(rows) == 1
    row = rows[0]
    assert row["api_blocks_per_sm"] == row["blocks_per_sm"] >= 1
    # case 3's default is the wide build: m 192 is one wide tile (128 + 64 rows), m 320 two (128, then
    # a wide 128 + 64), each across 3072 / 128 = 24 n tiles
    assert row["tiles"] == (1 + 2) * 24 and 0 < row["sm_coverage"] <= 1


GPU_SUBMISSION = '''
import torch
from task import input_t, output_t

TABLE = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]

def expand(packed, sf):
    raw = packed[:, :, 0].view(torch.uint8)
    nib = torch.stack((raw & 15, raw >> 4), -1).reshape(raw.shape[0], -1).long()
    return torch.tensor(TABLE, device=raw.device)[nib] * sf[:, :, 0].to(raw.device).float().repeat_interleave(16, 1)

def custom_kernel(data: input_t) -> output_t:
    abc, sf, _, sizes = data
    for (a, b, c), (sfa, sfb) in zip(abc, sf):
        c[:, :, 0] = (expand(a, sfa) @ expand(b, sfb).T).half()
    return [c for _, _, c in abc]
'''


def test_profile_a_submission_names_its_kernels(tmp_path):
    path = tmp_path / "submission.py"
    path.write_text(GPU_SUBMISSION)
    out = CliRunner().invoke(app, ["profile", "--cupti", "--submission", str(path), "--case", "test-3", "--timeout", "120",
                                   "--json", str(tmp_path / "p.json")])
    assert out.exit_code == 0, out.output
    (res,) = json.loads((tmp_path / "p.json").read_text())["results"]
    cu = res["cupti"]
    assert res["status"] == "ok" and res["backend"] == "submission" and cu["calls"] == 15
    assert cu["activities"] >= 2 * 4 and len(cu["kernels"]) >= 2  # per group: expand, matmul, ...
    assert sum(k["per_call"] for k in cu["kernels"]) == pytest.approx(cu["activities"])
    assert cu["host_overhead_us"] == pytest.approx(res["time_us"] - cu["kernel_us"])
    assert res["verdict"]["phrase"] and any(k["name"][:40] in out.stdout for k in cu["kernels"])
    from test_result import validate
    validate(json.loads((tmp_path / "p.json").read_text()))  # profile's JSON is a file of the shipped schema


@pytest.mark.skipif(shutil.which("ncu") is None, reason="ncu not on PATH")
def test_ncu_on_a_submission(tmp_path):
    path = tmp_path / "submission.py"
    path.write_text(GPU_SUBMISSION)
    out = CliRunner().invoke(app, ["profile", "--ncu", "--submission", str(path), "--case", "test-3", "--out", str(tmp_path),
                                   "--json", str(tmp_path / "p.json")])
    assert out.exit_code == 0, out.output
    doc = json.loads((tmp_path / "p.json").read_text())["ncu"]["test-3"]
    assert len(doc["kernels"]) >= 2 and all(k["duration_us"] > 0 for k in doc["kernels"])
    assert list(tmp_path.glob("nvgg-test-3-submission.ncu-rep"))
