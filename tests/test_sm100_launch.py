"""The sm_100a kernels' driver launch against the DSL's own, on the CPU: for every build and every
case, the kernel parameters nvgg packs (kernels/sm100/params.py) equal, byte for byte, what the
DSL's compiled host function passes to its launch (captured without a GPU: kernels/dsl_capture.py),
and so do the grid, cluster and shared memory; the host-mode map table equals the DSL encoder's
maps; and a warm process does that host work without importing CuTe DSL. On a GPU (any: the
sm_90a kernels stand in), the launch object and the occupancy query the driver path uses."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch

pytest.importorskip("cutlass")

from nvgg import cases, inputs  # noqa: E402
from nvgg.errors import NvggError  # noqa: E402
from nvgg.kernels import dsl_capture, launch, tensormaps  # noqa: E402
from nvgg.kernels import groups as kgroups  # noqa: E402
from nvgg.kernels.sm100 import config as gemm, host, params  # noqa: E402

CASES = [c.id for c in cases.builtin()]
# shapes at the edges of the maps' fields: tensors just below and at 128 KiB (A: m·k/2, C: 2·m·n,
# scales: 512 bytes a 128-row × 64-k block), one row, rows past a 128-row scale block, large k
EDGES = [(127, 128, 2048), (128, 128, 2048), (64, 1024, 256), (63, 1024, 256), (1, 128, 256), (129, 256, 512),
         (256, 2048, 256), (257, 4096, 1024), (513, 7168, 7168), (40, 7168, 16384)]
PERSISTENT = [host.with_mode(c, mode, instrument) for c in host.CONFIGS for mode in gemm.TENSORMAP_MODES
              for instrument in (False, True)]


def _Stream():
    """The stream argument as the DSL's host function takes it (what DslLaunch passes)."""
    return launch._StreamArg(ctypes.c_void_p(0x5157))


def _groups(case_id):
    """A case's groups as placeholders at distinct aligned addresses (nothing is dereferenced)."""
    case = cases.get(case_id) if isinstance(case_id, str) else None
    shapes = case.groups if case else case_id
    return [host._fake_group(m, n, k, 0x7E0000000000 + i * (1 << 36)) for i, (m, n, k) in enumerate(shapes)]


def _same_launch(captured: dict, ours: list[bytes], grid, cluster, smem) -> None:
    assert [len(p) for p in captured["params"]] == [len(p) for p in ours] == list(params.PARAM_SIZES)
    for i, (theirs, mine) in enumerate(zip(captured["params"], ours)):
        if i in params.MAP_PARAMS:  # words 0-7: the DSL never writes words 8-15 (ours are zero)
            assert theirs[:64] == mine[:64], f"parameter {i} (map {params.MAP_PARAMS.index(i)})"
            assert mine[64:] == bytes(64)
        elif len(theirs) == 12:  # three flags, a padding byte the DSL never writes, two int32
            assert theirs[:3] + theirs[4:] == mine[:3] + mine[4:], f"parameter {i}"
        else:
            assert theirs == mine, f"parameter {i}"
    assert captured["grid"] == tuple(grid) and captured["block"] == (gemm.THREADS, 1, 1)
    assert captured["attrs"]["cluster"] == tuple(cluster) and captured["smem"] == smem


@pytest.mark.parametrize("config", host.CONFIGS, ids=lambda c: f"{c.mma_n}x{c.cta_group}")
def test_per_group_parameters_equal_the_dsls_for_every_case(config):
    entry = host.compile_gemm(config)
    capture = dsl_capture.Capture(entry.fn)
    assert capture.sizes[host.kcache.kernel_symbol(entry.info)] == entry.info["param_sizes"]
    checked = 0
    for case_id in CASES + [EDGES]:
        for g in _groups(case_id):
            got = capture.run((*host.dsl_args(config, g, None, 0), _Stream()))
            _same_launch(got, host.packed_params(entry, g, None), host.group_grid(config, g),
                         (config.cta_group, 1, 1), entry.info["dynamic_smem_bytes"])
            checked += 1
    assert checked == sum(cases.get(c).g for c in CASES) + len(EDGES)


@pytest.mark.parametrize("config", PERSISTENT,
                         ids=lambda c: f"{c.mma_n}x{c.cta_group}-{c.tensormaps}{'-instrumented' if c.instrument else ''}")
