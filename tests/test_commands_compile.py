"""`nvgg compile` for every strategy on the benchmark cases, on the CPU: a kernel that stops
compiling, outgrows the sm_90 limits or loses its wgmma fails here (and so in CI)."""

import json

import pytest

from nvgg.profiles import get

LIMITS = get("h100").limits  # the sm_90 limits (CUDA C Programming Guide, compute capability 9.0)


@pytest.fixture(scope="module", autouse=True)
def _arch():
    """sm_90a for the DSL; the builds go to the run's kernel cache (NVGG_CACHE_DIR or the default),
    where each compiles once a run and not at all from a cache a previous run filled."""
    mp = pytest.MonkeyPatch()
    mp.setenv("CUTE_DSL_ARCH", "sm_90a")
    yield
    mp.undo()


@pytest.mark.parametrize("strategy", ["persistent", "multistream", "graph", "sequential"])
@pytest.mark.parametrize("case_id", ["1", "2", "3", "4"])
def test_compile_every_strategy_on_the_benchmarks(cli, case_id, strategy):
    out = cli("compile", "--arch", "sm_90a", "--case", case_id, "--strategy", strategy, "--backend", "cute", "--json", "-")
    assert out.exit_code == 0, out.output
    kernels = json.loads(out.stdout)["kernels"]
    assert kernels, "no kernel reported"
    expected = 1 if strategy == "persistent" else None
    if expected:
        assert len(kernels) == 1 and "grouped" in kernels[0]["name"]
    else:  # the per-group launches run the expand kernel (A to fp16) before each GEMM
        assert [k["name"] for k in kernels].count("nvfp4_expand_a_sm90") == 1
    for k in kernels:
        gemm_kernel = k["name"] != "nvfp4_expand_a_sm90"
        assert k["arch"] == "sm_90a" and k["wgmma"] is gemm_kernel
        assert 0 < k["registers"] <= LIMITS.registers_per_thread
        assert (0 < k["smem_bytes"] if gemm_kernel else k["smem_bytes"] == 0)
        assert k["smem_bytes"] <= LIMITS.smem_per_block_bytes
        assert 0 < k["threads"] <= LIMITS.max_threads_per_block
        assert 0 < k["theoretical_occupancy"] <= 1


def test_compile_refuses_an_arch_without_kernels(cli):
    out = cli("compile", "--arch", "sm_80", "--case", "3", "--backend", "cute")
    assert out.exit_code == 2 and "sm_80" in out.stderr
