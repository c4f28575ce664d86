"""Parsing Nsight Compute's raw CSV, on output recorded from a real run: `nvgg profile --ncu
--case test-3 --backend torch --strategy sequential` on an NVIDIA H200 (ncu 2025.3, 2026-11-26)."""

from pathlib import Path

import pytest

from nvgg.errors import NvggError
from nvgg.profiling import ncu

FIXTURE = Path(__file__).parent / "fixtures" / "ncu_raw_h200_torch_test-3.csv"


def test_parses_every_kernel_of_the_recorded_call():
    kernels = ncu.parse_raw_csv(FIXTURE.read_text())
    assert len(kernels) == 38  # 2 groups x 19 PyTorch kernels (expansions, copies, the GEMM)
    first = kernels[0]
    assert "BitwiseAndFunctor" in first.name
    assert first.duration_us == pytest.approx(2.464)          # "2,464" ns
    assert (first.registers, first.grid, first.block) == (30, 32, 128)
    assert first.smem_bytes == 0 and first.theoretical_occupancy_pct == 100
    assert first.achieved_occupancy_pct == pytest.approx(5.87)
    # no dram__bytes_read/write in this recording: bytes come from the rate x the duration
    assert first.dram_bytes == pytest.approx(15_584_415_584.42 * 2.464e-6)


def test_the_gemm_kernel_is_recognised():
    gemm = [k for k in ncu.parse_raw_csv(FIXTURE.read_text()) if k.name.startswith("nvjet")]
    assert len(gemm) == 2 and all(k.registers == 168 and k.block == 384 for k in gemm)
    assert all(k.tensor_pct is not None for k in gemm)


def test_report_totals_against_the_sol_bytes():
    rep = ncu.NcuReport(kernels=ncu.parse_raw_csv(FIXTURE.read_text()), sol_bytes=227_328)
    d = rep.to_dict()
    assert d["duration_us"] == pytest.approx(sum(k.duration_us for k in rep.kernels))
    assert d["dram_vs_sol"] == pytest.approx(rep.dram_bytes / 227_328)


def test_empty_output_is_a_clear_error():
    with pytest.raises(NvggError, match="no kernel rows"):
        ncu.parse_raw_csv("==PROF== Disconnected\n")
