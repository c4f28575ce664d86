"""Configuration of the sm_90a NVFP4 kernels and the arithmetic of their tiles, in plain Python:
what the host side, the backend and `nvgg compile` need without importing CuTe DSL (whose import
costs seconds); the DSL kernel itself is nvfp4_gemm.py, which builds on these names.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from .. import groups, tensormaps
from ..schedule import makespan, piece_loads, schedule, split_k

TILE_N = 128  # rows of B per CTA tile: two consumer warpgroups × 64 (wgmma's M per warpgroup)
K_STAGE = 256  # k per pipeline stage: 128 packed bytes a row, the tensor map box width
K_SUB = 64  # k per fp16 subtile: one 128-byte swizzle atom of fp16
SUBS_PER_STAGE = K_STAGE // K_SUB
# bytes a row of C takes where a CTA's last tile is staged in shared memory (`_store_staged`): 128
# fp16 and 16 bytes of padding
C_STAGE_ROW = TILE_N * 2 + 16
A16_SLOTS = 8  # fp16 A buffers the producer loads ahead (64 k each)
A16_BOX_ROWS = 32  # rows of one fp16 A copy: a slot gets only the boxes that hold rows < m
EXPAND_THREADS = 256  # threads per CTA of the expand kernel (the per-group launches' phase 0)
SCALE_CHUNK = 512  # bytes of scales for 128 rows × 64 k
SCALE_RUN = SCALE_CHUNK * SUBS_PER_STAGE  # bytes of scales for 128 rows × one stage
ROW_BYTES = K_STAGE // 2
MMA_THREADS = 256  # warps 0-7: the two MMA warpgroups (64 rows of B each)
MMA_WARPS = MMA_THREADS // 32
BAR_MMA = 1  # named CTA barrier of the MMA warps alone (phase 0)
# named CTA barrier at which the MMA warps tell the producer warp that they are done with the
# group columns staged in the last fp16 A slots (phase 0 over); the producer waits there before it
# first fills one of those slots
BAR_INFO = 2
HALF_ROWS = 64  # rows of A up to which a tile of tile_m 128 runs the half-width wgmma
# registers a thread after setmaxnreg (wide tiles, 384 threads): 168 each at launch (64 K registers
# over 384 threads, in steps of 8) = 2 × 128 × MMA_REGS + 128 × PRODUCER_REGS
PRODUCER_REGS, MMA_REGS = 56, 224
# Sources of the limits below:
SMEM_LIMIT = 232448  # bytes per block, CUDA C Programming Guide, compute capability 9.0 table
REG_LIMIT = 255  # registers per thread, same table
TMA_BOX_MAX = 256  # elements per box dimension, CUDA driver API cuTensorMapEncodeTiled
TMA_DIM_MAX = 1 << 32  # elements per tensor dimension, same
WGMMA_N = range(8, 257, 8)  # wgmma .f16 N: multiples of 8 up to 256, PTX ISA "wgmma.mma_async" shapes

# Columns of the int64 group table (one row a group) both kernels read: the group's packed A and B,
# blocked scales and C (addresses), its shape, and its tiles in the persistent kernel's order.
COL_A, COL_B, COL_SFA, COL_SFB, COL_C, COL_M, COL_N, COL_K = (groups.COL_A, groups.COL_B, groups.COL_SFA, groups.COL_SFB,
                                                            groups.COL_C, groups.COL_M, groups.COL_N, groups.COL_K)
COL_TILE_BEGIN, COL_TILE_END, COL_M_TILES = 8, 9, 10
# Launch-wide columns, read from row 0 only: the host-encoded template tensor-map pair (A, B), the
# workspace holding one pair per CTA (CTA c's at workspace + c * PAIR_BYTES), and the phase buffer
# of the instrumented build ([ctas, phase_slots.SM90.slots] int64; 0 when not instrumented).
COL_TEMPLATE, COL_WORKSPACE, COL_PHASES = 12, 13, 14
# A expanded once per launch (phase 0): per group the fp16 copy (m × k,
# row-major, each 64-k block in the k order of the B fragments) and its share of the phase-0 work
# units (one unit: one row × 64 k); launch-wide, the unit count and (persistent kernel) the grid
# barrier's state.
COL_A16, COL_UNIT_BEGIN, COL_UNIT_END = 11, 15, 16
COL_UNITS, COL_BARRIER, COL_GROUPS = 17, 18, 19
# launch-wide (persistent kernel): int32 [ctas + 1 + tiles], each CTA's list of tiles (`schedule`):
# the ctas + 1 run boundaries, then the tile order
COL_RUNS = 20
# persistent kernel: launch-wide, the host-encoded maps (`host` mode: [groups, 2, 16] int64, each
# group's fp16 A map then its packed B map) and the readiness counters of the fp16 copy (u64, one
# per READY_ROWS rows of a group's A); per group, the index of its first counter
COL_MAPS, COL_READY, COL_READY_BEGIN = 21, 22, 23
# launch-wide (persistent kernel, rows wait): how phase 0's units are dealt (`even_deal`): CTAs
# below the first count take the first share each, CTAs up to the second count the second share
COL_DEAL = 24  # 4 columns: first count, first share, second count, second share
# the "chunks" build (READINESS): per group, its first and end unit in a stage's worth of units
# over every group (`chunk_units`); launch-wide, that stage's units and the stages of the deepest k
COL_CHUNK_BEGIN, COL_CHUNK_END, COL_CHUNK_UNITS, COL_CHUNKS = 28, 29, 30, 31
# the columns phase 0 reads per group, staged in shared memory (the fp16 A slots, unused until the
# first tile's loads) by the persistent kernel, which therefore takes at most MAX_GROUPS groups
INFO_COLS = (COL_UNIT_END, COL_UNIT_BEGIN, COL_K, COL_A, COL_SFA, COL_A16, COL_READY_BEGIN)
MAX_GROUPS = 512
# rows of a group's A one readiness counter covers: one fp16 A box, what one TMA load reads
READY_ROWS = A16_BOX_ROWS
# the persistent kernel's tile order entries (int32): tile | group << ORDER_GROUP_SHIFT, so that a
# CTA finds a tile's group without searching the table (a chain of dependent loads)
ORDER_GROUP_SHIFT = 22
MAX_TILES = 1 << ORDER_GROUP_SHIFT
# the entries, and the chunks build's producer's key of an A tile's rows (mt · MAX_GROUPS + group),
# are positive int32 for every tile and group
assert MAX_TILES * MAX_GROUPS <= 1 << 31
TENSORMAP_MODES = tensormaps.MODES
# how the persistent kernel's producer knows the fp16 A rows of a group are written: "rows", the
# readiness counters of just that group's rows (faster than "grid" on three of the four
# benchmarks, about even on the other; lab log); "grid", a grid-wide barrier after all of phase 0
# (the earlier build's wait, kept for benchmarks to compare against). In both the MMA warps
# expand their share of A before their first MMA. "chunks": three more warps a CTA (HELPER_WARPS)
# expand A stage by stage (256 k over every group's rows, the first stage first) while the MMA
# warps run, and count each stage of each READY_ROWS rows apart, so the producer waits for the
# stage it loads of the rows it loads and no more
READINESS = ("rows", "grid", "chunks")
HELPER_WARPS = 3  # the "chunks" build's expanding warps, 9-11: the producer warp's warpgroup
HELPER_FIRST = MMA_WARPS + 1
BAR_HELPERS = 3  # named barrier of the helper warps alone (their end, instrumented build)
# rows of A one helper warp expands a turn: 32 lanes, a lane a 64-k block of a 256-k stage; the
# units a turn counts. Small turns spread a stage over many warps, which brings the first stage
# soonest; a warp keeps TURNS_IN_FLIGHT turns' loads in flight (the same rows, later stages) so
# that the helpers keep ahead of the main loops (turns of 16 or 32 rows made the first stage
# later, one turn at a time left the helpers behind case 1's main loops: lab log)
CHUNK_ROWS = 32 // SUBS_PER_STAGE
TURNS_IN_FLIGHT = 4
CHUNK_UNITS = CHUNK_ROWS * SUBS_PER_STAGE
# the split build (GemmConfig.split_k): launch-wide, the fp32 partial sums of its writer pieces
# (PARTIAL slots, one a writer: [MMA_THREADS, slot_rows / 2] words, each thread's accumulators) and
# one u64 flag a slot, to which each launch adds 1 once the slot is written (never reset, as the
# readiness counters). Its tile order has ORDER_WORDS int32 a position: the order entry, the stages
# kb | ke << SPAN_SHIFT, the role (schedule.WHOLE, WRITER, READER) and the slot (a writer's, which
# its tile's reader adds in)
COL_PARTIALS, COL_FLAGS = 32, 33
TABLE_COLS = 34
ORDER_WORDS = 4
SPAN_SHIFT = 16
MAX_STAGES = 1 << (31 - SPAN_SHIFT)  # ke << SPAN_SHIFT stays a positive int32
# a writer's or reader's extra work in the split build's schedule (its partial sum written or
# added in), in stages of a full tile; the backend splits only where the longest CTA's list
# shortens by more
SPLIT_COST = 1.0
TABLE_ROWS = 1 << 20  # the table's declared extent; the kernel reads only rows of real groups
TENSORMAP_BYTES = tensormaps.MAP_BYTES
PAIR_BYTES = 2 * TENSORMAP_BYTES


@dataclass(frozen=True)
class GemmConfig:
    """Launch configuration shared by the per-group and the persistent kernel."""

    tile_m: int = 128  # rows of A per CTA tile (wgmma N); 128 must be a multiple
    stages: int = 3  # depth of the packed-data ring (each stage is 256 k)
    persistent: bool = False
    # the persistent kernel's phase-timestamp build (profiling only; never the timed build): it
    # writes %globaltimer readings into the buffer at table row 0, COL_PHASES (its slots:
    # kernels/sm90/phase_slots.py, SM90)
    instrument: bool = False
    # persistent kernel: each CTA takes the list of tiles `schedule` gives it (contiguous runs,
    # balanced by cost; True) rather than every grid-th tile; a run stays in one group for longer,
    # so CTAs retarget their maps less often
    chunked: bool = True
    # fp16 A slots (64 k each) the producer may load ahead
    slots: int = A16_SLOTS
    # L2 eviction priorities on the copies, "last" for the fp16 A that every n
    # tile reads again, "first" for packed B that at most a few tiles of one CTA read
    l2_hints: bool = True
    # the expand kernel alone: phase 0 over the table's groups, for the per-group launches (which
    # cannot wait on each other: their grid may exceed what is resident)
    expand_only: bool = False
    # persistent kernel: where its tensor maps come from. "device": each CTA's producer rewrites one
    # pair in place (tensormap.replace) on every change of group; "host": every group's pair is
    # encoded at prepare time, the kernel only acquires and prefetches the group's pair
    tensormaps: str = "device"
    # persistent kernel: see READINESS
    readiness: str = "rows"
    # tile_m 128: a tile of at most HALF_ROWS rows (a group's last, or a group of m <= 64) runs a
    # wgmma half as wide (N = 64), at about half the tensor work
    half_tiles: bool = True
    # persistent kernel, tile_m 128 with half tiles: a group's last full tile and the at most
    # HALF_ROWS rows after it may run as one wide tile (the N = 128 and the N = 64 wgmma over the
    # same B fragments, so B is loaded and decoded once for both); the fp16 A slots hold
    # tile_m + HALF_ROWS rows. Whether a launch merges its tiles is the host's choice
    # (`tile_plan`), told to the kernel through the table's m-tile counts.
    wide_tiles: bool = False
    # persistent kernel, "chunks" build: its tiles' k may be shared by CTAs (schedule.split_k), each
    # CTA a run of even work; a tile's writer pieces leave fp32 partial sums, which its reader adds
    # in before it stores the tile. Whether a launch splits is the host's choice (`split_plan`)
    split_k: bool = False

    @property
    def slot_rows(self) -> int:
        """Rows of one fp16 A slot: tile_m, or tile_m + HALF_ROWS with wide tiles."""
        return self.tile_m + HALF_ROWS if self.wide_tiles else self.tile_m

    @property
    def info_slots(self) -> int:
        """The last fp16 A slots, which hold the staged group columns (INFO_COLS) during phase 0."""
        slot_bytes = self.slot_rows * K_SUB * 2
        return -(-MAX_GROUPS * len(INFO_COLS) * 8 // slot_bytes)

    @property
    def threads(self) -> int:
        """MMA warpgroups and one producer warp, or a whole producer warpgroup: with wide tiles,
        so that setmaxnreg can move registers to the MMA warpgroups, and in the "chunks" build,
        whose other three warps expand A (otherwise idle); the expand kernel: EXPAND_THREADS."""
        if self.expand_only:
            return EXPAND_THREADS
        return MMA_THREADS + (128 if self.wide_tiles or self.readiness == "chunks" else 32)

    @property
    def a16_slots(self) -> int:
        return self.slots

    @property
    def producer_warp(self) -> int:
        return MMA_WARPS

    @property
    def stage_bytes(self) -> int:
        return TILE_N * ROW_BYTES + SCALE_RUN  # packed B and its scales; A arrives as fp16 in slots

    @property
    def smem_bytes(self) -> int:
        fp16 = self.slots * self.slot_rows * K_SUB * 2  # A only: B goes to registers
        barriers = 2 * (self.stages + self.slots) * 8
        return self.stages * self.stage_bytes + fp16 + barriers + 2 * 1024  # 1 KB alignment of 2 regions

    def problems(self) -> str | None:
        """Why this configuration cannot compile, or None."""
        if self.tile_m not in (32, 64, 128):
            # 256 (one wgmma over a whole group of m <= 256) was tried: at 288 threads ptxas caps the
            # kernel at 168 registers, spills and serialises every wgmma (lab log)
            return f"tile_m={self.tile_m} must be 32, 64 or 128"
        if self.tile_m not in WGMMA_N or self.tile_m > TMA_BOX_MAX:
            return f"tile_m={self.tile_m} is not a valid wgmma N / tensor-map box height"
        if self.instrument and not self.persistent:
            return "instrument=True needs the persistent kernel (the phase buffer has one row per CTA)"
        if self.tile_m % A16_BOX_ROWS:
            return f"tile_m={self.tile_m} must be a multiple of the fp16 A box ({A16_BOX_ROWS} rows)"
        if self.slots < SUBS_PER_STAGE:
            return f"slots={self.slots}: the kernel needs at least {SUBS_PER_STAGE} (one stage of A)"
        if self.stages < 2:
            return f"stages={self.stages}: the load ring needs at least 2 stages to overlap"
        if self.tensormaps not in TENSORMAP_MODES or self.readiness not in READINESS:
            return (f"tensormaps={self.tensormaps!r} must be one of {TENSORMAP_MODES}, readiness={self.readiness!r} "
                    f"one of {READINESS}")
        if not self.persistent and (self.tensormaps, self.readiness) != ("device", "rows"):
            return "tensormaps and readiness choose between builds of the persistent kernel only"
        if self.wide_tiles and not (self.persistent and has_half_width(self.tile_m, self.half_tiles)):
            return "wide_tiles needs the persistent kernel with tile_m 128 and half tiles"
        if self.split_k and not (self.persistent and self.readiness == "chunks"):
            return "split_k needs the persistent kernel's chunks build (readiness='chunks')"
        if self.persistent and self.info_slots >= self.slots:
            return f"slots={self.slots}, tile_m={self.tile_m}: the fp16 A slots cannot stage {MAX_GROUPS} groups' phase-0 columns"
        if self.smem_bytes > SMEM_LIMIT:
            return (f"tile_m={self.tile_m}, stages={self.stages} needs {self.smem_bytes} bytes of shared "
                    f"memory, over sm_90's {SMEM_LIMIT}")
        return None

    def is_valid(self, m: int, n: int, k: int) -> str | None:
        """None if one group (m, n, k) runs with this configuration, else the reason."""
        reason = self.problems()
        if reason:
            return reason
        if m < 1:
            return f"m={m} must be positive"
        if k % K_STAGE or k < K_STAGE:
            return f"k={k} is not a multiple of {K_STAGE} (the kernel's K stage)"
        if self.split_k and k // K_STAGE >= MAX_STAGES:
            return f"k={k}: the split build's pieces hold fewer than {MAX_STAGES} stages of {K_STAGE} k"
        if n % TILE_N or n < TILE_N:
            return f"n={n} is not a multiple of {TILE_N} (the kernel's N tile)"
        if max(m, n) >= TMA_DIM_MAX or k // 2 >= TMA_DIM_MAX:
            return f"({m}, {n}, {k}) exceeds the tensor map's 2^32 elements a dimension"
        return None


def pick_tile_m(ms) -> int:
    """Smallest allowed A tile that holds the largest group's m (fewer wasted wgmma columns)."""
    largest = max(ms)
    for tile in (32, 64):
        if largest <= tile:
            return tile
    return 128


