"""NVFP4 block-scaled GEMM for Blackwell (sm_100a): C_g = A_g · B_gᵀ, fp16 out, one kernel class.

The tensor core multiplies NVFP4 natively: `tcgen05.mma ... kind::mxf4nvf4.block_scale.block16`
reads packed e2m1 A and B from shared memory and one e4m3 scale per 16 k of each from tensor
memory, and accumulates in fp32 in tensor memory. Everything here is built from CuTe DSL's own
sm100 pieces (`utils.blackwell_helpers`, `utils.blockscaled_layout`, `cutlass.pipeline`, the
tensor-map manager, `memory.TmemAllocator`), which NVIDIA runs on B200s; what this file adds is
the operand order, the tile source (a host-built schedule) and where the tensor maps come from.
The structure follows CUTLASS's `dense_blockscaled_gemm_persistent.py` and
`grouped_blockscaled_gemm.py` examples (read, not copied).

Operands are swapped. The kernel computes Cᵀ = B · Aᵀ: the MMA's A operand is the competition's B
(n × k, the large side, 128 rows a CTA), its B operand the competition's A (m × k, the small side:
`mma_n` = 128 or 256 rows a tile, any m ≥ 1 through the copy engine's zero fill), and its D is
Cᵀ, an (n, m) view of the row-major (m, n) fp16 C with n contiguous. The copy engine clips the
store at m and n, so rows of A past m are read as zeros and never written. With `cta_group` 2 a
pair of CTAs (a cluster of 2) runs one `cta_group::2` MMA of 256 rows of B; each CTA loads its
128 rows of B and half of the tile's rows of A, and the leader issues the MMAs.

Data (the competition's layout): A (m, k/2) and B (n, k/2) bytes, K-major, two e2m1 a byte with
the lower k in the low nibble (the `float4_e2m1fn_x2` convention the tensor core reads); scales in
cuBLAS's blocked layout, which is exactly the layout of the MMA's scale-factor atom
(`blockscaled_layout.tile_atom_to_shape_SF`; tests/test_kernels_sm100.py reads every scale through
it from nvgg's copy of the competition's `to_blocked`); C (m, n) fp16, written in place.

Warps (192 threads): 0-3 epilogue (tensor memory → registers → fp16 → shared memory → bulk tensor
store), 4 MMA (scales to tensor memory by `tcgen05.cp`, then the MMAs of each 256-k stage), 5 TMA
(A, B and their scales into a ring of `stages` buffers). Pipelines: load ring (TMA → MMA),
accumulator (MMA → epilogue: two buffers in tensor memory; at mma_n 256 they overlap by the
scales' columns, NVIDIA's `overlapping_accum`, see config.py), store (epilogue).

The persistent kernel is launched programmatically (host.py): its CTAs may start while the kernel
before it in the stream finishes; its TMA and epilogue warps wait for that kernel
(griddepcontrol.wait) before their first bulk copy, map fence or map write, and the MMA warp reads
only shared and tensor memory and the schedule (tests/test_grid_dependency.py checks every path of
every persistent build's PTX).

Tiles and tensor maps, by build:
- per-group (`persistent=False`, for sequential, multistream, graph): one launch per group, one
  tile a CTA (pair), grid (n tiles · cta_group, m tiles); the tensor maps are kernel parameters,
  as this class's host side (`__call__`) encodes them (packed once by params.py for the driver
  launch, or made by the compiled `__call__` at every call for the DSL's).
- persistent: one launch for all groups. Each cluster walks its list of tiles from the host's
  schedule (`runs`, `tiles`: see host.py) and its maps come from one of two places:
  - `host`: every group's five maps encoded on the host at prepare time (params.py, exactly as
    `encode_maps` would) into a device table [G, 5, 128 B]; the kernel prefetches and fences a group's
    maps when it first uses them and never writes one.
  - `device`: each CTA rewrites the template maps for each group it visits, in its own slot of a
    workspace [ctas, visits, 5, 128 B] (`tensormap.replace` in shared memory, then
    `tensormap.cp_fenceproxy` to the slot, then the acquire fence). A CTA's k-th group always gets
    its k-th slot, so no map is ever rewritten while a copy that reads it may be in flight (the
    hazard of DeepGEMM PR 343 and cutlass issue 3165).

The instrumented build (`instrument`) writes %globaltimer readings into a phase buffer [ctas,
phase_slots.SM100.slots] (see kernels/sm100/phase_slots.py); never the timed build.
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
import cutlass.utils.blackwell_helpers as sm100_utils
import cutlass.utils.blockscaled_layout as blockscaled_utils
from cutlass import Float16, Float32, Int32, Int64
from cutlass.cute.nvgpu import OperandMajorMode, cpasync, tcgen05
from cutlass.memory import SmemAllocator, TmemAllocator, get_smem_capacity_in_bytes
from cutlass.pipeline import pipeline_init_arrive, pipeline_init_wait
from cutlass.tensor_utils import LayoutEnum, TensorMapManager, TensorMapUpdateMode

from .. import asm
from .phase_slots import SM100
from . import params as kparams
from .config import (COL_A, COL_B, COL_C, COL_K, COL_M, COL_N, COL_SFA, COL_SFB, CTA_ROWS, EPILOGUE_WARPS,  # noqa: F401
                     GROUP_COLS, MAP_BYTES, MAPS, MMA_WARP, SF_VEC, TABLE_EXTENT, THREADS, TILE_COLS, TILE_K,
                     TMA_WARP, TMEM_COLUMNS, Sm100Config, _round_up)

AB_DTYPE = cutlass.Float4E2M1FN
SF_DTYPE = cutlass.Float8E4M3FN
C_DTYPE = Float16
ACC_DTYPE = Float32
_BAR_EPILOGUE, _BAR_TMEM = 1, 2  # named barriers (0 is the CTA barrier)


class Nvfp4GemmSm100:
    """The sm_100a kernel for one `Sm100Config`. `__call__` is the host side (built by
    `cute.compile`), `kernel` the device side, `encode_maps` the host encoder of one group's maps."""

    def __init__(self, config: Sm100Config):
        reason = config.problems()
        if reason:
            raise ValueError(reason)
        self.config = config
        self.use_2cta = config.cta_group == 2
        self.cta_group = tcgen05.CtaGroup.TWO if self.use_2cta else tcgen05.CtaGroup.ONE
        self.cluster_shape_mn = (config.cta_group, 1)
        self.mma_inst_mn = (config.mma_m, config.mma_n)
        # the scale tile of the MMA's B operand spans whole 128-row scale atoms
        self.mma_inst_mn_sfb = (CTA_ROWS, _round_up(config.mma_n, 128))
        self.mma_tiler = (config.mma_m, config.mma_n, TILE_K)
        self.mma_tiler_sfb = (*self.mma_inst_mn_sfb, TILE_K)
        self.cta_tile = (CTA_ROWS, config.mma_n, TILE_K)
        self.c_layout = LayoutEnum.COL_MAJOR  # D = Cᵀ: n (the MMA's M) is contiguous
        self.num_acc_stage = config.acc_stages
        self.smem_capacity = get_smem_capacity_in_bytes("sm_100")
        self.num_tmem_alloc_cols = TMEM_COLUMNS
        self.epilogue_sync = pipeline.NamedBarrier(barrier_id=_BAR_EPILOGUE, num_threads=32 * len(EPILOGUE_WARPS))
        self.tmem_alloc_sync = pipeline.NamedBarrier(barrier_id=_BAR_TMEM,
                                                     num_threads=32 * (len(EPILOGUE_WARPS) + 1))
        self.maps = TensorMapManager(TensorMapUpdateMode.SMEM, MAP_BYTES)
        self.layout = SM100

    # -----------------------------------------------------------------------------------------
    # Host side

    def _tiled_mmas(self):
        tiled_mma = sm100_utils.make_blockscaled_trivial_tiled_mma(
            AB_DTYPE, AB_DTYPE, OperandMajorMode.K, OperandMajorMode.K, SF_DTYPE, SF_VEC,
            self.cta_group, self.mma_inst_mn)
        tiled_mma_sfb = sm100_utils.make_blockscaled_trivial_tiled_mma(
            AB_DTYPE, AB_DTYPE, OperandMajorMode.K, OperandMajorMode.K, SF_DTYPE, SF_VEC,
            tcgen05.CtaGroup.ONE, self.mma_inst_mn_sfb)
        return tiled_mma, tiled_mma_sfb

    def _setup(self, tiled_mma, tiled_mma_sfb):
        """Cluster layouts, epilogue tile, stage counts and shared-memory layouts (static)."""
        self.cluster_layout_vmnk = cute.tiled_divide(cute.make_layout((*self.cluster_shape_mn, 1)),
                                                     (tiled_mma.thr_id.shape,))
        self.cluster_layout_sfb_vmnk = cute.tiled_divide(cute.make_layout((*self.cluster_shape_mn, 1)),
                                                         (tiled_mma_sfb.thr_id.shape,))
        self.epi_tile = sm100_utils.compute_epilogue_tile_shape(self.cta_tile, self.use_2cta, self.c_layout, C_DTYPE)
        one = lambda fn, *a: fn(*a, 1)  # noqa: E731  (a one-stage layout, for sizes)
        ab_stage_bytes = (
            cute.size_in_bytes(AB_DTYPE, one(sm100_utils.make_smem_layout_a, tiled_mma, self.mma_tiler, AB_DTYPE))
            + cute.size_in_bytes(AB_DTYPE, one(sm100_utils.make_smem_layout_b, tiled_mma, self.mma_tiler, AB_DTYPE))
            + cute.size_in_bytes(SF_DTYPE, one(blockscaled_utils.make_smem_layout_sfa, tiled_mma, self.mma_tiler, SF_VEC))
            + cute.size_in_bytes(SF_DTYPE, one(blockscaled_utils.make_smem_layout_sfb, tiled_mma, self.mma_tiler, SF_VEC)))
        c_stage_bytes = cute.size_in_bytes(C_DTYPE, sm100_utils.make_smem_layout_epi(C_DTYPE, self.c_layout, self.epi_tile, 1))
        # barriers, the tensor-memory address, and the five shared-memory map copies of the device mode
        reserved = 1024 + MAPS * MAP_BYTES
        self.num_c_stage = 2
        self.num_ab_stage = (self.smem_capacity - reserved - self.num_c_stage * c_stage_bytes) // ab_stage_bytes
        self.num_c_stage += (self.smem_capacity - reserved - self.num_ab_stage * ab_stage_bytes
                             - self.num_c_stage * c_stage_bytes) // c_stage_bytes
        self.a_smem_layout_staged = sm100_utils.make_smem_layout_a(tiled_mma, self.mma_tiler, AB_DTYPE, self.num_ab_stage)
        self.b_smem_layout_staged = sm100_utils.make_smem_layout_b(tiled_mma, self.mma_tiler, AB_DTYPE, self.num_ab_stage)
        self.sfa_smem_layout_staged = blockscaled_utils.make_smem_layout_sfa(tiled_mma, self.mma_tiler, SF_VEC,
                                                                             self.num_ab_stage)
        self.sfb_smem_layout_staged = blockscaled_utils.make_smem_layout_sfb(tiled_mma, self.mma_tiler, SF_VEC,
                                                                             self.num_ab_stage)
        self.c_smem_layout_staged = sm100_utils.make_smem_layout_epi(C_DTYPE, self.c_layout, self.epi_tile,
                                                                     self.num_c_stage)
        self.num_sfa_tmem_cols = self.config.sfa_tmem_columns
        self.num_acc_tmem_cols = self.config.acc_tmem_columns
        # overlapping accumulators: the epilogue's subtiles span epi_tile_n columns each; after
        # reading the first `acc_release_subtile` + 1 of them (the columns the other buffer shares,
        # read first) it hands the accumulator back to the MMA warp
        self.epi_tile_n = cute.size(self.epi_tile[1])
        self.acc_subtiles = self.config.mma_n // self.epi_tile_n
        self.acc_release_subtile = self.config.sf_tmem_columns // self.epi_tile_n
        if self.config.overlapping_accum and not (
                self.config.mma_n % self.epi_tile_n == 0 and self.acc_release_subtile < self.acc_subtiles
                and cute.size(self.epi_tile[0]) == CTA_ROWS):
            raise ValueError(f"overlapping accumulators need whole epilogue subtiles of the CTA's {CTA_ROWS} rows; "
                             f"the epilogue tile spans {cute.size(self.epi_tile[0])} x {self.epi_tile_n}")

    @cute.jit
    def operands(self, b_ptr: cute.Pointer, a_ptr: cute.Pointer, sfb_ptr: cute.Pointer, sfa_ptr: cute.Pointer,
                 c_ptr: cute.Pointer, m: Int32, n: Int32, k: Int32):
        """One group's five tensors in the MMA's roles: (MMA A = B (n, k, 1), MMA B = A (m, k, 1),
        their scales in the scale-factor atom layout, D = Cᵀ (n, m, 1) with n contiguous). The same
        function builds the template maps, the device-mode replacements and the host-encoded maps,
        so all three describe a group alike."""
        k32 = cute.assume(k, 32)
        mma_a = cute.make_tensor(b_ptr, cute.make_layout((n, k32, 1), stride=(k32, 1, n * k32)))
        mma_b = cute.make_tensor(a_ptr, cute.make_layout((m, k32, 1), stride=(k32, 1, m * k32)))
        sfa = cute.make_tensor(sfb_ptr, blockscaled_utils.tile_atom_to_shape_SF(mma_a.shape, SF_VEC))
        sfb = cute.make_tensor(sfa_ptr, blockscaled_utils.tile_atom_to_shape_SF(mma_b.shape, SF_VEC))
        n8 = cute.assume(n, 8)
        d = cute.make_tensor(c_ptr, cute.make_layout((n8, m, 1), stride=(1, n8, m * n8)))
        return mma_a, mma_b, sfa, sfb, d

    @cute.jit
    def _atoms(self, tiled_mma, tiled_mma_sfb, mma_a, mma_b, sfa, sfb, d):
        """The TMA atoms (and their coordinate tensors) of one group's five tensors."""
        a_op = sm100_utils.cluster_shape_to_tma_atom_A(self.cluster_shape_mn, tiled_mma.thr_id)
        atom_a, t_a = cute.nvgpu.make_tiled_tma_atom_A(
            a_op, mma_a, cute.slice_(self.a_smem_layout_staged, (None, None, None, 0)), self.mma_tiler,
            tiled_mma, self.cluster_layout_vmnk.shape)
        b_op = sm100_utils.cluster_shape_to_tma_atom_B(self.cluster_shape_mn, tiled_mma.thr_id)
        atom_b, t_b = cute.nvgpu.make_tiled_tma_atom_B(
            b_op, mma_b, cute.slice_(self.b_smem_layout_staged, (None, None, None, 0)), self.mma_tiler,
            tiled_mma, self.cluster_layout_vmnk.shape)
        sfa_op = sm100_utils.cluster_shape_to_tma_atom_A(self.cluster_shape_mn, tiled_mma.thr_id)
        atom_sfa, t_sfa = cute.nvgpu.make_tiled_tma_atom_A(
            sfa_op, sfa, cute.slice_(self.sfa_smem_layout_staged, (None, None, None, 0)), self.mma_tiler,
            tiled_mma, self.cluster_layout_vmnk.shape, internal_type=cutlass.Int16)
        sfb_op = sm100_utils.cluster_shape_to_tma_atom_SFB(self.cluster_shape_mn, tiled_mma.thr_id)
        atom_sfb, t_sfb = cute.nvgpu.make_tiled_tma_atom_B(
            sfb_op, sfb, cute.slice_(self.sfb_smem_layout_staged, (None, None, None, 0)), self.mma_tiler_sfb,
            tiled_mma_sfb, self.cluster_layout_sfb_vmnk.shape, internal_type=cutlass.Int16)
        atom_c, t_c = cpasync.make_tiled_tma_atom(
            cpasync.CopyBulkTensorTileS2GOp(), d, cute.slice_(self.c_smem_layout_staged, (None, None, 0)),
            self.epi_tile)
        return (atom_a, t_a), (atom_b, t_b), (atom_sfa, t_sfa), (atom_sfb, t_sfb), (atom_c, t_c)

    @cute.jit
    def encode_maps(self, b_ptr: cute.Pointer, a_ptr: cute.Pointer, sfb_ptr: cute.Pointer, sfa_ptr: cute.Pointer,
                    c_ptr: cute.Pointer, m: Int32, n: Int32, k: Int32, out: cute.Pointer):
        """Host code only (no kernel): the five tensor maps of one group, exactly as the kernel's
        atoms would encode them, written to `out` (5 × 128 bytes of host memory). The host mode's
        prepare step runs this once per group (host.encoder)."""
        tiled_mma, tiled_mma_sfb = self._tiled_mmas()
        self._setup(tiled_mma, tiled_mma_sfb)
        atoms = self._atoms(tiled_mma, tiled_mma_sfb, *self.operands(b_ptr, a_ptr, sfb_ptr, sfa_ptr, c_ptr, m, n, k))
        base = out.toint()
        for i in cutlass.range_constexpr(MAPS):
            dst = cute.make_ptr(Int64, base + i * MAP_BYTES, cute.AddressSpace.gmem, assumed_align=64)
            cpasync.copy_tensormap(atoms[i][0], dst)

    @cute.jit
    def __call__(self, b_ptr: cute.Pointer, a_ptr: cute.Pointer, sfb_ptr: cute.Pointer, sfa_ptr: cute.Pointer,
                 c_ptr: cute.Pointer, m: Int32, n: Int32, k: Int32, runs_ptr: cute.Pointer, tiles_ptr: cute.Pointer,
                 groups_ptr: cute.Pointer, maps_ptr: cute.Pointer, phases_ptr: cute.Pointer, grid_ctas: Int32,
                 visits: Int32, stream):
        """Launch. The per-group kernel: (b, a, sfb, sfa, c, m, n, k) are the group's; the other
        pointers are unused (null). The persistent kernel: they are group 0's (the templates), and
        the work comes from `runs`/`tiles`, the group table, the map table or workspace and
        `grid_ctas` CTAs (a multiple of cta_group); `visits` is the workspace's slots per CTA."""
        tiled_mma, tiled_mma_sfb = self._tiled_mmas()
        self._setup(tiled_mma, tiled_mma_sfb)
        tensors = self.operands(b_ptr, a_ptr, sfb_ptr, sfa_ptr, c_ptr, m, n, k)
        (atom_a, t_a), (atom_b, t_b), (atom_sfa, t_sfa), (atom_sfb, t_sfb), (atom_c, t_c) = self._atoms(
            tiled_mma, tiled_mma_sfb, *tensors)
        self.num_tma_load_bytes = cute.size(tiled_mma.thr_id.shape) * (
            cute.size_in_bytes(AB_DTYPE, cute.slice_(self.a_smem_layout_staged, (None, None, None, 0)))
            + cute.size_in_bytes(AB_DTYPE, cute.slice_(self.b_smem_layout_staged, (None, None, None, 0)))
            + cute.size_in_bytes(SF_DTYPE, cute.slice_(self.sfa_smem_layout_staged, (None, None, None, 0)))
            + cute.size_in_bytes(SF_DTYPE, cute.slice_(self.sfb_smem_layout_staged, (None, None, None, 0))))

        runs = cute.make_tensor(runs_ptr, cute.make_layout(TABLE_EXTENT))
        tiles = cute.make_tensor(tiles_ptr, cute.make_layout((TABLE_EXTENT, TILE_COLS), stride=(TILE_COLS, 1)))
        groups = cute.make_tensor(groups_ptr, cute.make_layout((TABLE_EXTENT, GROUP_COLS), stride=(GROUP_COLS, 1)))
        phases = cute.make_tensor(phases_ptr, cute.make_layout((TABLE_EXTENT, self.layout.slots),
                                                               stride=(self.layout.slots, 1)))

        @cute.struct
        class SharedStorage:
            maps: cute.struct.Align[cute.struct.MemRange[Int64, MAPS * MAP_BYTES // 8], 128]
            ab_full_mbar: cute.struct.MemRange[Int64, self.num_ab_stage]
            ab_empty_mbar: cute.struct.MemRange[Int64, self.num_ab_stage]
            acc_full_mbar: cute.struct.MemRange[Int64, self.num_acc_stage]
            acc_empty_mbar: cute.struct.MemRange[Int64, self.num_acc_stage]
            tmem_dealloc_mbar: Int64
            tmem_holding_buf: Int32
            sC: cute.struct.Align[cute.struct.MemRange[C_DTYPE, cute.cosize(self.c_smem_layout_staged.outer)], 1024]
            sA: cute.struct.Align[cute.struct.MemRange[AB_DTYPE, cute.cosize(self.a_smem_layout_staged.outer)], 1024]
            sB: cute.struct.Align[cute.struct.MemRange[AB_DTYPE, cute.cosize(self.b_smem_layout_staged.outer)], 1024]
            sSFA: cute.struct.Align[cute.struct.MemRange[SF_DTYPE, cute.cosize(self.sfa_smem_layout_staged)], 1024]
            sSFB: cute.struct.Align[cute.struct.MemRange[SF_DTYPE, cute.cosize(self.sfb_smem_layout_staged)], 1024]

        self.shared_storage = SharedStorage
        if cutlass.const_expr(self.config.persistent):
            grid = (grid_ctas, 1, 1)
        else:
            grid = (cute.ceil_div(n, self.config.mma_m) * self.config.cta_group,
                    cute.ceil_div(m, self.config.mma_n), 1)
        self.kernel(tiled_mma, tiled_mma_sfb, atom_a, t_a, atom_b, t_b, atom_sfa, t_sfa, atom_sfb, t_sfb,
                    atom_c, t_c, self.cluster_layout_vmnk, self.cluster_layout_sfb_vmnk,
                    self.a_smem_layout_staged, self.b_smem_layout_staged, self.sfa_smem_layout_staged,
                    self.sfb_smem_layout_staged, self.c_smem_layout_staged, self.epi_tile,
                    k // TILE_K, runs, tiles, groups, maps_ptr, phases, visits).launch(
            grid=grid, block=[THREADS, 1, 1], cluster=(*self.cluster_shape_mn, 1), stream=stream,
            min_blocks_per_mp=1)

    # -----------------------------------------------------------------------------------------
    # Device side

    @cute.kernel
    def kernel(self, tiled_mma: cute.TiledMma, tiled_mma_sfb: cute.TiledMma,
               atom_a: cute.CopyAtom, mA: cute.Tensor, atom_b: cute.CopyAtom, mB: cute.Tensor,
               atom_sfa: cute.CopyAtom, mSFA: cute.Tensor, atom_sfb: cute.CopyAtom, mSFB: cute.Tensor,
               atom_c: cute.CopyAtom, mC: cute.Tensor, cluster_layout_vmnk: cute.Layout,
               cluster_layout_sfb_vmnk: cute.Layout, a_smem_layout_staged: cute.ComposedLayout,
               b_smem_layout_staged: cute.ComposedLayout, sfa_smem_layout_staged: cute.Layout,
               sfb_smem_layout_staged: cute.Layout, c_smem_layout_staged, epi_tile: cute.Tile,
               k_tiles_here: Int32, runs: cute.Tensor, tiles: cute.Tensor, groups: cute.Tensor,
               maps_ptr: cute.Pointer, phases: cute.Tensor, visits: Int32):
        config = self.config
        warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        tidx, _, _ = cute.arch.thread_idx()
        bidx, bidy, _ = cute.arch.block_idx()
        cta = bidx
        self._stamp(phases, cta, warp_idx, EPILOGUE_WARPS[0], self.layout.START)

        if cutlass.const_expr(not config.persistent):
            if warp_idx == TMA_WARP:
                for atom in (atom_a, atom_b, atom_sfa, atom_sfb, atom_c):
                    cpasync.prefetch_descriptor(atom)

        mma_tile_v = bidx % cute.size(tiled_mma.thr_id.shape)
        is_leader_cta = mma_tile_v == 0
        cta_rank_in_cluster = cute.arch.make_warp_uniform(cute.arch.block_idx_in_cluster())
        block_vmnk = cluster_layout_vmnk.get_flat_coord(cta_rank_in_cluster)
        block_sfb_vmnk = cluster_layout_sfb_vmnk.get_flat_coord(cta_rank_in_cluster)
        cluster = bidx // config.cta_group

        smem = SmemAllocator()
        storage = smem.allocate(self.shared_storage)
        map_smem = storage.maps.data_ptr()

        # pipelines (their barriers initialised here; pipeline_init_wait below publishes them)
        ab_pipeline = pipeline.PipelineTmaUmma.create(
            barrier_storage=storage.ab_full_mbar.data_ptr(), num_stages=self.num_ab_stage,
            producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
            consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, 1),
            tx_count=self.num_tma_load_bytes, cta_layout_vmnk=cluster_layout_vmnk, defer_sync=True)
        acc_pipeline = pipeline.PipelineUmmaAsync.create(
            barrier_storage=storage.acc_full_mbar.data_ptr(), num_stages=self.num_acc_stage,
            producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
            consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread,
                                                     len(EPILOGUE_WARPS) * config.cta_group),
            cta_layout_vmnk=cluster_layout_vmnk, defer_sync=True)
        tmem = TmemAllocator(storage.tmem_holding_buf.ptr, barrier_for_retrieve=self.tmem_alloc_sync,
                             allocator_warp_id=EPILOGUE_WARPS[0], is_two_cta=self.use_2cta,
                             two_cta_tmem_dealloc_mbar_ptr=storage.tmem_dealloc_mbar.ptr)
        pipeline_init_arrive(cluster_shape_mn=self.cluster_shape_mn, is_relaxed=True)

        sC = storage.sC.get_tensor(c_smem_layout_staged.outer, swizzle=c_smem_layout_staged.inner)
        sA = storage.sA.get_tensor(a_smem_layout_staged.outer, swizzle=a_smem_layout_staged.inner)
        sB = storage.sB.get_tensor(b_smem_layout_staged.outer, swizzle=b_smem_layout_staged.inner)
        sSFA = storage.sSFA.get_tensor(sfa_smem_layout_staged)
        sSFB = storage.sSFB.get_tensor(sfb_smem_layout_staged)

        a_mcast = b_mcast = sfa_mcast = sfb_mcast = None
        if cutlass.const_expr(self.use_2cta):
            a_mcast = cpasync.create_tma_multicast_mask(cluster_layout_vmnk, block_vmnk, mcast_mode=2)
            b_mcast = cpasync.create_tma_multicast_mask(cluster_layout_vmnk, block_vmnk, mcast_mode=1)
            sfa_mcast = cpasync.create_tma_multicast_mask(cluster_layout_vmnk, block_vmnk, mcast_mode=2)
            sfb_mcast = cpasync.create_tma_multicast_mask(cluster_layout_sfb_vmnk, block_sfb_vmnk, mcast_mode=1)

        # global tiles: (bM, bK, RestM, RestK, RestL) and alike
        gA = cute.local_tile(mA, cute.slice_(self.mma_tiler, (None, 0, None)), (None, None, None))
        gB = cute.local_tile(mB, cute.slice_(self.mma_tiler, (0, None, None)), (None, None, None))
        gSFA = cute.local_tile(mSFA, cute.slice_(self.mma_tiler, (None, 0, None)), (None, None, None))
        gSFB = cute.local_tile(mSFB, cute.slice_(self.mma_tiler_sfb, (0, None, None)), (None, None, None))
        gC = cute.local_tile(mC, cute.slice_(self.mma_tiler, (None, None, 0)), (None, None, None))
        thr_mma = tiled_mma.get_slice(mma_tile_v)
        thr_mma_sfb = tiled_mma_sfb.get_slice(mma_tile_v)
        tCgA = thr_mma.partition_A(gA)
        tCgB = thr_mma.partition_B(gB)
        tCgSFA = thr_mma.partition_A(gSFA)
        tCgSFB = thr_mma_sfb.partition_B(gSFB)
        tCgC = thr_mma.partition_C(gC)

        a_cta_layout = cute.make_layout(cute.slice_(cluster_layout_vmnk, (0, 0, None, 0)).shape)
        tAsA, tAgA = cpasync.tma_partition(atom_a, block_vmnk[2], a_cta_layout, cute.group_modes(sA, 0, 3),
                                           cute.group_modes(tCgA, 0, 3))
        b_cta_layout = cute.make_layout(cute.slice_(cluster_layout_vmnk, (0, None, 0, 0)).shape)
        tBsB, tBgB = cpasync.tma_partition(atom_b, block_vmnk[1], b_cta_layout, cute.group_modes(sB, 0, 3),
                                           cute.group_modes(tCgB, 0, 3))
        tAsSFA, tAgSFA = cpasync.tma_partition(atom_sfa, block_vmnk[2], a_cta_layout,
                                               cute.group_modes(sSFA, 0, 3), cute.group_modes(tCgSFA, 0, 3))
        tAsSFA = cute.filter_zeros(tAsSFA)
        tAgSFA = cute.filter_zeros(tAgSFA)
        sfb_cta_layout = cute.make_layout(cute.slice_(cluster_layout_sfb_vmnk, (0, None, 0, 0)).shape)
        tBsSFB, tBgSFB = cpasync.tma_partition(atom_sfb, block_sfb_vmnk[1], sfb_cta_layout,
                                               cute.group_modes(sSFB, 0, 3), cute.group_modes(tCgSFB, 0, 3))
        tBsSFB = cute.filter_zeros(tBsSFB)
        tBgSFB = cute.filter_zeros(tBgSFB)

        tCrA = tiled_mma.make_fragment_A(sA)
        tCrB = tiled_mma.make_fragment_B(sB)
        acc_shape = tiled_mma.partition_shape_C(self.mma_tiler[:2])
        tCtAcc_fake = tiled_mma.make_fragment_C(cute.append(acc_shape, self.config.acc_buffers))
        if cutlass.const_expr(config.overlapping_accum):
            # the second buffer starts acc_buffer_stride columns after the first (mode 0's second
            # stride is a column's), so the two share the scales' worth of columns
            stride = tCtAcc_fake.stride
            tCtAcc_fake = cute.make_tensor(tCtAcc_fake.iterator, cute.make_layout(
                tCtAcc_fake.shape, stride=(stride[0], stride[1], stride[2],
                                           config.acc_buffer_stride * stride[0][1])))

        pipeline_init_wait(cluster_shape_mn=self.cluster_shape_mn)
        self._stamp(phases, cta, warp_idx, EPILOGUE_WARPS[0], self.layout.BARRIERS_READY)
        count = self._tile_count(runs, cluster)
        if cutlass.const_expr(config.persistent):
            # Programmatic launches (host.py launches the persistent kernel so): the next launch
            # may start its CTAs now, on the SMs this one leaves. Before its wait below, a launch
            # writes only its own shared and tensor memory and reads only its schedule, which no
            # launch writes, so nothing of this launch can mix with the next one's.
            cute.arch.griddepcontrol_launch_dependents()

        # ------------------------------------------------------------------ TMA warp
        if warp_idx == TMA_WARP:
            if cutlass.const_expr(config.persistent):
                # every global read of the inputs (A, B, scales, the group and map tables) and
                # every map this warp writes (device mode) waits for the kernel before this one
                # in the stream: it may have rewritten them (inputs refilled in place)
                cute.arch.griddepcontrol_wait()
            state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, self.num_ab_stage)
            last_group = Int32(-1)
            visit = Int32(-1)
            if cutlass.const_expr(config.tensormaps == "device"):
                for i, atom in enumerate((atom_a, atom_b, atom_sfa, atom_sfb)):
                    self.maps.init_tensormap_from_atom(atom, map_smem + i * (MAP_BYTES // 8), TMA_WARP)
            for i in cutlass.range(count, unroll=1):
                group, tile_n, tile_m, k_tiles = self._tile(runs, tiles, cluster, i, bidx, bidy, k_tiles_here)
                desc = Int64(0)
                if cutlass.const_expr(config.persistent):
                    visit, desc = self._visit(group, last_group, visit, cta, visits, groups, maps_ptr, map_smem,
                                              (atom_a, atom_b, atom_sfa, atom_sfb), (0, 1, 2, 3), warp_idx, TMA_WARP,
                                              phases)
                    last_group = group
                    if i == 0:
                        self._stamp(phases, cta, warp_idx, TMA_WARP, self.layout.MAPS_READY)
                tAgA_t = tAgA[(None, tile_n, None, 0)]
                tBgB_t = tBgB[(None, tile_m, None, 0)]
                tAgSFA_t = tAgSFA[(None, tile_n, None, 0)]
                tBgSFB_t = tBgSFB[(None, tile_m, None, 0)]
                state.reset_count()
                for kt in cutlass.range(k_tiles, unroll=1):
                    ab_pipeline.producer_acquire(state)
                    bar = ab_pipeline.producer_get_barrier(state)
                    self._load(atom_a, tAgA_t[(None, kt)], tAsA[(None, state.index)], bar, a_mcast, desc, 0)
                    self._load(atom_b, tBgB_t[(None, kt)], tBsB[(None, state.index)], bar, b_mcast, desc, 1)
                    self._load(atom_sfa, tAgSFA_t[(None, kt)], tAsSFA[(None, state.index)], bar, sfa_mcast, desc, 2)
                    self._load(atom_sfb, tBgSFB_t[(None, kt)], tBsSFB[(None, state.index)], bar, sfb_mcast, desc, 3)
                    if i == 0:
                        if kt == 0:
                            self._stamp(phases, cta, warp_idx, TMA_WARP, self.layout.FIRST_TMA_ISSUED)
                    state.advance()
            self._stamp_count(phases, cta, visit + 1)
            ab_pipeline.producer_tail(state)

        # ------------------------------------------------------------------ MMA warp
        if warp_idx == MMA_WARP:
            tmem.wait_for_alloc()
            acc_tmem_ptr = tmem.retrieve_ptr(ACC_DTYPE)
            tCtAcc_base = cute.make_tensor(acc_tmem_ptr, tCtAcc_fake.layout)
            sfa_tmem_ptr = cute.recast_ptr(acc_tmem_ptr + self.num_acc_tmem_cols, dtype=SF_DTYPE)
            tCtSFA = cute.make_tensor(sfa_tmem_ptr, blockscaled_utils.make_tmem_layout_sfa(
                tiled_mma, self.mma_tiler, SF_VEC, cute.slice_(sfa_smem_layout_staged, (None, None, None, 0))))
            sfb_tmem_ptr = cute.recast_ptr(acc_tmem_ptr + self.num_acc_tmem_cols + self.num_sfa_tmem_cols,
                                           dtype=SF_DTYPE)
            tCtSFB = cute.make_tensor(sfb_tmem_ptr, blockscaled_utils.make_tmem_layout_sfb(
                tiled_mma, self.mma_tiler, SF_VEC, cute.slice_(sfb_smem_layout_staged, (None, None, None, 0))))
            copy_sfa, tCsSFA_s2t, tCtSFA_s2t = self._s2t(sSFA, tCtSFA)
            copy_sfb, tCsSFB_s2t, tCtSFB_s2t = self._s2t(sSFB, tCtSFB)

            ab_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.num_ab_stage)
            acc_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, self.num_acc_stage)
            for i in cutlass.range(count, unroll=1):
                _, _, _, k_tiles = self._tile(runs, tiles, cluster, i, bidx, bidy, k_tiles_here)
                tCtAcc = tCtAcc_base[(None, None, None, self._acc_buffer(acc_state, True))]
                if is_leader_cta:
                    acc_pipeline.producer_acquire(acc_state)
                ab_state.reset_count()
                for kt in cutlass.range(k_tiles, unroll=1):
                    if is_leader_cta:
                        ab_pipeline.consumer_wait(ab_state)
                        if i == 0:
                            if kt == 0:
                                self._stamp(phases, cta, warp_idx, MMA_WARP, self.layout.FIRST_TMA_LANDED)
                        stage = (None, None, None, None, ab_state.index)
                        cute.copy(copy_sfa, tCsSFA_s2t[stage], tCtSFA_s2t)
                        cute.copy(copy_sfb, tCsSFB_s2t[stage], tCtSFB_s2t)
                        tiled_mma.set(tcgen05.Field.ACCUMULATE, kt != 0)
                        crd = (None, None, None, ab_state.index)
                        cute.gemm(tiled_mma, tCtAcc, [tCrA[crd], tCtSFA], [tCrB[crd], tCtSFB], tCtAcc)
                        if i == 0:
                            if kt == 0:
                                self._stamp(phases, cta, warp_idx, MMA_WARP, self.layout.FIRST_MMA)
                        ab_pipeline.consumer_release(ab_state)
                    ab_state.advance()
                if is_leader_cta:
                    acc_pipeline.producer_commit(acc_state)
                acc_state.advance()
            self._stamp(phases, cta, warp_idx, MMA_WARP, self.layout.MAINLOOP_DONE)
            acc_pipeline.producer_tail(acc_state)

        # ------------------------------------------------------------------ epilogue warps
        if warp_idx < MMA_WARP:
            tmem.allocate(self.num_tmem_alloc_cols)
            tmem.wait_for_alloc()
            self._stamp(phases, cta, warp_idx, EPILOGUE_WARPS[0], self.layout.TMEM_READY)
            acc_tmem_ptr = tmem.retrieve_ptr(ACC_DTYPE)
            tCtAcc_base = cute.make_tensor(acc_tmem_ptr, tCtAcc_fake.layout)
            copy_t2r, tTR_tAcc_base, tTR_rAcc = self._t2r(tidx, tCtAcc_base, tCgC, epi_tile)
            tTR_rC = cute.make_rmem_tensor(tTR_rAcc.shape, C_DTYPE)
            copy_r2s, tRS_rC, tRS_sC = self._r2s(copy_t2r, tTR_rC, tidx, sC)
            gC_epi = cute.flat_divide(tCgC[((None, None), 0, 0, None, None, None)], epi_tile)
            bSG_sC, bSG_gC_all = cpasync.tma_partition(atom_c, 0, cute.make_layout(1), cute.group_modes(sC, 0, 2),
                                                       cute.group_modes(gC_epi, 0, 2))
            c_pipeline = pipeline.PipelineTmaStore.create(
                num_stages=self.num_c_stage,
                producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, 32 * len(EPILOGUE_WARPS)))
            acc_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.num_acc_stage)
            last_group = Int32(-1)
            visit = Int32(-1)
            if cutlass.const_expr(config.persistent):
                # every write of C (and of C's map, device mode) waits for the kernel before this
                # one in the stream, which may write the same C
                cute.arch.griddepcontrol_wait()
            if cutlass.const_expr(config.tensormaps == "device"):
                self.maps.init_tensormap_from_atom(atom_c, map_smem + 4 * (MAP_BYTES // 8), EPILOGUE_WARPS[0])
            subtiles_done = Int32(0)
            for i in cutlass.range(count, unroll=1):
                group, tile_n, tile_m, _ = self._tile(runs, tiles, cluster, i, bidx, bidy, k_tiles_here)
                desc = Int64(0)
                if cutlass.const_expr(config.persistent):
                    visit, desc = self._visit(group, last_group, visit, cta, visits, groups, maps_ptr, map_smem,
                                              (atom_c,), (4,), warp_idx, EPILOGUE_WARPS[0], None)
                    last_group = group
                bSG_gC = bSG_gC_all[(None, None, None, tile_n, tile_m, 0)]
                buffer_index = self._acc_buffer(acc_state, False)
                tTR_tAcc = tTR_tAcc_base[(None, None, None, None, None, buffer_index)]
                acc_pipeline.consumer_wait(acc_state)
                tTR_tAcc = cute.group_modes(tTR_tAcc, 3, cute.rank(tTR_tAcc))
                bSG_gC = cute.group_modes(bSG_gC, 1, cute.rank(bSG_gC))
                subtiles = cute.size(tTR_tAcc.shape, mode=[3])
                for s in cutlass.range(subtiles):
                    # overlapping accumulators: the first buffer is read from its last columns,
                    # the second from its first, so the shared columns come first either way
                    real = s
                    if cutlass.const_expr(config.overlapping_accum):
                        if buffer_index == 0:
                            real = subtiles - 1 - s
                    cute.copy(copy_t2r, tTR_tAcc[(None, None, None, real)], tTR_rAcc)
                    if cutlass.const_expr(config.overlapping_accum):
                        if s == self.acc_release_subtile:
                            # the shared columns are in registers: the next tile's MMAs may overwrite them
                            cute.arch.fence_view_async_tmem_load()
                            with cute.arch.elect_one():
                                acc_pipeline.consumer_release(acc_state)
                            acc_state.advance()
                    tRS_rC.store(copy_r2s.retile(tTR_rAcc).load().to(C_DTYPE))
                    buffer = (subtiles_done + s) % self.num_c_stage
                    cute.copy(copy_r2s, tRS_rC, tRS_sC[(None, None, None, buffer)])
                    # the generic-proxy stores into sC must be visible to the copy engine
                    cute.arch.fence_proxy("async.shared", space="cta")
                    self.epilogue_sync.arrive_and_wait()
                    if warp_idx == EPILOGUE_WARPS[0]:
                        self._store(atom_c, bSG_sC[(None, buffer)], bSG_gC[(None, real)], desc)
                        c_pipeline.producer_commit()
                        c_pipeline.producer_acquire()
                    self.epilogue_sync.arrive_and_wait()
                subtiles_done += subtiles
                if cutlass.const_expr(not config.overlapping_accum):
                    with cute.arch.elect_one():
                        acc_pipeline.consumer_release(acc_state)
                    acc_state.advance()
            self._stamp(phases, cta, warp_idx, EPILOGUE_WARPS[0], self.layout.EPILOGUE_DONE)
            tmem.relinquish_alloc_permit()
            self.epilogue_sync.arrive_and_wait()
            tmem.free(acc_tmem_ptr)
            c_pipeline.producer_tail()
            self._stamp(phases, cta, warp_idx, EPILOGUE_WARPS[0], self.layout.EXIT)

    # -----------------------------------------------------------------------------------------
    # Device helpers

    @cute.jit
    def _acc_buffer(self, state, producer: cutlass.Constexpr[bool]) -> Int32:
        """The accumulator buffer of a tile: the pipeline stage, or (overlapping accumulators, one
        stage) the stage's phase, which flips every tile. A producer state starts at phase 1 and
        a consumer's at 0, so both give buffer 0 to the first tile and alternate after."""
        if cutlass.const_expr(self.config.overlapping_accum):
            if cutlass.const_expr(producer):
                return state.phase ^ 1
            else:
                return state.phase
        else:
            return state.index

    @cute.jit
    def _tile_count(self, runs: cute.Tensor, cluster: Int32) -> Int32:
        """Tiles this CTA (pair) runs: its run of the schedule, or one (the per-group kernel)."""
        if cutlass.const_expr(self.config.persistent):
            return runs[cluster + 1] - runs[cluster]
        else:
            return Int32(1)

    @cute.jit
    def _tile(self, runs: cute.Tensor, tiles: cute.Tensor, cluster: Int32, i: Int32, bidx: Int32, bidy: Int32,
              k_tiles_here: Int32):
        """(group, n tile, m tile, k tiles) of this CTA's i-th tile: from the schedule's record, or
        (per-group kernel) from the block index."""
        if cutlass.const_expr(self.config.persistent):
            t = runs[cluster] + i
            return tiles[(t, 0)], tiles[(t, 1)], tiles[(t, 2)], tiles[(t, 3)]
        else:
            return Int32(0), bidx // self.config.cta_group, bidy, k_tiles_here

    @cute.jit
    def _map_base(self, group: Int32, visit: Int32, cta: Int32, visits: Int32, maps_ptr: cute.Pointer) -> Int64:
        """Address of the first of the five maps the current group uses: its row of the host table,
        or (device mode) this CTA's slot for its current visit."""
        if cutlass.const_expr(self.config.tensormaps == "host"):
            return maps_ptr.toint() + Int64(group) * (MAPS * MAP_BYTES)
        else:
            return maps_ptr.toint() + (Int64(cta) * Int64(visits) + Int64(visit)) * (MAPS * MAP_BYTES)

    @cute.jit
    def _visit(self, group: Int32, last_group: Int32, visit: Int32, cta: Int32, visits: Int32, groups: cute.Tensor,
               maps_ptr: cute.Pointer, map_smem, atoms, which: cutlass.Constexpr, warp_idx: Int32,
               warp: cutlass.Constexpr[int], phases):
        """A tile of `group` after one of `last_group`: on a change, the next visit and its maps made
        ready (`_maps_for`; `phases`: stamp the switch, the TMA warp only). Returns (visit, address
        of the five maps). The TMA warp and the epilogue walk the same tiles through this one
        function, so their visit counts, and the workspace slots they write, agree."""
        if group != last_group:
            visit = visit + 1
            self._maps_for(group, visit, cta, visits, groups, maps_ptr, map_smem, atoms, which, warp_idx, warp)
            if cutlass.const_expr(phases is not None):
                self._stamp_switch(phases, cta, visit)
        return visit, self._map_base(group, visit, cta, visits, maps_ptr)

    @cute.jit
    def _desc(self, base: Int64, which: cutlass.Constexpr[int], space: cutlass.Constexpr = cute.AddressSpace.generic):
        """Pointer to map `which` of the five at `base`: generic for the copies, gmem for the
        tensor-map manager's writes and fences."""
        ptr = cute.make_ptr(Int64, base + which * MAP_BYTES, cute.AddressSpace.gmem, assumed_align=MAP_BYTES)
        return self.maps.get_tensormap_ptr(ptr, space)

    @cute.jit
    def _maps_for(self, group: Int32, visit: Int32, cta: Int32, visits: Int32, groups: cute.Tensor,
                  maps_ptr: cute.Pointer, map_smem, atoms, which: cutlass.Constexpr, warp_idx: Int32,
                  warp: cutlass.Constexpr[int]):
        """Make the maps `which` of `group` ready for warp `warp`'s copies. Host mode: acquire them
        for the tensor-map proxy at system scope (a host-to-device copy wrote them before the
        launch; the fence also drops what the copy engine cached at these addresses from an
        earlier launch), then prefetch them. Device mode: rewrite this CTA's slot for this visit
        from the group's table row (replace in shared memory, copy out with a release fence), then
        acquire it (gpu scope: the writer is this kernel).

        The replace leaves every field it is not given as the shared-memory copy holds it, group
        0's template from the kernel parameters. One such field depends on the group: bit 21 of
        word 1, which the encoder sets for a tensor that spans at least 128 KiB (params.encode,
        LARGE_TENSOR_BYTES) and which lets the copy engine fetch that far past the address; group
        0's bit kept for a smaller group may fault. CuTe DSL's own `tensormap_replace`
        (cutlass/experimental/primitives/nvvm_wrapper.py, `_apply_tensormap_fixup`) clears it
        after replacing a dimension or stride unless told 128 KiB follow the new address; the
        TensorMapManager.update_tensormap used here (cutlass/tensor_utils/tensormap.py, through
        the update_tma_desc op) leaves it alone. So the kernel sets it for each map and group as
        the host encoder does (params.span_bytes), in the shared-memory copy before the replace,
        and a map made here equals the host mode's map of the same group."""
        base = self._map_base(group, visit, cta, visits, maps_ptr)
        if cutlass.const_expr(self.config.tensormaps == "device"):
            m, n, k = Int32(groups[(group, COL_M)]), Int32(groups[(group, COL_N)]), Int32(groups[(group, COL_K)])
            real = self.operands(
                cute.make_ptr(AB_DTYPE, groups[(group, COL_B)], cute.AddressSpace.gmem, assumed_align=32),
                cute.make_ptr(AB_DTYPE, groups[(group, COL_A)], cute.AddressSpace.gmem, assumed_align=32),
                cute.make_ptr(SF_DTYPE, groups[(group, COL_SFB)], cute.AddressSpace.gmem, assumed_align=16),
                cute.make_ptr(SF_DTYPE, groups[(group, COL_SFA)], cute.AddressSpace.gmem, assumed_align=16),
                cute.make_ptr(C_DTYPE, groups[(group, COL_C)], cute.AddressSpace.gmem, assumed_align=16),
                m, n, k)
            if warp_idx == warp:
                for w in cutlass.range_constexpr(len(which)):
                    asm.set_large_tensor_bit((map_smem + which[w] * (MAP_BYTES // 8)).toint(),
                                             kparams.span_bytes(which[w], Int64(m), Int64(n), Int64(k)),
                                             kparams.LARGE_TENSOR_BYTES)
            self.maps.update_tensormap(
                tuple(real[w] for w in which), atoms,
                tuple(self._desc(base, w, cute.AddressSpace.gmem) for w in which), warp,
                tuple(map_smem + w * (MAP_BYTES // 8) for w in which))
        if warp_idx == warp:
            for w in cutlass.range_constexpr(len(which)):
                if cutlass.const_expr(self.config.tensormaps == "host"):
                    asm.acquire_tensormap_sys(base + which[w] * MAP_BYTES)
                    asm.prefetch_tensormap(base + which[w] * MAP_BYTES)
                else:  # pairs with the release of tensormap.cp_fenceproxy in update_tensormap
                    self.maps.fence_tensormap_update(self._desc(base, which[w], cute.AddressSpace.gmem))

    @cute.jit
    def _load(self, atom, src, dst, bar, mcast, desc: Int64, which: cutlass.Constexpr[int]):
        if cutlass.const_expr(self.config.persistent):
            cute.copy(atom, src, dst, tma_bar_ptr=bar, mcast_mask=mcast, tma_desc_ptr=self._desc(desc, which))
        else:
            cute.copy(atom, src, dst, tma_bar_ptr=bar, mcast_mask=mcast)

    @cute.jit
    def _store(self, atom, src, dst, desc: Int64):
        if cutlass.const_expr(self.config.persistent):
            cute.copy(atom, src, dst, tma_desc_ptr=self._desc(desc, 4))
        else:
            cute.copy(atom, src, dst)

    def _s2t(self, sSF: cute.Tensor, tSF: cute.Tensor):
        """The scale copy shared memory → tensor memory (tcgen05.cp, 4 × 32 × 128 bit) and its partitions."""
        tCsSF = cute.filter_zeros(sSF)
        tCtSF = cute.filter_zeros(tSF)
        copy = tcgen05.make_s2t_copy(cute.make_copy_atom(tcgen05.Cp4x32x128bOp(self.cta_group), SF_DTYPE), tCtSF)
        thr = copy.get_slice(0)
        src = tcgen05.get_s2t_smem_desc_tensor(copy, thr.partition_S(tCsSF))
        return copy, src, thr.partition_D(tCtSF)

    def _t2r(self, tidx: Int32, tAcc: cute.Tensor, tCgC: cute.Tensor, epi_tile: cute.Tile):
        """The accumulator copy tensor memory → registers and its partitions, per epilogue subtile."""
        atom = sm100_utils.get_tmem_load_op(self.cta_tile, self.c_layout, C_DTYPE, ACC_DTYPE, epi_tile, self.use_2cta)
        tAcc_epi = cute.flat_divide(tAcc[((None, None), 0, 0, None)], epi_tile)
        copy = tcgen05.make_tmem_copy(atom, tAcc_epi[(None, None, 0, 0, 0)])
        thr = copy.get_slice(tidx)
        gC_epi = cute.flat_divide(tCgC[((None, None), 0, 0, None, None, None)], epi_tile)
        tTR_gC = thr.partition_D(gC_epi)
        rAcc = cute.make_rmem_tensor(tTR_gC[(None, None, None, 0, 0, 0, 0, 0)].shape, ACC_DTYPE)
        return copy, thr.partition_S(tAcc_epi), rAcc

    def _r2s(self, copy_t2r, tTR_rC: cute.Tensor, tidx: Int32, sC: cute.Tensor):
        """The fp16 copy registers → shared memory (matching the tensor-memory load) and its partitions."""
        atom = sm100_utils.get_smem_store_op(self.c_layout, C_DTYPE, ACC_DTYPE, copy_t2r)
        copy = cute.make_tiled_copy_D(atom, copy_t2r)
        return copy, copy.retile(tTR_rC), copy.get_slice(tidx).partition_D(sC)

    @cute.jit
    def _stamp(self, phases: cute.Tensor, cta: Int32, warp_idx: Int32, warp: cutlass.Constexpr[int],
               slot: cutlass.Constexpr[int]):
        """Instrumented build: lane 0 of warp `warp` records the time of `slot` (a later write of
        the same slot replaces it)."""
        if cutlass.const_expr(self.config.instrument):
            if warp_idx == warp:
                if cute.arch.lane_idx() == 0:
                    phases[(cta, slot)] = asm.globaltimer()

    @cute.jit
    def _stamp_switch(self, phases: cute.Tensor, cta: Int32, visit: Int32):
        """Instrumented build: the time the maps of the CTA's visit-th group were ready (TMA warp)."""
        if cutlass.const_expr(self.config.instrument):
            if cute.arch.lane_idx() == 0:
                if visit < self.layout.max_switches:
                    phases[(cta, self.layout.FIRST_SWITCH + visit)] = asm.globaltimer()

    @cute.jit
    def _stamp_count(self, phases: cute.Tensor, cta: Int32, groups_visited: Int32):
        if cutlass.const_expr(self.config.instrument):
            if cute.arch.lane_idx() == 0:
                phases[(cta, self.layout.SWITCHES)] = Int64(groups_visited)
