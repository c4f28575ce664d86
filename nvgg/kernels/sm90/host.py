"""Host side of the sm_90a NVFP4 kernels: compiling (no GPU needed), the per-group tensor maps and
the device group table both kernels read, and the launch closures.

Tensor maps: the host encodes one template pair per launch (A, then B) with the driver's
cuTensorMapEncodeTiled: A's describes the fp16 copy of A that phase 0 writes (k × m fp16, boxes of
A16_BOX_ROWS rows × 64 k), B's the packed bytes of B as a 2-D uint8 tensor (k/2 bytes × n, boxes
of 128 bytes × 128 rows); both with the 128-byte swizzle and rows beyond the tensor filled with
zeros. The template's box, swizzle and fill are what every group uses, its address and dimensions
are placeholders (group 0's). In the persistent kernel's `device` mode each CTA copies the template
into its own slot of the workspace (one pair per CTA), and its producer warp rewrites the address,
dimensions and row stride in place (tensormap.replace) whenever its next tile belongs to another
group, from the group's row of the table (see ptx.retarget_tensormap and ptx.publish_tensormaps).
In `host` mode the host encodes every group's pair at prepare time into a table [G, 2, 16] (the
same encoder, the group's own address and dimensions), which the kernel only reads.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from pathlib import Path

import torch

from .. import groups as kgroups, launch, schedule, tensormaps
from .. import cache as kcache
from ..groups import GroupTensors
from . import config as gemm  # the DSL kernel (nvfp4_gemm) is imported where one is compiled

_HERE = Path(__file__).resolve().parent
# what a compiled entry depends on (by path: importing the kernel modules imports CuTe DSL); this
# file too, since it writes the entry's recorded facts
SOURCES = tuple(_HERE / name for name in ("nvfp4_gemm.py", "ptx.py", "config.py", "phase_slots.py")) + tuple(
    _HERE.parent / name for name in ("asm.py", "phase_slots.py", "groups.py", "schedule.py")) + (Path(__file__),)
SUPPORTED_ARCHS = ("sm_90a",)


def kernel_name(config: gemm.GemmConfig, shape) -> str:
    if config.expand_only:
        return "nvfp4_expand_a_sm90"
    if config.persistent:
        suffix = ",instrumented" if config.instrument else ""
        suffix += "" if config.chunked else ",strided"
        suffix += "" if config.slots == gemm.A16_SLOTS else f",slots={config.slots}"
        suffix += "" if config.l2_hints else ",no_l2_hints"
        suffix += "" if config.half_tiles else ",no_half_tiles"
        suffix += ",wide_tiles" if config.wide_tiles else ""
        suffix += f",tensormaps={config.tensormaps}"  # named as the sm_100a kernel names it
        suffix += "" if config.readiness == "rows" else f",{config.readiness}_wait"
        suffix += ",split_k" if config.split_k else ""
        return f"nvfp4_grouped_gemm_sm90[tile_m={config.tile_m},stages={config.stages}{suffix}]"
    m, n, k = shape
    return f"nvfp4_gemm_sm90[m={m},n={n},k={k},tile_m={config.tile_m},stages={config.stages}]"


def compile_gemm(config: gemm.GemmConfig, shape=None, arch: str = "sm_90a", *, need_callable: bool = True,
                 store: kcache.CompileCache | None = None) -> kcache.Entry:
    """Compile (or fetch) one kernel for `arch` from placeholder arguments: works without a GPU."""
    if arch not in SUPPORTED_ARCHS:
        raise ValueError(f"only {', '.join(SUPPORTED_ARCHS)} kernels exist; got {arch}")
    store = store or kcache.shared()
    key = kcache.CacheKey.make(kernel_name(config, shape), config, shape, arch, SOURCES)

    def build(folder: Path) -> kcache.Built:
        import cutlass
        import cutlass.cute as cute
        from cutlass.cute.runtime import make_fake_stream, make_ptr

        from .nvfp4_gemm import Nvfp4GemmSm90

        kernel = Nvfp4GemmSm90(config, shape)
        table = make_ptr(cutlass.Int64, 0, cute.AddressSpace.gmem, assumed_align=16)
        fn = cute.compile(kernel, table, cutlass.Int32(0), cutlass.Int32(1), make_fake_stream(),
                          options=f"--gpu-arch {arch} --keep-ptx --keep-cubin --dump-dir {folder}")
        ptx = fn.artifacts.PTX
        ptx = ptx if isinstance(ptx, str) else ptx.decode()
        meta = {"name": kernel_name(config, shape), "arch": arch, "threads": config.threads,
                "dynamic_smem_bytes": 0 if config.expand_only else kernel.shared_storage.size_in_bytes(),
                "config": {"tile_m": config.tile_m, "stages": config.stages, "persistent": config.persistent,
                           "instrument": config.instrument, "chunked": config.chunked,
                           "slots": config.slots, "l2_hints": config.l2_hints, "half_tiles": config.half_tiles,
                           "expand_only": config.expand_only, "wide_tiles": config.wide_tiles,
                           "tensormaps": config.tensormaps, "readiness": config.readiness,
                           "split_k": config.split_k},
                "shape": list(shape) if shape else None, "wgmma": "wgmma.mma_async" in ptx,
                # read from the PTX once here, not at every launcher built from the entry
                "params": launch.entry_params(ptx), "setmaxnreg": setmaxnreg(ptx)}
        return kcache.Built(fn, ptx, bytes(fn.artifacts.CUBIN), meta)

    return store.get(key, build, need_callable=need_callable)


resources = kcache.resources


def setmaxnreg(ptx_text: str) -> dict:
    """The register counts the kernel's warpgroups move to after launch ({"inc": n, "dec": n})."""
    return {kind: int(n) for kind, n in re.findall(r"setmaxnreg\.(inc|dec)\.sync\.aligned\.u32\s+(\d+);", ptx_text)}


