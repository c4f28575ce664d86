"""GPU tests of the observers: CUPTI records beside the event time, and Nsight Compute."""

import json
import shutil

import pytest
import torch
from typer.testing import CliRunner

from nvgg import cases, runner
from nvgg.cli import app

pytestmark = pytest.mark.gpu


def test_cupti_timer_splits_kernel_time_from_host_overhead():
    res = runner.run_one(cases.get("test-3"), strategy="sequential", backend="torch", device=torch.device("cuda"),
                         timer="cupti")
    cu = res.cupti
    assert res.status == "ok" and cu["calls"] == 15
    # the torch backend launches several kernels per group (expand A, expand B, GEMM, ...)
    assert cu["activities"] >= 2 * 3
    assert 0 < cu["busy_us"] <= cu["span_us"] and cu["idle_us"] == pytest.approx(cu["span_us"] - cu["busy_us"])
    assert cu["host_overhead_us"] == pytest.approx(res.stats.mean_us - cu["span_us"])


@pytest.mark.skipif(shutil.which("ncu") is None, reason="ncu not on PATH")
def test_ncu_profile_reports_counters(tmp_path):
    out = CliRunner().invoke(app, ["profile", "--ncu", "--case", "test-3", "--backend", "torch", "--strategy", "sequential",
                                   "--out", str(tmp_path), "--json", str(tmp_path / "p.json")])
    assert out.exit_code == 0, out.output
    doc = json.loads((tmp_path / "p.json").read_text())["ncu"]
    assert doc["kernels"] and all(k["duration_us"] > 0 for k in doc["kernels"])
    assert doc["dram_bytes"] > 0 and any(k["registers"] for k in doc["kernels"])
    assert list(tmp_path.glob("*.ncu-rep"))
