"""Parsing Nsight Compute's raw CSV, on output recorded from a real run: `nvgg profile --ncu
--case test-3 --backend torch --strategy sequential` on an NVIDIA H200 (ncu 2025.3)."""

import csv
from pathlib import Path

import pytest

from nvgg.kernels import registry
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


# ---------------------------------------------------------------------------------------------
# The metric set of each architecture, against what ncu lists for its chip

NCU_LISTS = Path(__file__).parent / "fixtures" / "ncu"  # tests/fixtures/ncu/regenerate.py writes them


def _chip(chip: str):
    """{name: type} of every metric ncu lists for `chip`, and {type: suffixes ncu accepts}."""
    import gzip

    with gzip.open(NCU_LISTS / f"{chip}.tsv.gz", "rt") as f:
        types = {line.split("\t")[0]: line.split("\t")[1] for line in f if not line.startswith("#")}
    accepted: dict[str, set] = {}
    for line in (NCU_LISTS / f"{chip}.suffixes.tsv").read_text().splitlines():
        if not line.startswith("#"):
            base, suffixes = line.split("\t")
            accepted.setdefault(types[base], set()).update(suffixes.split(","))
    return types, accepted


@pytest.mark.parametrize("major", [cls.capability[0] for cls in registry.families() if cls.ncu])
def test_every_requested_metric_exists_on_the_archs_chip(major):
    arch = ncu.arch_metrics(major)
    types, accepted = _chip(arch.chip)
    assert len(types) > 3000  # the whole list, not a stub
    for name in arch.requested():
        base, suffix = name.split(".", 1)
        assert base in types, f"{arch.chip} has no {base}"
        assert suffix in accepted[types[base]], f"{arch.chip}: {base} ({types[base]}) takes no .{suffix}"


def test_the_mma_pipe_is_the_one_the_archs_mmas_run_on():
    gb100, _ = _chip("gb100")
    gh100, _ = _chip("gh100")
    sm100, sm90 = ncu.arch_metrics(10), ncu.arch_metrics(9)
    # tcgen05 runs on the TC pipe; GB100's tensor pipe counters are the warp-level MMAs
    assert sm100.tensor_pipe == "sm__pipe_tc_cycles_active" and sm100.tensor_pipe in gb100
    assert "sm__pipe_tensor_cycles_active" in gb100 and sm100.tensor_pipe != "sm__pipe_tensor_cycles_active"
    assert not any(name.startswith("sm__pipe_tensor_type_hmma_hgmma") for name in gb100)
    assert sm100.tensor_memory in gb100 and sm100.tensor_memory not in gh100
    assert sm100.tmem_pipe in gb100 and sm100.tmem_pipe not in gh100
    # Hopper: the wgmma pipe exists there and the TC pipe does not
    assert sm90.tensor_pipe in gh100 and sm90.tensor_pipe not in gb100
    assert "sm__pipe_tc_cycles_active" not in gh100 and sm90.tensor_memory is None


def _row(major: int, values: dict) -> str:
    header = ["Kernel Name", "gpu__time_duration.sum", ncu.CC_MAJOR, *values]
    units = ["", "nsecond", "", *("%" for _ in values)]
    data = ["kern", "10000", str(major), *(str(v) for v in values.values())]
    return "\n".join(",".join(f'"{c}"' for c in line) for line in (header, units, data))


def test_a_blackwell_row_reads_the_tc_pipe_not_the_warp_level_one():
    values = {"sm__pipe_tc_cycles_active.avg.pct_of_peak_sustained_elapsed": 82.5,
              "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed": 0.0,
              "sm__mem_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed": 40.0,
              "sm__inst_executed_pipe_tmem.avg.pct_of_peak_sustained_elapsed": 12.5,
              "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed": 20.0}
    (k,) = ncu.parse_raw_csv(_row(10, values))
    assert (k.arch, k.tensor_pipe, k.tensor_pct, k.tmem_pct, k.tmem_pipe_pct) == (
        "sm_100", "sm__pipe_tc_cycles_active", 82.5, 40.0, 12.5)
    from nvgg.verdict import _ncu_bound

    v = _ncu_bound(ncu.NcuReport([k]), 10.0)
    assert v.kind == "compute-bound" and "TC pipe (tcgen05) 82%" in v.phrase
    assert v.evidence["tensor_pipe"] == ["sm__pipe_tc_cycles_active"] and v.evidence["tmem_pct"] == 40.0
    assert v.evidence["tmem_pipe_pct"] == 12.5
    from nvgg.report.profile import ncu_table

    assert "12.5% / 40.0%" in ncu_table(ncu.NcuReport([k])) and "sm__pipe_tc_cycles_active" in ncu_table(ncu.NcuReport([k]))


def test_a_hopper_row_reads_the_wgmma_pipe_and_an_unknown_arch_reads_none():
    values = {"sm__pipe_tensor_type_hmma_hgmma_qgmma_imma_igmma_bmma_bgmma_cycles_active.avg.pct_of_peak_sustained_elapsed": 61.0,
              "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed": 5.0,
              "sm__pipe_tc_cycles_active.avg.pct_of_peak_sustained_elapsed": 99.0}
    (k,) = ncu.parse_raw_csv(_row(9, values))
    assert (k.arch, k.tensor_pct, k.tmem_pct) == ("sm_90", 61.0, None)
    (other,) = ncu.parse_raw_csv(_row(12, values))  # an architecture without a set: no pipe is guessed
    assert (other.arch, other.tensor_pct, other.tensor_pipe) == (None, None, None)
    from nvgg.verdict import _ncu_bound

    v = _ncu_bound(ncu.NcuReport([other]), 10.0)
    assert v.kind == "latency-bound" and "not read on this architecture" in v.phrase