# ---------------------------------------------------------------------------------------------
# Device tables


def encode_tensor_map(ptr: int, rows: int, row_bytes: int, box_rows: int) -> list[int]:
    """The 128-byte tensor map of a (rows, row_bytes) uint8 matrix, box (box_rows, 128 bytes)."""
    return tensormaps.encode_tiled_2d("UINT8", ptr, rows, row_bytes, 1, gemm.ROW_BYTES, box_rows)


def encode_tensor_map_f16(ptr: int, rows: int, cols: int, box_rows: int) -> list[int]:
    """The 128-byte tensor map of a (rows, cols) fp16 matrix, box (box_rows, 64 elements = 128
    bytes): the layout wgmma reads a K-major fp16 operand from (one 128-byte swizzle atom across
    64 k)."""
    return tensormaps.encode_tiled_2d("FLOAT16", ptr, rows, cols, 2, gemm.K_SUB, box_rows)


@dataclass
class Tables:
    table: torch.Tensor  # int64 [G, TABLE_COLS] on the device
    template: torch.Tensor | None  # `device` maps: int64 [2, 16], the host-encoded template pair (A, B)
    workspace: torch.Tensor | None  # `device` maps: int64 [ctas, 2, 16], each CTA's own descriptor pair
    total_tiles: int
    phases: torch.Tensor | None = None  # int64 [ctas, SLOTS]: the instrumented build's timestamps
    a16: torch.Tensor | None = None  # persistent kernel: every group's fp16 A, written by phase 0
    barrier: torch.Tensor | None = None  # persistent kernel: the grid barrier's arrival count (u64, see ptx.grid_target)
    units: int = 0  # phase-0 work units (one row × 64 k of A) over all groups
    runs: torch.Tensor | None = None  # persistent kernel: int32 [ctas + 1 + tiles], each CTA's tiles (schedule.schedule)
    # persistent kernel: u64 readiness counters (ptx.ready_wait), one a READY_ROWS rows of A, or in
    # the "chunks" build one a READY_ROWS rows and a stage (gemm.chunk_units)
    ready: torch.Tensor | None = None
    maps: torch.Tensor | None = None  # `host` maps: int64 [G, 2, 16], each group's fp16 A and packed B maps
    encode_us: list[float] | None = None  # `host` maps: the host's time for each group's pair
    # the split build: fp32 partial sums, one slot a writer piece, and each slot's u64 flag
    # (config.COL_PARTIALS, COL_FLAGS)
    partials: torch.Tensor | None = None
    flags: torch.Tensor | None = None


def count_tiles(groups: list[GroupTensors], tile_m: int, wide: bool = False) -> int:
    return gemm.table_tiles([g.m for g in groups], [g.n for g in groups], tile_m, wide)[2]


