"""Host side of the sm_100a kernel: compiling without a GPU, choosing a tile per case, the plan of a
persistent launch (tiles, schedule, tables), the host encoding of every group's tensor maps, and
the launches.

Tiles, in kernel order: group by group, in a group n tile by n tile (`mma_m` rows of B each), m
tiles (`mma_n` rows of A) fastest. A tile record is four int32: (group, n tile, m tile, k tiles).
A persistent launch runs `clusters` CTA clusters (one CTA, or a pair with cta_group 2, per SM);
cluster c runs records runs[c]:runs[c + 1] (`schedule.contiguous`, costs = k tiles), on as many
clusters as the GPU holds at once (`resident_clusters`) or fewer where the tiles are fewer.

Device tensors of a persistent launch (`Tables`): runs int32 [clusters + 1], tiles int32 [T, 4],
groups int64 [G, 8] (kernels/groups.py columns), and by tensor-map mode either the host-encoded
map table int64 [G, 5, 16] (`host`) or the per-CTA workspace int64 [ctas, visits, 5, 16]
(`device`, written by the kernel; `visits` = the most groups a cluster's run passes through).
"""

from __future__ import annotations

import functools
import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from types import SimpleNamespace

import torch

from ...errors import NvggError
from .. import launch, schedule, tensormaps
from .. import cache as kcache
from .. import groups as kgroups
from . import config as gemm  # the DSL kernel (nvfp4_gemm) is imported where one is compiled
from . import params as kparams
from .phase_slots import SM100

_HERE = Path(__file__).resolve().parent
# what a compiled entry depends on (by path: importing the kernel module imports CuTe DSL); this
# file and the packer too, since they write the entry's recorded facts
SOURCES = tuple(_HERE / name for name in ("nvfp4_gemm.py", "config.py", "params.py", "phase_slots.py")) + tuple(
    _HERE.parent / name for name in ("asm.py", "phase_slots.py", "groups.py")) + (Path(__file__),)
SUPPORTED_ARCHS = ("sm_100a",)
CONFIGS = tuple(gemm.Sm100Config(mma_n=n, cta_group=g) for g in gemm.CTA_GROUPS for n in gemm.MMA_N)
# how a launch reaches the GPU: "driver" (default: cuLaunchKernelEx on the cached cubin, the
# parameters packed once by params.py, no DSL in the process) or "dsl" (the DSL's compiled host
# function, which makes the maps at every call)
LAUNCH_PATHS = ("driver", "dsl")


def launch_path() -> str:
    """The launch path in force: NVGG_SM100_LAUNCH, driver by default."""
    path = os.environ.get("NVGG_SM100_LAUNCH", "driver")
    if path not in LAUNCH_PATHS:
        raise NvggError(f"NVGG_SM100_LAUNCH={path!r}: use one of {', '.join(LAUNCH_PATHS)}, or unset it")
    return path


def kernel_name(config: gemm.Sm100Config) -> str:
    tile = f"mma={config.mma_m}x{config.mma_n},cta_group={config.cta_group}"
    if not config.persistent:
        return f"nvfp4_gemm_sm100[{tile}]"
    suffix = ",instrumented" if config.instrument else ""
    return f"nvfp4_grouped_gemm_sm100[{tile},tensormaps={config.tensormaps}{suffix}]"


def _fake_args():
    """Placeholder arguments of `__call__` (null pointers, nominal sizes, a fake stream): what
    `cute.compile` needs to build the kernel without a GPU."""
    import cutlass
    import cutlass.cute as cute
    from cutlass.cute.runtime import make_fake_stream, make_ptr

    from . import nvfp4_gemm as dsl

    def ptr(dtype, align=16):
        return make_ptr(dtype, 0, cute.AddressSpace.gmem, assumed_align=align)

    return (ptr(dsl.AB_DTYPE, 32), ptr(dsl.AB_DTYPE, 32), ptr(dsl.SF_DTYPE), ptr(dsl.SF_DTYPE),
            ptr(dsl.C_DTYPE), cutlass.Int32(128), cutlass.Int32(256), cutlass.Int32(256), ptr(cutlass.Int32),
            ptr(cutlass.Int32), ptr(cutlass.Int64), ptr(cutlass.Int64, gemm.MAP_BYTES), ptr(cutlass.Int64),
            cutlass.Int32(1), cutlass.Int32(1), make_fake_stream())