def test_the_profile_runs_its_target_under_ncu_with_the_gpus_metric_set(monkeypatch, tmp_path):
    """ncu wraps nvgg's one-shot child (procs.run_once); a target that hangs is that child's timeout."""
    from nvgg import cases, procs
    seen = {}

    def fake_once(fn, *, wrap, timeout_s, log_path, **kwargs):
        seen.update(cmd=list(wrap), fn=fn, kwargs=kwargs, log=log_path)
        raise procs.ChildFailure("timed out after 1 s (a hang, or far too slow for its time limit)")

    monkeypatch.setattr(ncu, "find_ncu", lambda: "ncu")
    monkeypatch.setattr(ncu, "local_major", lambda: 10)
    monkeypatch.setattr(ncu.procs, "run_once", fake_once)
    with pytest.raises(NvggError, match="ncu's target: timed out after 1 s"):
        ncu.profile(cases.get("3"), tmp_path, strategy="persistent", backend="cute", tensormaps=None)
    assert seen["fn"] is ncu.one_call and seen["kwargs"]["case"].id == "3" and seen["kwargs"]["strategy"] == "persistent"
    assert seen["cmd"][:3] == ["ncu", "--clock-control", "none"] and seen["log"].name == "nvgg-3-persistent-cute.ncu.log"
    metrics = seen["cmd"][seen["cmd"].index("--metrics") + 1].split(",")
    assert metrics == list(ncu.arch_metrics(10).requested())
    assert "sm__pipe_tc_cycles_active.avg.pct_of_peak_sustained_elapsed" in metrics


def test_the_warp_states_come_from_the_first_family_ncu_reported_largest_first():
    latency = {"smsp__average_warp_latency_issue_stalled_long_scoreboard.ratio": 2.0,
               "smsp__average_warp_latency_issue_stalled_selected.ratio": 1.0,
               "smsp__average_warp_latency_issue_stalled_no_instruction.ratio": 3.0,
               "smsp__average_warp_latency_issue_stalled_sleeping.ratio": 0.0,
               "smsp__average_warps_issue_stalled_wait_per_issue_active.ratio": 9.0}
    (k,) = ncu.parse_raw_csv(_row(9, latency))
    # the latency family is read whole; the per-issue-active one beside it is not mixed in
    assert list(k.stalls.items()) == [("no_instruction", 3.0), ("long_scoreboard", 2.0), ("selected", 1.0),
                                      ("sleeping", 0.0)]
    # shares of all 6 warp cycles per issued instruction; the issue itself and empty states left out
    assert k.top_stalls() == [("no_instruction", 0.5), ("long_scoreboard", pytest.approx(1 / 3))]
    (w,) = ncu.parse_raw_csv(_row(9, {"smsp__average_warps_issue_stalled_wait_per_issue_active.ratio": 4.0,
                                      "smsp__average_warps_issue_stalled_gmma_per_issue_active.ratio": 1.0}))
    assert w.stalls == {"wait": 4.0, "gmma": 1.0} and w.top_stalls(1) == [("wait", 0.8)]
    from nvgg.report.profile import ncu_table

    table = ncu_table({"9": ncu.NcuReport([k, w])})
    assert "warps waited on" in table and "no_instruction 50%, long_scoreboard 33%" in table and "wait 80%, gmma 20%" in table
    # a recording without the section: no states, a dash in the table
    (old,) = ncu.parse_raw_csv(FIXTURE.read_text())[:1]
    assert old.stalls == {} and old.top_stalls() == [] and ncu_table(ncu.NcuReport([old])).splitlines()[2].split("|")[-2].strip() == "—"


def test_the_profile_asks_ncu_for_the_warp_states():
    assert "WarpStateStats" in ncu.SECTIONS


def test_a_recorded_hopper_kernel_s_warp_states_add_up_to_ncus_cycles_per_issue():
    """`nvgg profile --ncu --case 4 --strategy persistent --backend cute` on an NVIDIA H200 (ncu
    2025.3.1, WarpStateStats among the sections): the per-issue-active family, 19 states."""
    text = (Path(__file__).parent / "fixtures" / "ncu_raw_h200_persistent_case-4.csv").read_text()
    (k,) = ncu.parse_raw_csv(text)
    assert (k.arch, k.grid, k.block, k.registers) == ("sm_90", 128, 384, 149)
    assert len(k.stalls) == 19 and k.stalls["selected"] == 1.0
    header, _, row = [r for r in csv.reader(text.splitlines()) if r][:3]
    total = float(dict(zip(header, row))["smsp__average_warp_latency_per_inst_issued.ratio"])
    assert sum(k.stalls.values()) == pytest.approx(total, abs=0.05)  # 9.05 against 9.07: rounding
    assert [why for why, _ in k.top_stalls()] == ["long_scoreboard", "no_instruction", "wait"]
