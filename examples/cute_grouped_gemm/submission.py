"""NVFP4 grouped GEMM for Hopper in CuTe DSL: tensor maps made in the kernel, TMA, warp MMA.

A competition-format submission (`custom_kernel(data)`) for GPU MODE's nvfp4_group_gemm problem,
written to be read rather than to be fast. What it shows:

- Tensor maps made in the kernel. The host encodes one template TMA descriptor for A and one for
  B (from group 0's tensors). Every CTA copies both templates into its own two 128-byte slots of a
  global workspace, rewrites their address, shape and row stride for its own group
  (`cpasync.update_tma_descriptor`), releases those writes to the tensor-map proxy and acquires
  them before its first TMA load. So one launch serves every group, whatever their shapes.
- TMA loads of the packed FP4 bytes into shared memory, completed on one mbarrier.
- Hopper has no FP4 tensor core: the CTA expands the e2m1 values, their e4m3 scales applied, into
  fp16 tiles in shared memory and multiplies those with the warp-level fp16 MMA (mma.sync
  m16n8k16, fp32 accumulators). Every e2m1 × e4m3 product is exact in fp16, so the result is
  exact up to the order of the fp32 sums.
- Phase marks (nvgg.probe): six moments of each CTA, read from the GPU's global timer. They are
  compiled in only where nvgg is installed and its profiler turns them on; otherwise the kernel is
  built without them (the competition's harness imports no nvgg). To see them:

      nvgg profile --phases --submission examples/cute_grouped_gemm/submission.py --case 4

The problem, per group: C[m, n] = A[m, k] · B[n, k]ᵀ with A and B in e2m1 (two values a byte, the
even k in the low nibble), one e4m3 scale per 16 consecutive k of each row of A and of B, fp32
accumulation, C in fp16. Shapes: any m, n a multiple of 128, k a multiple of 256.

The work: one launch, grid (most n tiles, most m tiles, groups). CTA (x, y, g) computes the 64 × 128
tile of C_g at rows 64·y, columns 128·x, or returns at once where that tile lies outside group g.
One stage, nothing overlapped; per k step of 128 values (64 bytes a row):
  1. one thread sets the mbarrier's expected bytes and issues the TMA loads of the A box
     (64 rows × 64 bytes) and the B box (128 rows × 64 bytes); rows of A past m arrive as zeros
     (the map holds the group's real m);
  2. all 128 threads wait for the mbarrier's phase;
  3. they expand the packed bytes into fp16 tiles (sA16: 64 × 128, sB16: 128 × 128), reading each
     16-value block's scale from global memory;
  4. barrier; the four warps (2 × 2 in m and n, a 32 × 64 share of the tile each) copy fp16
     fragments to registers and issue mma.sync; barrier (the next step overwrites every buffer).
The epilogue rounds the fp32 accumulators to fp16 and stores the rows below m.
"""

from typing import Optional

import torch

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
from cutlass import Float16, Float32, Int32, Int64, Uint8
from cutlass.cute.nvgpu import cpasync, warp
from cutlass.cute.runtime import make_ptr
from cutlass.tensor_utils import TensorMapManager, TensorMapUpdateMode

try:                                   # nvgg present: `nvgg profile --phases` turns the marks on
    from nvgg.probe import Probe
except ImportError:                    # absent (the competition's harness): no marks at all
    Probe = None
MARKS = ("start", "maps_ready", "first_tma_landed", "first_mma", "mainloop_done", "epilogue_done")
PHASES = Probe("cute_gemm", MARKS) if Probe else None


def mark(probes, name, warp=None):    # plain Python, run while the kernel is traced
    if probes is not None:
        PHASES.mark(probes, name, warp=warp)


# --- tiling --------------------------------------------------------------------------------------

TILE_M = 64                  # rows of A (and of C) a CTA computes
TILE_N = 128                 # rows of B (columns of C) a CTA computes
K_STEP = 128                 # k values one main-loop step handles
K_BYTES = K_STEP // 2        # packed bytes of one row in one step (two e2m1 a byte)
SF_VEC = 16                  # k values one e4m3 scale covers
UNIT_BYTES = SF_VEC // 2     # packed bytes one scale covers: what a thread expands at a time
UNITS = K_BYTES // UNIT_BYTES  # units (scale columns) of one row in one step: 8
THREADS = 128                # 4 warps
# The fp16 tiles' rows are padded from 128 to 136 halves (272 bytes): the 8 rows that one
# 32-bit fragment load of a warp touches then fall in different shared-memory banks (with 256-byte
# rows they would all fall in the same 4 banks).
ROW16 = K_STEP + 8
TX_BYTES = (TILE_M + TILE_N) * K_BYTES  # bytes the two TMA boxes of one step deliver: 12288