# the reference groups whose maps the compile records and checks: one small (no map spans 128 KiB),
# one large (every map does), at addresses that are only placeholders
_REFERENCE_GROUPS = ((40, 256, 256), (300, 4096, 7168))


def _fake_group(m: int, n: int, k: int, base: int):
    """A stand-in for kgroups.GroupTensors with placeholder addresses (nothing is dereferenced)."""
    address = iter(range(base, base + 5 * (1 << 32), 1 << 32))
    tensors = {name: SimpleNamespace(data_ptr=(lambda a=next(address): a)) for name in ("a", "b", "sfa", "sfb", "c")}
    return SimpleNamespace(m=m, n=n, k=k, **tensors)


def record_templates(config: gemm.Sm100Config) -> list[list[int]]:
    """The build-constant words of its five maps (params.template), from the DSL's own encoder;
    and a check that params.encode then reproduces the DSL's maps, words 0-7, for both reference
    groups (an error otherwise: the driver launch would pass wrong maps)."""
    encode = encoder(config)
    captured = []
    for i, (m, n, k) in enumerate(_REFERENCE_GROUPS):
        group = _fake_group(m, n, k, 0x7F0000000000 + i * 0x100000)
        row = torch.zeros((gemm.MAPS, tensormaps.MAP_WORDS), dtype=torch.int64)
        encode(group, row)
        captured.append((group, [[int(x) & ((1 << 64) - 1) for x in r] for r in row.tolist()]))
    ranks = [len(kparams.map_geometry(w, 1, 1, 1)[0]) for w in range(gemm.MAPS)]
    templates = [kparams.template(words, rank) for words, rank in zip(captured[0][1], ranks)]
    for group, maps in captured:
        ours = kparams.group_maps(templates, kparams.map_addresses(group), group.m, group.n, group.k)
        for which in range(gemm.MAPS):
            if ours[which][:8] != maps[which][:8]:
                raise RuntimeError(f"{kernel_name(config)}: map {which} of a {group.m}x{group.n}x{group.k} group as "
                                   f"nvgg encodes it differs from the DSL's: {[hex(w) for w in ours[which][:8]]} vs "
                                   f"{[hex(w) for w in maps[which][:8]]}")
    return templates


def compile_gemm(config: gemm.Sm100Config, arch: str = "sm_100a", *, need_callable: bool = True,
                 store: kcache.CompileCache | None = None) -> kcache.Entry:
    """Compile (or fetch) the kernel of `config` for `arch` from placeholder arguments: works
    without a GPU. One compiled kernel serves any shapes (they are run-time arguments). A disk hit
    with `need_callable=False` imports no DSL: the driver launch needs only the record."""
    if arch not in SUPPORTED_ARCHS:
        raise ValueError(f"the sm100 kernels build for {', '.join(SUPPORTED_ARCHS)}; got {arch}")
    store = store or kcache.shared()
    key = kcache.CacheKey.make(kernel_name(config), config, None, arch, SOURCES)

    def build(folder: Path) -> kcache.Built:
        import cutlass.cute as cute

        from . import nvfp4_gemm as dsl

        kernel = dsl.Nvfp4GemmSm100(config)
        fn = cute.compile(kernel, *_fake_args(),
                          options=f"--gpu-arch {arch} --keep-ptx --keep-cubin --dump-dir {folder}")
        ptx = fn.artifacts.PTX
        ptx = ptx if isinstance(ptx, str) else ptx.decode()
        params = launch.entry_params(ptx)
        meta = {"name": kernel_name(config), "arch": arch, "threads": config.threads,
                "dynamic_smem_bytes": kernel.shared_storage.size_in_bytes(),
                "config": asdict(config), "shape": None,
                "cluster": [config.cta_group, 1, 1], "mma_tile": [config.mma_m, config.mma_n, gemm.TILE_K],
                "stages": {"ab": kernel.num_ab_stage, "acc": kernel.num_acc_stage, "c": kernel.num_c_stage},
                "tmem_columns": config.tmem_columns, "tmem_alloc_columns": kernel.num_tmem_alloc_cols,
                "accumulators": {"buffers": config.acc_buffers, "stride_columns": config.acc_buffer_stride,
                                 "overlapping": config.overlapping_accum,
                                 "epilogue_subtile_columns": kernel.epi_tile_n,
                                 "released_after_subtile": kernel.acc_release_subtile},
                "operands": "swapped: the MMA computes C^T = B A^T (n on the MMA's M, m on its N)",
                "tcgen05_mma": sorted(set(_ptx_ops(ptx, "tcgen05.mma"))),
                "tensormap_replace": "tensormap.replace" in ptx,
                "params": params, "param_sizes": [kparams.param_size(p) for p in params],
                "map_templates": [[str(w) for w in t] for t in record_templates(config)]}
        return kcache.Built(fn, ptx, bytes(fn.artifacts.CUBIN), meta)

    return store.get(key, build, need_callable=need_callable)


