"""NVFP4 block-scaled GEMM for Hopper (sm_90a): C_g = A_g · B_gᵀ, fp16 out. One class, three
kernels: per-group (shape fixed at compile time, one launch a group), persistent (every group's
shape from the device table, one launch) and expand (the per-group launches' phase 0).

Hopper has no FP4 tensor core: both operands are expanded to fp16, scale applied, and multiplied
with wgmma. Exact: e2m1 × e4m3 values are fp16 values, wgmma multiplies them exactly and
accumulates in fp32, and the epilogue's conversion to fp16 is the one rounding.

Operands are swapped: the kernel computes Cᵀ = B · Aᵀ, so a group's large n fills wgmma's M (64
rows a warpgroup, TILE_N = 128 a CTA tile) and its small m wgmma's N (`tile_m` rows; N takes any
multiple of 8). B, wgmma's A operand, is decoded straight into registers; A, its B operand and
shared by both warpgroups, is read as fp16 from shared memory.

Data, per group (table columns, shape rules and sizes: config.py):
- packed A (m, k/2) and B (n, k/2) bytes, row-major, two e2m1 a byte, lower k in the low nibble;
- scales in cuBLAS's blocked layout, one e4m3 per 16 k: scale (i, j) at ((i//128)·(k/64) + j//4)·512
  + (i%32)·16 + ((i%128)//32)·4 + j%4; the 256 k of a stage are 4 consecutive 512-byte chunks;
- C (m, n) fp16 row-major, written in place, rows < m only;
- A's fp16 copy, written by phase 0 (one work unit: a row × 64 k): m × k, row-major, each 64-k
  block in the k order below, unswizzled (the tensor map's 128-byte swizzle applies on loading);
  its allocation holds m rounded up to CHUNK_ROWS rows (the chunks build's helpers store whole turns).
The k order of a 64-k subtile: wgmma's register fragment gives lane l the k columns 2c, 2c + 1,
2c + 8, 2c + 9 (c = l % 4) of each 16-k step s. A permutation of k applied to both operands leaves
the dot products alone, so lane c takes the subtile's 16-k scale block c (8 packed bytes, one
scale) and ptx.decode_word turns each of its words h = 0, 1 into four registers, register s for
step s: fragment slot (step s, column 8h + 2c + e) holds value e of register s of word h of block
c. In A's copy, 16-byte chunk 2s + h of a row holds register s of word h of blocks c = 0..3.

Warps (`kernel`; a persistent CTA walks the tiles the host's schedule lists for it, COL_RUNS):
- producer (warp 8; with wide tiles its whole warpgroup, warps 9-11 giving their registers away by
  setmaxnreg): per 256-k stage it copies B's packed bytes (tensor map) and scales (plain bulk copy)
  into a ring of `stages` buffers, then per 64-k subtile the A16_BOX_ROWS-row fp16 boxes holding
  rows < m into an A slot (its other rows stay stale: they feed only columns of Cᵀ never stored);
  both rings have full/empty mbarriers. Its tensor maps are the host's pair for each group (`host`)
  or its CTA's own pair, rewritten on a change of group once its loads in flight landed (`device`).
- helpers (the "chunks" build, warps 9-11 of the producer's warpgroup): A expanded stage by stage
  (`_expand_chunks`: 256 k of every group's rows, the first stage first, over every CTA's
  helpers), each turn counted into its row block's counter for that stage; they never wait, and
  the producer waits for the stage it loads next of its tile's row blocks (`_wait_chunk`, one
  round trip looking ahead), but for its CTA's first tile's first stage: the MMA warps decode that one into its slots
  themselves (`_expand_own_stage`), so that no CTA's first MMA waits for another CTA's helpers.
- MMA warpgroups (warps 0-7): persistent kernel but the chunks build, phase 0 first
  (`_expand_a_global`, the groups' phase-0 columns staged in the last A slots, freed to the
  producer at BAR_INFO); the chunks build, its first tile's first stage of A; then per 64-k
  subtile: wait for the A slot, decode B into one of two register fragments, wgmma, commit;
  wait_group(1) retires the previous subtile's wgmma, freeing its A slot and its fragment (the
  tile's last one retires after its main loop, wait_group(0)). Half
  and wide tiles add narrower wgmmas over the same fragments (GemmConfig.half_tiles, wide_tiles).
  The epilogue stores the accumulators' rows < m as fp16 pairs; a CTA's last tile, whose fp16 A
  slots no load refills, goes through them and leaves in 16-byte chunks (`_store_staged`).
Phase 0 to the producer's A loads (GemmConfig.readiness; the persistent grid is resident at
once, so its CTAs may wait on each other): counters a row block and stage written by the helpers
(`chunks`: ptx.ready_add, ptx.ready_probe), per-row-block counters (`rows`: ptx.ready_add,
ptx.ready_wait) or a grid barrier (`grid`: ptx.grid_arrive, ptx.grid_wait).

Programmatic launches (launch.DirectLaunch's `programmatic`): the persistent kernel's CTAs may
start while the kernel before it in the stream finishes, and see that kernel's writes only after
griddepcontrol.wait (ptx.wait_for_previous_grid). So every thread waits first, before it touches
any memory, and no read of an input can come before the wait on any path: the kernel before may
have written A, B, their scales or C (a user's kernel refilling the inputs), or be nvgg's own
previous launch, which until it ends still loads the fp16 copy of A through its tensor maps and
counts its CTAs into the launch count (the grid build's CTAs arrive there only after phase 0).
What overlaps the kernel before is the launch: CTAs become resident on the SMs it leaves and wait
there. A CTA lets the next launch start (ptx.launch_dependents) once it has read the launch count
(grid: every thread, after the CTA barrier that follows the read; rows: the producer, after
counting itself in); that launch reads the count after its own wait, when this one has ended, so
it finds every CTA of this one counted in. Launched in stream order, the wait returns at once.
ptx.py holds each protocol's details; the instrumented build's %globaltimer slots are
kernels/sm90/phase_slots.py's SM90 (START is read before the wait, so it still says when the CTA began).
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
from cutlass.memory import SmemAllocator
from cutlass.tensor_utils import LayoutEnum
import cutlass.utils.hopper_helpers as sm90_utils
from cutlass import Float16, Float32, Int32, Int64, Uint32

from .phase_slots import SM90 as phase_slots
from . import ptx
from .config import (
    A16_BOX_ROWS, BAR_HELPERS, BAR_INFO, BAR_MMA, COL_A, COL_CHUNK_BEGIN, COL_CHUNK_END, COL_CHUNK_UNITS,
    COL_CHUNKS, CHUNK_UNITS, HELPER_FIRST, HELPER_WARPS, TURNS_IN_FLIGHT, padded_rows, COL_A16, COL_B, COL_BARRIER, COL_C, COL_GROUPS, COL_K, COL_M, COL_M_TILES,
    COL_DEAL, COL_MAPS, COL_N, COL_PHASES, COL_READY, COL_READY_BEGIN, COL_RUNS, COL_SFA, COL_SFB, COL_TEMPLATE,
    COL_TILE_BEGIN, COL_TILE_END, COL_UNITS, COL_UNIT_BEGIN, COL_UNIT_END, COL_WORKSPACE, EXPAND_THREADS, GemmConfig, HALF_ROWS, INFO_COLS, K_STAGE,
    K_SUB, MAX_GROUPS, MMA_REGS, MMA_THREADS, MMA_WARPS, PAIR_BYTES, PRODUCER_REGS, ROW_BYTES, SCALE_CHUNK,
    ORDER_GROUP_SHIFT, C_STAGE_ROW, READY_ROWS, SCALE_RUN, SUBS_PER_STAGE, TABLE_COLS, TABLE_ROWS, TENSORMAP_BYTES, TILE_N,
    COL_FLAGS, COL_PARTIALS, ORDER_WORDS, SPAN_SHIFT, has_half_width, partial_words, scale_offset, turn_chunk, turn_selector)
from ..schedule import READER, WRITER


class Nvfp4GemmSm90:
    """One compiled kernel: per-group (static m, n, k) or persistent (shapes from the table)."""

    def __init__(self, config: GemmConfig, shape: tuple[int, int, int] | None = None):
        reason = config.problems()
        if reason:
            raise ValueError(reason)
        if (config.persistent or config.expand_only) != (shape is None):
            raise ValueError("the per-group kernel needs a static (m, n, k); the persistent and expand ones take none")
        if shape is not None:
            reason = config.is_valid(*shape)
            if reason:
                raise ValueError(reason)
        self.config = config
        self.shape = shape
        self.tile_m = config.tile_m
        self.stages = config.stages
        # byte offsets inside one stage of the load ring (each a multiple of 1024: the swizzle atom)
        self.off_b = 0
        self.off_sfb = TILE_N * ROW_BYTES
        assert config.stage_bytes % 1024 == 0 and self.off_b % 1024 == 0  # `_b_rows` flips address bits 5-6
        self.slots = config.slots
        # L2 eviction priorities of the copies: "last" for the fp16 A that every n tile reads
        # again, "first" for packed B that at most a few tiles of one CTA read
        self.evict_b, self.evict_a16 = ("first", "last") if config.l2_hints else ("", "")
        self.stage_bytes = config.stage_bytes
        self.slot_rows = config.slot_rows
        assert self.slot_rows <= 32 * READY_ROWS  # `_wait_chunk`: a tile's row blocks fit one warp's lanes
        self.a16_bytes = self.slot_rows * K_SUB * 2
        self.half = has_half_width(self.tile_m, config.half_tiles)
        self.wide = config.wide_tiles
        self.box_bytes = A16_BOX_ROWS * K_SUB * 2
        self.host_maps = config.tensormaps == "host"
        # how the producer learns that the fp16 A it loads is written (GemmConfig.readiness):
        # counters (rows, chunks) or the grid barrier; in the chunks build the helper warps expand
        # A and the MMA warps none of it
        self.chunks = config.persistent and config.readiness == "chunks"
        self.counted = config.persistent and config.readiness in ("rows", "chunks")  # not the grid barrier
        self.phase0_first = config.persistent and not self.chunks
        # the split build: a position of the tile order is a piece of a tile (schedule.split_k)
        self.split = config.split_k
        self.partial_bytes = MMA_THREADS * partial_words(config) * 4  # one writer's slot

    @cute.jit
    def __call__(self, table_ptr: cute.Pointer, total_tiles: Int32, grid_ctas: Int32, stream):
        """Launch on `stream`. `table_ptr` points at the int64 group table ([G, TABLE_COLS] row-major, see
        the COL_ constants); `total_tiles` and `grid_ctas` matter only to the persistent kernel."""
        table = cute.make_tensor(table_ptr, cute.make_layout((TABLE_ROWS, TABLE_COLS), stride=(TABLE_COLS, 1)))
        if cutlass.const_expr(self.config.expand_only):
            self.expand_kernel(table).launch(grid=(grid_ctas, 1, 1), block=[EXPAND_THREADS, 1, 1], stream=stream)
            return
        # wgmma's A operand (our B) from registers, its B operand (our A) from shared memory
        tiled_mma = sm90_utils.make_trivial_tiled_mma(
            Float16, Float16,
            cute.nvgpu.OperandMajorMode.K, cute.nvgpu.OperandMajorMode.K,
            Float32, (2, 1, 1), tiler_mn=(64, self.tile_m), a_source=cute.nvgpu.warpgroup.OperandSource.RMEM,
        )
        # the same for tiles of at most HALF_ROWS rows (see GemmConfig.half_tiles)
        tiled_mma_half = sm90_utils.make_trivial_tiled_mma(
            Float16, Float16,
            cute.nvgpu.OperandMajorMode.K, cute.nvgpu.OperandMajorMode.K,
            Float32, (2, 1, 1), tiler_mn=(64, HALF_ROWS), a_source=cute.nvgpu.warpgroup.OperandSource.RMEM,
        )
        mma_tiler = (TILE_N, self.slot_rows, K_SUB)
        k_major = LayoutEnum.ROW_MAJOR  # K-major for both wgmma operands
        a16_layout = sm90_utils.make_smem_layout_b(k_major, mma_tiler, Float16, self.slots)

        @cute.struct
        class SharedStorage:
            barriers: cute.struct.MemRange[cutlass.Int64, 2 * self.stages]
            # the split build: one more word, this launch's number (E + 1) for the MMA warps
            a16_barriers: cute.struct.MemRange[cutlass.Int64, 2 * self.slots + int(self.split)]
            ring: cute.struct.Align[cute.struct.MemRange[cutlass.Uint8, self.stages * self.stage_bytes], 1024]
            a16: cute.struct.Align[cute.struct.MemRange[Float16, cute.cosize(a16_layout)], 1024]

        self.shared_storage = SharedStorage
        if cutlass.const_expr(self.config.persistent):
            grid = (grid_ctas, 1, 1)
        else:
            m, n, _ = self.shape
            grid = (n // TILE_N, (m + self.tile_m - 1) // self.tile_m, 1)
        self.kernel(table, total_tiles, tiled_mma, tiled_mma_half, a16_layout).launch(
            grid=grid, block=[self.config.threads, 1, 1], min_blocks_per_mp=1, stream=stream,
        )

    @cute.kernel
    def expand_kernel(self, table: cute.Tensor):
        """Phase 0 alone (see `_expand_a_global`), grid-stride over the table's work units."""
        tidx, _, _ = cute.arch.thread_idx()
        bidx, _, _ = cute.arch.block_idx()
        gdimx, _, _ = cute.arch.grid_dim()
        self._expand_a_global(table, bidx * EXPAND_THREADS + tidx, gdimx * EXPAND_THREADS, Int32(table[(0, COL_UNITS)]))
        ptx.fence_proxy_async_global()

    @cute.kernel
    def kernel(self, table: cute.Tensor, total_tiles: Int32, tiled_mma: cute.TiledMma,
               tiled_mma_half: cute.TiledMma, a16_layout: cute.ComposedLayout):
        start = None
        if cutlass.const_expr(self.config.instrument):
            start = ptx.globaltimer()  # the CTA's start, stored once the wait below has returned
        if cutlass.const_expr(self.config.persistent):
            # every thread, before it touches memory, so that no path reaches a read of an input,
            # a store to C or nvgg's own launch state without it (module docstring: programmatic
            # launches; tests/test_grid_dependency.py checks every persistent build's PTX)
            ptx.wait_for_previous_grid()
        tidx, _, _ = cute.arch.thread_idx()
        warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        bidx, bidy, _ = cute.arch.block_idx()
        gdimx, _, _ = cute.arch.grid_dim()

        smem = SmemAllocator()
        storage = smem.allocate(self.shared_storage)
        # packed B stages, and the fp16 A slots filled from the phase-0 copy; lane 0 of every MMA
        # warp releases a B stage once decoded, an A slot once the wgmma that read it has retired
        ring = self._tma_pipeline(storage.barriers, self.stages, self.stage_bytes)
        a16_pipe = self._tma_pipeline(storage.a16_barriers, self.slots, self.a16_bytes)
        ring_addr = storage.ring.data_ptr().toint()
        a16_addr = storage.a16.data_ptr().toint()
        launch_at = self._launch_word(storage)

        # first tile of this CTA; the per-group grid is (n tiles, m tiles), the persistent one 1-D
        tile = bidx
        stride = gdimx
        cta = bidx
        if cutlass.const_expr(not self.config.persistent):
            m_tiles = (self.shape[0] + self.tile_m - 1) // self.tile_m
            tile = bidy + bidx * m_tiles
            stride = m_tiles * (self.shape[1] // TILE_N)  # one tile per CTA
            cta = tile
        all_tiles = total_tiles
        if cutlass.const_expr(self.config.persistent and self.config.chunked):
            # this CTA's list of tiles, from the host's cost-balanced schedule: `tile` walks the
            # positions runs[c] .. runs[c + 1] of the order (`_order`), which names the tiles
            runs = self._runs(table, gdimx, all_tiles)
            tile = runs[bidx]
            stride = 1
            total_tiles = runs[bidx + 1]  # this CTA's end
        group = Int32(0)
        phases = None
        if cutlass.const_expr(self.config.instrument):
            phases = cute.make_tensor(
                cute.make_ptr(Int64, table[(0, COL_PHASES)], cute.AddressSpace.gmem, assumed_align=8),
                cute.make_layout((gdimx, phase_slots.slots), stride=(phase_slots.slots, 1)))
            if tidx == 0:
                phases[(cta, phase_slots.START)] = start

        # phase 0 (persistent kernel): the MMA warps of the grid expand every group's A into the
        # fp16 copy and arrive at the grid barrier; the producer warp meanwhile prepares its tensor
        # maps, and only then waits for the barrier: its fp16 A loads may read any of the copy. The
        # MMA warps never wait at the barrier; their first fp16 A slot fills after it. (Issuing the
        # first tile's packed-B loads before the barrier too, during phase 0 or after this CTA's
        # share of it, brought the first MMA earlier but made the main loops slower, by more:
        # lab log.)
        barrier_state = Int64(0)
        target = Int64(0)
        # (the rows build meets no barrier: the grid count only numbers its launches, and its
        # producer arrives as it reads it, below)
        if cutlass.const_expr(self.config.persistent and not self.counted):
            barrier_state = Int64(table[(0, COL_BARRIER)])
            if warp_idx == self.config.producer_warp:
                target = ptx.grid_target(barrier_state)
            cute.arch.barrier()  # the count is read before any thread of this CTA arrives
            ptx.launch_dependents()  # the next launch may start (module docstring: programmatic launches)
        # the producer warp (its warpgroup with wide tiles) and the MMA warpgroups part here for
        # good: ptxas honours setmaxnreg only where no path leads from one side's code to the other's
        if warp_idx >= MMA_WARPS:
            if cutlass.const_expr(self.config.wide_tiles):
                # a wide tile's accumulators (96 a thread) do not fit the 168 registers ptxas allows
                # each of 384 threads (it serialised every wgmma, C7512): the producer warpgroup
                # gives registers to the MMA warpgroups
                cute.arch.setmaxregister_decrease(PRODUCER_REGS)
            if warp_idx == self.config.producer_warp:
                order = self._order(table, gdimx, all_tiles)
                if cutlass.const_expr(self.counted):
                    # read here, after setmaxnreg: a value live across it is spilled
                    target = Int64(ptx.count_launch(Int64(table[(0, COL_BARRIER)]), gdimx, bidx))
                    if cutlass.const_expr(self.split):
                        # for the MMA warps' readers, which see it after a wait on a stage this
                        # warp fills later (the mbarrier's arrive releases, its wait acquires)
                        ptx.st_shared_b32(launch_at, Int32(target))
                    # a programmatic launch of the next kernel may start its CTAs from here on
                    # (see the module docstring: programmatic launches)
                    ptx.launch_dependents()
                state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, self.stages)
                astate = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, self.slots)
                # device maps: this CTA's own descriptor pair, initialised from the template and
                # retargeted in place for the first tile's group here, then on every switch of
                # group. Host maps: the group's pair in the host's table, acquired and prefetched.
                maps = Int64(0)
                desc_a = Int64(0)
                if cutlass.const_expr(self.host_maps):
                    maps = Int64(table[(0, COL_MAPS)])
                else:
                    desc_a = Int64(table[(0, COL_WORKSPACE)]) + Int64(cta) * Int64(PAIR_BYTES)
                    ptx.copy_tensormaps(desc_a, Int64(table[(0, COL_TEMPLATE)]))
                mapped = Int32(-1)  # the group the descriptor pair describes
                if self._more(tile, total_tiles):
                    _, group = self._locate(table, order, tile, group)
                    desc_a = self._use_maps(table, group, desc_a, maps)
                    mapped = group
                    self._stamp_lane0(phases, cta, phase_slots.DESC_READY)
                if cutlass.const_expr(self.config.persistent and not self.counted):
                    ptx.grid_wait(barrier_state, target)
                    self._stamp_lane0(phases, cta, phase_slots.A_READY)
                    ptx.fence_proxy_async_global()  # the phase-0 copy, seen through the grid barrier
                switches = Int32(0)
                # the group whose fp16 A rows this warp last saw written (chunks: the A tile and
                # group whose rows, mt · MAX_GROUPS + group: one int32 for every pair, as mt <
                # MAX_TILES, config.py)
                waited = Int32(-1)
                known = Int32(0)  # chunks: the stages of those rows seen written
                # chunks: the first tile's first stage, which the MMA warps decode into its slots
                # themselves (`_expand_own_stage`): nothing to wait for, nothing to copy
                own = Int32(1)
                info_free = self.slots - self.config.info_slots  # fills before the staged columns' slots
                while self._more(tile, total_tiles):
                    t, group = self._locate(table, order, tile, group)
                    m, n, k, mt, nt, rows = self._tile_coords(table, t, group)
                    kb, ke = 0, k // K_STAGE  # the stages this CTA runs of the tile
                    if cutlass.const_expr(self.split):
                        kb, ke, _, _ = self._span(order, tile)
                    if group != mapped:
                        # the maps describe the first tile's group already: this is a switch
                        if cutlass.const_expr(not self.host_maps):
                            # a map is rewritten only once no copy issued with it can still read it
                            self._wait_loads_landed(ring, state, self.stages)
                            self._wait_loads_landed(a16_pipe, astate, self.slots)
                        desc_a = self._use_maps(table, group, desc_a, maps)
                        if cutlass.const_expr(self.config.instrument):
                            if switches < phase_slots.max_switches:
                                self._stamp_lane0(phases, cta, phase_slots.FIRST_SWITCH + switches)
                            switches += 1
                            if cute.arch.lane_idx() == 0:
                                phases[(cta, phase_slots.SWITCHES)] = Int64(switches)
                        mapped = group
                    # fp16 A boxes holding rows < m (the rest of a slot keeps stale rows: they feed only
                    # columns of Cᵀ past m, which are never stored; zero-filling them was measured slower
                    # than loading real rows)
                    boxes = (rows + A16_BOX_ROWS - 1) // A16_BOX_ROWS
                    sfb = Int64(table[(group, COL_SFB)]) + Int64(nt * (k // 64) * SCALE_CHUNK)  # the B tile's scales
                    desc_b = desc_a + Int64(TENSORMAP_BYTES)
                    for kt in cutlass.range(kb, ke, unroll=1):
                        if cutlass.const_expr(self.config.instrument):
                            if state.count == 0:
                                self._stamp_lane0(phases, cta, phase_slots.B_ISSUED)
                        state = self._load_b_stage(ring, state, ring_addr, desc_b, sfb, nt, kt)
                        copied = boxes  # the fp16 A boxes this stage's slots get
                        if cutlass.const_expr(self.chunks):
                            if mt * MAX_GROUPS + group != waited:
                                waited = mt * MAX_GROUPS + group
                                known = Int32(0)
                            if kt == kb and own == 1:
                                copied = Int32(0)
                            else:
                                if kt >= known:
                                    # this stage of the tile's fp16 A rows (the row blocks of the
                                    # boxes it copies), expanded by the helper warps of the grid in
                                    # this launch, and whichever stages after it one round trip also
                                    # finds written; once a visit of these rows a stage
                                    known = self._wait_chunk(table, group, m, k, kt, mt * (self.tile_m // READY_ROWS),
                                                             boxes, Int64(table[(0, COL_READY)]), target)
                                    ptx.fence_proxy_async_global()
                        if cutlass.const_expr(self.counted and not self.chunks):
                            if kt == 0:
                                if group != waited:
                                    # the group's fp16 A rows, written by phase 0 in this launch
                                    # (the tile's first B stage is on its way meanwhile); once a
                                    # group visit, not once a tile: a poll is a round trip to L2
                                    self._wait_rows(table, group, m, k, Int64(table[(0, COL_READY)]), target)
                                    if waited < 0:  # the first tile's
                                        self._stamp_lane0(phases, cta, phase_slots.A_READY)
                                    waited = group
                                    ptx.fence_proxy_async_global()
                        for sub in cutlass.range_constexpr(SUBS_PER_STAGE):
                            if cutlass.const_expr(self.phase0_first):
                                if astate.count == info_free:
                                    # the first fill of a slot that held the staged group columns
                                    cute.arch.barrier(barrier_id=BAR_INFO, number_of_threads=MMA_THREADS + 32)
                            # the slot's expected bytes are those of the boxes actually copied
                            a16_pipe.sync_object_empty.wait(astate.index, astate.phase)
                            a16_pipe.sync_object_full.arrive_and_expect_tx(astate.index, copied * self.box_bytes)
                            a_x, a_y = kt * K_STAGE + sub * K_SUB, mt * self.tile_m
                            mbar = a16_pipe.producer_get_barrier(astate).toint()
                            for b in cutlass.range_constexpr(self.slot_rows // A16_BOX_ROWS):
                                if b < copied:
                                    ptx.tma_load_2d(a16_addr + astate.index * self.a16_bytes + b * self.box_bytes, desc_a,
                                                    a_x, a_y + b * A16_BOX_ROWS, mbar, self.evict_a16)
                            astate.advance()
                    if cutlass.const_expr(self.chunks):
                        if own == 1:
                            # stage 0 of this group was not waited for: the next tile (other rows of
                            # it, maybe) waits from stage 0 on
                            own = Int32(0)
                            waited = Int32(-1)
                        if cutlass.const_expr(self.split):
                            # `known` counts the stages seen written from 0 on; a piece may start
                            # past them, so each piece waits from its own first stage on
                            waited = Int32(-1)
                    tile += stride
                if cutlass.const_expr(self.phase0_first):
                    if astate.count <= info_free:  # never filled those slots: meet the MMA warps once all the same
                        cute.arch.barrier(barrier_id=BAR_INFO, number_of_threads=MMA_THREADS + 32)
            if cutlass.const_expr(self.chunks):
                if warp_idx >= HELPER_FIRST:
                    self._expand_chunks(table, bidx * HELPER_WARPS + warp_idx - HELPER_FIRST, gdimx * HELPER_WARPS)
                    if cutlass.const_expr(self.config.instrument):
                        cute.arch.barrier(barrier_id=BAR_HELPERS, number_of_threads=HELPER_WARPS * 32)
                        if warp_idx == HELPER_FIRST:
                            self._stamp_lane0(phases, cta, phase_slots.PHASE0_DONE)
        else:
            if cutlass.const_expr(self.config.wide_tiles):
                cute.arch.setmaxregister_increase(MMA_REGS)
            if cutlass.const_expr(self.phase0_first):
                # the group table's phase-0 columns, staged in the last fp16 A slots, which the
                # producer fills first only after BAR_INFO (its first fills may land during phase 0)
                info_at = (self.slots - self.config.info_slots) * self.slot_rows * K_SUB
                info = cute.make_tensor(cute.recast_ptr(storage.a16.data_ptr() + info_at, dtype=Int64),
                                        cute.make_layout((MAX_GROUPS, len(INFO_COLS)), stride=(len(INFO_COLS), 1)))
                self._stage_group_info(table, info, tidx)
                units = Int32(table[(0, COL_UNITS)])
                lo = Int32(0)
                hi = units
                if cutlass.const_expr(self.counted):
                    # a contiguous share of the units a CTA (rows of A in order, so a CTA touches
                    # few row blocks and a warp reads contiguous bytes), dealt by the host
                    # (config.even_deal): CTAs below `a` take s1 units, those up to `b` s2
                    deal = [Int32(table[(0, COL_DEAL + i)]) for i in range(4)]
                    lo = self._dealt_below(bidx, deal, units)
                    hi = self._dealt_below(bidx + 1, deal, units)
                    self._expand_a_global(table, lo + tidx, MMA_THREADS, hi, info)
                else:
                    self._expand_a_global(table, bidx * MMA_THREADS + tidx, gdimx * MMA_THREADS, units, info)
                # the fp16 copy (global) and the staged columns (shared memory, which bulk copies
                # overwrite after the barrier), both ordered before the async proxy's accesses
                ptx.fence_proxy_async()
                cute.arch.barrier(barrier_id=BAR_MMA, number_of_threads=MMA_THREADS)
                self._stamp(phases, cta, tidx, phase_slots.PHASE0_DONE)
                if tidx == 0:
                    if cutlass.const_expr(self.counted):
                        self._publish_rows(table, info, lo, hi)
                    else:
                        ptx.grid_arrive(barrier_state, gdimx, bidx)
                # the staged columns are read for the last time: their slots may fill
                cute.arch.barrier_arrive(barrier_id=BAR_INFO, number_of_threads=MMA_THREADS + 32)
            self._mma_role(table, self._order(table, gdimx, all_tiles), total_tiles, tile, stride, group, tidx, ring, a16_pipe, ring_addr,
                           tiled_mma, tiled_mma_half, storage, a16_layout, phases, cta)
            self._stamp(phases, cta, tidx, phase_slots.EXIT)

    def _launch_word(self, storage) -> Int32:
        """The split build's shared word after the fp16 A slots' mbarriers: this launch's number
        (E + 1), which the producer stores for the MMA warps' readers."""
        return storage.a16_barriers.data_ptr().toint() + 2 * self.slots * 8

    def _runs(self, table: cute.Tensor, ctas: Int32, tiles: Int32) -> cute.Tensor:
        """The schedule's int32 array (table row 0, COL_RUNS): ctas + 1 run bounds, then the order."""
        return cute.make_tensor(cute.make_ptr(Int32, table[(0, COL_RUNS)], cute.AddressSpace.gmem, assumed_align=4),
                                cute.make_layout(ctas + 1 + tiles))

    def _order(self, table: cute.Tensor, ctas: Int32, tiles: Int32):
        """The tile order of the scheduled persistent kernel (entries: tile | group <<
        ORDER_GROUP_SHIFT), or None where tile positions are tile numbers. Each side makes it after
        setmaxnreg: a pointer live across setmaxnreg is spilled."""
        if cutlass.const_expr(not (self.config.persistent and self.config.chunked)):
            return None
        runs = self._runs(table, ctas, tiles)
        if cutlass.const_expr(self.split):  # ORDER_WORDS a piece, at most a piece more than tiles a CTA
            return cute.make_tensor(runs.iterator + (ctas + 1), cute.make_layout((tiles + ctas) * ORDER_WORDS))
        return cute.make_tensor(runs.iterator + (ctas + 1), cute.make_layout(tiles))

    @cute.jit
    def _use_maps(self, table: cute.Tensor, group: Int32, desc_a: Int64, maps: Int64) -> Int64:
        """Make a tensor-map pair for `group` (its fp16 A copy, then its packed B, 128 bytes on)
        ready for this warp's copies; returns the pair's address. Device maps: rewrite this CTA's
        pair at `desc_a` in place and fence it for the copy engine. Host maps: the group's pair in
        the host's table at `maps`, acquired and prefetched."""
        pair = desc_a
        if cutlass.const_expr(self.host_maps):
            pair = maps + Int64(group) * Int64(PAIR_BYTES)
            ptx.use_host_tensormaps(pair)
        else:
            k = Int32(table[(group, COL_K)])
            row_bytes = k // 2
            ptx.retarget_tensormap(desc_a, Int64(table[(group, COL_A16)]), Int32(table[(group, COL_M)]), k, 2 * k)
            ptx.retarget_tensormap(desc_a + Int64(TENSORMAP_BYTES), Int64(table[(group, COL_B)]),
                                   Int32(table[(group, COL_N)]), row_bytes, row_bytes)
            ptx.publish_tensormaps(desc_a)
        return pair

    @cute.jit
    def _wait_rows(self, table: cute.Tensor, group: Int32, m: Int32, k: Int32, ready: Int64, launches: Int64):
        """The producer warp waits until phase 0 of this launch has written every fp16 A row of
        `group`: lane l watches the counters of row blocks l, l + 32, .. (READY_ROWS rows each).
        No branch depends on the lane (see ptx.ready_wait): lanes past the last block wait for
        0 units on the last block's counter."""
        begin = Int32(table[(group, COL_READY_BEGIN)])
        blocks = (m + READY_ROWS - 1) // READY_ROWS
        lane = cute.arch.lane_idx()
        base = Int32(0)
        while base < blocks:
            i = base + lane
            units = self._block_rows(m, i) * (k // K_SUB)
            ptx.ready_wait(ready + Int64(begin + cutlass.min(i, blocks - 1)) * Int64(8), units, launches)
            base += 32
        cute.arch.sync_warp()

    @cute.jit
    def _publish_rows(self, table: cute.Tensor, info: cute.Tensor, lo: Int32, hi: Int32):
        """One thread, after its CTA expanded units lo .. hi - 1: add to each row block's counter
        the units of it this CTA wrote (units run row by row, group by group, so the range meets
        consecutive row blocks)."""
        ready = Int64(table[(0, COL_READY)])
        g = Int32(0)
        cur = lo
        while cur < hi:
            g = self._unit_group(table, info, cur, g)
            begin = Int32(self._field(table, info, g, COL_UNIT_BEGIN))
            blocks = Int32(self._field(table, info, g, COL_K)) // K_SUB
            block = (cur - begin) // (blocks * READY_ROWS)
            end = cutlass.min(cutlass.min(begin + (block + 1) * READY_ROWS * blocks,
                                          Int32(self._field(table, info, g, COL_UNIT_END))), hi)
            counter = Int32(self._field(table, info, g, COL_READY_BEGIN)) + block
            ptx.ready_add(ready + Int64(counter) * Int64(8), end - cur)
            cur = end

    @cute.jit
    def _load_b_stage(self, ring, state, ring_addr: Int32, desc_b: Int64, sfb: Int64, nt: Int32, kt: Int32):
        """Acquire the next ring stage and copy stage `kt` of B tile `nt` into it: the packed bytes
        (tensor map) and their 2 KB scale run (plain bulk copy from the tile's scales at `sfb`),
        one mbarrier for both. Returns the advanced state."""
        ring.producer_acquire(state)
        mbar = ring.producer_get_barrier(state).toint()
        base = ring_addr + state.index * self.stage_bytes
        ptx.tma_load_2d(base + self.off_b, desc_b, kt * ROW_BYTES, nt * TILE_N, mbar, self.evict_b)
        ptx.bulk_load(base + self.off_sfb, sfb + Int64(kt * SCALE_RUN), SCALE_RUN, mbar)
        state.advance()
        return state

    @staticmethod
    def _tma_pipeline(barriers, stages: int, tx_bytes: int):
        """Full/empty mbarriers for `stages` buffers one producer thread fills with bulk copies of
        `tx_bytes` each and the MMA warps release."""
        return pipeline.PipelineTmaAsync.create(
            barrier_storage=barriers.data_ptr(),
            num_stages=stages,
            producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
            consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, MMA_WARPS),
            tx_count=tx_bytes,
            cta_layout_vmnk=cute.make_layout((1, 1, 1, 1)),
        )

    @cute.jit
    def _mma_role(self, table, order, total_tiles: Int32, tile: Int32, stride: Int32, group: Int32, tidx: Int32,
                  ring, a16_pipe, ring_addr: Int32, tiled_mma: cute.TiledMma, tiled_mma_half: cute.TiledMma,
                  storage, a16_layout: cute.ComposedLayout, phases, cta: Int32):
        """The two MMA warpgroups: decode B into registers, multiply against the fp16 A slots,
        and store every tile of this CTA. A tile of at most HALF_ROWS rows (half_tiles) runs the
        narrower wgmma over the first HALF_ROWS rows of each slot into the first half of the
        accumulators (wgmma's accumulator fragment lists its 8-column chunks in order, so the
        first half of an N = 128 fragment is the N = 64 fragment). A wide tile (wide_tiles: more
        than tile_m rows) adds the narrower wgmma over rows tile_m .. tile_m + HALF_ROWS of each
        slot, into accumulators of its own, on the same B fragments."""
        wg = tidx // 128
        sA16 = storage.a16.get_tensor(a16_layout.outer, swizzle=a16_layout.inner)
        thr_mma = tiled_mma.get_slice(wg * 128)
        tCrB = tiled_mma.make_fragment_B(thr_mma.partition_B(cute.local_tile(sA16, (self.tile_m, K_SUB), (0, 0, None))))
        # two register fragments of B (64 rows × 64 k per warpgroup), alternating by subtile: a
        # fragment is rewritten only after wait_group(1) retired the wgmma that read it
        frags = [tiled_mma.make_fragment_A(thr_mma.partition_shape_A((TILE_N, K_SUB))) for _ in range(2)]
        words = [cute.recast_tensor(f, Uint32) for f in frags]
        coords = tiled_mma.get_slice(tidx).partition_C(cute.make_identity_tensor((TILE_N, self.tile_m)))
        acc = cute.make_rmem_tensor(coords.shape, Float32)
        tiled_mma.set(cute.nvgpu.warpgroup.Field.ACCUMULATE, True)
        half = None
        if cutlass.const_expr(self.half):
            thr_half = tiled_mma_half.get_slice(wg * 128)
            sA16_half = cute.local_tile(sA16, (HALF_ROWS, K_SUB), (0, 0, None))
            tCrB_half = tiled_mma_half.make_fragment_B(thr_half.partition_B(sA16_half))
            half_shape = tiled_mma_half.get_slice(tidx).partition_C(
                cute.make_identity_tensor((TILE_N, HALF_ROWS))).shape
            acc_half = cute.make_tensor(acc.iterator, cute.make_layout(half_shape))
            tiled_mma_half.set(cute.nvgpu.warpgroup.Field.ACCUMULATE, True)
            half = (tiled_mma_half, acc_half, tCrB_half)
        extra = None
        coords_extra = None
        if cutlass.const_expr(self.wide):
            sA16_extra = cute.local_tile(sA16, (HALF_ROWS, K_SUB), (self.tile_m // HALF_ROWS, 0, None))
            tCrB_extra = tiled_mma_half.make_fragment_B(thr_half.partition_B(sA16_extra))
            acc_extra = cute.make_rmem_tensor(half_shape, Float32)
            coords_extra = tiled_mma_half.get_slice(tidx).partition_C(cute.make_identity_tensor((TILE_N, HALF_ROWS)))
            extra = (tiled_mma_half, acc_extra, tCrB_extra)
        rstate = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.stages)
        astate = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.slots)
        own = Int32(1)  # the chunks build: the first tile's first stage of A is decoded here
        slots = storage.a16.data_ptr().toint()  # the fp16 A slots: that stage, and the last tile's C
        launch_at = self._launch_word(storage)  # made again here: a value live across setmaxnreg is spilled
        while self._more(tile, total_tiles):
            t, group = self._locate(table, order, tile, group)
            m, n, k, mt, nt, rows = self._tile_coords(table, t, group)
            kb, ke = 0, k // K_STAGE  # the stages this CTA runs of the tile
            role, slot = Int32(0), Int32(0)
            if cutlass.const_expr(self.split):
                kb, ke, role, slot = self._span(order, tile)
            if cutlass.const_expr(self.chunks):
                if own == 1:
                    self._expand_own_stage(table, group, k, mt, rows, kb, tidx, slots, phases, cta)
                    own = Int32(0)
            acc.fill(0.0)
            if cutlass.const_expr(self.half):
                if rows <= HALF_ROWS:
                    rstate, astate = self._mma_tile(ring, a16_pipe, rstate, astate, kb, ke, tidx, ring_addr, *half,
                                                    frags, words, phases, cta)
                else:
                    if cutlass.const_expr(self.wide):
                        if rows > self.tile_m:
                            extra[1].fill(0.0)
                            rstate, astate = self._mma_tile(ring, a16_pipe, rstate, astate, kb, ke, tidx, ring_addr,
                                                            tiled_mma, acc, tCrB, frags, words, phases, cta, extra)
                        else:
                            rstate, astate = self._mma_tile(ring, a16_pipe, rstate, astate, kb, ke, tidx, ring_addr,
                                                            tiled_mma, acc, tCrB, frags, words, phases, cta)
                    else:
                        rstate, astate = self._mma_tile(ring, a16_pipe, rstate, astate, kb, ke, tidx, ring_addr,
                                                        tiled_mma, acc, tCrB, frags, words, phases, cta)
            else:
                rstate, astate = self._mma_tile(ring, a16_pipe, rstate, astate, kb, ke, tidx, ring_addr, tiled_mma, acc,
                                                tCrB, frags, words, phases, cta)
            self._stamp(phases, cta, tidx, phase_slots.MAINLOOP_DONE)
            wide_acc = None  # a wide tile's other accumulators
            if cutlass.const_expr(self.wide):
                wide_acc = extra[1]
            if cutlass.const_expr(self.split):
                if role == WRITER:
                    self._write_partial(table, slot, acc, wide_acc, rows, tidx)
                else:
                    if role == READER:
                        self._add_partial(table, slot, acc, wide_acc, rows, tidx, launch_at)
                    self._epilogue(table, group, acc, coords, wide_acc, coords_extra, rows, m, n, mt, nt, tidx,
                                   slots, self._more(tile + stride, total_tiles))
            else:
                self._epilogue(table, group, acc, coords, wide_acc, coords_extra, rows, m, n, mt, nt, tidx, slots,
                               self._more(tile + stride, total_tiles))
            self._stamp(phases, cta, tidx, phase_slots.EPILOGUE_DONE)
            tile += stride

    @cute.jit
    def _mma_tile(self, ring, a16_pipe, rstate, astate, kb, ke, tidx: Int32, ring_addr: Int32,
                  tiled_mma: cute.TiledMma, acc: cute.Tensor, tCrB: cute.Tensor, frags, words, phases, cta: Int32,
                  extra=None):
        """The main loop of one tile: its stages kb .. ke - 1 (every stage but in the split build),
        through `tiled_mma` into `acc` (and, for a wide tile, through `extra` = (MMA, accumulators,
        A operand) as well)."""
        # every stage through the loop's one copy of the code: a peeled last stage was code the
        # MMA warps ran once a tile, fetched cold into the instruction cache (ncu: its
        # instructions stalled on fetch, the loop's did not; lab log). The last wgmma retires
        # after the loop; tests/test_kernels_sm90.py checks in the SASS that no read of the
        # accumulators comes before that wait
        for kt in cutlass.range(kb, ke, unroll=1):
            rstate, astate = self._mma_stage(ring, a16_pipe, rstate, astate, kt, kb, tidx, ring_addr, tiled_mma,
                                             acc, frags, words, tCrB, phases, cta, extra)
        cute.nvgpu.warpgroup.wait_group(0)
        self._release_previous(a16_pipe, astate)  # the last subtile's slot
        return rstate, astate

    @cute.jit
    def _mma_stage(self, ring, a16_pipe, rstate, astate, kt: Int32, kb, tidx: Int32, ring_addr: Int32,
                   tiled_mma: cute.TiledMma, acc: cute.Tensor, frags, words, tCrB: cute.Tensor,
                   phases, cta: Int32, extra=None):
        """Decode and multiply stage `kt` of a tile (4 subtiles of 64 k) whose main loop began at
        stage `kb`. An fp16 A buffer goes back to the producer once the wgmma that read it has
        retired: slot q - 1 after the wait_group(1) that follows wgmma q, and the tile's last one
        after its main loop (`_mma_tile`)."""
        ring.consumer_wait(rstate)
        if cutlass.const_expr(self.config.instrument):
            if rstate.count == 0:
                self._stamp(phases, cta, tidx, phase_slots.B_LANDED)
        rows = self._b_rows(tidx, ring_addr + rstate.index * self.stage_bytes)
        for sub in cutlass.range_constexpr(SUBS_PER_STAGE):
            a16_pipe.consumer_wait(astate)
            if cutlass.const_expr(self.config.instrument and self.chunks and sub == 0):
                if astate.count == SUBS_PER_STAGE:  # the first slot the producer copied (`own`)
                    self._stamp(phases, cta, tidx, phase_slots.A_FED)
            self._decode_b(rows, sub, words[sub % 2])
            self._mma_subtile(tiled_mma, acc, frags[sub % 2], tCrB, astate.index, extra)
            if cutlass.const_expr(self.config.instrument and sub == 0):
                if astate.count == 0:
                    self._stamp(phases, cta, tidx, phase_slots.FIRST_MMA)
            cute.nvgpu.warpgroup.wait_group(1)
            if cutlass.const_expr(sub > 0):
                self._release_previous(a16_pipe, astate)
            else:
                if kt > kb:
                    self._release_previous(a16_pipe, astate)
            astate.advance()
        # B was decoded into registers: nothing reads this stage any more
        ring.consumer_release(rstate)
        rstate.advance()
        return rstate, astate

    @cute.jit
    def _release_previous(self, a16_pipe, astate):
        """Hand the fp16 A slot before `astate`'s back to the producer."""
        previous = cutlass.select_(astate.index == 0, Int32(self.slots - 1), astate.index - 1)  # not a signed %
        a16_pipe.consumer_release(pipeline.PipelineState(self.slots, astate.count - 1, previous, astate.phase))

    @cute.jit
    def _mma_subtile(self, tiled_mma: cute.TiledMma, acc: cute.Tensor, frag: cute.Tensor, tCrB: cute.Tensor,
                     buf: Int32, extra=None):
        """Issue and commit the wgmma of one 64-k subtile: B from the register fragment `frag`, A
        from fp16 buffer `buf` (a wide tile's `extra` wgmma too, in the same commit group)."""
        cute.nvgpu.warpgroup.fence()
        for kb in cutlass.range_constexpr(K_SUB // 16):
            cute.gemm(tiled_mma, acc, frag[(None, None, kb)], tCrB[(None, None, kb, buf)], acc)
        if cutlass.const_expr(extra is not None):
            mma_x, acc_x, tCrB_x = extra
            for kb in cutlass.range_constexpr(K_SUB // 16):
                cute.gemm(mma_x, acc_x, frag[(None, None, kb)], tCrB_x[(None, None, kb, buf)], acc_x)
        cute.nvgpu.warpgroup.commit_group()

    def _b_rows(self, tidx: Int32, stage: Int32):
        """This thread's two B rows in the ring stage at `stage` (`_decode_b`): for each, the
        address of its packed bytes in subtile 0 and that of its scale in subtile 0.

        Thread (warp w, lane l) holds fragment rows 16w + l/4 and that + 8 (`half` 0, 1), into which
        it decodes B rows r = 16w + 2(l/4) and r + 1 of the CTA's 128 (a permutation of wgmma's M
        rows, undone by `_store`, which so finds adjacent n in one thread), and k block c = l % 4
        (16 k, 8 packed bytes, one scale) of each subtile. The tensor map's 128-byte swizzle puts
        16-byte chunk j of row r at chunk j ^ (r % 8); subtile `sub`'s chunk of block c is 2 sub +
        c / 2, so its address is subtile 0's with bits 5-6 flipped by `sub` (a stage is 1024-byte
        aligned), and its scale SCALE_CHUNK bytes a subtile on."""
        c = tidx % 4
        rows = []
        for half in range(2):  # a plain method: unrolled as traced
            row = (tidx // 32) * 16 + 2 * ((tidx % 32) // 4) + half
            rows.append((stage + self.off_b + row * ROW_BYTES + (((c // 2) ^ (row % 8)) * 16) + (c % 2) * 8,
                         stage + self.off_sfb + (row % 32) * 16 + ((row % 128) // 32) * 4 + c))
        return rows

    @cute.jit
    def _decode_b(self, rows, sub: cutlass.Constexpr[int], words: cute.Tensor):
        """Expand this thread's share of B for subtile `sub` into the register fragment `words`
        (32-bit view: 4 registers per k16 step, see the module docstring for the k order), from
        its two rows at `rows` (`_b_rows`)."""
        for half in cutlass.range_constexpr(2):
            packed, scale_at = rows[half]
            w0, w1 = ptx.ld_shared_v2(packed ^ (sub << 5))
            scale = ptx.ld_shared_scale(scale_at + sub * SCALE_CHUNK)
            lo = ptx.decode_word(w0, scale)
            hi = ptx.decode_word(w1, scale)
            for s in cutlass.range_constexpr(K_SUB // 16):
                words[s * 4 + half] = Uint32(lo[s])
                words[s * 4 + 2 + half] = Uint32(hi[s])

    @staticmethod
    def _dealt_below(cta: Int32, deal, units: Int32) -> Int32:
        """The phase-0 units dealt to the CTAs below `cta` by `deal` = (a, s1, b, s2), the table's
        COL_DEAL columns (config.even_deal), at most `units`."""
        a, s1, b, s2 = deal
        return cutlass.min(cutlass.min(cta, a) * s1 + cutlass.max(cutlass.min(cta, b) - a, 0) * s2, units)

    @staticmethod
    def _field(table: cute.Tensor, info, g: Int32, col: int):
        """Column `col` of group g: from the staged `info` when there is one, else the table."""
        if info is None:
            return table[(g, col)]
        return info[(g, INFO_COLS.index(col))]

    @cute.jit
    def _unit_group(self, table: cute.Tensor, info, unit: Int32, g: Int32) -> Int32:
        """The group holding work unit `unit`, searching on from group `g` (units only grow)."""
        found = g
        while unit >= Int32(self._field(table, info, found, COL_UNIT_END)):
            found += 1
        return found

    @cute.jit
    def _stage_group_info(self, table: cute.Tensor, info: cute.Tensor, tidx: Int32):
        """The MMA warps copy the table's INFO_COLS of every group into `info` (shared memory, one
        row a group) in one round of loads, so that phase 0 looks groups up there: a search over
        the table in global memory was a chain of dependent loads, each a trip to DRAM after the
        L2 flush."""
        groups = Int32(table[(0, COL_GROUPS)])
        r = tidx
        while r < groups:
            for j, col in enumerate(INFO_COLS):
                info[(r, j)] = table[(r, col)]
            r += MMA_THREADS
        cute.arch.barrier(barrier_id=BAR_MMA, number_of_threads=MMA_THREADS)

    @cute.jit
    def _expand_a_global(self, table: cute.Tensor, first: Int32, step: Int32, end: Int32, info=None):
        """Phase 0 of the persistent kernel: work units first, first + step, .. below `end` of all groups' A,
        one unit being one row × 64 k (32 packed bytes, 4 scales) expanded into the group's fp16
        copy in the k order of the module docstring, unswizzled (the bulk tensor copy applies the
        swizzle). Consecutive threads take consecutive 64-k blocks of a row. Group
        columns come from `info` (INFO_COLS, staged by `_stage_group_info`) when given, else from
        the table."""
        g = Int32(0)
        u = first
        while u < end:
            g = self._unit_group(table, info, u, g)
            k = Int32(self._field(table, info, g, COL_K))
            blocks = k // K_SUB
            local = u - Int32(self._field(table, info, g, COL_UNIT_BEGIN))
            self._expand_unit(Int64(self._field(table, info, g, COL_A)), Int64(self._field(table, info, g, COL_SFA)),
                              Int64(self._field(table, info, g, COL_A16)), k, local // blocks, local % blocks)
            u += step

    @cute.jit
    def _expand_unit(self, a: Int64, sfa: Int64, a16: Int64, k: Int32, row: Int32, kb: Int32):
        """One work unit: row `row`, 64-k block `kb` of a group's A (packed at `a`, scales at `sfa`)
        into its fp16 copy at `a16`, in the k order of the module docstring, unswizzled (the bulk
        tensor copy applies the swizzle)."""
        self._store_unit(a16, k, row, kb, self._load_unit(a, sfa, k, row, kb))

    @staticmethod
    def _load_unit(a: Int64, sfa: Int64, k: Int32, row: Int32, kb: Int32):
        """A work unit's 32 packed bytes (8 words) and its 4 scales (see ptx.ld_global_scale_quad)."""
        words = Nvfp4GemmSm90._unit_words(a + Int64(row) * Int64(k // 2), kb)
        return words, ptx.ld_global_scale_quad(sfa + Int64(scale_offset(row, k, kb)))

    @staticmethod
    def _unit_words(packed_row: Int64, kb: Int32):
        """The 8 packed words (32 bytes) of 64-k block `kb` of the packed row at `packed_row`. (The
        MMA warps' own stage takes the unit's scales converted as they load; the helpers take them
        raw, to hand each to the lanes of its row by shuffles before converting: `_store_turn`.)"""
        src = packed_row + Int64(kb * 32)
        return ptx.ld_global_v4(src) + ptx.ld_global_v4(src + Int64(16))

    @staticmethod
    def _decode_unit(loaded):
        """A unit loaded by `_load_unit`, decoded: its eight 16-byte chunks of fp16 in the k order
        of the module docstring (chunk 2s + h: register s of word h of the four 16-k blocks)."""
        (x0, x1, x2, x3, y0, y1, y2, y3), scales = loaded
        chunks = [None] * (K_SUB // 8)
        for h in range(2):  # a plain function (not preprocessed): Python loops, unrolled as traced
            block_words = (x0, x2, y0, y2) if h == 0 else (x1, x3, y1, y3)
            d = [ptx.decode_word(w, sc) for w, sc in zip(block_words, scales)]
            for s in range(K_SUB // 16):
                chunks[2 * s + h] = (d[0][s], d[1][s], d[2][s], d[3][s])
        return chunks

    @staticmethod
    def _store_unit(a16: Int64, k: Int32, row: Int32, kb: Int32, loaded):
        """Decode a unit loaded by `_load_unit` and store it into the fp16 copy."""
        dst = a16 + Int64(row) * Int64(2 * k) + Int64(kb * (K_SUB * 2))
        for j, regs in enumerate(Nvfp4GemmSm90._decode_unit(loaded)):
            ptx.st_global_v4(dst + Int64(j * 16), *regs)

    @staticmethod
    def _store_unit_shared(slot: Int32, row: Int32, loaded):
        """Decode a unit loaded by `_load_unit` into row `row` of the fp16 A slot at `slot` (1024-byte
        aligned), where the tensor map's 128-byte swizzle puts a copied row's 16-byte chunk j: at
        row · 128 + (j ^ row % 8) · 16."""
        dst = slot + row * (K_SUB * 2)
        for j, regs in enumerate(Nvfp4GemmSm90._decode_unit(loaded)):
            ptx.st_shared_v4(dst + ((j ^ (row % 8)) * 16), *regs)

    @cute.jit
    def _expand_own_stage(self, table: cute.Tensor, group: Int32, k: Int32, mt: Int32, rows: Int32, kb,
                          tidx: Int32, a16_addr: Int32, phases, cta: Int32):
        """The chunks build's MMA warps, before their CTA's first tile: the first stage (256 k) it
        runs (`kb`: 0 but in the split build) of that tile's A rows (mt · tile_m on, `rows` of them), decoded from the packed bytes straight
        into the fp16 A slots of the tile's first four subtiles (slots 0-3), in the layout a copy
        from the fp16 copy would have given them. The producer copies nothing into those slots and
        waits for no counter (its loop: `own`), so the first MMA waits for no other CTA. Thread t
        takes units t, t + 256, .. (a row × 64 k; four consecutive threads a row), all loads
        first; rows past `rows` get the last row's values (they feed only columns of Cᵀ never
        stored)."""
        a = Int64(table[(group, COL_A)])
        sfa = Int64(table[(group, COL_SFA)])
        first_row = mt * self.tile_m
        turns = -(-self.slot_rows * SUBS_PER_STAGE // MMA_THREADS)
        first_block = 0  # the stage's first 64-k block
        if cutlass.const_expr(self.split):
            first_block = kb * SUBS_PER_STAGE
        loaded = [self._load_unit(a, sfa, k, first_row + cutlass.min((tidx + t * MMA_THREADS) // SUBS_PER_STAGE, rows - 1),
                                  first_block + (tidx + t * MMA_THREADS) % SUBS_PER_STAGE) for t in range(turns)]
        for t in cutlass.range_constexpr(turns):
            # every unit stored, rows past `rows` too (their loads read the last row): a branch
            # here put the later units' loads behind the first unit's scale conversion, a second
            # trip to memory
            unit = tidx + t * MMA_THREADS
            slot = a16_addr + (unit % SUBS_PER_STAGE) * self.a16_bytes
            if cutlass.const_expr((t + 1) * MMA_THREADS <= self.slot_rows * SUBS_PER_STAGE):
                self._store_unit_shared(slot, unit // SUBS_PER_STAGE, loaded[t])
            else:  # the last turn reaches past the slots' rows
                if unit < self.slot_rows * SUBS_PER_STAGE:
                    self._store_unit_shared(slot, unit // SUBS_PER_STAGE, loaded[t])
        # the slots' bytes, written through the generic proxy, before any wgmma reads them
        ptx.fence_proxy_async_shared()
        cute.arch.barrier(barrier_id=BAR_MMA, number_of_threads=MMA_THREADS)
        self._stamp(phases, cta, tidx, phase_slots.A_READY)

    @cute.jit
    def _expand_chunks(self, table: cute.Tensor, first: Int32, helpers: Int32):
        """A helper warp of the "chunks" build (`helpers` of them in the grid, this one `first`):
        the launch's turns, stage-major (every group's rows of a stage before the next stage:
        config.chunk_units), each CHUNK_ROWS rows × one stage of a group's A (lane l: row l / 4;
        `_load_turn`, `_store_turn`) expanded, then counted into its row block's counter for
        that stage (CHUNK_UNITS, padded rows included). Where a stage has no more turns than there
        are helper warps, only a multiple of that many take turns, so that each keeps the same
        rows (one group lookup) stage after stage, and (but in the wide-tile build, whose
        producer warpgroup has too few registers) loads TURNS_IN_FLIGHT turns at once. Turns of a
        group whose k ends before the stage are skipped. Never waits on another CTA, so the
        grid's helpers always progress."""
        lane = cute.arch.lane_idx()
        per_stage = Int32(table[(0, COL_CHUNK_UNITS)]) // CHUNK_UNITS
        turns = Int32(table[(0, COL_CHUNKS)]) * per_stage
        groups = Int32(table[(0, COL_GROUPS)])
        ready = Int64(table[(0, COL_READY)])
        step = helpers
        if per_stage <= helpers:
            step = helpers - helpers % per_stage
        # the group of the last turn and its columns, kept while the turns stay in it
        g = Int32(-1)
        begin = Int32(0)
        end = Int32(0)
        m = Int32(0)
        k = Int32(0)
        counters = Int32(0)
        a = Int64(0)
        sfa = Int64(0)
        a16 = Int64(0)
        turn = first
        if first >= step:
            turn = turns
        while turn < turns:
            stage = turn // per_stage
            unit = (turn - stage * per_stage) * CHUNK_UNITS
            if unit < begin or unit >= end:
                g = self._chunk_group(table, groups, unit, lane)
                begin = Int32(table[(g, COL_CHUNK_BEGIN)])
                end = Int32(table[(g, COL_CHUNK_END)])
                m = Int32(table[(g, COL_M)])
                k = Int32(table[(g, COL_K)])
                counters = Int32(table[(g, COL_READY_BEGIN)])
                a = Int64(table[(g, COL_A)])
                sfa = Int64(table[(g, COL_SFA)])
                a16 = Int64(table[(g, COL_A16)])
            row = (unit - begin) // SUBS_PER_STAGE + lane // SUBS_PER_STAGE
            sub = lane % SUBS_PER_STAGE
            block = (unit - begin) // (READY_ROWS * SUBS_PER_STAGE)
            stages = k // K_STAGE
            if step % per_stage == 0:
                # this warp's next turns are the same rows at later stages
                later = step // per_stage
                if cutlass.const_expr(self.wide):
                    # PRODUCER_REGS after setmaxnreg hold a turn's loads and the next turn's, not several
                    self._turns_in_turn(a, sfa, a16, k, m, row, sub, stage, stages, later, ready, counters, block)
                    turn = turns  # this warp's turns are all of these rows' (`_turns_in_turn`)
                else:
                    # all their loads first (a row past m loads the last row and stores into the
                    # copy's padded rows; a stage past k loads the first turn's lines again and
                    # stores nothing)
                    rows = self._turn_rows(a, sfa, a16, k, row, cutlass.min(row, m - 1))
                    loaded = [self._load_turn(rows, self._in_range(stage + later * t, stages, stage), sub)
                              for t in range(TURNS_IN_FLIGHT)]
                    for t in cutlass.range_constexpr(TURNS_IN_FLIGHT):
                        if stage + later * t < stages:
                            self._store_turn(rows, stage + later * t, sub, loaded[t])
                            self._count_turn(ready, counters + block * stages + stage + later * t)
                    turn += step * TURNS_IN_FLIGHT
            else:
                self._one_turn(a, sfa, a16, k, m, row, sub, stage, stages, ready, counters, block)
                turn += step

    @cute.jit
    def _turns_in_turn(self, a: Int64, sfa: Int64, a16: Int64, k: Int32, m: Int32, row: Int32, sub: Int32,
                       stage: Int32, stages: Int32, later: Int32, ready: Int64, counters: Int32, block: Int32):
        """A helper lane's turns where they keep its rows (stages `stage`, stage + `later`, .. of the
        group's `stages`), one after another: each turn's stores, then the next turn's loads, then
        the count, so that the release's wait for the stores and the next loads' trip overlap."""
        if stage < stages:
            rows = self._turn_rows(a, sfa, a16, k, row, cutlass.min(row, m - 1))
            words, scales = self._load_turn(rows, stage, sub)
            now = stage
            while now < stages:
                self._store_turn(rows, now, sub, (words, scales))
                words, scales = self._load_turn(rows, self._in_range(now + later, stages, now), sub)
                self._count_turn(ready, counters + block * stages + now)
                now += later

    @cute.jit
    def _one_turn(self, a: Int64, sfa: Int64, a16: Int64, k: Int32, m: Int32, row: Int32, sub: Int32, stage: Int32,
                  stages: Int32, ready: Int64, counters: Int32, block: Int32):
        """A helper lane's part of one turn, loaded and stored in one go (`_load_turn`,
        `_store_turn`; nothing past the group's `stages`), the turn counted into its row block's
        counter for that stage (the group's from `counters` on)."""
        if stage < stages:
            rows = self._turn_rows(a, sfa, a16, k, row, cutlass.min(row, m - 1))
            self._store_turn(rows, stage, sub, self._load_turn(rows, stage, sub))
            self._count_turn(ready, counters + block * stages + stage)

    @cute.jit
    def _in_range(self, stage: Int32, stages: Int32, fallback: Int32) -> Int32:
        """`stage` where the group has it, else `fallback` (a turn loaded ahead past the group's k
        loads the lines of the warp's first turn again instead of lines nothing uses)."""
        return cutlass.select_(stage < stages, stage, fallback)

    @staticmethod
    def _turn_rows(a: Int64, sfa: Int64, a16: Int64, k: Int32, row: Int32, source: Int32):
        """A helper lane's row pointers for its turns: packed row `source` (the row it loads), that
        row's scales (unit 0's, SCALE_CHUNK bytes a unit on) and fp16 row `row` (the row it stores)."""
        return (a + Int64(source) * Int64(k // 2),
                sfa + Int64(scale_offset(source, k, 0)),
                a16 + Int64(row) * Int64(2 * k))

    @staticmethod
    def _load_turn(rows, stage: Int32, sub: Int32):
        """A helper lane's loads for a turn (`rows` from `_turn_rows`): unit `sub` (64 k) of stage
        `stage`, its 8 packed words (block c's word h at 2c + h) and its 4 scales (raw)."""
        packed, scales, _ = rows
        kb = stage * SUBS_PER_STAGE + sub
        return Nvfp4GemmSm90._unit_words(packed, kb), ptx.ld_global_b32(scales + Int64(kb * SCALE_CHUNK))

    @staticmethod
    def _store_turn(rows, stage: Int32, sub: Int32, loaded):
        """Decode a turn loaded by `_load_turn` and store it into the fp16 copy so that each store
        of the warp writes 64 contiguous bytes a row (whole 32-byte sectors), not 16 bytes in each
        of 32 lines: the release after the stores waits on them (lab log). The four lanes of a row
        take each unit's words from its lane (shuffles): lane `sub` the words sub % 2 of its four
        16-k blocks, half of whose decode (config.turn_selector) makes chunks sub and 4 + sub of
        that unit (config.turn_chunk). Rows past the group's m (up to its padded rows, which the
        copy holds) take the last row's values and feed only columns of Cᵀ never stored."""
        words, scales = loaded
        selector = Int32(turn_selector(sub))
        odd = sub % 2
        dst = rows[2]
        for u in range(SUBS_PER_STAGE):  # a plain function: Python loops, unrolled as traced
            src = cute.arch.lane_idx() - sub + u  # the row's lane of unit u
            picked = [cutlass.select_(odd == 1, cute.arch.shuffle_sync(words[2 * c + 1], src),
                                      cute.arch.shuffle_sync(words[2 * c], src)) for c in range(4)]
            quad = ptx.scale_quad(cute.arch.shuffle_sync(scales, src))
            halves = [ptx.decode_half(picked[c], quad[c], selector) for c in range(4)]
            for half in range(2):
                ptx.st_global_v4(dst + Int64(turn_chunk(stage, u, half, sub)), *(h[half] for h in halves))

    @staticmethod
    def _count_turn(ready: Int64, counter: Int32):
        """A helper warp's turn is written: count it into `counter` (CHUNK_UNITS units). Each
        lane's stores are ordered before the async proxy's loads, then before lane 0's release by
        the warp barrier (bar.warp.sync orders the memory of its lanes)."""
        ptx.fence_proxy_async_global()
        cute.arch.sync_warp()
        ptx.ready_add(ready + Int64(counter) * Int64(8), CHUNK_UNITS, lane0=True)

    @cute.jit
    def _chunk_group(self, table: cute.Tensor, groups: Int32, unit: Int32, lane: Int32) -> Int32:
        """The group whose units of a stage hold `unit` (the whole warp): lane l reads the end of
        group base + l, and the lanes whose group ends at or below `unit` count the groups before
        it, 32 groups a round trip. Lanes past the last group read the last one's end, which is
        above every unit."""
        found = Int32(0)
        base = Int32(0)
        while base < groups:
            end = Int32(table[(cutlass.min(base + lane, groups - 1), COL_CHUNK_END)])
            below = ptx.lanes_at_or_above(unit, end)
            found = base + below
            if below < 32:
                base = groups
            else:
                base += 32
        return found

    @staticmethod
    def _block_rows(rows: Int32, block: Int32) -> Int32:
        """The rows of row block `block` (READY_ROWS each) among `rows`; 0 past the last block."""
        return cutlass.max(cutlass.min(rows - block * READY_ROWS, READY_ROWS), 0)

    @cute.jit
    def _wait_chunk(self, table: cute.Tensor, group: Int32, m: Int32, k: Int32, stage: Int32, first: Int32,
                    blocks: Int32, ready: Int64, launches: Int64) -> Int32:
        """The producer warp of the "chunks" build waits until the helper warps of this launch
        have expanded stage `stage` of row blocks `first` .. `first` + `blocks` of `group`'s fp16 A
        (a tile's boxes: READY_ROWS = A16_BOX_ROWS), and returns the first stage after it not yet
        seen written there. A tile has at most slot_rows / READY_ROWS <= 32 blocks: one round trip
        reads that stage's counters and, in the lanes left over, those of the stages after it (lane
        l: block first + l % blocks, stage + l / blocks); the lanes poll and leave together (as in
        `_wait_rows`). Waiting for the group's other rows too made each tile's first copied stage
        wait for the slowest of more helper warps."""
        begin = Int32(table[(group, COL_READY_BEGIN)])
        padded = padded_rows(m)
        stages = k // K_STAGE
        lane = cute.arch.lane_idx()
        span = 32 // blocks
        ahead = lane // blocks
        i = first + lane % blocks
        units = self._block_rows(padded, i) * SUBS_PER_STAGE
        if ahead >= span:
            units = Int32(0)
        if stage + ahead >= stages:
            units = Int32(0)
        counter = begin + i * stages + cutlass.min(stage + ahead, stages - 1)
        missing = Int32(0)
        while missing == 0:
            missing = ptx.ready_probe(ready + Int64(counter) * Int64(8), units, launches, ahead)
        known = stage + cutlass.min(cutlass.min(missing, span), stages - stage)
        cute.arch.sync_warp()
        return known

    @cute.jit
    def _stamp(self, phases, cta: Int32, tidx: Int32, slot: cutlass.Constexpr[int]):
        """Instrumented build: thread 0 (the first consumer warpgroup's first thread) records the
        time of `slot`; a later write of the same slot (the next tile) replaces it."""
        if cutlass.const_expr(self.config.instrument):
            if tidx == 0:
                phases[(cta, slot)] = ptx.globaltimer()

    @cute.jit
    def _stamp_lane0(self, phases, cta: Int32, slot):
        """Instrumented build: lane 0 of the calling warp (the producer) records the time of `slot`."""
        if cutlass.const_expr(self.config.instrument):
            if cute.arch.lane_idx() == 0:
                phases[(cta, slot)] = ptx.globaltimer()

    @cute.jit
    def _wait_loads_landed(self, ring, state, stages: cutlass.Constexpr[int]):
        """Wait until every load the producer issued so far has landed (the full barriers of the
        last `stages` fills completed). A bulk tensor copy reads its tensor map asynchronously, so
        a map is retargeted only once no copy issued with the old contents can still read it.
        Earlier fills need no wait: the producer re-acquired their slots, so they were consumed."""
        for back in cutlass.range_constexpr(1, stages + 1):
            fill = state.count - back
            if fill >= 0:
                ring.consumer_wait(pipeline.PipelineState(stages, fill, fill % stages, (fill // stages) % 2))

    @cute.jit
    def _more(self, tile: Int32, total_tiles: Int32):
        if cutlass.const_expr(self.config.persistent):
            return tile < total_tiles
        else:
            m, n, _ = self.shape
            return tile < (n // TILE_N) * ((m + self.tile_m - 1) // self.tile_m)

    @cute.jit
    def _locate(self, table: cute.Tensor, order, position: Int32, group: Int32):
        """(tile, group) at `position` of this CTA's walk: the scheduled order's entry (tile and
        group packed, ORDER_GROUP_SHIFT), or the tile of that number and its group from the table."""
        tile = position
        found = group
        if cutlass.const_expr(order is None):
            found = self._find_group(table, tile, group)
        else:
            if cutlass.const_expr(self.split):
                entry = Int32(order[position * ORDER_WORDS])
            else:
                entry = Int32(order[position])
            tile = entry & Int32((1 << ORDER_GROUP_SHIFT) - 1)
            found = entry >> ORDER_GROUP_SHIFT
        return tile, found

    @cute.jit
    def _span(self, order, position: Int32):
        """The split build's piece at `position` of this CTA's walk: its first and end stage, its
        role (schedule.WHOLE, WRITER or READER) and its slot: config.ORDER_WORDS."""
        span = Int32(order[position * ORDER_WORDS + 1])
        return (span & Int32((1 << SPAN_SHIFT) - 1), span >> SPAN_SHIFT, Int32(order[position * ORDER_WORDS + 2]),
                Int32(order[position * ORDER_WORDS + 3]))

    @cute.jit
    def _find_group(self, table: cute.Tensor, tile: Int32, group: Int32) -> Int32:
        """The group holding `tile`. A CTA's tiles mostly grow, so the search resumes at `group`;
        it restarts from group 0 when the schedule moves back (to its half-width tiles)."""
        found = group
        if cutlass.const_expr(self.config.persistent):
            if tile < Int32(table[(found, COL_TILE_BEGIN)]):
                found = Int32(0)
            while tile >= Int32(table[(found, COL_TILE_END)]):
                found += 1
        return found

    @cute.jit
    def _tile_coords(self, table: cute.Tensor, tile: Int32, group: Int32):
        """(m, n, k, A tile index, B tile index, rows of A) of `tile`; tiles of one group run
        m-fastest, so the CTAs that share a B tile (the large operand) run side by side and share
        it through L2. A tile has tile_m rows, the group's last one the rest of m: at most
        HALF_ROWS more than tile_m where the table merged it into a wide tile (m_tiles_of)."""
        if cutlass.const_expr(self.config.persistent):
            m = Int32(table[(group, COL_M)])
            n = Int32(table[(group, COL_N)])
            k = Int32(table[(group, COL_K)])
            m_tiles = Int32(table[(group, COL_M_TILES)])
            local = tile - Int32(table[(group, COL_TILE_BEGIN)])
            mt = local % m_tiles
            rows = cutlass.min(m - mt * self.tile_m, self.tile_m)
            if mt + 1 == m_tiles:
                rows = m - mt * self.tile_m
            return m, n, k, mt, local // m_tiles, rows
        else:
            m, n, k = self.shape
            m_tiles = (m + self.tile_m - 1) // self.tile_m
            mt = tile % m_tiles
            return m, n, k, mt, tile // m_tiles, cutlass.min(m - mt * self.tile_m, self.tile_m)

    @staticmethod
    def _pairs(acc: cute.Tensor, coords: cute.Tensor):
        """The accumulator pairs `_store` describes: (i, column of Cᵀ, the pair's first B row) for
        values i and i + 2, which hold adjacent n at one m."""
        pairs = []
        for pair in range(cute.size(acc) // 2):  # a plain function: a Python loop, unrolled as traced
            i = (pair // 2) * 4 + pair % 2  # h = 0; its partner i + 2
            nn, mm = coords[i]
            pairs.append((i, mm, (nn // 16) * 16 + (nn % 8) * 2))
        return pairs

    @cute.jit
    def _epilogue(self, table: cute.Tensor, group: Int32, acc: cute.Tensor, coords: cute.Tensor, wide_acc,
                  coords_extra, rows: Int32, m: Int32, n: Int32, mt: Int32, nt: Int32, tidx: Int32, slots: Int32, more):
        """Store a tile's C: through the CTA's fp16 A slots at `slots`, which no load refills after
        its last tile (`_store_staged`), else (`more`: tiles left) directly (`_store`); a wide
        tile's other rows (`wide_acc`) after the first tile_m. The last tile's path comes first, so
        that its code follows the main loop's in memory (the code after the last wgmma's wait, which
        every CTA runs once, cold). C's address is read first, so that its trip overlaps the
        barrier and the shared stores before the first global store."""
        if not more:
            c = Int64(table[(group, COL_C)])
            self._store_staged(c, acc, coords, self.tile_m, m, n, mt * self.tile_m, nt, tidx, slots)
            if cutlass.const_expr(self.wide):
                if rows > self.tile_m:
                    self._store_staged(c, wide_acc, coords_extra, HALF_ROWS, m, n, mt * self.tile_m + self.tile_m, nt,
                                       tidx, slots)
        else:
            c = Int64(table[(group, COL_C)])
            self._store(c, acc, coords, m, n, mt * self.tile_m, nt)
            if cutlass.const_expr(self.wide):
                if rows > self.tile_m:
                    self._store(c, wide_acc, coords_extra, m, n, mt * self.tile_m + self.tile_m, nt)

    @staticmethod
    def _quads(base: Int64, vals: cute.Tensor, first: int, tidx: Int32):
        """(address, index of its first value) of each 4 of `vals` a thread keeps in the partial-sum
        slot at `base`: quad j of thread t at 16-byte word (first + j) · MMA_THREADS + t, so that a
        warp's quad fills 512 contiguous bytes (a plain function: unrolled as traced)."""
        return [(base + Int64(((first + j) * MMA_THREADS + tidx) * 16), 4 * j) for j in range(cute.size(vals) // 4)]

    @cute.jit
    def _write_partial(self, table: cute.Tensor, slot: Int32, acc: cute.Tensor, wide_acc, rows: Int32, tidx: Int32):
        """The split build's writer piece: the MMA threads store their accumulators into partial-sum
        slot `slot` (`_quads`; a wide tile's other accumulators after them, where it has those
        rows), then one thread, after a barrier over them, adds 1 to the slot's flag (release;
        ptx.ready_add)."""
        base = Int64(table[(0, COL_PARTIALS)]) + Int64(slot) * Int64(self.partial_bytes)
        for at, i in self._quads(base, acc, 0, tidx):
            ptx.st_global_v4_f32(at, acc[i], acc[i + 1], acc[i + 2], acc[i + 3])
        if cutlass.const_expr(self.wide):
            if rows > self.tile_m:
                for at, i in self._quads(base, wide_acc, cute.size(acc) // 4, tidx):
                    ptx.st_global_v4_f32(at, wide_acc[i], wide_acc[i + 1], wide_acc[i + 2], wide_acc[i + 3])
        cute.arch.barrier(barrier_id=BAR_MMA, number_of_threads=MMA_THREADS)
        if tidx == 0:
            ptx.ready_add(Int64(table[(0, COL_FLAGS)]) + Int64(slot) * Int64(8), 1)

    @cute.jit
    def _add_partial(self, table: cute.Tensor, slot: Int32, acc: cute.Tensor, wide_acc, rows: Int32, tidx: Int32,
                     launch_at: Int32):
        """The split build's reader piece: once the flag of its tile's writer slot `slot` says this
        launch wrote it (the launch's number at `launch_at`, shared memory), add the partial sum
        into the accumulators. The first MMA warp waits (ptx.ready_wait), then a barrier of the MMA
        warps orders its acquire before every thread's loads."""
        if cute.arch.make_warp_uniform(cute.arch.warp_idx()) == 0:
            ptx.ready_wait(Int64(table[(0, COL_FLAGS)]) + Int64(slot) * Int64(8), 1,
                           Int64(ptx.ld_shared_b32(launch_at)))
        cute.arch.barrier(barrier_id=BAR_MMA, number_of_threads=MMA_THREADS)
        base = Int64(table[(0, COL_PARTIALS)]) + Int64(slot) * Int64(self.partial_bytes)
        for at, i in self._quads(base, acc, 0, tidx):
            acc[i], acc[i + 1], acc[i + 2], acc[i + 3] = ptx.add_global_v4_f32(at, acc[i], acc[i + 1], acc[i + 2],
                                                                               acc[i + 3])
        if cutlass.const_expr(self.wide):
            if rows > self.tile_m:
                for at, i in self._quads(base, wide_acc, cute.size(acc) // 4, tidx):
                    wide_acc[i], wide_acc[i + 1], wide_acc[i + 2], wide_acc[i + 3] = ptx.add_global_v4_f32(
                        at, wide_acc[i], wide_acc[i + 1], wide_acc[i + 2], wide_acc[i + 3])

    @cute.jit
    def _store_staged(self, c: Int64, acc: cute.Tensor, coords: cute.Tensor, tile_rows: cutlass.Constexpr[int],
                      m: Int32, n: Int32, m0: Int32, nt: Int32, tidx: Int32, staging: Int32):
        """`_store` through shared memory, for a CTA's last tile, whose fp16 A slots (at `staging`)
        nothing loads into any more: the MMA warps write the tile (`tile_rows` rows of C from m0 on,
        128 n each) as fp16 pairs into rows of C_STAGE_ROW bytes (16 more than a row: the four rows
        of one store instruction, two apart, fall in different banks), then store it as 16-byte
        chunks, 16 threads a row of C, rows < m only. A barrier of the MMA warps before (every
        wgmma that read a slot has retired in both warpgroups) and after the writes."""
        # the slots' last accesses were the async proxy's (copies, wgmma), now the generic proxy's
        cute.arch.barrier(barrier_id=BAR_MMA, number_of_threads=MMA_THREADS)
        ptx.fence_proxy_async_shared()
        for i, mm, row in self._pairs(acc, coords):
            ptx.st_shared_f16x2(staging + mm * C_STAGE_ROW + row * 2, acc[i], acc[i + 2])
        cute.arch.barrier(barrier_id=BAR_MMA, number_of_threads=MMA_THREADS)
        c = c + Int64(nt * TILE_N * 2)
        chunks = TILE_N * 2 // 16  # 16-byte chunks a row of the tile
        # a loop, not unrolled: this code runs once a CTA, as its last, and every line of it comes
        # into the instruction cache cold (ncu: unrolled, its 8 turns' guarded copies stalled on
        # instruction fetch for most of the epilogue; lab log)
        for turn in cutlass.range(tile_rows * chunks // MMA_THREADS, unroll=1):
            unit = tidx + turn * MMA_THREADS
            r = unit // chunks
            j = unit % chunks
            if m0 + r < m:
                w0, w1, w2, w3 = ptx.ld_shared_v4(staging + r * C_STAGE_ROW + j * 16)
                ptx.st_global_v4(c + Int64(m0 + r) * Int64(n) * Int64(2) + Int64(j * 16), w0, w1, w2, w3)

    @cute.jit
    def _store(self, c: Int64, acc: cute.Tensor, coords: cute.Tensor, m: Int32, n: Int32, m0: Int32, nt: Int32):
        """Write the accumulator tile (Cᵀ rows = n, columns = m from m0 on) to C[m, n], rows < m only.
        The accumulator fragment's values run e + 2h + 4j (wgmma's m64nN f32 layout: column 8j +
        2(lane % 4) + e, row lane / 4 + 8h of the warp's 16; PTX ISA, wgmma's register fragment of
        D, and CuTe's tv_layout_C ((4,8,4),(2,2,N/8))), and its row r + 8h holds B row 2r + h
        (`_decode_b`), so values i and i + 2 (h = 0, 1) are adjacent n at one m: one 32-bit store of
        two fp16, the 8 lanes of a column writing 32 bytes. Each store is predicated on its row of C,
        not branched around: a CTA runs this code cold at its first tile's end, where each
        instruction's fetch counts, and the branches doubled its length (lab log)."""
        n0 = nt * TILE_N
        for i, mm, row in self._pairs(acc, coords):
            ptx.st_global_f16x2_if(c + (Int64(m0 + mm) * Int64(n) + Int64(n0 + row)) * Int64(2), acc[i], acc[i + 2],
                                   Int32(m0 + mm < m))