# the group table: int64 [G, COLS], built by the host at every call
COL_A, COL_B, COL_C, COL_SFA, COL_SFB, COL_M, COL_N, COL_K = range(8)
COLS = 8
MAP_BYTES = 128              # one TMA descriptor (CUtensorMap)
MAP_WORDS = MAP_BYTES // 8   # the same in int64; a CTA's workspace slot holds two maps, A then B


# --- decoding, shared by the kernel (traced on DSL integers) and by plain-integer checks ----------

def scale_offset(row, col, k):
    """Byte offset of the scale of (row, scale column col = k index // 16) in the blocked layout:
    the scales of each 128-row × 64-k block are one 512-byte chunk of [32][4][4] bytes, indexed
    (row % 32, (row % 128) // 32, col % 4); chunks go row block by row block, k block fastest."""
    return ((row // 128) * (k // 64) + col // 4) * 512 + (row % 32) * 16 + ((row % 128) // 32) * 4 + col % 4


def scale_times_512(byte):
    """An e4m3 scale (sign, 4 exponent bits with bias 7, 3 mantissa bits) as the integer
    scale · 2⁹, exactly: the significand, with its hidden bit where the exponent is not 0, shifted
    left by exponent - 1 (subnormals, exponent 0: no hidden bit, no shift). `byte` is 0..255."""
    e = (byte >> 3) & 0xF
    normal = (e + 15) >> 4                     # 1 where e > 0, else 0
    s = ((byte & 0x7) + 8 * normal) << (e - normal)
    return s - 2 * s * (byte >> 7)             # the sign


def e2m1_times_2(nibble):
    """An e2m1 value (sign, 2 exponent bits with bias 1, 1 mantissa bit) as the integer 2 · value,
    exactly (0, ±1, ±2, ±3, ±4, ±6, ±8, ±12), by the rule of `scale_times_512`. `nibble` is 0..15."""
    e = (nibble >> 1) & 0x3
    normal = (e + 3) >> 2                      # 1 where e > 0, else 0
    v = ((nibble & 0x1) + 2 * normal) << (e - normal)
    return v - 2 * v * (nibble >> 3)           # the sign


def expand_unit(packed, out16, sf, row, unit, sf_row, sf_col, k):
    """Expand one unit: the 8 packed bytes (16 values) of tile row `row` under scale column `unit`
    of this step, from `packed` (uint8 [rows, 64], shared memory) into `out16` (fp16 [rows, 128],
    shared memory); the scale is the group's (sf_row, sf_col) in `sf` (blocked, global memory).

    value · scale = (2 · value) · (scale · 2⁹) · 2⁻¹⁰: both factors are integers and their product
    is below 2²⁴, so the fp32 arithmetic is exact, and so is the rounding to fp16 (an e2m1 × e4m3
    product fits fp16). Int32(x) of a Uint8 x sign-extends in the DSL (the target type's
    signedness decides), hence the masks back to 0..255 before any shift."""
    scale = Float32(scale_times_512(Int32(sf[scale_offset(sf_row, sf_col, k)]) & 0xFF)) * Float32(2.0 ** -10)
    for b in range(UNIT_BYTES):   # a plain Python loop: unrolled while tracing
        byte = Int32(packed[(row, unit * UNIT_BYTES + b)]) & 0xFF
        col = unit * SF_VEC + 2 * b
        out16[(row, col)] = (Float32(e2m1_times_2(byte & 0xF)) * scale).to(Float16)    # even k
        out16[(row, col + 1)] = (Float32(e2m1_times_2(byte >> 4)) * scale).to(Float16)  # odd k


def gmem_ptr(dtype, address, align):
    """A typed global-memory pointer from an int64 address (a table entry)."""
    return cute.make_ptr(dtype, address, cute.AddressSpace.gmem, assumed_align=align)


# --- the kernel ----------------------------------------------------------------------------------

@cute.kernel
def grouped_gemm_kernel(atom_a: cute.CopyAtom, tma_a: cute.Tensor, atom_b: cute.CopyAtom, tma_b: cute.Tensor,
                        table: cute.Tensor, workspace: cute.Tensor, tiled_mma: cute.TiledMma,
                        probes: Optional[cute.Tensor]):
    tidx, _, _ = cute.arch.thread_idx()
    warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())
    bx, by, g = cute.arch.block_idx()
    gx, gy, _ = cute.arch.grid_dim()
    mark(probes, "start", warp=0)

    m = Int32(table[(g, COL_M)])
    n = Int32(table[(g, COL_N)])
    k = Int32(table[(g, COL_K)])
    if by * TILE_M < m and bx * TILE_N < n:   # else the tile lies outside group g: nothing to do
        # --- shared memory: the packed TMA boxes, the fp16 tiles, one mbarrier ------------------
        smem = cutlass.utils.SmemAllocator()
        sA4 = smem.allocate_tensor(Uint8, cute.make_layout((TILE_M, K_BYTES), stride=(K_BYTES, 1)), 128)
        sB4 = smem.allocate_tensor(Uint8, cute.make_layout((TILE_N, K_BYTES), stride=(K_BYTES, 1)), 128)
        sA16 = smem.allocate_tensor(Float16, cute.make_layout((TILE_M, K_STEP), stride=(ROW16, 1)), 16)
        sB16 = smem.allocate_tensor(Float16, cute.make_layout((TILE_N, K_STEP), stride=(ROW16, 1)), 16)
        mbar = smem.allocate_array(Int64, 1)

        # --- this CTA's tensor maps: the templates, rewritten for group g -----------------------
        # The CTA's slot is row `cta` (its linear index) of the workspace: map A, then map B.
        cta = bx + gx * (by + gy * g)
        maps = TensorMapManager(TensorMapUpdateMode.GMEM, MAP_BYTES)
        desc_a = maps.get_tensormap_ptr(workspace[(cta, 0, None)].iterator)   # global address space
        desc_b = maps.get_tensormap_ptr(workspace[(cta, 1, None)].iterator)
        if warp_idx == 0:
            # 1. the templates (kernel parameters) into the slots, by one thread
            with cute.arch.elect_one():
                cpasync.copy_tensormap(atom_a, desc_a)
                cpasync.copy_tensormap(atom_b, desc_b)
            cute.arch.sync_warp()
            cute.arch.fence_acq_rel_cta()   # the copies are seen by the rewrites below
            # 2. address, shape and row stride of group g: its A and B as uint8 [rows, k/2],
            #    row-major, which is how the templates were made (generic-proxy writes)
            row_bytes = k // 2
            gA = cute.make_tensor(gmem_ptr(Uint8, table[(g, COL_A)], 16),
                                  cute.make_layout((m, row_bytes), stride=(row_bytes, 1)))
            gB = cute.make_tensor(gmem_ptr(Uint8, table[(g, COL_B)], 16),
                                  cute.make_layout((n, row_bytes), stride=(row_bytes, 1)))
            cpasync.update_tma_descriptor(atom_a, gA, desc_a)
            cpasync.update_tma_descriptor(atom_b, gB, desc_b)
            cute.arch.sync_warp()
            # 3. release the writes to the tensor-map proxy, through which the TMA unit reads the
            #    maps, and acquire them in the warp that issues the loads: this one
            cpasync.fence_tma_desc_release()
            cpasync.fence_tma_desc_acquire(desc_a)
            cpasync.fence_tma_desc_acquire(desc_b)
            mark(probes, "maps_ready")
            with cute.arch.elect_one():
                cute.arch.mbarrier_init(mbar, 1)   # one arrival a phase: the arrive_and_expect_tx below
            cute.arch.mbarrier_init_fence()
        cute.arch.barrier()   # the mbarrier is initialised before anyone waits on it
        # the TMA loads take the maps' addresses as generic pointers
        load_a = maps.get_tensormap_ptr(desc_a, cute.AddressSpace.generic)
        load_b = maps.get_tensormap_ptr(desc_b, cute.AddressSpace.generic)

        # --- TMA views: box (tile row, step) -> the box's TMA coordinates -----------------------
        # tma_a / tma_b come with the templates: (rows, bytes) coordinate tensors whose TMA order is
        # (byte, row). They only turn tile indices into coordinates (row 64·y or 128·x, byte
        # 64·step); their extent (group 0's) bounds nothing. The bounds are the group's, in the map.
        tAsA, tAgA = cpasync.tma_partition(
            atom_a, 0, cute.make_layout(1), cute.group_modes(sA4, 0, 2),
            cute.group_modes(cute.local_tile(tma_a, (TILE_M, K_BYTES), (None, None)), 0, 2))
        tBsB, tBgB = cpasync.tma_partition(
            atom_b, 0, cute.make_layout(1), cute.group_modes(sB4, 0, 2),
            cute.group_modes(cute.local_tile(tma_b, (TILE_N, K_BYTES), (None, None)), 0, 2))

        # --- MMA partitions: fragments of one 16-k block; C's tile and its coordinates ----------
        thr_mma = tiled_mma.get_slice(tidx)
        tCsA = thr_mma.partition_A(sA16)                      # (MMA, MMA_M, MMA_K)
        tCsB = thr_mma.partition_B(sB16)                      # (MMA, MMA_N, MMA_K)
        tCrA = tiled_mma.make_fragment_A(tCsA[(None, None, 0)])
        tCrB = tiled_mma.make_fragment_B(tCsB[(None, None, 0)])
        mC = cute.make_tensor(gmem_ptr(Float16, table[(g, COL_C)], 16), cute.make_layout((m, n), stride=(n, 1)))
        tCgC = thr_mma.partition_C(cute.local_tile(mC, (TILE_M, TILE_N), (by, bx)))
        # (row, column) in C_g of each accumulator, for the epilogue's row < m
        tCcC = thr_mma.partition_C(cute.local_tile(cute.make_identity_tensor((m, n)), (TILE_M, TILE_N), (by, bx)))
        acc = tiled_mma.make_fragment_C(tCgC)
        acc.fill(0.0)

        # the group's scales, read as bytes: blocked layout, padded to whole 128-row blocks
        # (a 64-row tile never reaches past its 128-row block, so every row it reads is there)
        k_scales = k // SF_VEC
        sfa = cute.make_tensor(gmem_ptr(Uint8, table[(g, COL_SFA)], 16),
                               cute.make_layout(((m + 127) // 128) * 128 * k_scales))
        sfb = cute.make_tensor(gmem_ptr(Uint8, table[(g, COL_SFB)], 16), cute.make_layout(n * k_scales))

        for step in cutlass.range(k // K_STEP, unroll=1):
            # 1. expect the step's bytes and issue both loads through this CTA's maps. cute.copy of
            #    a TMA atom elects its one issuing thread itself: it is called by one whole warp,
            #    under a warp-uniform condition (an issue inside a one-thread `if` can lower to an
            #    illegal predicated R2UR on sm_90a)
            if warp_idx == 0:
                with cute.arch.elect_one():
                    cute.arch.mbarrier_arrive_and_expect_tx(mbar, TX_BYTES)
                cute.copy(atom_a, tAgA[(None, by, step)], tAsA, tma_bar_ptr=mbar, tma_desc_ptr=load_a)
                cute.copy(atom_b, tBgB[(None, bx, step)], tBsB, tma_bar_ptr=mbar, tma_desc_ptr=load_b)
            # 2. everyone waits for both boxes: the mbarrier completes its phase `step` (parity step % 2)
            cute.arch.mbarrier_wait(mbar, step % 2)
            if step == 0:
                mark(probes, "first_tma_landed", warp=0)

            # 3. expand: unit q (row q // 8, scale column q % 8) goes to thread q % 128
            for i in cutlass.range_constexpr(TILE_M * UNITS // THREADS):
                q = tidx + i * THREADS
                r, u = q // UNITS, q % UNITS
                expand_unit(sA4, sA16, sfa, r, u, by * TILE_M + r, step * UNITS + u, k)
            for i in cutlass.range_constexpr(TILE_N * UNITS // THREADS):
                q = tidx + i * THREADS
                r, u = q // UNITS, q % UNITS
                expand_unit(sB4, sB16, sfb, r, u, bx * TILE_N + r, step * UNITS + u, k)
            cute.arch.barrier()   # the fp16 tiles are complete (and the packed boxes read)

            # 4. the step's 8 blocks of 16 k: fragments to registers, mma.sync
            for kb in cutlass.range_constexpr(K_STEP // 16):
                cute.autovec_copy(tCsA[(None, None, kb)], tCrA)
                cute.autovec_copy(tCsB[(None, None, kb)], tCrB)
                cute.gemm(tiled_mma, acc, tCrA, tCrB, acc)
            # the first step's MMAs are issued. The mark sits after the unrolled loop: inside it, the
            # mark (a memory barrier to the compiler) would hold every step's loads behind it
            if step == 0:
                mark(probes, "first_mma", warp=0)
            cute.arch.barrier()   # every warp has read the fp16 tiles: the next step may overwrite them
        mark(probes, "mainloop_done", warp=0)

        # --- epilogue: fp32 -> fp16, rows < m only (a tile's last rows may lie past m) -----------
        for i in cutlass.range_constexpr(cute.size(acc)):
            row, _ = tCcC[i]
            if row < m:
                tCgC[i] = acc[i].to(Float16)
        mark(probes, "epilogue_done", warp=0)


# --- the host ------------------------------------------------------------------------------------

@cute.jit
def grouped_gemm(a0: cute.Pointer, b0: cute.Pointer, m0: Int32, n0: Int32, k0: Int32, table_ptr: cute.Pointer,
                 groups: Int32, workspace_ptr: cute.Pointer, grid_x: Int32, grid_y: Int32,
                 probes: Optional[cute.Tensor], stream: cuda.CUstream):
    """The template maps (group 0's A and B as uint8 [rows, k/2]; boxes of 64 and 128 rows × 64
    bytes, no swizzle), the views of the table and the workspace, the tiled MMA, and the launch."""
    row_bytes = k0 // 2
    a0_bytes = cute.make_tensor(a0, cute.make_layout((m0, row_bytes), stride=(row_bytes, 1)))
    b0_bytes = cute.make_tensor(b0, cute.make_layout((n0, row_bytes), stride=(row_bytes, 1)))
    box_a = cute.make_layout((TILE_M, K_BYTES), stride=(K_BYTES, 1))
    box_b = cute.make_layout((TILE_N, K_BYTES), stride=(K_BYTES, 1))
    atom_a, tma_a = cpasync.make_tiled_tma_atom(cpasync.CopyBulkTensorTileG2SOp(), a0_bytes, box_a, (TILE_M, K_BYTES))
    atom_b, tma_b = cpasync.make_tiled_tma_atom(cpasync.CopyBulkTensorTileG2SOp(), b0_bytes, box_b, (TILE_N, K_BYTES))

    table = cute.make_tensor(table_ptr, cute.make_layout((groups, COLS), stride=(COLS, 1)))
    ctas = grid_x * grid_y * groups
    workspace = cute.make_tensor(workspace_ptr,
                                 cute.make_layout((ctas, 2, MAP_WORDS), stride=(2 * MAP_WORDS, MAP_WORDS, 1)))

    # mma.sync m16n8k16, fp16 in, fp32 accumulators; the four warps as 2 (m) × 2 (n)
    tiled_mma = cute.make_tiled_mma(warp.MmaF16BF16Op(Float16, Float32, (16, 8, 16)), cute.make_layout((2, 2, 1)))

    grouped_gemm_kernel(atom_a, tma_a, atom_b, tma_b, table, workspace, tiled_mma, probes).launch(
        grid=(grid_x, grid_y, groups), block=(THREADS, 1, 1), stream=stream)


_COMPILED = {}   # probes on (True) or off (False) -> the compiled host function


def custom_kernel(data):
    abc, _, sf_blocked, sizes = data
    device = abc[0][2].device
    rows = []
    for (a, b, c), (sfa, sfb), (m, n, k, l) in zip(abc, sf_blocked, sizes):
        if n % TILE_N or k % 256 or l != 1:
            raise ValueError(f"this kernel takes n a multiple of {TILE_N}, k a multiple of 256 and l = 1, "
                             f"not m={m}, n={n}, k={k}, l={l}")
        rows.append([a.data_ptr(), b.data_ptr(), c.data_ptr(), sfa.data_ptr(), sfb.data_ptr(), m, n, k])
    table = torch.tensor(rows, dtype=torch.int64).to(device)
    groups = len(sizes)
    grid_x = max(n for _, n, _, _ in sizes) // TILE_N
    grid_y = max((m + TILE_M - 1) // TILE_M for m, _, _, _ in sizes)
    ctas = grid_x * grid_y * groups
    workspace = torch.empty((ctas, 2, MAP_WORDS), dtype=torch.int64, device=device)   # the kernel fills it
    probes = PHASES.cute_buffer(ctas) if PHASES else None

    def ptr(dtype, tensor, align):
        return make_ptr(dtype, tensor.data_ptr(), cute.AddressSpace.gmem, assumed_align=align)

    (a0, b0, _), (m0, n0, k0, _) = abc[0], sizes[0]
    args = (ptr(Uint8, a0, 16), ptr(Uint8, b0, 16), Int32(m0), Int32(n0), Int32(k0), ptr(Int64, table, 16),
            Int32(groups), ptr(Int64, workspace, MAP_BYTES), Int32(grid_x), Int32(grid_y), probes,
            cuda.CUstream(torch.cuda.current_stream(device).cuda_stream))
    key = probes is not None
    if key not in _COMPILED:   # compiled on the first call (importing the file compiles nothing)
        _COMPILED[key] = cute.compile(grouped_gemm, *args)
    # enqueue the launch; `table` and `workspace` are freed after it, which is safe: the caching
    # allocator hands their memory only to work queued later on this stream
    _COMPILED[key](*args)
    return [c for _, _, c in abc]