def templates_of(entry: kcache.Entry) -> list[list[int]]:
    """The map templates the compile recorded (params.template)."""
    return [[int(w) for w in t] for t in entry.info["map_templates"]]


def _ptx_ops(ptx: str, prefix: str) -> list[str]:
    import re
    return re.findall(re.escape(prefix) + r"[a-z0-9_.:]*", ptx)


# ---------------------------------------------------------------------------------------------
# Choosing a tile: a model, not a measurement (no B200 has run these kernels)

@dataclass(frozen=True)
class Estimate:
    config: gemm.Sm100Config
    tiles: int  # tiles (cluster tiles with cta_group 2)
    clusters: int
    makespan_us: float  # the longest cluster's modelled time

    def to_dict(self) -> dict:
        return {"mma_tile": [self.config.mma_m, self.config.mma_n], "cta_group": self.config.cta_group,
                "tiles": self.tiles, "clusters": self.clusters, "model_us": round(self.makespan_us, 3)}


def tile_records(shapes, config: gemm.Sm100Config) -> list[tuple[int, int, int, int]]:
    """(group, n tile, m tile, k tiles) of every tile, in kernel order."""
    records = []
    for g, (m, n, k) in enumerate(shapes):
        for tn in range(-(-n // config.mma_m)):
            for tm in range(-(-m // config.mma_n)):
                records.append((g, tn, tm, k // gemm.TILE_K))
    return records


def estimate(shapes, config: gemm.Sm100Config, sms: int, fp4_tflops: float, dram_gbs: float) -> Estimate:
    """A model of a persistent launch's time on `sms` SMs: each CTA streams, per 256-k stage, its
    128 rows of B and their scales (18 KB) at its share of DRAM bandwidth (shared by the CTAs that
    run at once), while its tensor core does 2 · 128 · mma_n · 256 FLOPs at its share of the fp4
    rate; a stage takes the longer of the two. A's rows come from L2 (every n tile reads them).
    The longest cluster's run under `schedule.contiguous` is the estimate."""
    records = tile_records(shapes, config)
    clusters = max(1, min(len(records), sms // config.cta_group))
    active = clusters * config.cta_group
    stage_bytes = gemm.CTA_ROWS * gemm.TILE_K // 2 + gemm.CTA_ROWS * gemm.TILE_K // gemm.SF_VEC
    memory_us = stage_bytes / (dram_gbs * 1e3 / active)
    compute_us = 2 * gemm.CTA_ROWS * config.mma_n * gemm.TILE_K / (fp4_tflops * 1e6 / sms)
    costs = [r[3] for r in records]
    runs, order = schedule.contiguous(costs, clusters)
    return Estimate(config, len(records), clusters, schedule.makespan(costs, runs, order) * max(memory_us, compute_us))


def choose(shapes, sms: int, fp4_tflops: float, dram_gbs: float) -> Estimate:
    """The configuration (mma_n, cta_group) the model rates fastest for these groups; between equal
    estimates, the one whose CTAs load fewer bytes of A a stage (a CTA pair loads half each), then
    the narrower tile. Remembered per shapes and model inputs: a run asks for it several times
    (compile, its cache-hit timing, tiles, the launch), each slow enough to show (lab log)."""
    return _choose(tuple(tuple(s) for s in shapes), sms, fp4_tflops, dram_gbs)


@functools.lru_cache(maxsize=256)
def _choose(shapes: tuple, sms: int, fp4_tflops: float, dram_gbs: float) -> Estimate:
    options = [estimate(shapes, c, sms, fp4_tflops, dram_gbs) for c in CONFIGS]
    return min(options, key=lambda e: (round(e.makespan_us, 6), e.config.mma_n // e.config.cta_group,
                                       e.config.mma_n))


# ---------------------------------------------------------------------------------------------
# Persistent launch: plan and device tables

@dataclass
class Plan:
    records: list[tuple[int, int, int, int]]
    runs: list[int]
    clusters: int
    visits: int  # the most groups a cluster's run passes through (device-mode map slots per CTA)


def plan(shapes, config: gemm.Sm100Config, resident: int) -> Plan:
    """The schedule of a persistent launch on at most `resident` clusters (those the GPU holds at
    once: `resident_clusters`), one run each."""
    records = tile_records(shapes, config)
    if not records:
        raise ValueError("no tiles: every group needs m, n, k > 0")
    clusters = max(1, min(len(records), resident))
    runs, order = schedule.contiguous([r[3] for r in records], clusters)
    return Plan(records, runs, clusters, schedule.visits([r[0] for r in records], runs, order))


@dataclass
class Tables:
    """What a persistent launch reads through raw pointers (the launch owns it)."""

    plan: Plan
    runs: torch.Tensor
    tiles: torch.Tensor
    groups: torch.Tensor
    maps: torch.Tensor  # host: the map table; device: the per-CTA workspace
    phases: torch.Tensor | None
    encode_us: list[float]  # host mode: each group's map encoding on the host


def build_tables(groups: list[kgroups.GroupTensors], config: gemm.Sm100Config, resident: int,
                 phases: torch.Tensor | None = None, the_plan: Plan | None = None,
                 templates: list[list[int]] | None = None) -> Tables:
    """The device tables of a persistent launch over `groups` (`the_plan`: the schedule, where
    the caller has made it already; `templates`: the build's map templates, `templates_of(entry)`,
    which host mode's map table needs)."""
    device = groups[0].c.device
    the_plan = the_plan or plan([(g.m, g.n, g.k) for g in groups], config, resident)
    ctas = the_plan.clusters * config.cta_group
    runs = torch.tensor(the_plan.runs, dtype=torch.int32).to(device)
    tiles = torch.tensor(the_plan.records, dtype=torch.int32).to(device)
    group_rows = torch.tensor([g.base_row() for g in groups], dtype=torch.int64).to(device)
    encode_us: list[float] = []
    if config.tensormaps == "host":
        if templates is None:
            raise ValueError("host-mode tables need the build's map templates (templates_of(entry))")

        def encode(i: int, row: torch.Tensor) -> None:
            g = groups[i]
            words = kparams.group_maps(templates, kparams.map_addresses(g), g.m, g.n, g.k)
            row.copy_(torch.tensor([[tensormaps.signed64(x) for x in w] for w in words], dtype=torch.int64))

        table = tensormaps.build_table(len(groups), gemm.MAPS, encode, device)
        maps, encode_us = table.table, table.encode_us
    else:
        maps = torch.zeros((ctas, the_plan.visits, gemm.MAPS, tensormaps.MAP_WORDS), dtype=torch.int64, device=device)
    if phases is not None and tuple(phases.shape) != (ctas, SM100.slots):
        raise ValueError(f"the phase buffer must be [{ctas}, {SM100.slots}], got {tuple(phases.shape)}")
    return Tables(the_plan, runs, tiles, group_rows, maps, phases, encode_us)


def resident_clusters(entry: kcache.Entry, cta_group: int) -> int:
    """Clusters of `cta_group` CTAs of this kernel the GPU holds at once (the driver's
    cuOccupancyMaxActiveClusters on the cached cubin: shared memory, registers, and a pair's two
    SMs in one GPC), so a persistent grid never runs a second wave. Needs the GPU (what an H100
    answered: lab log)."""
    return launch.max_active_clusters(entry, (cta_group, 1, 1))


# ---------------------------------------------------------------------------------------------
# The DSL's own encoder of one group's maps: the source of the map templates at compile time, and
# the reference the tests hold params.encode to

def _map_config(config: gemm.Sm100Config) -> gemm.Sm100Config:
    """The maps depend on the tile and cluster only: one encoder serves every build of a tile."""
    return gemm.Sm100Config(mma_n=config.mma_n, cta_group=config.cta_group)


@functools.lru_cache(maxsize=None)
def _encoder_fn(config: gemm.Sm100Config):
    import cutlass
    import cutlass.cute as cute
    from cutlass.cute.runtime import make_ptr

    from . import nvfp4_gemm as dsl

    kernel = dsl.Nvfp4GemmSm100(config)
    p = functools.partial(make_ptr, mem_space=cute.AddressSpace.gmem)
    return cute.compile(kernel.encode_maps, p(dsl.AB_DTYPE, 0, assumed_align=32), p(dsl.AB_DTYPE, 0, assumed_align=32),
                        p(dsl.SF_DTYPE, 0, assumed_align=16), p(dsl.SF_DTYPE, 0, assumed_align=16),
                        p(dsl.C_DTYPE, 0, assumed_align=16), cutlass.Int32(128), cutlass.Int32(256),
                        cutlass.Int32(256), p(cutlass.Int64, 0, assumed_align=64))


def encoder(config: gemm.Sm100Config):
    """A function (group, host int64 [5, 16] row) that writes the group's five maps as the
    kernel's atoms encode them: the DSL's own encoder, compiled once per tile (host code only, so
    it runs on any machine, GPU or not). Words 8-15 of each map are whatever the DSL leaves there."""
    import cutlass
    import cutlass.cute as cute
    from cutlass.cute.runtime import make_ptr

    from . import nvfp4_gemm as dsl

    fn = _encoder_fn(_map_config(config))

    def encode(g, row: torch.Tensor) -> None:
        if row.dtype != torch.int64 or tuple(row.shape) != (gemm.MAPS, tensormaps.MAP_WORDS) or row.is_cuda \
                or not row.is_contiguous():
            raise ValueError("encode writes a contiguous host int64 [5, 16] row")
        ptr = functools.partial(make_ptr, mem_space=cute.AddressSpace.gmem)
        fn(ptr(dsl.AB_DTYPE, g.b.data_ptr(), assumed_align=32), ptr(dsl.AB_DTYPE, g.a.data_ptr(), assumed_align=32),
           ptr(dsl.SF_DTYPE, g.sfb.data_ptr(), assumed_align=16), ptr(dsl.SF_DTYPE, g.sfa.data_ptr(), assumed_align=16),
           ptr(dsl.C_DTYPE, g.c.data_ptr(), assumed_align=16), cutlass.Int32(g.m), cutlass.Int32(g.n),
           cutlass.Int32(g.k), ptr(cutlass.Int64, row.data_ptr(), assumed_align=64))

    return encode


# ---------------------------------------------------------------------------------------------
# Launches

def dsl_args(config: gemm.Sm100Config, g, tables: Tables | None, grid_ctas: int):
    """The DSL host function's arguments (the `dsl` launch path, and the tests' reference)."""
    import cutlass
    import cutlass.cute as cute
    from cutlass.cute.runtime import make_ptr

    from . import nvfp4_gemm as dsl

    def ptr(dtype, tensor, align=16):
        return make_ptr(dtype, tensor.data_ptr() if tensor is not None else 0, cute.AddressSpace.gmem,
                        assumed_align=align)

    t = tables
    return (ptr(dsl.AB_DTYPE, g.b, 32), ptr(dsl.AB_DTYPE, g.a, 32), ptr(dsl.SF_DTYPE, g.sfb), ptr(dsl.SF_DTYPE, g.sfa),
            ptr(dsl.C_DTYPE, g.c), cutlass.Int32(g.m), cutlass.Int32(g.n), cutlass.Int32(g.k),
            ptr(cutlass.Int32, t.runs if t else None), ptr(cutlass.Int32, t.tiles if t else None),
            ptr(cutlass.Int64, t.groups if t else None), ptr(cutlass.Int64, t.maps if t else None, gemm.MAP_BYTES),
            ptr(cutlass.Int64, t.phases if t else None), cutlass.Int32(grid_ctas),
            cutlass.Int32(t.plan.visits if t else 1))


def table_pointers(tables: Tables | None) -> tuple[int, int, int, int, int]:
    """The persistent kernel's runs, tiles, group table, map table or workspace and phase buffer
    pointers (0 where absent: the per-group kernel has none)."""
    if tables is None:
        return (0, 0, 0, 0, 0)
    return tuple(t.data_ptr() if t is not None else 0
                 for t in (tables.runs, tables.tiles, tables.groups, tables.maps, tables.phases))


def group_grid(config: gemm.Sm100Config, g) -> tuple[int, int, int]:
    """The per-group kernel's grid: (n tiles · cta_group, m tiles), as its host function launches it."""
    return (-(-g.n // config.mma_m) * config.cta_group, -(-g.m // config.mma_n), 1)


def packed_params(entry: kcache.Entry, g, tables: Tables | None) -> list[bytes]:
    """The kernel parameters of a launch over `g` (and `tables`, persistent), as params.pack
    writes them; refused for an entry whose parameters differ from what pack writes."""
    reason = kparams.check_layout(entry.info.get("param_sizes", ()))
    if reason:
        raise RuntimeError(f"{entry.info['name']}: {reason}; set NVGG_SM100_LAUNCH=dsl to launch through the DSL")
    return kparams.pack(templates_of(entry), g, table_pointers(tables), tables.plan.visits if tables else 1)


def group_launch(entry: kcache.Entry, g: kgroups.GroupTensors, config: gemm.Sm100Config):
    """The per-group kernel over one group: grid (n tiles · cta_group, m tiles), in stream order.
    Driver path: maps and parameters packed here, once; DSL path: made by the DSL at every call."""
    if config.persistent:
        raise ValueError("group_launch takes the per-group kernel")
    device = g.c.device.index or 0
    if launch_path() == "dsl":
        return launch.DslLaunch(entry.fn, dsl_args(config, g, None, 0), keep=g, device_index=device)
    return launch.PackedLaunch(entry, packed_params(entry, g, None), group_grid(config, g),
                               cluster=(config.cta_group, 1, 1), keep=g, device_index=device)


def persistent_launch(entry: kcache.Entry, groups: list[kgroups.GroupTensors], tables: Tables,
                      config: gemm.Sm100Config, programmatic: bool | None = None):
    """The persistent kernel over `tables`; group 0's tensors are the template maps. Driver path:
    launched programmatically (its CTAs may start as the kernel before leaves; see nvfp4_gemm.py),
    except, unless asked (`programmatic`), the instrumented build, which stamps its phase buffer
    before its wait and is launched right behind the buffer's zeroing."""
    if not config.persistent:
        raise ValueError("persistent_launch takes the persistent kernel")
    ctas = tables.plan.clusters * config.cta_group
    device = groups[0].c.device.index or 0
    if launch_path() == "dsl":
        return launch.DslLaunch(entry.fn, dsl_args(config, groups[0], tables, ctas), keep=(groups, tables),
                                device_index=device)
    return launch.PackedLaunch(entry, packed_params(entry, groups[0], tables), (ctas, 1, 1),
                               cluster=(config.cta_group, 1, 1),
                               programmatic=not config.instrument if programmatic is None else programmatic,
                               keep=(groups, tables), device_index=device)


def with_mode(config: gemm.Sm100Config, tensormaps_mode: str, instrument: bool = False) -> gemm.Sm100Config:
    return replace(config, persistent=True, tensormaps=tensormaps_mode, instrument=instrument)