def test_persistent_parameters_equal_the_dsls_for_every_case(config):
    entry = host.compile_gemm(config)
    capture = dsl_capture.Capture(entry.fn)
    for case_id in CASES + [EDGES]:
        groups = _groups(case_id)
        plan = host.plan([(g.m, g.n, g.k) for g in groups], config, 148 // config.cta_group)
        ctas = plan.clusters * config.cta_group
        fake = lambda a: SimpleNamespace(data_ptr=lambda: a)  # noqa: E731
        tables = SimpleNamespace(plan=plan, runs=fake(0x10000), tiles=fake(0x20000), groups=fake(0x30000),
                                 maps=fake(0x40000), phases=fake(0x50000) if config.instrument else None)
        got = capture.run((*host.dsl_args(config, groups[0], tables, ctas), _Stream()))
        _same_launch(got, host.packed_params(entry, groups[0], tables), (ctas, 1, 1), (config.cta_group, 1, 1),
                     entry.info["dynamic_smem_bytes"])
        assert host.table_pointers(tables)[:4] == (0x10000, 0x20000, 0x30000, 0x40000)


@pytest.mark.parametrize("config", host.CONFIGS, ids=lambda c: f"{c.mma_n}x{c.cta_group}")
def test_host_map_table_equals_the_dsl_encoders_for_every_case(config):
    config = host.with_mode(config, "host")
    templates = host.templates_of(host.compile_gemm(config, need_callable=False))
    dsl = host.encoder(config)
    for case_id in CASES:
        groups = kgroups.all_groups(inputs.generate(cases.get(case_id), "cpu"))
        tables = host.build_tables(groups, config, 148 // config.cta_group, templates=templates)
        assert len(tables.encode_us) == len(groups)
        for g, row in zip(groups, tables.maps):
            want = torch.zeros(gemm.MAPS, tensormaps.MAP_WORDS, dtype=torch.int64)
            dsl(g, want)
            assert torch.equal(row[:, :8], want[:, :8]), (case_id, g.m, g.n, g.k)
            assert not row[:, 8:].any()


def test_the_packer_refuses_a_kernel_with_other_parameters():
    entry = host.compile_gemm(gemm.Sm100Config(), need_callable=False)
    other = SimpleNamespace(info=dict(entry.info, param_sizes=entry.info["param_sizes"][:-1]))
    with pytest.raises(RuntimeError, match="NVGG_SM100_LAUNCH=dsl"):
        host.packed_params(other, _groups([(64, 128, 256)])[0], None)
    with pytest.raises(NvggError, match="NVGG_SM100_LAUNCH='cuda'"):
        os.environ["NVGG_SM100_LAUNCH"] = "cuda"
        try:
            host.launch_path()
        finally:
            del os.environ["NVGG_SM100_LAUNCH"]


def test_map_templates_are_recorded_and_checked_at_compile_time(monkeypatch):
    entry = host.compile_gemm(host.with_mode(host.CONFIGS[0], "host"), need_callable=False)
    templates = host.templates_of(entry)
    assert len(templates) == gemm.MAPS and all(len(t) == 8 and t[0] == 0 for t in templates)
    # a wrong field position in nvgg's encoder is caught before any launch uses it
    real = params.encode
    monkeypatch.setattr(params, "encode", lambda *a: [w ^ (1 << 40) if i == 4 else w for i, w in enumerate(real(*a))])
    with pytest.raises(RuntimeError, match="differs from the DSL's"):
        host.record_templates(host.CONFIGS[0])


def test_a_warm_process_does_the_host_work_without_the_dsl():
    """From a disk cache a new process finds the builds, plans, encodes the maps and packs the
    parameters of the persistent and per-group launches of a case without importing CuTe DSL (its
    import and a JIT cost seconds): benchmarks/warm_start_sm100.py, which also times it. The script
    fills the run's kernel cache (NVGG_CACHE_DIR or the default) with the case's builds, compiling
    those it lacks, then measures in a process of its own and prints that process's rows."""
    script = os.path.join(os.path.dirname(__file__), "..", "benchmarks", "warm_start_sm100.py")
    warm = subprocess.run([sys.executable, script, "--cases", "3", "--json", "-"], capture_output=True, text=True,
                          timeout=600)
    assert warm.returncode == 0, warm.stderr[-2000:]
    (row,) = json.loads(warm.stdout)["rows"]
    assert row["hits"] == ["disk"] * len(row["hits"]) and row["dsl_modules"] == []
    assert row["params"] == len(params.PARAM_SIZES) * (1 + cases.get("3").g) and row["maps"] == cases.get("3").g
    assert row["host_work_ms"] > 0


# --- on a GPU: the launch object and the occupancy query (the sm_90a kernels stand in) -------------

@pytest.mark.gpu
def test_max_active_clusters_from_the_driver():
    """The persistent grid's size comes from cuOccupancyMaxActiveClusters on the kernel's own cubin:
    a kernel that takes an SM's shared memory fits once an SM, pairs at most half the SMs (what an
    H100 answered: lab log)."""
    from nvgg.kernels.sm90 import config as sm90, host as sm90host

    torch.zeros(1, device="cuda")
    entry = sm90host.compile_gemm(sm90.GemmConfig(tile_m=128, stages=4, persistent=True, tensormaps="host"), None, "sm_90a",
                                  need_callable=False)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    assert launch.max_active_clusters(entry, (1, 1, 1)) == sms
    assert sms // 2 - 8 <= launch.max_active_clusters(entry, (2, 1, 1)) <= sms // 2


@pytest.mark.gpu
@pytest.mark.sm90
def test_a_packed_launch_in_clusters_is_right_back_to_back():
    """The driver launch's cluster and programmatic attributes on real hardware: the sm_90a
    persistent kernel (which uses no cluster feature, so clusters change only where its CTAs run)
    launched through PackedLaunch in clusters of 2, programmatically, three times back to back
    over the same tables: right each time, as the backend's own launch is."""
    import struct

    from nvgg import reference
    from nvgg.kernels.sm90.family import Sm90Kernels
    from nvgg.kernels.sm90 import host as sm90host

    data = inputs.generate(cases.get("test-4"), "cuda")
    groups, config, entry, ctas = Sm90Kernels()._persistent(data, "device", instrument=False)
    tables = sm90host.build_tables(groups, config, ctas)
    grid = sm90host.grid_dims(config, None, ctas)
    if grid[0] % 2 or launch.max_active_clusters(entry, (2, 1, 1)) * 2 < grid[0]:
        pytest.skip(f"a grid of {grid[0]} CTAs does not run as resident pairs on this GPU")
    values = [struct.pack("<Q", tables.table.data_ptr()), struct.pack("<I", tables.total_tiles)]
    params_ = values + [b"\0"] * (len(entry.info["params"]) - 2)
    packed = launch.PackedLaunch(entry, params_, grid, cluster=(2, 1, 1), programmatic=True, keep=tables)
    want = reference.reference(data)
    for _ in range(3):
        reference.poison(data)
        packed()
        packed()
        torch.cuda.synchronize()
        verdict = reference.check(inputs.outputs(data), want)
        assert verdict.ok, verdict.message