def stages_for(tile_m: int, slots: int = A16_SLOTS, wide_tiles: bool = False) -> int:
    """Deepest load ring that fits next to the fp16 buffers."""
    stages = 2
    while (GemmConfig(tile_m=tile_m, stages=stages + 1, slots=slots, persistent=wide_tiles,
                      wide_tiles=wide_tiles).smem_bytes
           <= SMEM_LIMIT and stages < 6):
        stages += 1
    return stages



def m_tiles_of(m: int, tile_m: int, wide: bool = False) -> int:
    """Tiles across a group's m: ceil(m / tile_m), one fewer where `wide` merges the last full tile
    with the at most HALF_ROWS rows after it (a wide tile, see GemmConfig.wide_tiles)."""
    tiles = -(-m // tile_m)
    if wide and m > tile_m and 0 < m % tile_m <= HALF_ROWS:
        tiles -= 1
    return tiles


def table_tiles(ms, ns, tile_m: int, wide: bool = False) -> tuple[list[int], list[int], int]:
    """Per-group first tile and m-tile count, and the total, in the persistent kernel's order."""
    begins, m_tiles, total = [], [], 0
    for m, n in zip(ms, ns):
        mt = m_tiles_of(m, tile_m, wide)
        begins.append(total)
        m_tiles.append(mt)
        total += mt * (n // TILE_N)
    return begins, m_tiles, total


# A half-width tile's time against a full tile's: its wgmma work halves, its B loads and B decode
# do not. Measured from per-CTA main-loop times and each CTA's mix of tiles on cases 1 and 2
# (k 7168, 2048), between the two cases' figures (NOTES.md, Persistent sm_90a kernel).
HALF_TILE_COST = 0.75
# A wide tile's (a full and a half tile's rows over one B decode), measured the same way on case 2
# (lab log); a fixed part plus a part in proportion to the rows would have made it 1.25
WIDE_TILE_COST = 1.32


def has_half_width(tile_m: int, half_tiles: bool) -> bool:
    """Whether tiles of at most HALF_ROWS rows run the half-width wgmma: only tile_m 128 has one."""
    return half_tiles and tile_m == 2 * HALF_ROWS


def tile_costs(ms, ns, tile_m: int, half_tiles: bool, wide: bool = False) -> list[float]:
    """Each tile's relative cost, in the persistent kernel's tile order (group by group; in a group
    n tile by n tile, m fastest): 1, HALF_TILE_COST for a half-width tile, WIDE_TILE_COST for a
    wide one (`wide`: merged, see m_tiles_of)."""
    costs = []
    for m, n in zip(ms, ns):
        per_n = []
        m_tiles = m_tiles_of(m, tile_m, wide)
        for mt in range(m_tiles):
            rows = m - mt * tile_m if mt == m_tiles - 1 else tile_m
            if rows > tile_m:
                per_n.append(WIDE_TILE_COST)
            elif has_half_width(tile_m, half_tiles) and rows <= HALF_ROWS:
                per_n.append(HALF_TILE_COST)
            else:
                per_n.append(1.0)
        costs += per_n * (n // TILE_N)
    return costs


def tile_plan(ms, ns, config: GemmConfig, resident: int) -> bool:
    """Whether a persistent launch on `resident` CTAs gains by merging tiles into wide ones
    (`config`, with wide_tiles, against the same tiles unmerged): only where that shortens the
    longest CTA's list (fewer, costlier tiles leave CTAs idle where the tiles are already fewer
    than the CTAs)."""
    spans = []
    for wide in (False, True):
        costs = tile_costs(ms, ns, config.tile_m, config.half_tiles, wide)
        spans.append(makespan(costs, *schedule(costs, grid_for(len(costs), resident))))
    return spans[1] < spans[0] - 1e-9


def tile_stages(ms, ns, ks, tile_m: int, wide: bool = False) -> list[int]:
    """Each tile's k stages, in the persistent kernel's tile order."""
    return [k // K_STAGE for m, n, k in zip(ms, ns, ks) for _ in range(m_tiles_of(m, tile_m, wide) * (n // TILE_N))]


def partial_words(config: GemmConfig) -> int:
    """fp32 words of one thread's accumulators, what a writer piece leaves a thread (split build):
    TILE_N × slot_rows over the MMA threads."""
    return TILE_N * config.slot_rows // MMA_THREADS


def split_span(ms, ns, ks, config: GemmConfig, ctas: int) -> tuple[float, float]:
    """The longest CTA's work on `ctas` CTAs, in stages × tile costs: the split schedule's (each
    writer and reader charged SPLIT_COST), then the unsplit one's."""
    costs = tile_costs(ms, ns, config.tile_m, config.half_tiles, config.wide_tiles)
    stages = tile_stages(ms, ns, ks, config.tile_m, config.wide_tiles)
    split = max(piece_loads(costs, *split_k(costs, stages, ctas, SPLIT_COST), SPLIT_COST), default=0.0)
    work = [c * s for c, s in zip(costs, stages)]
    return split, makespan(work, *schedule(costs, grid_for(len(costs), ctas)))


def even_deal(units: int, ctas: int) -> tuple[int, int, int, int]:
    """How the rows build deals phase 0's units, as (a, s1, b, s2) (CTAs 0 .. a - 1 take s1 units
    each, CTAs a .. b - 1 take s2 each, in CTA order, contiguous, the last ones short): even shares
    over every CTA. Every CTA starts phase 0 when the kernel before it has ended (its first act is
    to wait for it, nvfp4_gemm.py), launched programmatically or not, so all start together.
    (`phase0_deal`, which gave phase 0 to the CTAs that start early behind the call before, was
    removed with the reads of A before that wait; launched alone it made case 3 slower: lab log,
    the persistent sm_90a kernel before its wait came first.)"""
    return (0, 0, ctas, -(-units // max(ctas, 1)))




# decode_half's selectors (prmt): bytes 0-1 of the even and of the odd e4m3 word, or bytes 2-3
HALF_LOW, HALF_HIGH = 0x5410, 0x7632


def scale_offset(row, k, block):
    """The byte offset, in a group's scales (cuBLAS's blocked layout, module docstring of
    nvfp4_gemm.py), of the four e4m3 scales of row `row`'s 64-k block `block` (a Python or a kernel
    integer); the block after it is SCALE_CHUNK bytes on."""
    return ((row // 128) * (k // K_SUB) + block) * SCALE_CHUNK + (row % 32) * 16 + ((row % 128) // 32) * 4


def turn_chunk(stage, unit, half, sub):
    """The byte offset, in its row of the fp16 copy, of the 16-byte chunk a helper lane stores for
    unit `unit` and half `half` of stage `stage`: chunk 4 · half + sub of that unit's 128 bytes,
    so that the four lanes of a row write 64 contiguous bytes a store."""
    return (stage * SUBS_PER_STAGE + unit) * (K_SUB * 2) + (4 * half + sub) * 16


def turn_selector(sub):
    """The decode_half selector of a helper lane: chunk 4 · half + sub holds register 2 · half +
    sub // 2 of each word's decode (module docstring of nvfp4_gemm.py: chunk 2s + h, register s)."""
    return HALF_LOW + (sub // 2) * (HALF_HIGH - HALF_LOW)


def padded_rows(m):
    """A group's rows as the "chunks" build counts them: m rounded up to CHUNK_ROWS (a Python or
    a kernel integer)."""
    return (m + CHUNK_ROWS - 1) // CHUNK_ROWS * CHUNK_ROWS


def chunk_units(ms, ks) -> tuple[list[int], int, int, list[int]]:
    """The "chunks" build's work: a stage (256 k) of every group's rows, each group's m rounded up
    to CHUNK_ROWS, in units of one row × 64 k, a helper warp taking CHUNK_UNITS consecutive units
    (CHUNK_ROWS rows, one stage) a turn. Returns each group's first unit in a stage, the units a
    stage, the stages of the deepest group, and each group's first readiness counter (one a
    READY_ROWS rows and a stage, row block by row block, the stages of a block adjacent) with the
    counters' total as the last entry."""
    begins, units = [], 0
    counters = [0]
    for m, k in zip(ms, ks):
        padded = padded_rows(m)
        begins.append(units)
        units += padded * SUBS_PER_STAGE
        counters.append(counters[-1] + -(-padded // READY_ROWS) * (k // K_STAGE))
    return begins, units, max(k // K_STAGE for k in ks), counters


def chunk_counts(m: int, k: int) -> list[int]:
    """The units a launch adds to each of one group's "chunks" counters, in counter order: every
    stage of a block counts CHUNK_UNITS a helper warp's turn, padded rows included."""
    padded = padded_rows(m)
    return [min(padded - b * READY_ROWS, READY_ROWS) * SUBS_PER_STAGE
            for b in range(-(-padded // READY_ROWS)) for _ in range(k // K_STAGE)]


@functools.lru_cache(maxsize=None)  # a prepare asks it for every launch; the profiles are files
def ctas_per_sm(registers: int, smem_bytes: int, threads: int) -> int:
    """Resident CTAs per SM for this kernel's registers and shared memory: the occupancy
    calculator's rules (nvgg/occupancy.py) on compute capability 9.0's limits (the same on
    every sm_90 card). The persistent kernel's CTAs wait on each other, so its grid must never
    exceed what is resident at once."""
    from ...profiles import get
    from ...occupancy import theoretical
    return max(1, theoretical(registers, smem_bytes, threads, get("h100")).blocks_per_sm)


def grid_for(total_tiles: int, sm_count: int, per_sm: int = 1, units: int = 0) -> int:
    """Persistent grid: as many CTAs as fit on the GPU at once, never more than there are tiles,
    unless phase 0's `units` need more CTAs for one round (one unit an MMA thread): a CTA left
    without tiles still expands its share of A. (With the grid barrier: case 3 has 120
    tiles and 32768 units: on 120 CTAs, 2048 units took a second round on 8 CTAs and every CTA
    waited for them at the barrier; 128 CTAs made case 3 faster: lab log.)"""
    wanted = max(total_tiles, -(-units // MMA_THREADS))
    return max(1, min(wanted, sm_count * per_sm))