def group_units(g: GroupTensors) -> int:
    """Phase-0 work units of one group: one row × 64 k of A each."""
    return g.m * (g.k // gemm.K_SUB)


def build_tables(groups: list[GroupTensors], config: gemm.GemmConfig, ctas: int,
                 phases: torch.Tensor | None = None) -> Tables:
    """The device table for `groups` and a launch of `config` over `ctas` CTAs (and, for the
    instrumented build, the phase buffer the kernel fills), with the fp16 copy of A (m × k per
    group) that phase 0 fills, and for the persistent kernel its grid barrier's state. A kernel
    built with wide tiles gets them: the table merges every group's last tiles that can be. The
    persistent kernel's phase 0 is dealt evenly (`gemm.even_deal`)."""
    wide = config.wide_tiles
    device = groups[0].c.device
    tile_m = config.tile_m
    ms, ns = [g.m for g in groups], [g.n for g in groups]
    begins, m_tiles, total = gemm.table_tiles(ms, ns, tile_m, wide)
    first = groups[0]
    # each group's rows rounded up to the chunks build's turns: its helper warps store whole turns
    sizes = [gemm.padded_rows(g.m) * g.k for g in groups]
    a16_offsets = [sum(sizes[:i]) for i in range(len(groups))]
    a16 = torch.empty(sum(sizes), dtype=torch.float16, device=device)
    barrier = torch.zeros(1, dtype=torch.int64, device=device) if config.persistent else None
    template = workspace = None
    if config.tensormaps == "device":  # the template pair and each CTA's pair, rewritten in the kernel
        a_map = encode_tensor_map_f16(a16.data_ptr(), first.m, first.k, gemm.A16_BOX_ROWS)
        template = torch.tensor([a_map, encode_tensor_map(first.b.data_ptr(), first.n, first.k // 2, gemm.TILE_N)],
                                dtype=torch.int64).to(device)
        workspace = torch.zeros((ctas, 2, gemm.TENSORMAP_BYTES // 8), dtype=torch.int64, device=device)
    if total >= gemm.MAX_TILES:
        raise ValueError(f"{total} tiles: the persistent kernel's tile order holds fewer than {gemm.MAX_TILES}")
    chunks = config.readiness == "chunks"
    if chunks:  # a counter a row block and a stage
        chunk_begins, chunk_units, stages, ready_begins = gemm.chunk_units(ms, [g.k for g in groups])
    else:
        ready_begins = [0]
        for g in groups:
            ready_begins.append(ready_begins[-1] + -(-g.m // gemm.READY_ROWS))
    ready = torch.zeros(ready_begins[-1], dtype=torch.int64, device=device) if config.persistent else None
    rows, units = [], 0
    for i, g in enumerate(groups):
        row = g.base_row() + [0] * (gemm.TABLE_COLS - kgroups.BASE_COLS)
        row[gemm.COL_TILE_BEGIN] = begins[i]
        row[gemm.COL_TILE_END] = begins[i] + m_tiles[i] * (g.n // gemm.TILE_N)
        row[gemm.COL_M_TILES] = m_tiles[i]
        row[gemm.COL_A16] = a16.data_ptr() + 2 * a16_offsets[i]
        row[gemm.COL_UNIT_BEGIN] = units
        units += group_units(g)
        row[gemm.COL_UNIT_END] = units
        row[gemm.COL_READY_BEGIN] = ready_begins[i]
        if chunks:
            row[gemm.COL_CHUNK_BEGIN] = chunk_begins[i]
            row[gemm.COL_CHUNK_END] = (chunk_begins[1:] + [chunk_units])[i]
        rows.append(row)
    if template is not None:
        rows[0][gemm.COL_TEMPLATE] = template.data_ptr()
        rows[0][gemm.COL_WORKSPACE] = workspace.data_ptr()
    if phases is not None:
        rows[0][gemm.COL_PHASES] = phases.data_ptr()
    runs = maps = partials = flags = None
    if config.persistent:
        costs = gemm.tile_costs(ms, ns, tile_m, config.half_tiles, wide)
        if config.split_k:
            bounds, pieces = schedule.split_k(costs, gemm.tile_stages(ms, ns, [g.k for g in groups], tile_m, wide), ctas,
                                              gemm.SPLIT_COST)
            slots = max(1, sum(p.role == schedule.WRITER for p in pieces))
            partials = torch.empty(slots * gemm.MMA_THREADS * gemm.partial_words(config), dtype=torch.float32,
                                   device=device)
            flags = torch.zeros(slots, dtype=torch.int64, device=device)
            rows[0][gemm.COL_PARTIALS] = partials.data_ptr()
            rows[0][gemm.COL_FLAGS] = flags.data_ptr()
            runs = torch.tensor(bounds + pack_pieces(pieces, begins), dtype=torch.int32).to(device)
        else:
            bounds, order = schedule.schedule(costs, ctas)
            runs = torch.tensor(bounds + pack_order(order, begins), dtype=torch.int32).to(device)
        rows[0][gemm.COL_DEAL:gemm.COL_DEAL + 4] = gemm.even_deal(units, ctas)
        rows[0][gemm.COL_RUNS] = runs.data_ptr()
        rows[0][gemm.COL_READY] = ready.data_ptr()
    if config.tensormaps == "host":
        maps = tensormaps.build_table(len(groups), 2, lambda i, row: encode_pair(
            groups[i], rows[i][gemm.COL_A16], row), device)
        rows[0][gemm.COL_MAPS] = maps.table.data_ptr()
    rows[0][gemm.COL_UNITS] = units
    if chunks:
        rows[0][gemm.COL_CHUNK_UNITS] = chunk_units
        rows[0][gemm.COL_CHUNKS] = stages
    rows[0][gemm.COL_GROUPS] = len(groups)
    if barrier is not None:
        rows[0][gemm.COL_BARRIER] = barrier.data_ptr()
    table = torch.tensor(rows, dtype=torch.int64).to(device)
    return Tables(table, template, workspace, total, phases, a16, barrier, units, runs, ready,
                  maps.table if maps else None, maps.encode_us if maps else None, partials, flags)


def encode_pair(g: GroupTensors, a16_ptr: int, out: torch.Tensor) -> None:
    """Group g's two maps (`host` mode) into `out` (int64 [2, 16]): its fp16 A copy at `a16_ptr`,
    then its packed B, as the device mode's retargeting would make them."""
    out[0] = torch.tensor(encode_tensor_map_f16(a16_ptr, g.m, g.k, gemm.A16_BOX_ROWS))
    out[1] = torch.tensor(encode_tensor_map(g.b.data_ptr(), g.n, g.k // 2, gemm.TILE_N))


def pack_order(order: list[int], begins: list[int]) -> list[int]:
    """The persistent kernel's tile order with each tile's group in its high bits
    (tile | group << ORDER_GROUP_SHIFT; `begins`: each group's first tile)."""
    return [t | (bisect.bisect_right(begins, t) - 1) << gemm.ORDER_GROUP_SHIFT for t in order]


def pack_pieces(pieces: list[schedule.Piece], begins: list[int]) -> list[int]:
    """The split build's tile order: gemm.ORDER_WORDS int32 a piece (the order entry as
    `pack_order` makes it, kb | ke << SPAN_SHIFT, role, slot)."""
    entries = pack_order([p.tile for p in pieces], begins)
    words = []
    for entry, p in zip(entries, pieces):
        words += [entry, p.kb | p.ke << gemm.SPAN_SHIFT, p.role, p.slot]
    return words


class Launch:
    """Zero-argument launch over `tables` on torch's current stream through the DSL's compiled
    callable. The backend launches through `launch.DirectLaunch` (cheaper on the host); this path stays
    as the reference the device check compares it with. Both own the tables (the kernel reads them
    through raw pointers)."""

    def __init__(self, fn, tables: Tables, grid: tuple[int, int, int]):
        import cutlass
        import cutlass.cute as cute
        import cuda.bindings.driver as cu
        from cutlass.cute.runtime import make_ptr

        self.fn = fn
        self.tables = tables
        self.grid = grid
        self._stream = cu.CUstream
        self._args = (make_ptr(cutlass.Int64, tables.table.data_ptr(), cute.AddressSpace.gmem, assumed_align=16),
                      cutlass.Int32(tables.total_tiles), cutlass.Int32(grid[0]))

    def __call__(self) -> None:
        self.fn(*self._args, self._stream(torch.cuda.current_stream().cuda_stream))


def persistent_grid(groups: list[GroupTensors], config: gemm.GemmConfig, entry: kcache.Entry) -> int:
    """CTAs of the persistent kernel's launch: as many as are resident at once (its CTAs wait on
    each other's phase 0: every CTA must be running), never more than there are tiles or phase-0 rounds need
    (`config.grid_for`)."""
    res = resources(entry)
    sms = torch.cuda.get_device_properties(groups[0].c.device).multi_processor_count
    if config.split_k:  # pieces for every CTA that fits
        return sms * gemm.ctas_per_sm(res["registers"], res["smem_bytes"], config.threads)
    units = sum(group_units(g) for g in groups)
    return gemm.grid_for(count_tiles(groups, config.tile_m, config.wide_tiles), sms,
                         gemm.ctas_per_sm(res["registers"], res["smem_bytes"], config.threads), units)


EXPAND_CONFIG = gemm.GemmConfig(expand_only=True)


def expand_grid(tables: Tables, sm_count: int) -> int:
    """CTAs of the expand kernel for these tables: enough for one work unit a thread, at most
    8 waves of CTAs per SM (a grid-stride loop covers the rest)."""
    return max(1, min(-(-tables.units // gemm.EXPAND_THREADS), 8 * sm_count))


class ExpandThenGemm:
    """A per-group launch: the expand kernel (phase 0 over the table's one group), then the GEMM
    that reads the fp16 copy it wrote, in stream order."""

    def __init__(self, expand: launch.DirectLaunch, gemm_launch: launch.DirectLaunch):
        self.expand, self.gemm, self.tables = expand, gemm_launch, gemm_launch.tables

    def __call__(self) -> None:
        self.expand()
        self.gemm()


def grid_dims(config: gemm.GemmConfig, shape, ctas: int) -> tuple[int, int, int]:
    """The launch grid: (n tiles, m tiles, 1) per group, (ctas, 1, 1) persistent."""
    if config.persistent:
        return (ctas, 1, 1)
    m, n, _ = shape
    return (n // gemm.TILE_N, -(-m // config.tile_m), 1)
